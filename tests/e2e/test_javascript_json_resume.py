"""Lines orjson refuses but Claude Code's ``JSON.parse`` reads, with the real CLI: bytes that are
not UTF-8 (Node decodes the file with U+FFFD for each invalid sequence) and a number beyond the
double range (``Infinity``). Claude Code 2.1.328 loads such lines and sends their words to the
model; a rebuild carries them the same way: the forked session, resumed by the same CLI, sends
the same text — where the reader used to drop those lines as malformed."""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import NO_CONVERSATION, Machine
from tests.fixtures.transcripts import Transcript, tool_use

pytestmark = [pytest.mark.real_claude]


def resume_sees(machine: Machine, fake_api: FakeApi, session: str) -> str:
    nonce = f"next-{uuid.uuid4().hex[:8]}"
    done = machine.run_claude(["-p", "--resume", session, nonce], timeout=120)
    assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    return fake_api.wait_for_text(nonce, timeout=30, session_id=session).joined()


def test_words_on_a_line_with_invalid_bytes_reach_the_model_after_the_rebuild(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("TYPED-1 hello")
    t.assistant("ASSIST-1 hi")
    t.user("TYPED-2 the gate code is CUT 4471")
    t.assistant(tool_use("Bash", {"command": "echo NOISE-TOOL-CALL"}))
    t.assistant("ASSIST-2 noted BAD")
    raw = (b"\n".join(t.lines).replace(b"CUT", b"caf\xc3").replace(b"BAD", b"caf\xff\xfe")
           + b"\n")
    source = machine.project_dir / f"{t.session}.jsonl"
    source.write_bytes(raw)
    said = ["TYPED-1 hello", "ASSIST-1 hi", "TYPED-2 the gate code is caf\ufffd 4471",
            "ASSIST-2 noted caf\ufffd\ufffd"]

    # the oracle: the source itself, resumed, sends those lines with U+FFFD in place
    seen = resume_sees(machine, fake_api, t.session)
    assert all(s in seen for s in said), seen[-1500:]

    result = machine.fork(source)
    assert result["stats"]["read"]["invalid_utf8_lines"] == 2, result["stats"]
    seen = resume_sees(machine, fake_api, result["new_session_id"])
    assert all(s in seen for s in said), seen[-1500:]
    assert "NOISE-TOOL-CALL" not in seen


def test_words_on_a_line_with_a_number_beyond_the_double_range_reach_the_model_after_the_rebuild(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("TYPED-1 hello")
    t.assistant("ASSIST-1 hi")
    t.user("TYPED-2 the gate code is 4471", costUSD="WIDE-1")
    t.assistant("ASSIST-2 noted the code", costUSD="WIDE-2")
    raw = (b"\n".join(t.lines).replace(b'"WIDE-1"', b"1e400").replace(b'"WIDE-2"', b"-2E+999")
           + b"\n")
    source = machine.project_dir / f"{t.session}.jsonl"
    source.write_bytes(raw)
    said = ["TYPED-1 hello", "ASSIST-1 hi", "TYPED-2 the gate code is 4471",
            "ASSIST-2 noted the code"]

    seen = resume_sees(machine, fake_api, t.session)  # the oracle: the source's lines load
    assert all(s in seen for s in said), seen[-1500:]

    result = machine.fork(source)
    assert result["stats"]["read"]["wide_number_lines"] == 2, result["stats"]
    seen = resume_sees(machine, fake_api, result["new_session_id"])
    assert all(s in seen for s in said), seen[-1500:]
