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
    t.voice("said aloud on a call")
    t.assistant("heard")
    built = candidate.build(t.write(tmp_path / "source.jsonl"), config())
    assert built.blocked_reason is None
    audit = built.details["recognition_audit"]
    assert audit["unrecognised"] == {}
    assert audit["candidates"]["<channel> envelope"] == 1
    assert audit["candidates"]["queue-operation enqueue"] == 2
    assert audit["candidates"]["voice call talk"] == 1


def test_words_of_a_voice_line_the_rules_do_not_carry_block_with_its_line(
    tmp_path: Path,
) -> None:
    """A ``voice_call_talk`` line Claude Code would keep as a damaged system row (here: no
    ``origin``) still holds words said on a call: the rebuild refuses rather than drop them."""
    t = chat()
    t.voice("the code is 4471", origin=None)
    t.assistant("noted")
    assert blocked(tmp_path, t) == (
        "unrecognised speech: voice call talk at line 3; the speech rules do not know this "
        "shape, so a rebuild would lose it"
    )


@pytest.mark.parametrize(
    "blocks",
    [[{"type": "text", "text": "the code is 4471"}, {"type": "text", "text": "and 9"}],
     [{"type": "text", "text": "the code is 4471"}, {"type": "document", "text": "and 9"}],
     [{"type": "text", "text": "the code is"}, {"type": "text", "text": 4471}]],
    ids=["other words", "words in another block type", "a text that is not a string"],
)
def test_a_voice_line_whose_kept_blocks_are_not_its_content_blocks(
    tmp_path: Path, blocks: list[object]
) -> None:
    """Claude Code sends a voice line's ``blocks`` when it keeps them, not its ``content``: a
    line whose blocks say more than the content (or other words) cannot be carried by its
    content without a loss — the rebuild refuses at its line, whether or not the content is
    blank."""
    for content in ("the code is 4471", ""):
        t = chat()
        t.voice("x", content=content, blocks=blocks)
        t.assistant("noted")
        reason = blocked(tmp_path, t)
        assert reason is not None and reason.startswith(
            "unrecognised speech: voice call talk at line 3"), (content, reason)


def test_a_voice_line_with_its_blocks_as_claude_code_stores_them_does_not_block(
    tmp_path: Path,
) -> None:
    t = chat()
    t.voice([{"type": "text", "text": "the code is 4471"},
             {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
             {"type": "text", "text": "and the gate is 9"}])
    t.assistant("noted")
    built = candidate.build(t.write(tmp_path / "source.jsonl"), config())
    assert built.blocked_reason is None
    assert built.details["recognition_audit"]["candidates"]["voice call talk"] == 1


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


def _uuidless(uuid: object = None, **user: object) -> list[dict[str, object]]:
    """A hand-written chat: each line with only what a person writing one puts in, the
    uuid left out (``uuid`` None) or not a usable one."""
    lines: list[dict[str, object]] = [
        {"type": "user", "message": {"role": "user", "content": "remember the number 42"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "I will remember 42."}]}},
        {"type": "user", "message": {"role": "user", "content": "and 43"}, **user},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "43 too."}]}},
    ]
    if uuid is not None:
        for line in lines:
            line["uuid"] = uuid
    return lines


