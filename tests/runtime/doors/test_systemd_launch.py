"""tl-launch: reads the pointer, execs claude with --resume, else the launch argv, loudly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.doors.systemd_launch import choose_argv, parse_args, session_file
from runtime.paths import encode_project_dir

SID = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
STAND_IN = """#!{python}
import json, os, sys
with open({record!r}, "w") as out:
    json.dump({{"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd()}}, out)
"""


def tl_launch_argv() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m
    runtime.doors.systemd_launch``."""
    script = Path(sys.executable).parent / "tl-launch"
    return [str(script)] if script.exists() else [sys.executable, "-m",
                                                  "runtime.doors.systemd_launch"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "srv" / "my app"
    work.mkdir(parents=True)
    return work


def make_session(config_dir: Path, cwd: Path, session_id: str) -> Path:
    folder = config_dir / "projects" / encode_project_dir(str(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    path.write_text("{}\n")
    return path


def test_session_file_follows_claude_config_dir_and_the_encoded_cwd(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": "/nonexistent"}
    assert session_file(SID, "/srv/wo.rk_x y", env) == (
        tmp_path / "cfg" / "projects" / "-srv-wo-rk-x-y" / f"{SID}.jsonl"
    )
    assert session_file(SID, "/srv/a", {"HOME": "/home/u"}) == Path(
        f"/home/u/.claude/projects/-srv-a/{SID}.jsonl"
    )


def test_pointer_to_an_existing_session_gives_the_resume_argv(
    tmp_path: Path, workdir: Path
) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    make_session(tmp_path / "cfg", workdir, SID)
    (tmp_path / "pointer").write_text(SID + "\n")
    argv, line = choose_argv(["claude", "--continue", "--channels", "plugin:x"],
                             str(tmp_path / "pointer"), str(workdir), env)
    assert argv == ["claude", "--resume", SID, "--channels", "plugin:x"]
    assert line.startswith(f"resuming session '{SID}'")


@pytest.mark.parametrize("pointer_text, why", [
    (None, "is missing or empty"),
    ("", "is missing or empty"),
    ("../../etc/passwd", "not a session id"),
    ("7e1f0000-0000-4000-8000-000000000000", "does not exist"),
])
def test_unusable_pointer_falls_back_to_the_launch_argv_with_a_warning(
    tmp_path: Path, workdir: Path, pointer_text: str | None, why: str
) -> None:
    pointer = tmp_path / "pointer"
    if pointer_text is not None:
        pointer.write_text(pointer_text)
    launch = ["claude", "--continue"]
    argv, line = choose_argv(launch, str(pointer), str(workdir),
                             {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert argv == launch
    assert line.startswith("WARNING:") and why in line
    assert "starting the launch argv unchanged: claude --continue" in line


def test_an_ambiguous_launch_argv_falls_back_loudly_instead_of_failing_the_unit(
    tmp_path: Path, workdir: Path
) -> None:
    make_session(tmp_path / "cfg", workdir, SID)
    (tmp_path / "pointer").write_text(SID)
    argv, line = choose_argv(["claude", "-c", "--continue"], str(tmp_path / "pointer"),
                             str(workdir), {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert argv == ["claude", "-c", "--continue"]
    assert "more than once" in line


def test_arguments_need_a_pointer_and_a_double_dash() -> None:
    assert parse_args(["--pointer", "/p", "--", "claude", "-c"]) == ("/p", ["claude", "-c"])
    assert parse_args(["--pointer=/p", "--", "claude"]) == ("/p", ["claude"])
    for bad in (["claude"], ["--pointer", "/p", "claude"], ["--pointer", "/p", "--"], ["--", "c"]):
        with pytest.raises(ValueError, match="usage"):
            parse_args(bad)


def test_help_says_what_tl_launch_is_and_exits_0() -> None:
    done = subprocess.run([*tl_launch_argv(), "--help"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: tl-launch --pointer FILE -- CLAUDE_ARGV...\n")
    assert "ExecStart wrapper of Threadline's systemd door" in done.stdout
    assert "\n  ExecStart=tl-launch --pointer " in done.stdout  # the example


def test_version_prints_the_program_and_the_installed_version(capsys) -> None:
    from importlib.metadata import version

    from runtime.doors.systemd_launch import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"tl-launch {version('threadline')}\n"


def test_help_after_the_double_dash_belongs_to_claude(tmp_path: Path, capsys) -> None:
    from runtime.doors.systemd_launch import main

    missing = str(tmp_path / "no-claude")
    assert main(["--pointer", str(tmp_path / "p"), "--", missing, "--help"]) == 127
    captured = capsys.readouterr()
    assert captured.out == ""  # no help of ours: the argv went to the program (not there)
    assert f"tl-launch: cannot run {missing!r}" in captured.err


def run_tl_launch(
    tmp_path: Path, workdir: Path, pointer: Path
) -> tuple[subprocess.Popen[str], dict[str, object], str]:
    record = tmp_path / "record.json"
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir(exist_ok=True)
    claude.write_text(STAND_IN.format(python=sys.executable, record=str(record)))
    claude.chmod(0o755)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"),
           "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}"}
    child = subprocess.Popen(
        [*tl_launch_argv(), "--pointer", str(pointer), "--", "claude", "--continue",
         "--dangerously-load-development-channels", "server:companion"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    return child, json.loads(record.read_text()), stderr


def test_tl_launch_execs_claude_in_its_own_pid_with_the_resume_argv(
    tmp_path: Path, workdir: Path
) -> None:
    make_session(tmp_path / "cfg", workdir, SID)
    pointer = tmp_path / "pointer"
    pointer.write_text(SID + "\n")
    child, seen, stderr = run_tl_launch(tmp_path, workdir, pointer)
    assert seen["pid"] == child.pid  # exec, not a child: systemd's MainPID is claude
    assert seen["argv"] == ["--resume", SID, "--dangerously-load-development-channels",
                            "server:companion"]
    assert seen["cwd"] == str(workdir)
    assert f"tl-launch: resuming session '{SID}'" in stderr


def test_tl_launch_without_a_session_file_starts_the_launch_argv_and_says_so(
    tmp_path: Path, workdir: Path
) -> None:
    pointer = tmp_path / "pointer"
    pointer.write_text(SID + "\n")
    child, seen, stderr = run_tl_launch(tmp_path, workdir, pointer)
    assert seen["pid"] == child.pid
    assert seen["argv"] == ["--continue", "--dangerously-load-development-channels",
                            "server:companion"]
    assert "tl-launch: WARNING: pointer" in stderr and "does not exist" in stderr


def test_tl_launch_reports_a_missing_program_with_exit_127(tmp_path: Path) -> None:
    done = subprocess.run(
        [*tl_launch_argv(), "--pointer", str(tmp_path / "none"), "--",
         str(tmp_path / "no-such-claude"), "-c"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 127
    assert "cannot run" in done.stderr
    assert shutil.which("no-such-claude") is None
