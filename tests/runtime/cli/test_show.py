"""``tl-rebuild plan --show``: the carried conversation verbatim and in order, one dim line per
gap whose counts and sizes are the dirty ledger's, paged and coloured only on a terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from runtime.cli import main, render
from runtime.cli.show import INDENT, gap_line, wrap
from runtime.config import config_from_mapping
from runtime.engine.report import dirty_report, plan_report
from runtime.engine.show import view
from tests.conftest import REPO
from tests.fixtures.terminal import stdout_on_a_terminal
from tests.fixtures.transcripts import Transcript
from tests.runtime.codex_rollouts import Rollout

CORPUS = Path("/work/shared/corpus")
CLAUDE_CORPUS = CORPUS / "chiphuyen__sniffly__d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
CODEX_CORPUS = CORPUS / "codex-0.169" / "02-exec-reasoning-toolcall-4-turns.jsonl"
LONG = "a long line that a terminal would wrap " * 8
MULTI = "first line\n\n  indented second line with trailing spaces  \nlast"


def show(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> str:
    code = main(["plan", "--show", "--transcript", str(path), *extra])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out


def block(text: str) -> str:
    """How an utterance's text appears on a pipe: each line indented, none wrapped."""
    return "\n".join(INDENT + line if line else "" for line in text.split("\n")) + "\n"


def assert_in_order(out: str, texts: list[str]) -> None:
    at = 0
    for text in texts:
        found = out.find(block(text), at)
        assert found >= 0, f"{text!r} not shown verbatim after offset {at}"
        at = found + len(block(text))


def claude_fixture(tmp_path: Path) -> tuple[Path, list[bytes]]:
    t = Transcript()
    t.user("question one")
    t.tool_round(result="R" * 5000)
    t.tool_round(result="S" * 300)
    t.assistant("answer one\n" + LONG)
    t.user(MULTI)
    t.assistant("answer two")
    t.user("an open last turn is not carried")
    return t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl"), t.lines


