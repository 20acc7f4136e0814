"""Pure parsers for the launch environment (issue 10 §5): inline assignments, ``env`` wrappers,
``tmux new-session -e``, ``tmux show-environment`` output (tmux 3.3a, captured)."""

from __future__ import annotations

import pytest

from provision.errors import IntrospectError
from provision.parsers import facts as F
from runtime.doors.tmux_text import parse_tmux_environment


def test_inline_assignments_before_exec_are_the_launch_environment() -> None:
    command = F.parse_shell_command(
        "cd '/srv/my app' && CLAUDE_CONFIG_DIR='/srv/claude cfg' TOKEN=abc exec claude --continue")
    assert command.argv == ("claude", "--continue")
    assert command.env == (("CLAUDE_CONFIG_DIR", "/srv/claude cfg"), ("TOKEN", "abc"))
    assert command.cwd == "/srv/my app"


def test_an_env_wrapper_is_unwrapped_into_the_environment() -> None:
    command = F.parse_shell_command("exec /usr/bin/env A=1 B='two words' claude -c")
    assert command.argv == ("claude", "-c")
    assert command.env == (("A", "1"), ("B", "two words"))


def test_assignments_and_an_env_wrapper_combine_in_order() -> None:
    command = F.parse_shell_command("A=1 env -- B=2 claude --continue")
    assert command.env == (("A", "1"), ("B", "2"))
    assert command.argv == ("claude", "--continue")


def test_env_options_that_cannot_be_carried_are_refused_with_the_option_named() -> None:
    with pytest.raises(IntrospectError, match="'env -i'"):
        F.parse_shell_command("env -i HOME=/root claude --continue")
    with pytest.raises(IntrospectError, match="'env -u'"):
        F.split_env_wrapper(("env", "-u", "X", "claude"))


def test_a_multi_word_pane_command_with_env_is_unwrapped() -> None:
    command = F.parse_pane_start_command('env "CLAUDE_CONFIG_DIR=/c d" /usr/bin/claude -c')
    assert command.argv == ("/usr/bin/claude", "-c")
    assert command.env == (("CLAUDE_CONFIG_DIR", "/c d"),)


def test_an_argv_without_env_is_returned_unchanged() -> None:
    assert F.split_env_wrapper(("/usr/bin/claude", "A=1")) == (("/usr/bin/claude", "A=1"), ())


def test_new_session_e_values_in_a_unit_tmux_command_are_environment() -> None:
    argv = ("/usr/bin/tmux", "new-session", "-d", "-s", "main", "-e", "CLAUDE_CONFIG_DIR=/c",
            "-eTOKEN=x=y", "-c", "/srv/app", "claude --continue")
    command = F.tmux_command_in_argv(argv)
    assert command is not None
    assert command.argv == ("claude", "--continue")
    assert command.env == (("CLAUDE_CONFIG_DIR", "/c"), ("TOKEN", "x=y"))


def test_tmux_show_environment_lists_what_the_session_sets_not_what_it_removed() -> None:
    captured = ("-DISPLAY\n-KRB5CCNAME\nCLAUDE_CONFIG_DIR=/srv/claude cfg\nEMPTY=\n"
                "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1\n-WINDOWID\n")
    assert parse_tmux_environment(captured) == {
        "CLAUDE_CONFIG_DIR": "/srv/claude cfg", "EMPTY": "",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1"}


@pytest.mark.parametrize(("value", "socket"), [
    ("/tmp/tmux-1000/work,2411,0", "/tmp/tmux-1000/work"),  # a -L work server
    ("/run/claude/my,odd.sock,77,3", "/run/claude/my,odd.sock"),  # a comma in the path
    ("", None), ("screen", None), ("relative.sock,1,0", None), ("/tmp/s,x,0", None),
])
def test_the_tmux_variable_names_the_socket_of_the_server_a_process_runs_under(
        value: str, socket: str | None) -> None:
    assert F.parse_tmux_variable(value) == socket
