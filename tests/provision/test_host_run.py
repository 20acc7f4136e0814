"""LocalHost.run: a timeout ends the command's whole process group, not just its first process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from provision.errors import HostError
from provision.host import LocalHost


def _gone(pid: int, bound: float = 10.0) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _pid_from(path: Path, bound: float = 10.0) -> int:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid written to {path}")


def test_a_timeout_kills_a_grandchild_that_let_go_of_the_pipes(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; wait"
    with pytest.raises(HostError, match=r"command timed out after 1s: 'sh -c"):
        LocalHost().run(["sh", "-c", script], timeout=1)
    grandchild = _pid_from(pidfile)
    try:
        assert _gone(grandchild), f"grandchild {grandchild} still runs after the timeout"
    finally:
        if not _gone(grandchild, 0):
            os.kill(grandchild, 9)


def test_a_timeout_returns_while_a_grandchild_still_holds_stdout(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # the grandchild keeps the command's stdout open: the call must not wait for it to end
    script = f"sleep 300 & echo $! > {pidfile}; echo started; wait"
    with pytest.raises(HostError, match="timed out"):
        LocalHost().run(["sh", "-c", script], timeout=1)
    grandchild = _pid_from(pidfile)
    assert _gone(grandchild), f"grandchild {grandchild} still runs after the timeout"


def test_a_command_that_ends_keeps_rc_output_and_input(tmp_path: Path) -> None:
    result = LocalHost().run(["sh", "-c", "cat; echo err >&2; exit 3"], input_text="héllo\n",
                             timeout=10)
    assert (result.rc, result.stdout, result.stderr) == (3, "héllo\n", "err\n")


def test_a_missing_binary_is_a_host_error(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="command not found: 'tl-no-such-binary'"):
        LocalHost().run(["tl-no-such-binary"])


def test_the_runtime_door_also_ends_the_group_on_a_timeout(tmp_path: Path) -> None:
    from runtime.errors import ProcError
    from runtime.proc import run

    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; wait"
    with pytest.raises(ProcError, match=r"command timed out after 1s"):
        run(["sh", "-c", script], timeout=1)
    grandchild = _pid_from(pidfile)
    assert _gone(grandchild), f"grandchild {grandchild} still runs after the timeout"


def test_the_runtime_door_keeps_rc_output_and_input() -> None:
    from runtime.proc import run

    result = run(["sh", "-c", "cat; echo err >&2; exit 3"], input_text="héllo\n", timeout=10)
    assert (result.rc, result.stdout, result.stderr) == (3, "héllo\n", "err\n")
