"""Pure fact parsers, fed with outputs captured verbatim from tmux 3.3a, systemd 252 and /proc."""

from __future__ import annotations

import pytest

from provision.errors import FactError, IntrospectError
from provision.parsers import facts as F
from runtime.agents import decode_cmdline

# tmux 3.3a: list-panes -a -F PANE_FORMAT, pane started as one shell string (captured here)
PANES_SHELL_STRING = (
    'main:0.0\x1f%0\x1f2301\x1f0\x1f/tmp\x1f"PATH=/tmp/tlcap/bin:\\$PATH claude --continue '
    '--thinking-display summarized --channels plugin:telegram@claude-plugins-official '
    '--dangerously-load-development-channels server:companion"\n')
# tmux 3.3a: pane started with several arguments (exec form), quoting edge cases (captured here)
PANES_EXEC_FORM = ('two:0.0\x1f%0\x1f2627\x1f0\x1f/tmp\x1f/bin/sh -c "sleep 1000" "plugin:a b" '
                   '"it\'s" "#x" \'\' \\~y "say \\"hi\\"" tab\\tx "a\\$b" "{x}"\n')
# /proc/2301/cmdline of that pane: the stand-in claude (a #!/bin/sh script), captured here
PROC_CMDLINE = (b"/bin/sh\x00/tmp/tlcap/bin/claude\x00--continue\x00--thinking-display\x00"
                b"summarized\x00--channels\x00plugin:telegram@claude-plugins-official\x00"
                b"--dangerously-load-development-channels\x00server:companion\x00")

# systemd 252 (notes/systemd-sandbox.md §3.1, verbatim)
SHOW = (
    "MainPID=52\n"
    "ExecStart={ path=/usr/bin/env ; argv[]=/usr/bin/env python3 -c import time; "
    "time.sleep(1000) --flag two words ; ignore_errors=no ; start_time=[Wed 2026-12-02 "
    "18:30:18 UTC] ; stop_time=[n/a] ; pid=52 ; code=(null) ; status=0/0 }\n")
CAT_WITH_DROP_IN = """# /etc/systemd/system/claude.service
[Unit]
Description=claude companion
[Service]
User=claude
WorkingDirectory=/srv/app
Environment="CHANNELS=plugin:telegram@claude-plugins-official"
ExecStart=/usr/bin/env python3 -c "import time; time.sleep(1000)" --flag 'two words'

# /etc/systemd/system/claude.service.d/override.conf
[Service]
Environment=BAR=baz
ExecStart=
ExecStart=/usr/local/bin/claude --continue \\
    --channels ${CHANNELS} --dangerously-load-development-channels server:companion
"""


def test_tmux_panes_parse_one_row_per_pane() -> None:
    (pane,) = F.parse_tmux_panes(PANES_SHELL_STRING)
    assert (pane.target, pane.pane_id, pane.pid, pane.dead, pane.start_path) == \
        ("main:0.0", "%0", 2301, False, "/tmp")


def test_one_word_start_command_is_a_shell_string_with_env_prefix() -> None:
    (pane,) = F.parse_tmux_panes(PANES_SHELL_STRING)
    command = F.parse_pane_start_command(pane.start_command)
    assert command.argv == ("claude", "--continue", "--thinking-display", "summarized",
                            "--channels", "plugin:telegram@claude-plugins-official",
                            "--dangerously-load-development-channels", "server:companion")
    assert command.env == (("PATH", "/tmp/tlcap/bin:$PATH"),)


def test_exec_form_start_command_unescapes_tmux_quoting() -> None:
    (pane,) = F.parse_tmux_panes(PANES_EXEC_FORM)
    command = F.parse_pane_start_command(pane.start_command)
    assert command.argv == ("/bin/sh", "-c", "sleep 1000", "plugin:a b", "it's", "#x", "",
                            "~y", 'say "hi"', "tab\tx", "a$b", "{x}")
    assert command.env == ()


def test_cd_and_exec_prefix_of_the_tmux_door_is_understood() -> None:
    command = F.parse_shell_command("cd '/srv/my app' && exec /usr/bin/claude --resume abc")
    assert command.cwd == "/srv/my app"
    assert command.argv == ("/usr/bin/claude", "--resume", "abc")


@pytest.mark.parametrize("text", ["claude --continue | tee log", "claude $(cat flags)",
                                  "claude `x`", "claude; rm -rf /", "claude > out"])
def test_shell_strings_that_are_not_simple_commands_are_refused(text: str) -> None:
    with pytest.raises(IntrospectError, match="not a simple command"):
        F.parse_shell_command(text)


def test_broken_list_panes_line_is_a_fact_error() -> None:
    with pytest.raises(FactError, match="unexpected tmux list-panes line"):
        F.parse_tmux_panes("garbage\n")


def test_proc_cmdline_then_interpreter_stripped() -> None:
    argv = decode_cmdline(PROC_CMDLINE)
    assert argv[:2] == ("/bin/sh", "/tmp/tlcap/bin/claude")
    assert F.strip_interpreter(argv)[0] == "/tmp/tlcap/bin/claude"
    assert F.strip_interpreter(argv)[1:] == argv[2:]
    assert decode_cmdline(b"") == ()


def test_tmux_new_session_command_inside_a_unit_argv() -> None:
    argv = ("/usr/bin/tmux", "-L", "main", "new-session", "-d", "-s", "claude", "-c", "/srv/app",
            "claude --continue --channels plugin:x@y")
    command = F.tmux_command_in_argv(argv)
    assert command is not None
    assert command.argv == ("claude", "--continue", "--channels", "plugin:x@y")
    assert F.tmux_command_in_argv(("/usr/bin/claude", "--continue")) is None


