"""runtime.agents.claude: claude's command line from hand-made argvs, one rule per test."""

from __future__ import annotations

import json

import pytest

from runtime.agents import RunningFacts, claude
from runtime.agents.claude import (
    ResumeArgvError,
    asks_dev_warning,
    channel_flags,
    channel_tokens,
    dev_channel_servers,
    environment_names,
    format_argv,
    parse_session_record,
    resume_argv,
    resumed_session,
    same_launch,
)
from runtime.errors import ConfigError

SID = "0b9c3f52-6a1e-4d5b-9a57-1f0e2d3c4b5a"
DEV = "--dangerously-load-development-channels"


# -- channels -----------------------------------------------------------------------------

def test_channel_flags_pair_each_value_with_its_flag_in_both_spellings() -> None:
    argv = ["claude", "--channels", "plugin:a@m", "plugin:b@m", "--verbose", f"{DEV}=server:c"]
    assert channel_flags(argv) == (
        "--channels plugin:a@m", "--channels plugin:b@m", f"{DEV} server:c")


def test_channel_tokens_keep_the_options_as_written() -> None:
    argv = ["claude", "--model", "opus", "--channels", "plugin:a@m", f"{DEV}=server:c", "-c"]
    assert channel_tokens(argv) == ("--channels", "plugin:a@m", f"{DEV}=server:c")


def test_a_channel_value_with_spaces_stays_one_value() -> None:
    argv = ["claude", DEV, "server:my bridge", "--channels=plugin:x y@m"]
    assert channel_flags(argv) == (f"{DEV} server:my bridge", "--channels plugin:x y@m")
    assert channel_tokens(argv) == (DEV, "server:my bridge", "--channels=plugin:x y@m")


def test_an_equals_value_takes_no_further_words() -> None:
    argv = ["claude", "--channels=plugin:a@m", "prompt words"]
    assert channel_flags(argv) == ("--channels plugin:a@m",)
    assert channel_tokens(argv) == ("--channels=plugin:a@m",)


def test_a_configured_fragment_without_a_program_is_read_the_same_way() -> None:
    assert channel_flags(["--channels", "plugin:a@m"]) == ("--channels plugin:a@m",)


def test_flags_that_only_start_like_a_channel_flag_are_not_channels() -> None:
    assert channel_flags(["claude", "--channels-extra", "x", "--channel", "y"]) == ()


def test_only_a_development_channel_asks_the_warning_and_names_its_servers() -> None:
    argv = ["claude", f"{DEV}=server:a", DEV, "plugin:p@m", "--channels", "server:b"]
    assert dev_channel_servers(argv) == ["a"]
    assert asks_dev_warning(channel_flags(argv))
    assert not asks_dev_warning(channel_flags(["claude", "--channels", "server:b"]))


# -- the session an argv runs -------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["claude", "--resume", SID], ["claude", "-r", SID], ["claude", f"--resume={SID}"],
    ["claude", "--session-id", SID, "--verbose"],
])
def test_the_resumed_session_is_read_in_every_spelling(argv: list[str]) -> None:
    assert resumed_session(argv) == SID


@pytest.mark.parametrize("argv", [["claude", "--continue"], ["claude", "-c"], ["claude"]])
def test_a_continue_or_bare_launch_names_no_session(argv: list[str]) -> None:
    assert resumed_session(argv) is None


def test_the_template_names_the_session_in_every_token() -> None:
    template = ["claude", "--resume", claude.SESSION_TOKEN, "--x=a{session_id}"]
    assert format_argv(template, "abc") == ("claude", "--resume", "abc", "--x=aabc")


# -- the resume argv ----------------------------------------------------------------------

@pytest.mark.parametrize("choice", [["--continue"], ["-c"], ["--resume", "old-1"], ["-r", "old-1"],
                                    ["--resume=old-1"], ["--resume"]])
def test_every_session_choice_becomes_resume_in_place(choice: list[str]) -> None:
    launch = ["/usr/bin/claude", "--model", "opus", *choice, "--channels", "plugin:a@m"]
    assert resume_argv(launch, SID) == [
        "/usr/bin/claude", "--model", "opus", "--resume", SID, "--channels", "plugin:a@m"]


def test_values_with_spaces_are_kept_as_single_tokens() -> None:
    launch = ["claude", "--append-system-prompt", "be  brief, please", "-c"]
    assert resume_argv(launch, SID) == [
        "claude", "--append-system-prompt", "be  brief, please", "--resume", SID]


@pytest.mark.parametrize("launch, program", [
    (["/usr/bin/node", "/opt/claude-code/cli.js", "--verbose"], 2),
    (["/usr/bin/env", "NODE_OPTIONS=--max-old-space-size=4096", "/opt/bin/claude", "--verbose"], 3),
])
def test_a_launch_without_a_choice_gets_resume_right_after_the_program(
        launch: list[str], program: int) -> None:
    assert resume_argv(launch, SID) == [*launch[:program], "--resume", SID, "--verbose"]


