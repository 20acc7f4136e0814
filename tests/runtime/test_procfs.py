"""Process facts from /proc and from claude's own sessions/<pid>.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from runtime.procfs import (
    alive,
    claude_session_record,
    claude_session_status,
    cmdline,
    parse_stat,
    start_time,
)


def write_record(config_dir: Path, pid: int, **fields: object) -> None:
    folder = config_dir / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{pid}.json").write_text(json.dumps({"pid": pid, **fields}))


def test_a_session_record_of_this_very_process_is_read(tmp_path: Path) -> None:
    pid = os.getpid()
    write_record(tmp_path, pid, sessionId="s-1", status="busy", procStart=str(start_time(pid)))
    assert claude_session_record(tmp_path, pid)["sessionId"] == "s-1"  # type: ignore[index]
    assert claude_session_status(tmp_path, "s-1") == "busy"
    assert claude_session_status(tmp_path, "s-2") is None


def test_a_record_left_by_an_earlier_process_with_the_same_pid_is_ignored(tmp_path: Path) -> None:
    pid = os.getpid()
    write_record(tmp_path, pid, sessionId="s-1", status="busy", procStart="1")
    assert claude_session_record(tmp_path, pid) is None
    assert claude_session_status(tmp_path, "s-1") is None


def test_missing_or_broken_records_say_nothing(tmp_path: Path) -> None:
    assert claude_session_record(tmp_path, os.getpid()) is None
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / f"{os.getpid()}.json").write_text("{not json")
    assert claude_session_record(tmp_path, os.getpid()) is None


def test_liveness_needs_the_same_start_time_and_no_zombie() -> None:
    me = os.getpid()
    assert alive(me) and alive(me, start_time(me))
    assert not alive(me, (start_time(me) or 0) + 1)
    assert not alive(None) and not alive(0)
    assert cmdline(me) is not None


def test_an_environment_block_is_parsed_and_malformed_entries_are_skipped() -> None:
    from runtime.procfs import parse_environ

    raw = b"HOME=/h\0CLAUDE_CONFIG_DIR=/c d\0A=b=c\0junk\0=x\0\0"
    assert parse_environ(raw) == {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c d", "A": "b=c"}


def test_the_environment_of_a_live_child_is_read_and_its_parent_is_known() -> None:
    import os
    import subprocess
    import sys

    from runtime.procfs import descendant_pairs, environ
    from tests.fixtures.tmux import wait_for

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, env={**os.environ, "TL_PROBE": "1 2"})
    try:
        # Between fork and exec the block is the parent's (or empty): poll for the exec'd one.
        wait_for(lambda: (environ(child.pid) or {}).get("TL_PROBE") == "1 2",
                 what="the child's own environment")
        assert (child.pid, os.getpid()) in descendant_pairs(os.getpid())
    finally:
        child.communicate(b"", timeout=10)
    assert environ(child.pid) is None


def test_the_argv_of_a_live_child_keeps_its_non_utf8_bytes_for_exec() -> None:
    import subprocess
    import sys

    from tests.fixtures.tmux import wait_for

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                              b"caf\xe9 \xff"], stdin=subprocess.PIPE)
    try:
        wait_for(lambda: len(cmdline(child.pid) or ()) == 4, what="the child's own argv")
        assert os.fsencode((cmdline(child.pid) or ())[3]) == b"caf\xe9 \xff"
    finally:
        child.communicate(b"", timeout=10)


def test_the_stat_parser_reads_state_parent_and_start_time_after_the_last_parenthesis() -> None:
    text = "42 (tmux: server) S 1 42 42 0 -1 4194560 " + " ".join(["0"] * 12) + " 98765 0"
    assert parse_stat(text) == ("S", 1, 98765)
    assert parse_stat("garbage") is None
