"""The resume argv rule: the launch argv becomes the resume argv, every other argument kept."""

from __future__ import annotations

import pytest

from runtime.agents.claude import ResumeArgvError, resume_argv
from runtime.errors import ConfigError

SID = "0b9c3f52-6a1e-4d5b-9a57-1f0e2d3c4b5a"
CHANNELS = ["--dangerously-load-development-channels", "server:companion",
            "--channels", "plugin:telegram@claude-plugins-official"]


def test_continue_becomes_resume_with_every_other_argument_kept_in_order() -> None:
    launch = ["/usr/bin/claude", "--model", "opus", "--continue", *CHANNELS]
    assert resume_argv(launch, SID) == [
        "/usr/bin/claude", "--model", "opus", "--resume", SID, *CHANNELS,
    ]


def test_short_continue_flag_is_replaced_in_place() -> None:
    expected = ["claude", "--resume", SID, "--verbose"]
    assert resume_argv(["claude", "-c", "--verbose"], SID) == expected


@pytest.mark.parametrize("old", [["--resume", "old-id"], ["-r", "old-id"], ["--resume=old-id"]])
def test_an_existing_resume_of_another_session_is_replaced(old: list[str]) -> None:
    launch = ["claude", *old, *CHANNELS]
    assert resume_argv(launch, SID) == ["claude", "--resume", SID, *CHANNELS]


def test_a_bare_resume_picker_flag_is_replaced_without_eating_the_next_option() -> None:
    launch = ["claude", "--resume", "--channels", "plugin:x"]
    assert resume_argv(launch, SID) == ["claude", "--resume", SID, "--channels", "plugin:x"]


def test_a_launch_argv_without_a_session_choice_gets_resume_after_the_claude_program() -> None:
    launch = ["/usr/bin/env", "NODE_OPTIONS=--max-old-space-size=4096", "/opt/bin/claude",
              "--permission-mode", "acceptEdits"]
    assert resume_argv(launch, SID) == [
        "/usr/bin/env", "NODE_OPTIONS=--max-old-space-size=4096", "/opt/bin/claude",
        "--resume", SID, "--permission-mode", "acceptEdits",
    ]


def test_flags_after_a_literal_double_dash_are_arguments_not_session_choices() -> None:
    launch = ["claude", "--continue", "--", "-c"]
    assert resume_argv(launch, SID) == ["claude", "--resume", SID, "--", "-c"]


def test_two_session_choices_are_refused_naming_both() -> None:
    with pytest.raises(ResumeArgvError, match=r"more than once \('--continue', '-c'\)"):
        resume_argv(["claude", "--continue", "-c"], SID)
    with pytest.raises(ResumeArgvError, match="'--resume old'"):
        resume_argv(["claude", "--continue", "--resume", "old"], SID)


def test_a_shell_wrapper_is_refused_rather_than_rewritten() -> None:
    with pytest.raises(ResumeArgvError, match="runs a shell"):
        resume_argv(["/bin/sh", "-c", "claude --continue"], SID)


def test_an_argv_naming_no_claude_and_no_session_choice_is_refused() -> None:
    with pytest.raises(ResumeArgvError, match="no 'claude' program"):
        resume_argv(["/usr/bin/node", "/opt/app/main.js"], SID)


def test_an_empty_argv_and_a_bad_session_id_are_refused_as_config_errors() -> None:
    with pytest.raises(ConfigError, match="empty"):
        resume_argv([], SID)
    with pytest.raises(ConfigError, match="not a valid session id"):
        resume_argv(["claude", "-c"], "../../etc/passwd")
    with pytest.raises(ConfigError, match="not a valid session id"):  # `$` matches before it
        resume_argv(["claude", "-c"], SID + "\n")


@pytest.mark.parametrize("option", ["--session-id=abc", "--fork-session", "--from-pr"])
def test_options_that_change_what_resuming_means_are_refused(option: str) -> None:
    with pytest.raises(ResumeArgvError, match="changes what resuming means"):
        resume_argv(["claude", "--continue", option], SID)
