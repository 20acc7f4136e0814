"""The independent recognition audit: shapes the classifier does not know block the rebuild.

Each test feeds a speech shape the speech rules do not recognise — a new attachment subtype
carrying a prompt, a channel envelope with another attribute order, a reply tool with a new
name, an unknown ``origin.kind``, an enqueued prompt that never lands — and expects ``plan``
to report ``unrecognised speech`` naming the shape and its line, and ``fork`` to refuse.
Known shapes, and every real corpus transcript, never block.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.cli import main
from runtime.engine import audit, candidate
from runtime.engine.report import plan_report
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript, tool_use
from tests.runtime.helpers import config


def chat() -> Transcript:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    return t


def blocked(tmp_path: Path, t: Transcript, **rebuild: object) -> str | None:
    return candidate.build(t.write(tmp_path / "source.jsonl"), config(**rebuild)).blocked_reason


def test_known_shapes_are_all_recognised_and_nothing_blocks(tmp_path: Path) -> None:
    t = chat()
    t.channel("from the phone")
    t.assistant(tool_use("mcp__companion__reply", {"chat_id": "42", "text": "answered"}))
    t.queued("typed while busy")
    t.assistant("ok")
    built = candidate.build(t.write(tmp_path / "source.jsonl"), config())
    assert built.blocked_reason is None
    audit = built.details["recognition_audit"]
    assert audit["unrecognised"] == {}
    assert audit["candidates"]["<channel> envelope"] == 1
    assert audit["candidates"]["queue-operation enqueue"] == 2


def test_a_new_attachment_subtype_carrying_a_prompt_blocks_with_its_line(tmp_path: Path) -> None:
    t = chat()
    t.event("attachment", {"attachment": {"type": "pushed_prompt", "prompt": "are you there?"}})
    t.assistant("yes")
    reason = blocked(tmp_path, t)
    assert reason is not None
    assert reason.startswith("unrecognised speech: attachment 'pushed_prompt' prompt at line 3")


def test_an_attachment_prompt_under_an_escaped_key_blocks_with_its_line(tmp_path: Path) -> None:
    t = chat()
    t.raw({"type": "attachment", "uuid": "a1", "attachment": {"type": "new_kind", "prompt": "hi"}})
    path = t.write(tmp_path / "source.jsonl")
    path.write_bytes(path.read_bytes().replace(b'"prompt"', b'"pr\\u006fmpt"'))
    reason = candidate.build(path, config()).blocked_reason
    assert reason is not None
    assert "attachment 'new_kind' prompt at line 3" in reason


def test_a_channel_envelope_with_another_attribute_order_blocks(tmp_path: Path) -> None:
    t = chat()
    t.meta('<channel chat_id="42" source="companion">\nping\n</channel>')
    t.assistant("pong")
    assert blocked(tmp_path, t) == (
        "unrecognised speech: <channel> envelope at line 3; the speech rules do not know this "
        "shape, so a rebuild would lose it"
    )


def test_a_reply_tool_with_a_new_name_blocks(tmp_path: Path) -> None:
    t = chat()
    t.assistant("on it", tool_use("mcp__plugin_discord_discord__reply", {"text": "sent"}))
    reason = blocked(tmp_path, t)
    assert reason is not None
    assert "reply tool 'mcp__plugin_discord_discord__reply' at line 3" in reason


def test_a_lone_reply_tool_call_the_fast_path_settles_blocks_even_with_an_escaped_name(
    tmp_path: Path,
) -> None:
    t = chat()
    t.assistant(tool_use("mcp__plugin_discord_discord__reply", {"text": "sent"}))
    path = t.write(tmp_path / "source.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b"discord__reply", b"discord__re\\u0070ly")
    path.write_bytes(b"".join(lines))
    reason = candidate.build(path, config()).blocked_reason
    assert reason is not None
    assert "reply tool 'mcp__plugin_discord_discord__reply' at line 3" in reason


def test_a_reply_to_a_chat_left_out_by_configuration_does_not_block(tmp_path: Path) -> None:
    t = chat()
    t.assistant(tool_use("mcp__companion__reply", {"chat_id": "7", "text": "elsewhere"}))
    assert blocked(tmp_path, t, reply_chat_ids=["42"]) is None


def test_an_unknown_origin_kind_blocks(tmp_path: Path) -> None:
    t = chat()
    t.meta("voice note: call me", origin={"kind": "voice"})
    t.assistant("calling")
    reason = blocked(tmp_path, t)
    assert reason is not None and "origin.kind 'voice' at line 3" in reason


def test_an_enqueued_prompt_that_never_lands_as_speech_blocks(tmp_path: Path) -> None:
    t = chat()
    t.queue_operation("enqueue", "lost in a new delivery path")
    t.queue_operation("dequeue")
    t.assistant("?")
    reason = blocked(tmp_path, t)
    assert reason is not None and "queue-operation enqueue at line 3" in reason


def test_plan_reports_unrecognised_speech_and_fork_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = chat()
    t.meta('<channel chat_id="42" source="companion">\nping\n</channel>')
    source = t.write(tmp_path / "source.jsonl")
    report = plan_report(source, config())
    assert report["blocked_reason"].startswith("unrecognised speech: <channel> envelope")
    assert report["recognition_audit"]["unrecognised"] == {"<channel> envelope": 1}
    assert main(["plan", "--transcript", str(source)]) == 0
    assert "unrecognised speech: <channel> envelope at line 3" in capsys.readouterr().out
    assert main(["fork", "--transcript", str(source)]) == 1
    assert "unrecognised speech" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["source.jsonl"]


def _corpus() -> list[Path]:
    found = corpus_dir()
    if found is None:
        return []
    return sorted(found.glob("*.jsonl")) + sorted((found / "live-2.1.328").glob("*.jsonl"))


@pytest.mark.corpus
def test_no_real_corpus_transcript_holds_unrecognised_speech() -> None:
    files = _corpus()
    if not files:
        pytest.skip("shared corpus not found beside the checkout (../shared/corpus)")
    found = {}
    for path in files:
        built = candidate.build(path, config(), lay_out=False)
        if built.details["recognition_audit"]["unrecognised"]:
            found[path.name] = built.details["recognition_audit"]
    assert found == {}
    assert len(files) >= 40


def test_unrecognised_speech_report_only_carries_on_and_still_reports_it(tmp_path: Path) -> None:
    t = chat()
    t.meta('<channel chat_id="42" source="companion">\nping\n</channel>')
    built = candidate.build(t.write(tmp_path / "source.jsonl"),
                            config(unrecognised_speech="report"))
    assert built.blocked_reason is None
    assert built.details["recognition_audit"]["unrecognised"] == {"<channel> envelope": 1}


# -- the tag-pair scan equals its regex definition ---------------------------------------------

PIECE = st.sampled_from(list("<>/ \n\tab:.-_1é\u00a0\u2028xy") + ["<a>", "</a>", "<b ", "</b>"])
TAGGY = st.lists(PIECE, max_size=30).map("".join)


@settings(max_examples=2000, deadline=None)
@given(TAGGY)
def test_dropping_tag_pairs_equals_the_pair_regex_on_fuzzed_text(text: str) -> None:
    assert audit._drop_pairs(text) == audit._PAIR.sub("", text)


@pytest.mark.corpus
def test_dropping_tag_pairs_equals_the_pair_regex_on_every_corpus_text() -> None:
    files = _corpus()
    if not files:
        pytest.skip("shared corpus not found beside the checkout (../shared/corpus)")
    compared = 0
    for path in files:
        for line in path.read_bytes().splitlines():
            for text in re.findall(r'"text":"((?:[^"\\]|\\.)*)"', line.decode("utf-8", "replace")):
                text = orjson.loads(f'"{text}"'.encode("utf-8", "surrogatepass"))
                if "</" in text:
                    compared += 1
                    assert audit._drop_pairs(text) == audit._PAIR.sub("", text), path.name
    assert compared >= 20  # texts holding a closing tag


def test_an_opening_tag_never_closed_is_kept_and_later_pairs_still_drop() -> None:
    text = 'git add <file>... <b x="1">gone</b >kept <file> <i>also gone</i>'
    assert audit._drop_pairs(text) == "git add <file>... kept <file> "