def test_systemctl_show_in_systemd_order_with_lossy_argv() -> None:
    show = F.parse_systemctl_show(SHOW)
    assert show.main_pid == 52
    assert show.exec_start == ("/usr/bin/env python3 -c import time; time.sleep(1000) "
                               "--flag two words",)


def test_unknown_unit_show_has_main_pid_zero() -> None:
    assert F.parse_systemctl_show("MainPID=0\n").main_pid == 0


def test_systemctl_cat_files_in_order_with_continuation_lines() -> None:
    files = F.parse_systemctl_cat(CAT_WITH_DROP_IN)
    assert [f.path for f in files] == ["/etc/systemd/system/claude.service",
                                       "/etc/systemd/system/claude.service.d/override.conf"]
    assert ("Service", "ExecStart", "") in files[1].directives


def test_exec_start_reset_in_a_drop_in_leaves_only_the_new_command() -> None:
    (command,) = F.effective_exec_start(F.parse_systemctl_cat(CAT_WITH_DROP_IN))
    assert command.argv == ("/usr/local/bin/claude", "--continue", "--channels", "${CHANNELS}",
                            "--dangerously-load-development-channels", "server:companion")


def test_exec_start_quoting_keeps_words_with_spaces() -> None:
    (command,) = F.parse_exec_start(
        '/usr/bin/env python3 -c "import time; time.sleep(1000)" --flag \'two words\'')
    assert command.argv == ("/usr/bin/env", "python3", "-c", "import time; time.sleep(1000)",
                            "--flag", "two words")


@pytest.mark.parametrize("value, prefixes, path, argv0", [
    ("-/usr/bin/claude --continue", "-", "/usr/bin/claude", "/usr/bin/claude"),
    ("@/usr/bin/claude claude-main --continue", "@", "/usr/bin/claude", "claude-main"),
    ("+:/usr/bin/claude --continue", "+:", "/usr/bin/claude", "/usr/bin/claude"),
    ("!!/usr/bin/claude --continue", "!!", "/usr/bin/claude", "/usr/bin/claude"),
])
def test_exec_start_prefixes_are_stripped_and_kept(value, prefixes, path, argv0) -> None:
    (command,) = F.parse_exec_start(value)
    assert (command.prefixes, command.path, command.argv[0]) == (prefixes, path, argv0)
    assert command.argv[-1] == "--continue"


def test_lone_semicolon_separates_commands_and_escaped_one_does_not() -> None:
    commands = F.parse_exec_start("/bin/echo a ; /bin/echo b \\; c")
    assert [c.argv for c in commands] == [("/bin/echo", "a"), ("/bin/echo", "b", ";", "c")]


def test_tmux_and_systemd_words_differ_only_in_single_quotes_and_escapes() -> None:
    text = "'a\\tb' \"c\\td\" e\\ f"
    assert F.parse_tmux_words(text) == ["a\\tb", "c\td", "e f"]  # tmux: '…' is literal
    assert F.split_systemd_words(text) == [["a\tb", "c\td", "e f"]]
    with pytest.raises(FactError, match="unterminated single quote in tmux command"):
        F.parse_tmux_words("a 'b")
    with pytest.raises(FactError, match="unterminated double quote in tmux command"):
        F.parse_tmux_words('a "b\\"')
    with pytest.raises(IntrospectError, match="unterminated quote in ExecStart"):
        F.split_systemd_words("a 'b")


def test_environment_lines_and_env_substitution_rules() -> None:
    files = F.parse_systemctl_cat(CAT_WITH_DROP_IN)
    env = F.parse_environment(F.effective_values(files, "Environment"))
    assert env == {"CHANNELS": "plugin:telegram@claude-plugins-official", "BAR": "baz"}
    argv, missing = F.expand_systemd_env(
        ("/c", "--channels", "${CHANNELS}", "$FLAGS", "x$${BAR}", "${NOPE}"),
        {**env, "FLAGS": '--a "b c"'})
    assert argv == ("/c", "--channels", "plugin:telegram@claude-plugins-official", "--a", "b c",
                    "x${BAR}", "")
    assert missing == ("NOPE",)


def test_environment_file_comments_quotes_and_later_wins() -> None:
    text = "# comment\n; other\nA=1\nB='two words'\nA=3\n"
    assert F.parse_environment_file(text) == {"A": "3", "B": "two words"}


def test_double_percent_is_a_literal_and_other_specifiers_are_refused() -> None:
    assert F.resolve_specifiers(("/c", "100%%")) == ("/c", "100%")
    with pytest.raises(IntrospectError, match="specifier '%h'"):
        F.resolve_specifiers(("/c", "--config", "%h/.claude"))


def test_assignments_systemd_ignores_are_no_part_of_the_unit_environment() -> None:
    """A shell's ``.env`` reused as EnvironmentFile: systemd logs "Ignoring invalid environment
    assignment 'export TOKEN=…'" and the unit has no TOKEN. Kept as a variable named
    "export TOKEN", it went into the rendered config's switch.environment, which the runtime
    schema refuses (names are [A-Za-z_][A-Za-z0-9_]*)."""
    text = "export TOKEN=abc\nFOO-BAR=1\n9LIVES=2\nGOOD = 3\nKEEP=\"x y\"\n"
    assert F.parse_environment_file(text) == {"GOOD": "3", "KEEP": "x y"}
    assert F.parse_environment(['"export A=1" B=2 "C D=3" 4E=5']) == {"B": "2"}
