"""runtime.agents.codex: codex's command line from argv shapes the real CLI runs with.

The shapes come from notes/codex-live.md §9 (the launch in tmux and the respawn), the
``/proc/PID/cmdline`` of the npm wrapper (``node …/.bin/codex``) and of its native child, and
the grammar of ``codex --help`` / ``codex resume --help`` (0.169.0).
"""

from __future__ import annotations

import pytest

from runtime.agents import RunningFacts, cli_for, codex
from runtime.agents.codex import (
    ResumeArgvError,
    channel_flags,
    environment_names,
    parse_argv,
    resume_argv,
    resumed_session,
    running_session,
    same_launch,
)

OLD = "01a23b12-51ca-7bf2-9c1e-3d4e5f60718a"
NEW = "7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f"
BIN = "/root/.cache/threadline/codex-0.169.0/node_modules/.bin/codex"
NATIVE = ("/root/.cache/threadline/codex-0.169.0/node_modules/@openai/codex-linux-x64/vendor/"
          "x86_64-unknown-linux-musl/bin/codex")

# (launch argv, the resume argv for NEW, the session the launch resumes)
CASES = {
    "notes §9 launch in tmux": (
        [BIN, "resume", OLD, "-m", "fake-model", "-c", "k=v", "--cd", "/srv/probe/work"],
        [BIN, "resume", NEW, "-m", "fake-model", "-c", "k=v", "--cd", "/srv/probe/work"],
        OLD),
    "the npm wrapper as /proc shows it": (
        ["node", BIN, "-m", "fake-model", "--cd", "/w"],
        ["node", BIN, "resume", NEW, "-m", "fake-model", "--cd", "/w"],
        None),
    "its native child": (
        [NATIVE, "resume", OLD, "-s", "danger-full-access", "-a", "never"],
        [NATIVE, "resume", NEW, "-s", "danger-full-access", "-a", "never"],
        OLD),
    "a TUI started with a prompt": (
        ["codex", "-m", "o3", "fix the failing test", "--search"],
        ["codex", "resume", NEW, "-m", "o3", "--search"],
        None),
    "-c values with spaces and '='": (
        ["codex", "-c", 'model_instructions="be brief = kind"', "--config=a.b=[1, 2]",
         "-cshell_environment_policy.inherit=all", "hello"],
        ["codex", "resume", NEW, "-c", 'model_instructions="be brief = kind"',
         "--config=a.b=[1, 2]", "-cshell_environment_policy.inherit=all"],
        None),
    "options before and after the sub-command": (
        ["codex", "-p", "work", "resume", "--all", OLD, "-C", "/w", "--add-dir", "/tmp/x"],
        ["codex", "resume", NEW, "-p", "work", "--all", "-C", "/w", "--add-dir", "/tmp/x"],
        OLD),
    "resume --last with a prompt": (
        ["codex", "resume", "--last", "-m", "o3", "go on"],
        ["codex", "resume", NEW, "-m", "o3"],
        None),
    "a fork launch runs a new thread": (
        ["codex", "fork", OLD, "--enable", "goals"],
        ["codex", "resume", NEW, "--enable", "goals"],
        None),
    "'--' makes the rest the prompt, dashes and all": (
        ["codex", "-m", "o3", "--", "-v is a prompt", "--model"],
        ["codex", "resume", NEW, "-m", "o3"],
        None),
    "'--' after resume ID: the prompt only": (
        ["codex", "resume", OLD, "--no-alt-screen", "--", "--last"],
        ["codex", "resume", NEW, "--no-alt-screen"],
        OLD),
    "images belong to the initial prompt": (
        ["codex", "-i", "a.png", "b.png", "--model=o3", "--image=c.png", "describe"],
        ["codex", "resume", NEW, "--model=o3"],
        None),
    "every boolean flag kept": (
        ["codex", "--oss", "--strict-config", "--dangerously-bypass-hook-trust", "--no-daemon",
         "--approve-for-me", "--worktree", "--include-non-interactive"],
        ["codex", "resume", NEW, "--oss", "--strict-config", "--dangerously-bypass-hook-trust",
         "--no-daemon", "--approve-for-me", "--worktree", "--include-non-interactive"],
        None),
    "a value that looks like a sub-command stays a value": (
        ["codex", "-m", "resume", "-p", "exec"],
        ["codex", "resume", NEW, "-m", "resume", "-p", "exec"],
        None),
}


