"""Templates render under StrictUndefined and validate before anything is replaced."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from provision.errors import RenderError
from provision.parsers.facts import effective_exec_start, parse_systemctl_cat
from provision.render import (
    render,
    systemd_argv,
    toml_value,
    validate_config,
    validate_drop_in,
    validate_runner,
)


def _config_context(**changes):
    context = {
        "managed_mark": "Managed by tl-provision", "profile_source": "host.yml", "host": "h",
        "launch_source": "tmux pane main:0.0 start command",
        "project_dir": "/h/.claude/projects/-srv-app", "workdir": "/srv/app",
        "state_dir": "/var/lib/threadline",
        "rebuild": [("carry_max_tokens", 1000), ("poison_patterns", ['\\b(AUP)\\b', "中毒"]),
                    ("speech_tools", [{"name": "mcp__x__relay", "path": "payload.text"}])],
        "door": "tmux", "resume_argv": ["/c", "--resume", "{session_id}", 'say "hi"'],
        "launch_argv": ["/c", "--continue", 'say "hi"'], "channel_flags": [],
        "expected_channel_servers": ["companion"], "request_max_age_hours": 24.0,
        "environment": ["CLAUDE_CONFIG_DIR"],
        "tmux_target": "main:0.0",
        "tmux_socket_name": "", "tmux_socket_path": "", "systemd_unit": "",
        "systemd_pointer_path": "", "systemd_sudo_user": "",
        "pointer_path": "",
    }
    context.update(changes)
    return context


def test_config_renders_and_loads_with_the_runtime_validator() -> None:
    content = render("config.toml.j2", _config_context())
    validate_config(content)
    data = tomllib.loads(content.decode())
    assert data["switch"]["resume_argv"] == ["/c", "--resume", "{session_id}", 'say "hi"']
    assert data["rebuild"]["poison_patterns"] == ['\\b(AUP)\\b', "中毒"]
    assert data["rebuild"]["speech_tools"] == [{"name": "mcp__x__relay", "path": "payload.text"}]
    assert data["switch"]["request_max_age_hours"] == 24.0
    assert data["switch"]["environment"] == ["CLAUDE_CONFIG_DIR"]  # names only, never values


def test_a_socket_path_is_written_only_when_the_profile_names_one() -> None:
    plain = tomllib.loads(render("config.toml.j2", _config_context()).decode())
    assert "socket_path" not in plain["switch"]["tmux"]  # configs of -L hosts stay as they were
    content = render("config.toml.j2", _config_context(tmux_socket_path="/run/claude/tmux.sock"))
    validate_config(content)
    tmux = tomllib.loads(content.decode())["switch"]["tmux"]
    assert tmux == {"target": "main:0.0", "socket_name": "", "socket_path": "/run/claude/tmux.sock"}


def test_a_missing_template_variable_is_a_render_error() -> None:
    context = _config_context()
    del context["workdir"]
    with pytest.raises(RenderError, match="'workdir' is undefined"):
        render("config.toml.j2", context)


def test_a_config_the_runtime_refuses_never_validates() -> None:
    bad = render("config.toml.j2", _config_context(rebuild=[("carry_overflow", "sometimes")]))
    with pytest.raises(RenderError, match="carry_overflow"):
        validate_config(bad)


def test_toml_values_escape_quotes_backslashes_and_booleans() -> None:
    assert tomllib.loads("v = " + toml_value('a"b\\c\n'))["v"] == 'a"b\\c\n'
    assert toml_value(True) == "true" and toml_value(1.5) == "1.5"
    with pytest.raises(RenderError):
        toml_value(object())


def test_drop_in_resets_exec_start_and_round_trips_the_argv() -> None:
    launch = ["/usr/bin/claude", "--continue", "--append-system-prompt", "100% of $HOME \"x\"",
              "--channels", "plugin:a b"]
    content = render("tl-launch.conf.j2", {
        "managed_mark": "Managed by tl-provision", "host": "h", "unit": "claude.service",
        "pointer_path": "/var/lib/threadline/pointer", "tl_launch": "/opt/tl/bin/tl-launch",
        "launch_argv": launch})
    validate_drop_in(launch)(content)
    files = parse_systemctl_cat("# /x.conf\n" + content.decode())
    assert ("Service", "ExecStart", "") in files[0].directives
    (command,) = effective_exec_start(files)
    assert command.argv[:4] == ("/opt/tl/bin/tl-launch", "--pointer",
                                "/var/lib/threadline/pointer", "--")
    assert systemd_argv(["100%"]) == "100%%"


def test_drop_in_validator_refuses_an_argv_that_does_not_round_trip() -> None:
    with pytest.raises(RenderError, match="does not re-parse"):
        validate_drop_in(["/usr/bin/claude", "--continue"])(
            b"[Service]\nExecStart=\nExecStart=/x -- /usr/bin/claude --other\n")


def test_runner_wrapper_renders_a_sh_script_that_execs_resume_or_launch() -> None:
    content = render("tl-runner.sh.j2", {
        "managed_mark": "Managed by tl-provision", "host": "h", "workdir": "/srv/my app",
        "pointer_path": "/var/lib/threadline/pointer",
        "resume_shell": '/c -p --resume "$session"', "launch_argv": ["/c", "-p", "--continue"],
        "hook_command": "/opt/tl/bin/tl-rebuild hook-stop"})
    validate_runner(content)
    text = content.decode()
    assert "cd '/srv/my app'" in text
    assert 'exec /c -p --resume "$session" "$@"' in text
    with pytest.raises(RenderError):
        validate_runner(b"echo hi\n")


@pytest.mark.parametrize("pointer", [
    "sid-1\n", "\n\n  sid-1 \t\nsid-2\n", "sid-1", "", " \n\t\n", None])
def test_the_runner_reads_the_pointer_by_the_doors_own_rule(
        tmp_path: Path, pointer: str | None) -> None:
    from runtime.doors.pointer import parse_pointer

    path = tmp_path / "pointer"
    if pointer is not None:
        path.write_text(pointer)
    runner = tmp_path / "tl-runner"
    runner.write_bytes(render("tl-runner.sh.j2", {
        "managed_mark": "Managed by tl-provision", "host": "h", "workdir": str(tmp_path),
        "pointer_path": str(path), "resume_shell": 'printf "resume [%s]\\n" "$session"',
        "launch_argv": ["printf", "launch\\n"], "hook_command": "true"}))
    done = subprocess.run(["sh", str(runner)], capture_output=True, text=True, timeout=10)
    session = parse_pointer(pointer) if pointer is not None else None
    assert done.stdout == (f"resume [{session}]\n" if session else "launch\n"), done.stderr


HOSTILE = "vps\nrm -rf /tmp/x #\r\x1b[2J\x00"


def test_values_in_comment_lines_stay_on_their_line_in_every_template(tmp_path: Path) -> None:
    """A newline in a value a template writes into a comment (a host name, a unit, a hook
    command, where the argv came from) would start a line of shell, unit file or TOML."""
    marker = tmp_path / "ran"
    hostile = f"h\ntouch {marker}\n#"
    runner = tmp_path / "tl-runner"
    runner.write_bytes(render("tl-runner.sh.j2", {
        "managed_mark": "Managed by tl-provision", "host": hostile, "workdir": str(tmp_path),
        "pointer_path": str(tmp_path / "pointer"), "resume_shell": "true",
        "launch_argv": ["true"], "hook_command": hostile}))
    validate_runner(runner.read_bytes())
    done = subprocess.run(["sh", str(runner)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0 and not marker.exists(), done.stderr
    assert "h\\x0atouch" in runner.read_text()  # still shown, escaped

    drop_in = render("tl-launch.conf.j2", {
        "managed_mark": "Managed by tl-provision", "host": HOSTILE, "unit": "a\nExecStop=/x",
        "pointer_path": "/p\nUser=root", "tl_launch": "/opt/tl/bin/tl-launch",
        "launch_argv": ["/c"]})
    (unit,) = parse_systemctl_cat("# /x.conf\n" + drop_in.decode())
    assert [key for _, key, _ in unit.directives] == ["ExecStart", "ExecStart"]

    config = render("config.toml.j2", _config_context(
        host=HOSTILE, profile_source="h\n[switch]", launch_source="pane\nx = 1"))
    validate_config(config)
    assert tomllib.loads(config.decode())["switch"]["resume_argv"][0] == "/c"


@pytest.mark.parametrize("word", ["line one\nline two", "tab\there", "cr\rend", 'q"\\\n'])
def test_an_argv_word_with_control_characters_round_trips_through_the_drop_in(word: str) -> None:
    launch = ["/usr/bin/claude", "--append-system-prompt", word]
    content = render("tl-launch.conf.j2", {
        "managed_mark": "Managed by tl-provision", "host": "h", "unit": "claude.service",
        "pointer_path": "/p", "tl_launch": "/tl-launch", "launch_argv": launch})
    validate_drop_in(launch)(content)
    (command,) = effective_exec_start(parse_systemctl_cat("# /x.conf\n" + content.decode()))
    assert command.argv[-1] == word


def test_an_argv_word_a_unit_file_cannot_hold_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="cannot be written in a unit file"):
        systemd_argv(["/c", "bell\x07"])
