"""Words said on a voice call, with the real CLI: Claude Code 2.1.328 stores each as a
``voice_call_talk`` system line (``origin: {kind: "voice-call"}``) and sends it to the model
when it resumes the session. A rebuild carries those words in the same form: the forked
session, resumed by the same CLI, sends them to the model as the source did — beside typed
speech, with the tool noise gone."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import NO_CONVERSATION, Machine
from tests.e2e.oracle import normalized
from tests.fixtures.transcripts import Transcript, tool_use

pytestmark = [pytest.mark.real_claude]


def resume_sees(machine: Machine, fake_api: FakeApi, session: str) -> str:
    nonce = f"next-{uuid.uuid4().hex[:8]}"
    done = machine.run_claude(["-p", "--resume", session, nonce], timeout=120)
    assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    return normalized(fake_api.wait_for_text(nonce, timeout=30, session_id=session).joined())


def test_voice_call_words_are_carried_and_the_real_cli_sends_them_after_the_rebuild(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("TYPED-1 we will talk on a call")
    t.assistant("ASSIST-1 ready when you are")
    t.voice("VOICE-1 the door code is four four seven")
    t.assistant(tool_use("Bash", {"command": "echo NOISE-TOOL-CALL"}))
    t.assistant("ASSIST-2 noted the door code")
    t.voice("VOICE-2 and the spare key is under the mat",
          fold={"command": {"commandMode": "prompt"}, "rendered": None})
    t.assistant("ASSIST-3 noted the key")
    source = t.write(machine.project_dir / f"{t.session}.jsonl")
    said = ["TYPED-1 we will talk on a call", "VOICE-1 the door code is four four seven",
            "ASSIST-2 noted the door code", "VOICE-2 and the spare key is under the mat",
            "ASSIST-3 noted the key"]

    # the oracle: the source itself, resumed by the real CLI, sends the voice words
    seen = resume_sees(machine, fake_api, t.session)
    assert all(normalized(s) in seen for s in said), seen

    result = machine.fork(source)
    assert result["verify"]["audit"]["voice"] == {"source": 2, "candidate": 2,
                                                  "left_out_by_rule": 0}
    written = [json.loads(line) for line in
               Path(result["candidate_path"]).read_text("utf-8").splitlines()]
    voices = [e for e in written if e["type"] == "system"]
    assert [(e["subtype"], e["content"], e["origin"]) for e in voices] == [
        ("voice_call_talk", "VOICE-1 the door code is four four seven", {"kind": "voice-call"}),
        ("voice_call_talk", "VOICE-2 and the spare key is under the mat",
         {"kind": "voice-call"})]

    seen = resume_sees(machine, fake_api, result["new_session_id"])
    assert all(normalized(s) in seen for s in said), seen
    assert "NOISE-TOOL-CALL" not in seen
