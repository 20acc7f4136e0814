"""``parse_start_command``: what a dead pane was started with, read from ``#{pane_start_command}``
as tmux 3.3a prints it (captured outputs), so ``tl-rebuild restart`` can tell a dead claude's
pane from a dead shell's and carry the launch's inline assignments."""

from __future__ import annotations

import pytest

from provision.parsers import facts as F
from runtime.doors.tmux_text import parse_start_command
from tests.provision.parsers.test_facts import PANES_EXEC_FORM, PANES_SHELL_STRING

# tmux 3.3a, captured: a pane a switch respawned (`respawn-pane -- env NAME=VALUE … ARGV`)
RESPAWNED = ('env CLAUDE_CONFIG_DIR=/home/claude/.claude-work "TL_TOKEN=a b\\$c" '
             '/usr/local/bin/claude --resume 5f0c2a52-7a40-4c3e-9d0e-4c1e3a8e2b11 '
             '--dangerously-load-development-channels server:companion')
# tmux 3.3a, captured: `new-session "cd /tmp && A=1 exec sleep 1000"` (one shell string)
CD_EXEC = '"cd /tmp && A=1 exec sleep 1000"'


@pytest.mark.parametrize("rows", [PANES_SHELL_STRING, PANES_EXEC_FORM], ids=["shell", "exec"])
def test_the_argv_and_assignments_agree_with_the_installers_parser(rows: str) -> None:
    (pane,) = F.parse_tmux_panes(rows)
    command = F.parse_pane_start_command(pane.start_command)
    assert parse_start_command(pane.start_command) == (command.argv, command.env)


def test_a_switchs_respawn_gives_the_program_and_the_carried_assignments() -> None:
    assert parse_start_command(RESPAWNED) == (
        ("/usr/local/bin/claude", "--resume", "5f0c2a52-7a40-4c3e-9d0e-4c1e3a8e2b11",
         "--dangerously-load-development-channels", "server:companion"),
        (("CLAUDE_CONFIG_DIR", "/home/claude/.claude-work"), ("TL_TOKEN", "a b$c")))


def test_a_shell_string_with_cd_assignments_and_exec_gives_the_program() -> None:
    assert parse_start_command(CD_EXEC) == (("sleep", "1000"), (("A", "1"),))


@pytest.mark.parametrize("text", [
    '"claude --continue && echo done"',  # a list: what ran last is not known
    '"claude | tee log"',
    "env -u HOME claude",  # env options other than assignments
    "'unterminated",
    '"a \'b"',
    "",
    '""',
])
def test_what_is_no_simple_command_gives_no_argv(text: str) -> None:
    assert parse_start_command(text) == ((), ())