@pytest.mark.parametrize("before", [[], ["--continue"]])
def test_a_choice_after_the_end_of_options_is_a_prompt_not_a_choice(before: list[str]) -> None:
    assert resume_argv(["claude", *before, "--", "-c"], SID) == [
        "claude", "--resume", SID, "--", "-c"]


@pytest.mark.parametrize("launch, says", [
    (["claude", "--continue", "-c"], r"more than once \('--continue', '-c'\)"),
    (["claude", "--continue", "--resume", "old"], "'--resume old'"),
    (["claude", "-c", "-r", "x"], "more than once"),
    (["claude", "--resume=a", "--continue"], "more than once"),
    (["claude", "--continue", "--fork-session"], "changes what resuming means"),
    (["claude", "--continue", "--session-id=abc"], "changes what resuming means"),
    (["claude", "--session-id=x", "-c"], "changes what resuming means"),
    (["claude", "--continue", "--from-pr"], "changes what resuming means"),
    (["/bin/sh", "-c", "claude --continue"], "runs a shell"),
    (["/usr/bin/node", "/opt/app/main.js"], "no 'claude' program"),
])
def test_an_ambiguous_launch_is_refused_saying_why(launch: list[str], says: str) -> None:
    with pytest.raises(ResumeArgvError, match=says):
        resume_argv(launch, SID)


@pytest.mark.parametrize("launch, session, says", [
    ([], SID, "empty"),
    (["claude", "-c"], "../../etc/passwd", "not a valid session id"),
    (["claude", "-c"], SID + "\n", "not a valid session id"),  # `$` would match before it
])
def test_an_empty_argv_and_a_bad_session_id_are_config_errors(
        launch: list[str], session: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        resume_argv(launch, session)


# -- comparing a configured launch with the live process ---------------------------------

def test_a_live_resume_matches_its_continue_launch() -> None:
    launch = ("/usr/bin/claude", "--model", "opus", "--continue", "--channels", "plugin:a@m")
    live = ("/usr/bin/claude", "--model", "opus", "--resume", SID, "--channels", "plugin:a@m")
    assert same_launch(launch, live)
    assert same_launch(("/opt/claude",), ("claude", "-r", SID))  # program by name
    assert same_launch(("claude", "--resume=a"), ("claude", "-r", "b"))


def test_other_arguments_or_another_program_are_a_different_launch() -> None:
    assert not same_launch(("claude", "-c", "--model", "opus"), ("claude", "-r", SID))
    assert not same_launch(("claude", "-c"), ("claude-other", "-c"))
    assert not same_launch(("claude", "--channels", "a b"), ("claude", "--channels", "a", "b"))


def test_an_argv_with_two_choices_matches_only_itself() -> None:
    twice = ("claude", "-c", "-r", "x")
    assert same_launch(twice, twice)
    assert not same_launch(twice, ("claude", "-r", "x"))


# -- environment --------------------------------------------------------------------------

def test_the_config_dir_is_carried_only_when_one_is_in_use() -> None:
    assert environment_names(["TL_TOKEN", "A"], False) == ("A", "TL_TOKEN")
    assert environment_names(["TL_TOKEN"], True) == ("CLAUDE_CONFIG_DIR", "TL_TOKEN")
    assert environment_names([], False) == ()


# -- the session record -------------------------------------------------------------------

def record(**fields: object) -> bytes:
    return json.dumps({"pid": 4242, "sessionId": SID, "status": "idle", **fields}).encode()


def test_a_record_of_this_very_process_is_read() -> None:
    assert parse_session_record(record(procStart="9001"), 9001) == {
        "pid": 4242, "sessionId": SID, "status": "idle", "procStart": "9001"}
    assert parse_session_record(record(procStart=9001), 9001) is not None  # a number too


def test_a_recycled_pid_whose_start_time_differs_has_no_session() -> None:
    assert parse_session_record(record(procStart="9001"), 9002) is None


def test_a_gone_pid_or_junk_has_no_session() -> None:
    assert parse_session_record(record(procStart="9001"), None) is None
    assert parse_session_record(b"{not json", 9001) is None
    assert parse_session_record(b"[1, 2]", 9001) is None
    assert parse_session_record(b'{"sessionId": "caf\xe9"}', 9001) is None  # not UTF-8


def test_a_record_without_a_start_time_is_taken_at_its_word() -> None:
    assert parse_session_record(record(), 9001) is not None  # claude before procStart


def test_the_record_lives_under_the_config_dir(tmp_path) -> None:
    assert claude.session_record_path(tmp_path, 42) == tmp_path / "sessions" / "42.json"


def test_the_running_session_is_the_records_session_of_this_very_process() -> None:
    assert claude.running_session(4242, RunningFacts(9001, record(procStart="9001"))) == SID
    assert claude.running_session(4242, RunningFacts(9002, record(procStart="9001"))) is None
    assert claude.running_session(4242, RunningFacts(9001, None)) is None
    assert claude.running_session(4242, RunningFacts(9001, record(sessionId=7))) is None