@pytest.mark.parametrize("launch,expected,resumed", CASES.values(), ids=CASES.keys())
def test_resume_argv_keeps_every_option_in_order_and_drops_the_session_choice_and_prompt(
        launch: list[str], expected: list[str], resumed: str | None) -> None:
    assert resume_argv(launch, NEW) == expected
    assert resumed_session(launch) == resumed
    assert resumed_session(expected) == NEW  # the relaunch is read back the same way


def test_a_resume_argv_resumed_again_only_changes_the_id() -> None:
    first = resume_argv(CASES["-c values with spaces and '='"][0], NEW)
    assert resume_argv(first, OLD) == [*first[:2], OLD, *first[3:]]


REFUSED = {
    "a shell": (["sh", "-c", "codex -m o3"], "runs a shell"),
    "no codex program": (["/usr/bin/claude", "-c"], "no 'codex' program"),
    "codex exec": (["codex", "-m", "o3", "exec", "hi"], "'codex exec'"),
    "codex review": (["codex", "review"], "'codex review'"),
    "an unknown option": (["codex", "--frobnicate", "x"], "'--frobnicate'"),
    "a value option with no value": (["codex", "-m"], "'-m' has no value"),
    "a flag given a value": (["codex", "--search=yes"], "takes no value"),
    "empty": ([], "empty"),
}


@pytest.mark.parametrize("argv,message", REFUSED.values(), ids=REFUSED.keys())
def test_an_argv_that_cannot_be_read_one_way_is_refused_by_name(argv: list[str],
                                                                message: str) -> None:
    with pytest.raises(ResumeArgvError, match=message):
        resume_argv(argv, NEW)
    assert resumed_session(argv) is None


def test_an_invalid_thread_id_is_refused() -> None:
    with pytest.raises(ResumeArgvError, match="'x y'"):
        resume_argv(["codex"], "x y")


def test_the_parse_keeps_options_as_written_and_positionals_apart() -> None:
    parsed = parse_argv(["codex", "-ck=v", "-m", "o3", "resume", OLD, "say hi"])
    assert parsed.program == ("codex",)
    assert parsed.command == "resume"
    assert parsed.options == (("-ck=v",), ("-m", "o3"))
    assert parsed.positionals == (OLD, "say hi")


def test_codex_has_no_channel_flags_and_always_carries_codex_home() -> None:
    assert channel_flags(["codex", "--channels", "x"]) == ()
    assert environment_names(["OPENAI_API_KEY", "TL_TOKEN"], False) == (
        "CODEX_HOME", "OPENAI_API_KEY", "TL_TOKEN")
    assert environment_names([], True) == ("CODEX_HOME",)


@pytest.mark.parametrize("locks,thread", [
    ((OLD,), OLD),
    ((OLD, OLD), OLD),       # two fds on the same lock
    ((), None),              # holds no thread: a conflict, not a guess
    ((OLD, NEW), None),      # after /fork both are locked: ambiguous
])
def test_the_running_thread_is_the_one_writer_lock_the_process_holds(
        locks: tuple[str, ...], thread: str | None) -> None:
    assert running_session(42, RunningFacts(started=7, writer_locks=locks)) == thread


def test_cli_for_codex_gives_these_rules() -> None:
    assert cli_for("codex") is codex


def test_a_pane_switched_to_resume_id_is_still_the_same_launch() -> None:
    assert same_launch((BIN, "-m", "x"), (BIN, "resume", NEW, "-m", "x"))
    assert same_launch((BIN, "resume", "--last"), (BIN, "resume", NEW))  # --last: a choice too
    assert same_launch(("/opt/codex", "-m", "x"), (BIN, "-m", "x"))  # the program by name
    assert not same_launch((BIN, "-m", "x"), (BIN, "-m", "y"))
    assert not same_launch((BIN, "-m", "x"), ("claude", "-m", "x"))
    assert not same_launch((), (BIN,))


def test_argvs_the_grammar_refuses_compare_token_for_token() -> None:
    assert same_launch((BIN, "--no-such-option"), ("/opt/codex", "--no-such-option"))
    assert not same_launch((BIN, "--no-such-option"), (BIN, "--no-such-option", "x"))


def test_same_launch_is_reached_through_the_agent_owner() -> None:
    from runtime.agents.kind import AgentKind

    assert AgentKind.CODEX.cli.same_launch((BIN, "-m", "x"), (BIN, "resume", NEW, "-m", "x"))
    assert AgentKind.CLAUDE.cli.same_launch(("claude", "--resume=a"), ("claude", "-r", NEW))
