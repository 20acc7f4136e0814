"""runtime.proc: the runtime's one door to the machine (commands and durable writes)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import logs, proc
from runtime.errors import ProcError


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_atomic_write_replaces_the_file_with_mode_0600_and_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "record.json"
    target.write_bytes(b"old")
    target.chmod(0o644)
    proc.atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and mode(target) == 0o600
    assert leftovers(tmp_path) == []


def test_atomic_write_into_a_missing_folder_is_a_proc_error_naming_the_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "absent" / "record.json"
    with pytest.raises(ProcError, match=r"cannot write '.*absent/record\.json'"):
        proc.atomic_write(target, b"x")


def test_a_failed_rename_removes_the_temp_file_and_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "in-the-way"
    target.mkdir()
    with pytest.raises(ProcError, match="in-the-way"):
        proc.atomic_write(target, b"x")
    assert target.is_dir() and leftovers(tmp_path) == []


def test_a_pipe_or_device_in_the_way_is_refused_not_replaced_by_a_file(tmp_path: Path) -> None:
    """``tl-rebuild fork --manifest /dev/null`` run as root put a 0600 file in place of
    /dev/null; a FIFO stands in for the device here."""
    target = tmp_path / "manifest.jsonl"
    os.mkfifo(target)
    with pytest.raises(ProcError, match=r"cannot write '.*manifest\.jsonl': it exists and is "
                                        r"not a regular file"):
        proc.atomic_write(target, b"x")
    assert stat.S_ISFIFO(target.lstat().st_mode) and leftovers(tmp_path) == []


def test_any_failure_while_filling_removes_the_temp_file_and_keeps_the_old_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "record.json"
    target.write_bytes(b"old")

    def chunks():
        yield b"half written"
        raise ValueError("the source broke")

    with pytest.raises(ValueError, match="the source broke"):
        proc.atomic_write_chunks(target, chunks())
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives a file away")
def test_atomic_write_gives_the_file_the_owner_asked_for_with_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    proc.atomic_write(target, b"{}", 0o640, owner=(54321, 54322))
    st = target.stat()
    assert (st.st_uid, st.st_gid, mode(target)) == (54321, 54322, 0o640)


def test_the_local_runner_and_provisions_hosts_are_one_runner_protocol(tmp_path: Path) -> None:
    from provision.host import LocalHost
    from tests.fakes import FakeHost

    def roundtrip(runner: proc.Runner, path: str) -> tuple[bytes | None, str]:
        runner.write_file(path, b"abc\n", mode=0o600)
        return runner.read_bytes(path), runner.run(["cat", path]).stdout

    fake = FakeHost()
    fake.add_command(["cat", "/f"], stdout="abc\n")
    assert roundtrip(fake, "/f") == (b"abc\n", "abc\n")
    for index, runner in enumerate((proc.LOCAL, LocalHost())):
        path = str(tmp_path / f"f{index}")
        assert roundtrip(runner, path) == (b"abc\n", "abc\n") and mode(Path(path)) == 0o600
        assert isinstance(runner.run(["true"]), proc.Result)
    assert proc.LocalRunner().read_bytes(str(tmp_path / "absent")) is None


def test_a_provision_action_runs_through_the_runtimes_runner(tmp_path: Path) -> None:
    from provision.actions import RunCommand
    from provision.errors import HostError

    assert RunCommand(("touch", str(tmp_path / "ran"))).execute(proc.LOCAL) is None
    assert (tmp_path / "ran").exists()
    with pytest.raises(HostError, match=r"command failed \(rc=1\): 'false'"):
        RunCommand(("false",)).execute(proc.LOCAL)


def test_copy_file_returns_the_digest_of_the_bytes_written_with_mode_0600(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    data = b'{"type":"user"}\n' * 100_000  # more than one read chunk
    source.write_bytes(data)
    backup = tmp_path / "backup.jsonl"
    assert proc.copy_file(source, backup) == hashlib.sha256(data).hexdigest()
    assert backup.read_bytes() == data and mode(backup) == 0o600
    assert leftovers(tmp_path) == []


def test_copy_of_a_missing_source_names_both_paths_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ProcError, match=r"cannot copy '.*gone\.jsonl' to '.*copy\.jsonl'"):
        proc.copy_file(tmp_path / "gone.jsonl", tmp_path / "copy.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_append_line_adds_the_newline_once_and_creates_the_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    proc.append_line(path, b'{"phase":"a"}')
    proc.append_line(path, b'{"phase":"b"}\n')
    assert path.read_bytes() == b'{"phase":"a"}\n{"phase":"b"}\n' and mode(path) == 0o600


def test_ensure_dir_sets_0700_on_a_new_or_existing_folder(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    assert proc.ensure_dir(folder) == folder and mode(folder) == 0o700
    folder.chmod(0o755)
    proc.ensure_dir(folder)
    assert mode(folder) == 0o700



def test_ensure_dir_on_a_file_says_it_is_not_a_directory(tmp_path: Path) -> None:
    """A state_dir that names a file: the error says so, not a bare "File exists"."""
    afile = tmp_path / "state"
    afile.write_text("")
    with pytest.raises(ProcError, match=r"exists and is not a directory") as info:
        proc.ensure_dir(afile)
    assert str(afile) in str(info.value) and "File exists" not in str(info.value)

def test_run_names_a_missing_binary_and_a_failing_command(tmp_path: Path) -> None:
    with pytest.raises(ProcError, match="command not found: '/nonexistent/tl-no-such-binary'"):
        proc.run(["/nonexistent/tl-no-such-binary"])
    failing = [sys.executable, "-c", "import sys; sys.exit('broken here')"]
    assert proc.run(failing).rc == 1
    with pytest.raises(ProcError, match=r"rc=1.*broken here"):
        proc.run(failing, check=True, cwd=tmp_path)


def test_a_log_below_the_limit_is_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"x" * 99)
    assert proc.rotate_log(log, limit=100) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker.log"]


def test_a_full_log_rotates_and_never_more_than_five_files_remain(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    for generation in range(8):
        log.write_bytes(bytes([65 + generation]) * 100)
        assert proc.rotate_log(log, limit=100) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "worker.log.1", "worker.log.2", "worker.log.3", "worker.log.4",
    ]
    assert (tmp_path / "worker.log.1").read_bytes() == b"H" * 100  # the newest
    assert (tmp_path / "worker.log.4").read_bytes() == b"E" * 100  # the oldest kept


def test_spawning_a_worker_rotates_a_full_log_first(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"old\n" * (proc.LOG_BYTES // 4))
    pid = proc.spawn_detached([sys.executable, "-c", "print('fresh')"], log_path=log)
    os.waitpid(pid, 0)  # our child: it has written and exited
    assert log.read_bytes() == b"fresh\n"
    assert (tmp_path / "worker.log.1").stat().st_size == proc.LOG_BYTES


def test_a_watched_child_that_exits_at_once_keeps_its_exit_code_for_the_caller(
    tmp_path: Path,
) -> None:
    """What ``schedule`` needs to see a refusing sudo: before, the dropped Popen reaped a child
    that had already exited, and the caller's waitpid found no child (the operation stayed
    ``scheduled``; CI caught it on the real-systemd sudo test)."""
    log = tmp_path / "worker.log"
    argv = ["/bin/sh", "-c", "echo 'sudo: a password is required' >&2; exit 1"]
    pid = proc.spawn_detached(argv, log_path=log, watch=True)
    proc.run(["/bin/sh", "-c", "sleep 0.2"])  # time to exit, and a Popen that reaps dropped ones
    assert proc.wait_spawned(pid, 30) == 1
    assert log.read_text() == "sudo: a password is required\n"
    assert proc.wait_spawned(pid, 1) is None  # forgotten once read
    running = proc.spawn_detached(["/bin/sh", "-c", "sleep 30"], log_path=log, watch=True)
    try:
        assert proc.wait_spawned(running, 0.1) is None
    finally:
        os.kill(running, 9)


LINE = r"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z {who}\[{pid}\] {message}"


def test_the_worker_and_the_hook_log_in_one_line_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    from runtime.switch.job import log

    log("op-1: scheduled → running")
    out = capsys.readouterr().out
    assert re.fullmatch(LINE.format(who="worker", pid=os.getpid(),
                                    message="op-1: scheduled → running") + "\n", out), out
    path = tmp_path / "worker.log"
    logs.logger("hook-stop", logs.AppendToLog(path)).error("%s", "ValueError: no EOF")
    text = path.read_text()
    assert re.fullmatch(LINE.format(who="hook-stop", pid=os.getpid(),
                                    message="ValueError: no EOF") + "\n", text), text
    assert mode(path) == 0o600


def test_the_log_file_handler_rotates_a_full_log_and_raises_when_it_cannot_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "worker.log"
    path.write_bytes(b"x" * proc.LOG_BYTES)
    logs.logger("hook-stop", logs.AppendToLog(path)).error("after the rotation")
    assert (tmp_path / "worker.log.1").stat().st_size == proc.LOG_BYTES
    assert path.read_text().endswith("] after the rotation\n")
    with pytest.raises(ProcError, match="cannot append to"):
        logs.logger("hook-stop", logs.AppendToLog(tmp_path / "absent" / "w.log")).error("x")


FULL_DISK = """
import resource, signal, sys
from runtime import proc
from runtime.errors import ProcError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit write() is cut short, then EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
try:
    proc.append_line(sys.argv[1], b'{"phase": "scheduled", "evidence": "' + b"x" * 200 + b'"}')
except ProcError as exc:
    print(exc)
"""


def test_a_line_the_disk_takes_only_part_of_is_an_error_and_the_next_line_survives(
    tmp_path: Path,
) -> None:
    """A full disk (here: RLIMIT_FSIZE, which cuts a write short exactly like one) took part
    of a timeline line without a word; the next line was then glued onto the torn one and
    lost as well when the timeline was read."""
    from runtime.switch.store import Store

    store = Store(tmp_path / "state").ensure()
    events = store.events_path("op-x")
    store.event("op-x", "created", state="pending")
    room = events.stat().st_size + 40
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(events), str(room)],
                          capture_output=True, text=True, timeout=30,
                          cwd=Path(__file__).resolve().parents[2])
    assert f"cannot append to {str(events)!r}" in done.stdout, done.stdout + done.stderr
    assert events.stat().st_size == room  # the torn line is there

    store.event("op-x", "cancelled", state="cancelled")  # the disk has room again

    assert [e["phase"] for e in store.events("op-x")] == ["created", "cancelled"]
