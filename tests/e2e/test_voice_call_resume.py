"""Words said on a voice call, with the real CLI: Claude Code 2.1.328 stores each as a
``voice_call_talk`` system line (``origin: {kind: "voice-call"}``) and sends it to the model
when it resumes the session. A rebuild carries those words in the same form: the forked
session, resumed by the same CLI, sends them to the model as the source did — beside typed
speech, with the tool noise gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import Machine
from tests.e2e.oracle import normalized
from tests.fixtures.transcripts import Transcript, tool_use

pytestmark = [pytest.mark.real_claude]

# a 1×1 PNG: the image a voice message's block list can hold (noise to a rebuild)
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5"
       "ErkJggg==")


def resume_sees(machine: Machine, fake_api: FakeApi, session: str) -> str:
    return normalized(machine.resume_sees(fake_api, session))


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
    # a voice message that was a block list: Claude Code keeps the list as ``blocks`` (and
    # sends that) beside ``content``, its text blocks joined by a newline
    t.voice([{"type": "text", "text": "VOICE-3 the gate opens"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                          "data": PNG}},
             {"type": "text", "text": "VOICE-4 at nine sharp"}])
    t.assistant("ASSIST-4 nine it is")
    source = t.write(machine.project_dir / f"{t.session}.jsonl")
    said = ["TYPED-1 we will talk on a call", "VOICE-1 the door code is four four seven",
            "ASSIST-2 noted the door code", "VOICE-2 and the spare key is under the mat",
            "ASSIST-3 noted the key", "VOICE-3 the gate opens", "VOICE-4 at nine sharp",
            "ASSIST-4 nine it is"]

    # the oracle: the source itself, resumed by the real CLI, sends the voice words
    seen = resume_sees(machine, fake_api, t.session)
    assert all(normalized(s) in seen for s in said), seen

    result = machine.fork(source)
    assert result["verify"]["audit"]["voice"] == {"source": 3, "candidate": 3,
                                                  "left_out_by_rule": 0}
    written = [json.loads(line) for line in
               Path(result["candidate_path"]).read_text("utf-8").splitlines()]
    voices = [e for e in written if e["type"] == "system"]
    assert [(e["subtype"], e["content"], e["origin"]) for e in voices] == [
        ("voice_call_talk", "VOICE-1 the door code is four four seven", {"kind": "voice-call"}),
        ("voice_call_talk", "VOICE-2 and the spare key is under the mat",
         {"kind": "voice-call"}),
        ("voice_call_talk", "VOICE-3 the gate opens\nVOICE-4 at nine sharp",
         {"kind": "voice-call"})]
    assert not any("blocks" in e for e in voices)

    seen = resume_sees(machine, fake_api, result["new_session_id"])
    assert all(normalized(s) in seen for s in said), seen
    assert "NOISE-TOOL-CALL" not in seen


def test_a_voice_line_whose_blocks_say_other_words_than_its_content_is_refused(
        resume_machine: Machine, fake_api: FakeApi) -> None:
    """The premise of the rule, with the real CLI: where a voice line keeps ``blocks``, those
    are what the model is sent, not ``content``. A line whose two disagree (no build writes
    it; a hostile or damaged file can) cannot be carried by its content without losing what
    the model heard: the rebuild refuses, naming the line, and writes nothing."""
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("TYPED-1 a call is coming")
    t.assistant("ASSIST-1 ready")
    t.voice("CONTENT-ONLY words", blocks=[{"type": "text", "text": "BLOCKS-ONLY words"}])
    t.assistant("ASSIST-2 heard")
    source = t.write(machine.project_dir / f"{t.session}.jsonl")

    seen = resume_sees(machine, fake_api, t.session)
    assert "BLOCKS-ONLY words" in seen and "CONTENT-ONLY" not in seen, seen

    before = sorted(p.name for p in machine.project_dir.iterdir())
    done = machine.fork_run(source)
    assert done.returncode != 0, done.stdout
    assert "unrecognised speech: voice call talk at line 3" in done.stderr + done.stdout
    assert sorted(p.name for p in machine.project_dir.iterdir()) == before
