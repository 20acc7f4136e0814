"""Lines orjson refuses but Claude Code's ``JSON.parse`` reads, with the real CLI: bytes that are
not UTF-8 (Node decodes the file with U+FFFD for each invalid sequence) and a number beyond the
double range (``Infinity``). Claude Code 2.1.328 loads such lines and sends their words to the
model; a rebuild carries them the same way: the forked session, resumed by the same CLI, sends
the same text — where the reader used to drop those lines as malformed."""

from __future__ import annotations

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import Machine
from tests.fixtures.transcripts import Transcript, tool_use

pytestmark = [pytest.mark.real_claude]

CASES = {
    # a cut two-byte character in a typed prompt, two bytes no UTF-8 has in an answer
    "invalid_utf8_lines": ({b'"CUT"': b'"caf\xc3"', b'"BAD"': b'"caf\xff\xfe"'},
                           ["TYPED-2 the gate code is", "caf\ufffd", "ASSIST-2 noted",
                            "caf\ufffd\ufffd"]),
    # a number beyond the double range beside each
    "wide_number_lines": ({b'"CUT"': b'"4471","n":1e400', b'"BAD"': b'"done","n":-2E+999'},
                          ["TYPED-2 the gate code is", "4471", "ASSIST-2 noted", "done"]),
}


@pytest.mark.parametrize("stat", sorted(CASES))
def test_words_on_a_line_json_parse_reads_reach_the_model_after_the_rebuild(
        resume_machine: Machine, fake_api: FakeApi, stat: str) -> None:
    replace, words = CASES[stat]
    machine = resume_machine
    machine.project_dir.mkdir(parents=True)
    t = Transcript()
    t.user("TYPED-1 hello")
    t.assistant("ASSIST-1 hi")
    t.user([{"type": "text", "text": "TYPED-2 the gate code is"}, {"type": "text", "text": "CUT"}])
    t.assistant(tool_use("Bash", {"command": "echo NOISE-TOOL-CALL"}))
    t.assistant({"type": "text", "text": "ASSIST-2 noted"}, {"type": "text", "text": "BAD"})
    raw = b"\n".join(t.lines) + b"\n"
    for old, new in replace.items():
        assert old in raw
        raw = raw.replace(old, new)
    source = machine.project_dir / f"{t.session}.jsonl"
    source.write_bytes(raw)
    said = ["TYPED-1 hello", "ASSIST-1 hi", *words]

    # the oracle: the source itself, resumed, sends the words of those lines
    seen = machine.resume_sees(fake_api, t.session)
    assert all(s in seen for s in said), seen[-1500:]

    result = machine.fork(source)
    assert result["stats"]["read"][stat] == 2, result["stats"]
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert all(s in seen for s in said), seen[-1500:]
    assert "NOISE-TOOL-CALL" not in seen