@pytest.mark.parametrize("uuid", [None, "", 7], ids=["missing", "empty", "a number"])
def test_lines_without_a_uuid_are_matched_by_their_line_and_do_not_block(
    tmp_path: Path, uuid: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hand-written.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in _uuidless(uuid)))
    built = candidate.build(path, config())
    assert built.blocked_reason is None
    assert built.details["recognition_audit"]["unrecognised"] == {}
    assert built.details["recognition_audit"]["candidates"] == {"user text": 2,
                                                                "assistant text": 2}
    assert main(["fork", "--transcript", str(path), "--into", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / f"{capsys.readouterr().out.split()[1]}.jsonl").read_bytes()
    for said in (b"remember the number 42", b"I will remember 42.", b"and 43", b"43 too."):
        assert said in written


def test_an_unknown_shape_on_a_line_without_a_uuid_blocks_with_its_line(tmp_path: Path) -> None:
    """Matched by line, not pooled: line 1's recognised user text does not cover line 3."""
    path = tmp_path / "hand-written.jsonl"
    lines = _uuidless(origin={"kind": "voice"}, isMeta=True)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    reason = candidate.build(path, config()).blocked_reason
    assert reason is not None and reason.startswith("unrecognised speech: origin.kind 'voice' at "
                                                    "line 3;")


@pytest.mark.parametrize("where", ["after", "before"])
def test_an_unknown_shape_on_a_line_sharing_a_uuid_with_a_recognised_one_blocks(
    tmp_path: Path, where: str
) -> None:
    """Two lines with one uuid (a damaged or hostile file): the typed text the classifier
    made of one does not cover a prompt in an attachment subtype it does not know on the
    other — those words would be lost, so the rebuild refuses, wherever the unknown line is."""
    t = chat()
    typed = orjson.loads(t.lines[0])
    unknown = {**typed, "type": "attachment", "attachment": {"type": "new_thing",
                                                              "prompt": "the gate code is 4471"}}
    del unknown["message"]
    t.lines.insert(0 if where == "before" else len(t.lines), orjson.dumps(unknown))
    reason = blocked(tmp_path, t)
    assert reason is not None and reason.startswith(
        "unrecognised speech: attachment 'new_thing' prompt at line"), reason


def test_a_line_written_twice_with_its_uuid_does_not_block(tmp_path: Path) -> None:
    t = chat()
    t.lines.extend(list(t.lines))
    built = candidate.build(t.write(tmp_path / "source.jsonl"), config())
    assert built.blocked_reason is None
    assert built.details["recognition_audit"]["unrecognised"] == {}


ORDINARY_TEXT = st.sampled_from(["hello", "caf\u00e9 \u4e2d", "<b>x</b> words", "42"])
UUID = st.one_of(st.none(), st.just(""), st.integers(0, 3), st.sampled_from(["a", "b", "dup"]))


@st.composite
def ordinary_line(draw: st.DrawFn) -> dict[str, object]:
    """A user or assistant line of a shape the rules know, with any uuid arrangement: left
    out, empty, a number, or one that other lines share."""
    said = draw(ORDINARY_TEXT)
    if draw(st.booleans()):
        line: dict[str, object] = {"type": "user", "message": {"role": "user", "content": (
            said if draw(st.booleans()) else [{"type": "text", "text": said}])}}
    else:
        blocks: list[dict[str, object]] = [{"type": "text", "text": said}]
        if draw(st.booleans()):
            blocks.append({"type": "tool_use", "id": "t", "name": "mcp__companion__reply",
                           "input": {"chat_id": "1", "text": draw(ORDINARY_TEXT)}})
        line = {"type": "assistant", "message": {"role": "assistant", "model": "m",
                                                 "content": blocks}}
    uuid = draw(UUID)
    if uuid is not None:
        line["uuid"] = uuid
    return line


@settings(max_examples=300, deadline=None)
@given(st.lists(ordinary_line(), min_size=1, max_size=8))
def test_known_shapes_never_block_whatever_their_uuids(lines: list[dict[str, object]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "source.jsonl"
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        built = candidate.build(path, config())
    assert built.details["recognition_audit"]["unrecognised"] == {}
    assert built.blocked_reason is None


def test_an_enqueued_prompt_that_never_lands_as_speech_blocks(tmp_path: Path) -> None:
    t = chat()
    t.queue_operation("enqueue", "lost in a new delivery path")
    t.queue_operation("dequeue")
    t.assistant("?")
    reason = blocked(tmp_path, t)
    assert reason is not None and "queue-operation enqueue at line 3" in reason


@pytest.mark.parametrize("said", [
    "typed while busy: keep <system-reminder>x</system-reminder> as a literal tag",
    "typed while busy: what does <command-name>/compact</command-name> mean",
])
def test_a_prompt_typed_while_busy_with_an_injected_tag_in_it_does_not_block(
    tmp_path: Path, said: str,
) -> None:
    """2.1.328's typed-while-busy prompt: an enqueue, later the user event. Its words were
    compared tags and all with the carried text (injected blocks removed): a false block."""
    t = chat()
    t.queue_operation("enqueue", said)
    t.assistant("echo: hello")
    t.queue_operation("dequeue")
    t.user(said, promptSource="queued", origin={"kind": "human"})
    t.assistant("noted")
    assert blocked(tmp_path, t) is None


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


def long_chat(turns: int) -> Transcript:
    t = Transcript()
    for n in range(turns):
        t.user(f"question number {n}")
        t.assistant(f"answer number {n}")
    return t


def plan_and_fork(tmp_path: Path, t: Transcript, **rebuild: object) -> list[candidate.Build]:
    """``plan``'s build (turn texts let go outside the poison window) and ``fork``'s (all kept)."""
    source = t.write(tmp_path / "source.jsonl")
    knobs = config(**rebuild)
    return [
        candidate.build(source, knobs, new_session_id="s", lay_out=lay) for lay in (False, True)
    ]


def test_plan_lets_old_turn_texts_go_and_still_matches_a_prompt_typed_in_one(
    tmp_path: Path,
) -> None:
    t = long_chat(6)  # "question number 1" is typed in turn 1, let go by plan at turn 3
    t.queue_operation("enqueue", "question   number 1")  # enqueued later, never delivered
    t.queue_operation("remove")
    plan, fork = plan_and_fork(tmp_path, t, poison_window_turns=2)
    assert plan.turns[1].items[0].text == ""  # the text was really let go
    assert fork.turns[1].items[0].text == "question number 1"
    assert plan.blocked_reason is None and fork.blocked_reason is None
    assert plan.stats() == fork.stats()


def test_plan_still_blocks_an_enqueued_prompt_that_never_lands_after_letting_texts_go(
    tmp_path: Path,
) -> None:
    t = long_chat(3)
    t.queue_operation("enqueue", "question number 2 and more")
    t.queue_operation("remove")
    t.queued("delivered while busy")
    t.assistant("ok")
    t.user("later")
    t.assistant("done")
    plan, fork = plan_and_fork(tmp_path, t, poison_window_turns=1)
    assert plan.turns[0].items[0].text == ""
    reason = plan.blocked_reason
    assert reason is not None and "queue-operation enqueue at line 7" in reason
    assert plan.stats() == fork.stats()


@pytest.mark.corpus
@pytest.mark.parametrize("window", [1, 10])
def test_plan_letting_texts_go_reports_what_fork_does_on_the_corpus(
    corpus: Path, window: int
) -> None:
    knobs = config(poison_window_turns=window)
    for path in sorted(corpus.glob("*.jsonl")):
        try:
            builds = [candidate.build(path, knobs, new_session_id="s", lay_out=lay)
                      for lay in (False, True)]
        except Exception as exc:  # the same refusal from both
            with pytest.raises(type(exc)):
                candidate.build(path, knobs, new_session_id="s", lay_out=True)
            continue
        assert builds[0].stats() == builds[1].stats(), path.name


SPOKEN_PIECE = st.sampled_from(
    [*"<>/ \n\tab:.-_1é", "<a>", "</a>", "<b ", "</b>", "[Request interrupted", "[Req",
     "uest interrupted", "<task-notification", "<task-notification>", "</task-notification>"]
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(SPOKEN_PIECE, max_size=20).map("".join))
def test_a_text_counts_as_spoken_exactly_when_its_plain_words_do(text: str) -> None:
    said = audit.plain(text)
    assert audit._spoken(text) == (bool(said) and not said.startswith(audit.NOT_SPEECH_OPENINGS))


def test_the_reader_asks_wants_only_about_the_kinds_it_can_say_yes_to() -> None:
    """``SecondReading.wanted`` lets the reader skip the call for every other settled line: for
    any other type ``wants`` must say no, whatever the line holds."""
    from runtime.engine.audit import SecondReading

    reading = SecondReading(frozenset())
    line = (b'{"type":"x","attachment":{"type":"queued_command","prompt":"hi"},'
            b'"message":{"content":[{"type":"tool_use","name":"reply"}]}}')
    blocks = [type("Block", (), {"type": "tool_use", "name": "mcp__x__reply"})()]
    for kind in ("progress", "user", "system", "file-history-snapshot", "summary",
                 "custom-title", "(no type)", "queue_operation", "Assistant", ""):
        assert kind not in reading.wanted
        assert reading.wants(line, kind, blocks) is False, kind
    for kind in reading.wanted:  # each can say yes
        assert reading.wants(line.replace(b'"x"', f'"{kind}"'.encode()), kind, blocks), kind