def test_claude_show_carries_every_utterance_verbatim_with_the_ledger_between(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, lines = claude_fixture(tmp_path)
    config = tmp_path / "threadline.toml"
    config.write_text("[rebuild]\ninclude_open_tail = false\n", encoding="utf-8")
    out = show(capsys, path, "--config", str(config))
    assert out.splitlines()[0].startswith("carries 4 utterances in 2 turns, drops ")
    assert_in_order(out, ["question one", "answer one\n" + LONG, MULTI, "answer two"])
    assert block("an open last turn is not carried") not in out
    # lines 2-5: two tool calls and two tool results, each its own line in the file
    calls, results = len(lines[1]) + len(lines[3]) + 2, len(lines[2]) + len(lines[4]) + 2
    assert f"… 2 tool results ({render.size(results)}), 2 tool calls ({render.size(calls)}) " \
           "dropped\n" in out
    assert "… 1 utterance not carried\n" in out
    dirty = dirty_report(path, config_from_mapping({}))["categories"]
    assert (dirty["tool_result"], dirty["tool_use"]) == (results, calls)
    assert out.index("2 tool results") < out.index(block("answer one\n" + LONG))
    assert out.rstrip().endswith("(the rebuild happens after the current turn)")
    assert "\x1b" not in out


def test_show_shows_who_spoke_when_and_the_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = claude_fixture(tmp_path)
    out = show(capsys, path).splitlines()
    # by default the open last turn is carried too
    assert [line for line in out if line.startswith("── turn")] == [
        "── turn 1 ──", "── turn 2 ──", "── turn 3 ──"]
    heads = [line for line in out if line.endswith(("human (typed)", "assistant"))]
    assert [h.split("  ")[1] for h in heads] == ["human (typed)", "assistant"] * 2 + [
        "human (typed)"]
    assert heads[0] == "2026-04-26 21:55:01 UTC  human (typed)"  # the fixture's first stamp


def test_show_and_the_html_page_show_words_said_on_a_voice_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.agents.kind import AgentKind
    from runtime.cli.report_html import gather, page

    t = Transcript()
    t.user("question one")
    t.assistant("answer one")
    t.voice("said on the call:\nline two")
    t.assistant("answer two")
    path = t.write(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl")
    out = show(capsys, path)
    assert_in_order(out, ["question one", "answer one", "said on the call:\nline two",
                          "answer two"])
    assert "  human (voice)\n" in out
    html = page(gather(path, config_from_mapping({}), AgentKind.CLAUDE, None))
    assert "said on the call:\nline two" in html


def test_codex_show_carries_the_rollout_speech_and_its_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Rollout()
    r.start(harness=True)
    r.user("fix the build")
    r.tool_round()
    r.assistant(MULTI)
    r.end(MULTI)
    r.exchange("and the tests?", "they pass")
    path = r.write(tmp_path)
    out = show(capsys, path, "--agent", "codex")
    assert_in_order(out, ["fix the build", MULTI, "and the tests?", "they pass"])
    gap = next(line for line in out.splitlines() if "function call" in line)
    for part in ("1 reasoning item", "1 function call (", "1 function output ("):
        assert part in gap
    shown = view(path, config_from_mapping({}), "codex")
    dirty = dirty_report(path, config_from_mapping({}), agent="codex")
    assert shown.noise_totals() == {k: n for k, n in dirty["categories"].items() if n}
    assert "\x1b" not in out


@pytest.mark.parametrize("path", [CLAUDE_CORPUS, CODEX_CORPUS], ids=["claude", "codex"])
def test_a_corpus_file_shows_what_plan_carries_and_all_its_noise(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not path.is_file():
        pytest.skip(f"corpus file {path} missing (the shared corpus is not on this machine)")
    config = config_from_mapping({})
    shown = view(path, config)
    plan = plan_report(path, config)
    assert len(shown.items) == plan["items"] > 0
    dirty = plan["dirty"]
    want = {k: n for k, n in dirty["categories"].items() if n}
    if dirty["malformed_bytes"]:
        want["malformed"] = dirty["malformed_bytes"]
    assert shown.noise_totals() == want
    out = show(capsys, path)
    assert_in_order(out, [said.text for said in shown.items])
    gaps = [gap_line(g) for g in shown.gaps if not g.empty]
    assert gaps and all(f"{line}\n" in out for line in gaps)


def test_show_with_json_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = claude_fixture(tmp_path)
    code = main(["plan", "--show", "--json", "--transcript", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "--show" in err and "--json" in err


def test_wrap_cuts_after_spaces_and_loses_nothing() -> None:
    pieces = wrap(LONG, 30)
    assert "".join(pieces) == LONG
    assert all(len(p) <= 30 for p in pieces) and all(p.endswith(" ") for p in pieces[:-1])
    assert wrap("x" * 70, 30) == ["x" * 30, "x" * 30, "x" * 10]


def on_a_terminal(path: Path, tmp_path: Path, **env: str) -> str:
    """Run ``plan --show`` with stdout on a pseudo-terminal; return what reached it."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PAGER")}
    child_env |= {"COLUMNS": "60", "LINES": "20", **env}
    rc, out, err = stdout_on_a_terminal(
        [sys.executable, "-m", "runtime.cli", "plan", "--show", "--transcript", str(path)],
        child_env, REPO)
    assert rc == 0, err
    return out


def test_on_a_terminal_it_pages_wraps_and_colours_unless_no_color(tmp_path: Path) -> None:
    path, _ = claude_fixture(tmp_path)
    paged = tmp_path / "paged.txt"
    out = on_a_terminal(path, tmp_path, PAGER=f"tee {paged}")
    through_pager = paged.read_text(encoding="utf-8")
    assert "\x1b[2m… 2 tool results" in through_pager  # dim gap line
    assert "\x1b[2m… 2 tool results" in out
    assert all(len(line) <= 60 for line in out.splitlines() if line.startswith(INDENT))
    assert block(LONG) not in through_pager and "".join(wrap(LONG, 58)) == LONG
    plain = on_a_terminal(path, tmp_path, PAGER="cat", NO_COLOR="1")
    assert "\x1b" not in plain and "… 2 tool results" in plain


def test_a_channel_message_names_its_server_and_its_queue_lines_are_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.channel("from the phone", source="companion")
    t.assistant("answered")
    out = show(capsys, t.write(tmp_path / "s.jsonl")).splitlines()
    head = next(line for line in out if "channel" in line)
    assert head.endswith("  human (channel from companion)")
    body = out[out.index(head) + 1:out.index(head) + 4]
    # the envelope is carried as the candidate holds it, after the turn's stamp block
    assert body[0].startswith(f"{INDENT}(Threadline adds: [")
    assert body[1:] == [f'{INDENT}<channel source="companion" chat_id="42">',
                        f"{INDENT}from the phone"]
    # the enqueue/dequeue lines before the message are noise of the gap before it
    queue = len(t.lines[2]) + len(t.lines[3]) + 2
    assert out[out.index(head) - 2] == f"… 2 other lines ({render.size(queue)}) dropped"


def test_turns_the_carry_cap_drops_are_counted_where_they_were(tmp_path: Path) -> None:
    t = Transcript()
    for n in range(4):
        t.user(f"question {n} " + "word " * 200)
        t.tool_round()
        t.assistant(f"answer {n}")
    path = t.write(tmp_path / "s.jsonl")
    shown = view(path, config_from_mapping({"rebuild": {"carry_max_tokens": 400}}))
    carried = [said.text.split(" ")[:2] for said in shown.items]
    assert carried and carried[-1] == ["answer", "3"] and ["question", "0"] not in carried
    dropped = 8 - len(shown.items)
    # the dropped oldest turns lie before the first carried item, with their tool rounds
    assert shown.gaps[0].not_carried == dropped
    assert shown.gaps[0].noise["tool_use"][0] == dropped // 2
    assert gap_line(shown.gaps[0]).endswith(f", {dropped} utterances not carried")
    assert sum(g.not_carried for g in shown.gaps) == dropped


def test_on_a_terminal_control_characters_are_shown_never_sent() -> None:
    from runtime.cli.show import _text

    said = "a\x1b[31mred\x07 b\x7f c\x9b2J d\x85e\tf"
    assert _text(said, None, terminal=True) == [
        "  a\u241b[31mred\u2407 b\u2421 c\\x9b2J d\\x85e\tf"]
    assert _text(said, None, terminal=False) == ["  " + said]  # piped: verbatim
