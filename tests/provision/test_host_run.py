"""LocalHost.run: a timeout ends the command's whole process group, not just its first process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision.errors import HostError
from provision.host import LocalHost
from tests.fixtures.tmux import wait_for


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for its reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _gone(pid: int) -> bool:
    return bool(wait_for(lambda: _dead(pid), timeout=10, what=f"pid {pid} to end"))


def _pid_from(path: Path) -> int:
    text = wait_for(lambda: path.exists() and path.read_text().strip(), timeout=10,
                    what=f"a pid in {path}")
    return int(str(text))


def test_a_timeout_kills_a_grandchild_that_let_go_of_the_pipes(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; wait"
    with pytest.raises(HostError, match=r"command timed out after 1s: 'sh -c"):
        LocalHost().run(["sh", "-c", script], timeout=1)
    grandchild = _pid_from(pidfile)
    try:
        assert _gone(grandchild), f"grandchild {grandchild} still runs after the timeout"
    finally:
        if not _dead(grandchild):
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
