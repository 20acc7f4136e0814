"""The resume argv rule (SPEC §4.3) as provision computes and shows it."""

from __future__ import annotations

import pytest

from provision.errors import ResumeError
from provision.resume import SESSION_TOKEN, resume_argv, token_table

CLAUDE = "/usr/local/bin/claude"
FLAGS = ("--thinking-display", "summarized", "--channels",
         "plugin:telegram@claude-plugins-official",
         "--dangerously-load-development-channels", "server:companion")


def test_continue_becomes_resume_placeholder_and_every_flag_stays_in_order() -> None:
    assert resume_argv((CLAUDE, "--continue", *FLAGS), SESSION_TOKEN) == \
        (CLAUDE, "--resume", SESSION_TOKEN, *FLAGS)
    assert resume_argv((CLAUDE, *FLAGS[:2], "-c", *FLAGS[2:]), SESSION_TOKEN) == \
        (CLAUDE, *FLAGS[:2], "--resume", SESSION_TOKEN, *FLAGS[2:])


def test_an_existing_resume_is_replaced() -> None:
    assert resume_argv((CLAUDE, "--resume", "abc-123", *FLAGS), SESSION_TOKEN) == \
        (CLAUDE, "--resume", SESSION_TOKEN, *FLAGS)
    assert resume_argv((CLAUDE, "--resume=abc", *FLAGS), SESSION_TOKEN) == \
        (CLAUDE, "--resume", SESSION_TOKEN, *FLAGS)


def test_two_session_choices_are_refused() -> None:
    with pytest.raises(ResumeError, match="more than once|expected at most one"):
        resume_argv((CLAUDE, "--continue", "-c", *FLAGS), SESSION_TOKEN)


def test_a_launch_without_session_choice_gets_resume_after_claude() -> None:
    assert resume_argv((CLAUDE, *FLAGS)) == (CLAUDE, "--resume", SESSION_TOKEN, *FLAGS)


@pytest.mark.parametrize("flag", ["--session-id", "--fork-session"])
def test_flags_that_change_what_resume_means_are_refused(flag: str) -> None:
    with pytest.raises(ResumeError, match=flag):
        resume_argv((CLAUDE, "--continue", flag, "x"))


def test_a_shell_launch_argv_is_refused_with_the_reason() -> None:
    with pytest.raises(ResumeError, match="runs a shell"):
        resume_argv(("/bin/sh", "-c", "claude --continue"))


def test_token_table_marks_only_the_replaced_tokens() -> None:
    launch = (CLAUDE, "--continue", *FLAGS)
    rows = token_table(launch, resume_argv(launch))
    marked = [row for row in rows if row.startswith("*")]
    assert len(marked) == 2
    assert "'--continue'" in marked[0] and "'--resume'" in marked[0]
    assert SESSION_TOKEN in marked[1]
    assert len(rows) == len(launch) + 1
