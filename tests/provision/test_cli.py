"""The tl-provision command line: one-line errors, exit 2, nothing touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.cli import main
from tests.fixtures.terminal import stdout_on_a_terminal


def test_invalid_profile_lists_every_problem_and_exits_2(tmp_path: Path, capsys) -> None:
    profile = tmp_path / "host.yml"
    profile.write_text("host: h\nclaude: {user: u}\ndoor: {kind: tmux, tmux: {}}\nextra: 1\n")
    assert main(["apply", "--check", str(profile)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tl-provision: error: invalid host profile")
    for problem in ("claude.home: required", "door.tmux.target: required",
                    "extra: unknown key", "install: required"):
        assert problem in err


def test_ssh_connection_is_refused_in_this_release(tmp_path: Path, capsys) -> None:
    profile = tmp_path / "host.yml"
    profile.write_text("host: h\nconnection: ssh://root@vps\nclaude: {user: u, home: /h}\n"
                       "door: {kind: tmux, tmux: {target: 'x:0.0'}}\n"
                       "install: {config_path: /c.toml, state_dir: /s}\n")
    assert main(["introspect", str(profile)]) == 2
    assert "connection 'ssh://root@vps' is not supported" in capsys.readouterr().err


def test_missing_profile_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["drift", str(tmp_path / "nope.yml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tl-provision: error: host profile not found: '{tmp_path / 'nope.yml'}'"]


def test_subcommand_is_required() -> None:
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2


def test_validate_reports_every_problem_with_its_path_and_exits_2(tmp_path: Path,
                                                                  capsys) -> None:
    profile = tmp_path / "host.yml"
    profile.write_text("host: h\nclaude: {user: u, home: relative}\n"
                       "door: {kind: tmux, tmux: {}}\n"
                       "install: {config_path: /c.toml, state_dir: /s}\n")
    assert main(["validate", str(profile)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"tl-provision: error: invalid host profile '{profile}': ")
    assert "door.tmux.target: required" in err[0]
    assert "claude.home: 'relative' does not match '^/'" in err[0]


def test_validate_accepts_a_valid_profile_and_touches_nothing(tmp_path: Path, capsys) -> None:
    profile = tmp_path / "host.yml"
    profile.write_text("host: h\nclaude: {user: u, home: /nonexistent/h}\n"
                       "door: {kind: tmux, tmux: {target: 'x:0.0'}}\n"
                       "install: {config_path: /nonexistent/c.toml, state_dir: /nonexistent/s}\n")
    assert main(["validate", "--json", str(profile)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {"schema_version": 1, "host": "h", "valid": True}
    assert out.startswith('{\n  "schema_version": 1,')  # the first key, as tl-rebuild's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host.yml"]


def _task_classes() -> set[str]:
    """The name of every concrete task the provision package defines (tasks/, Verify, Manifest)."""
    import importlib
    import pkgutil

    import provision.tasks
    from provision.actions import Task

    modules = [f"provision.tasks.{info.name}"
               for info in pkgutil.iter_modules(provision.tasks.__path__)]
    for module in [*modules, "provision.tasks.verify", "provision.tasks.manifest"]:
        importlib.import_module(module)  # a module that does not import fails here, by name
    found, todo = set(), list(Task.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("provision.") and not cls.__subclasses__():
            found.add(cls.name)
    return found


def test_apply_check_lists_every_task_the_package_defines(tmp_path: Path, capsys) -> None:
    profile = tmp_path / "host.yml"
    profile.write_text("host: h\nclaude: {user: u, home: /nonexistent/h}\n"
                       "door: {kind: tmux, tmux: {target: 'x:0.0', "
                       f"socket_name: 'wt-runner-{tmp_path.name}'}}}}\n"
                       "install: {config_path: /nonexistent/c.toml, state_dir: /nonexistent/s}\n")
    main(["apply", "--check", str(profile)])
    listed = {line.split("] ", 1)[1].split(" — ", 1)[0]
              for line in capsys.readouterr().out.splitlines() if line.startswith(
                  ("ok: [h] ", "changed: [h] ", "failed: [h] ", "skipped: [h] "))}
    expected = _task_classes()
    assert {"StopHook", "McpServer", "McpTools", "StopHookPersists", "Verify"} <= expected
    assert listed == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host.yml"]


def test_version_prints_the_program_and_the_installed_version(capsys) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tl-provision {version('threadline')}\n"


@pytest.mark.parametrize("argv", [["--debug", "validate"], ["validate", "--debug"]])
def test_debug_before_or_after_the_subcommand_shows_the_traceback(
        tmp_path: Path, argv: list[str]) -> None:
    from provision.errors import ProfileError

    with pytest.raises(ProfileError, match="host profile not found"):
        main([*argv, str(tmp_path / "missing.yml")])


def test_without_debug_a_missing_profile_is_one_line(tmp_path: Path, capsys) -> None:
    missing = str(tmp_path / "missing.yml")
    assert main(["validate", missing]) == 2
    assert capsys.readouterr().err == f"tl-provision: error: host profile not found: {missing!r}\n"


def test_every_subcommand_has_a_description_and_an_example_in_its_help() -> None:
    from provision.cli import build_parser
    from tests.runtime.cli.test_parser import subcommands

    commands = subcommands(build_parser())
    assert commands.keys() == {"validate", "introspect", "apply", "drift", "accept", "uninstall",
                               "completion"}
    for name, parser in commands.items():
        text = parser.format_help()
        assert parser.description and parser.description in text, name
        examples = text.split("examples:\n", 1)[1].splitlines()
        assert examples and all(line.startswith(f"  tl-provision {name} ") for line in examples)
        assert "--debug" in text, name


def unreachable_tmux_profile(tmp_path: Path) -> Path:
    """A profile whose pane cannot be found (its own socket name under a private TMUX_TMPDIR):
    HostFacts is ok, LaunchCommand fails, everything after it is skipped — nothing is
    written, and no tmux server is started (list-panes starts none)."""
    import getpass

    profile = tmp_path / "host.yml"
    profile.write_text(
        f"host: box\nclaude: {{user: {getpass.getuser()}, home: {tmp_path / 'home'}}}\n"
        "door: {kind: tmux, tmux: {target: 'nope:0.0', socket_name: tl-colour-test}}\n"
        f"install: {{config_path: {tmp_path / 'cfg.toml'}, state_dir: {tmp_path / 'st'}}}\n")
    (tmp_path / "tmux").mkdir()
    (tmp_path / "home").mkdir()
    return profile


@pytest.mark.real_tmux
def test_apply_on_a_terminal_colours_its_lines_like_ansible_and_no_color_or_a_pipe_does_not(
        tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    profile = unreachable_tmux_profile(tmp_path)
    tl = str(Path(sys.executable).with_name("tl-provision"))
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TMUX_TMPDIR"] = str(tmp_path / "tmux")
    rc, out, _ = stdout_on_a_terminal([tl, "apply", "--check", str(profile)], env)
    lines = out.splitlines()
    assert rc == 2
    assert lines[0].startswith("\x1b[32mok: [box] HostFacts — door tmux; user ")
    assert lines[1].startswith("\x1b[31mfailed: [box] LaunchCommand — tmux list-panes failed")
    assert lines[1].endswith("\x1b[0m")
    assert lines[2] == ("\x1b[36mskipped: [box] ResumeCommand — LaunchCommand failed; "
                        "nothing after it ran\x1b[0m")
    assert lines[-1] == ("\x1b[31mbox\x1b[0m : \x1b[32mok=1\x1b[0m changed=0 "
                         "\x1b[31mfailed=1\x1b[0m \x1b[36mskipped=14\x1b[0m")
    rc, plain, _ = stdout_on_a_terminal([tl, "apply", "--check", str(profile)],
                                        {**env, "NO_COLOR": "1"})
    assert rc == 2 and "\x1b[" not in plain
    assert plain.splitlines()[-1] == "box : ok=1 changed=0 failed=1 skipped=14"
    piped = subprocess.run([tl, "apply", "--check", str(profile)], env=env, timeout=60,
                           capture_output=True, text=True, check=False)
    assert piped.returncode == 2 and "\x1b[" not in piped.stdout
    assert [x.split(" — ")[0] for x in piped.stdout.splitlines()[:3]] == [
        "ok: [box] HostFacts", "failed: [box] LaunchCommand", "skipped: [box] ResumeCommand"]
    rc, as_json, _ = stdout_on_a_terminal([tl, "apply", "--check", "--json", str(profile)], env)
    assert rc == 2 and "\x1b[" not in as_json
    report = json.loads(as_json)
    assert report["recap"] == {"ok": 1, "changed": 0, "failed": 1, "skipped": 14}
    assert list(report)[:2] == ["schema_version", "host"] and report["schema_version"] == 1
