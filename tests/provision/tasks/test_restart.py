"""``--restart-claude`` finds the session the live claude runs from its own session record,
with the pid-reuse guard of ``runtime.agents.claude``: a record left by an earlier process with
the same pid names another conversation, and resuming it would be wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from provision.errors import FactError
from provision.tasks.restart import live_session
from runtime.procfs import parse_stat
from tests.fakes import FakeHost

PID = 4242
SID = "0b9c3f52-6a1e-4d5b-9a57-1f0e2d3c4b5a"
# A real stat line (this process's), so the start time sits where the kernel puts it.
STAT = Path(f"/proc/{os.getpid()}/stat").read_text()
STARTED = (parse_stat(STAT) or ("", 0, 0))[2]


def _host(record: dict[str, object] | None, stat: str | None = STAT) -> FakeHost:
    files = {}
    if record is not None:
        files[f"/home/c/.claude/sessions/{PID}.json"] = json.dumps(record).encode()
    if stat is not None:
        files[f"/proc/{PID}/stat"] = stat.encode()
    return FakeHost(files=files)


def test_the_record_of_this_very_process_names_the_session() -> None:
    record = {"pid": PID, "sessionId": SID, "procStart": str(STARTED), "status": "idle"}
    assert live_session(_host(record), "/home/c/.claude/", PID) == SID


@pytest.mark.parametrize("record, stat", [
    ({"pid": PID, "sessionId": SID, "procStart": str(STARTED + 1)}, STAT),  # a recycled pid
    ({"pid": PID, "sessionId": SID, "procStart": str(STARTED)}, None),      # the pid is gone
    (None, STAT),                                                             # no record
    ({"pid": PID, "sessionId": ""}, STAT),                                   # no session in it
])
def test_without_a_record_of_this_very_process_the_restart_is_refused(
        record: dict[str, object] | None, stat: str | None) -> None:
    with pytest.raises(FactError, match=f"claude pid {PID} runs: no session id of this process "
                                        f"in '/home/c/.claude/sessions/{PID}.json'"):
        live_session(_host(record, stat), "/home/c/.claude", PID)
