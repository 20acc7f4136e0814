"""``tl-rebuild report --html``: the page's chart, conversation and operation, and the command."""

from __future__ import annotations

import json
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runtime.agents.kind import AgentKind
from runtime.cli import main
from runtime.cli.render import size
from runtime.cli.report_chart import MAX_BARS, bucketed
from runtime.cli.report_html import gather, page
from runtime.config import Config
from runtime.engine.report import dirty_report
from runtime.switch.state import State
from runtime.switch.store import Store
from tests.fixtures.transcripts import Transcript, image, thinking, tool_use
from tests.runtime.codex_rollouts import Rollout

SESSION = "11111111-2222-3333-4444-555555555555"
HOSTILE = "</script><img src=x onerror=alert(1)>\n  <b>&amp; \"quoted\" 'single' </pre>"
CORPUS = Path("/work/shared/corpus")


class Page(HTMLParser):
    """What a browser would take from the page: <pre> texts, chart segments, tags seen."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.bars: dict[str, int] = {}
        self.tags: set[str] = set()
        self.carried: list[tuple[int, str]] = []  # conversation bars: bytes, tooltip
        self._pre: list[str] | None = None
        self._title: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if tag == "pre":
            self._pre = []
        if tag == "rect" and "data-category" in found:
            name = str(found["data-category"])
            self.bars[name] = self.bars.get(name, 0) + int(str(found["data-bytes"]))
        if tag == "rect" and "data-conversation-bytes" in found:
            self.carried.append((int(str(found["data-conversation-bytes"])), ""))
            self._title = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre" and self._pre is not None:
            text = "".join(self._pre)  # a browser drops the one newline right after <pre>
            self.texts.append(text[1:] if text.startswith("\n") else text)
            self._pre = None
        if tag == "title" and self._title is not None:
            self.carried[-1] = (self.carried[-1][0], "".join(self._title))
            self._title = None

    def handle_data(self, data: str) -> None:
        if self._pre is not None:
            self._pre.append(data)
        if self._title is not None:
            self._title.append(data)


def ledger(path: Path) -> dict[str, int]:
    dirty = dirty_report(path, Config())
    out = {k: v for k, v in dirty["categories"].items() if v}
    if dirty["malformed_bytes"]:
        out["malformed"] = dirty["malformed_bytes"]
    return out


def session(folder: Path, hostile: str = HOSTILE) -> Path:
    t = Transcript(SESSION)
    t.user("first question", timestamp="2026-04-26T10:00:00.000Z")
    t.assistant([thinking("x" * 3000), tool_use("Read")], timestamp="2026-04-26T10:00:05.000Z")
    t.user([{"type": "tool_result", "tool_use_id": "t1", "content": [image(20_000)]}],
           timestamp="2026-04-26T13:00:00.000Z")
    t.assistant("first answer", timestamp="2026-04-26T13:00:09.000Z")
    t.user(hostile, timestamp="2026-04-27T09:00:00.000Z")
    t.assistant("  spaced\n\n answer  ", timestamp="2026-04-27T09:00:03.000Z")
    return t.write(folder / f"{SESSION}.jsonl")


def test_every_carried_utterance_is_on_the_page_verbatim_and_hostile_text_stays_text(
    tmp_path: Path
) -> None:
    html = page(gather(session(tmp_path), Config(), AgentKind.CLAUDE, None))
    seen = Page(html)
    assert seen.texts == ["first question", "first answer", HOSTILE, "  spaced\n\n answer  "]
    assert "<img" not in html and "<script" not in html and "</script><img" not in html
    assert seen.tags.isdisjoint({"img", "script", "b", "link", "iframe", "object"})


def test_the_chart_sums_to_the_dirty_ledger_and_the_table_shows_the_same_totals(
    tmp_path: Path
) -> None:
    source = session(tmp_path)
    report = gather(source, Config(), AgentKind.CLAUDE, None)
    html = page(report)
    assert Page(html).bars == ledger(source)
    assert 20_000 < ledger(source)["image"] < 20_200
    for name, nbytes in ledger(source).items():
        assert f'<td>{name}</td><td class="n" data-bytes="{nbytes}">{nbytes}</td>' in html
    assert "the chart's per-category totals differ" not in html
    bars, seconds, label = bucketed(report.minutes)
    assert (seconds, label) == (3600, "1-hour") and len(bars) == 24  # 10:00 .. 09:00 next day


def test_a_session_without_speech_or_noise_says_so(tmp_path: Path) -> None:
    empty = tmp_path / f"{SESSION}.jsonl"
    empty.write_bytes(b"")
    html = page(gather(empty, Config(), AgentKind.CLAUDE, None))
    assert "no noise recorded: nothing to chart" in html
    assert "Carried conversation (0 utterances)" in html and "nothing to carry" in html
    assert "no operation (no state_dir configured)" in html
    assert Page(html).bars == {}


def test_a_codex_rollout_shows_its_messages_and_its_own_noise_categories(tmp_path: Path) -> None:
    rollout = Rollout()
    rollout.exchange("fix the <build>", "fixed & done")
    rollout.tool_round()
    path = rollout.write(tmp_path)
    report = gather(path, Config(), AgentKind.CODEX, None)
    seen = Page(page(report))
    assert seen.texts == ["fix the <build>", "fixed & done"]
    assert seen.bars == ledger(path) and "harness_message" in seen.bars
    assert report.session_id == rollout.id


def test_a_real_corpus_transcript_renders_every_carried_utterance_and_its_ledger() -> None:
    source = CORPUS / "samar-58__scout__claude-session.jsonl"
    if not source.is_file():
        pytest.skip(f"corpus transcript {source} is missing")
    report = gather(source, Config(), AgentKind.CLAUDE, None)
    seen = Page(page(report))
    assert seen.bars == ledger(source) and seen.bars["image"] > 1_000_000
    assert seen.texts == [u.text for u in report.utterances] and len(seen.texts) > 10
    assert 1 < len(bucketed(report.minutes)[0]) <= MAX_BARS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_json_names_the_page_and_its_totals_and_writes_it_0600(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = session(tmp_path), tmp_path / "r.html"
    code, stdout, err = run(capsys, "report", "--html", str(out), "--transcript", str(source),
                            "--json")
    assert code == 0 and err == ""
    result = json.loads(stdout)
    assert result["schema_version"] == 1 and result["path"] == str(out)
    assert result["categories"] == ledger(source) == Page(out.read_text("utf-8")).bars
    assert result["utterances"] == 4 and result["operation"] is None
    said = ("first question", "first answer", HOSTILE, "  spaced\n\n answer  ")
    assert result["chart"] == {"bucket_seconds": 3600, "bars": 24, "matches_ledger": True,
                               "carried_bytes": sum(len(x.encode()) for x in said)}
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_report_prints_one_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    out = tmp_path / "r.html"
    code, stdout, _ = run(capsys, "report", "--html", str(out), "--transcript",
                          str(session(tmp_path)))
    assert code == 0
    assert stdout.startswith(f"wrote {out}: 4 utterances, ") and stdout.count("\n") == 1
    assert "over 24 bars, no operation (no state_dir configured)" in stdout


def test_a_report_into_a_missing_folder_is_a_one_line_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "absent" / "r.html"
    code, stdout, err = run(capsys, "report", "--html", str(out), "--transcript",
                            str(session(tmp_path)))
    assert code == 1 and stdout == ""
    assert err == (f"tl-rebuild: error: cannot write report {str(out)!r}: folder "
                   f"{str(out.parent)!r} does not exist\n")
    assert not out.parent.exists()


def config_file(tmp_path: Path, project: Path) -> Path:
    path = tmp_path / "threadline.toml"
    path.write_text(f'project_dir = "{project}"\nstate_dir = "{tmp_path / "state"}"\n')
    return path


def test_session_picks_its_file_and_its_latest_operation_with_the_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    session(project)
    config = config_file(tmp_path, project)
    store = Store(tmp_path / "state")
    other = store.create(reason={"reason": "other session"}, bound_session_id="another",
                         door="tmux")
    store.transition(other.operation_id, State.CANCELLED, phase="cancelled")
    mine = store.create(reason={"reason": "too much noise"}, bound_session_id=SESSION,
                        door="tmux")
    store.transition(mine.operation_id, State.CANCELLED, phase="cancelled")
    out = tmp_path / "r.html"
    code, stdout, err = run(capsys, "report", "--html", str(out), "--session", SESSION,
                            "--config", str(config), "--json")
    assert code == 0, err
    assert json.loads(stdout)["operation"] == mine.operation_id
    html = out.read_text("utf-8")
    assert f"{mine.operation_id}: <b>cancelled</b> (the latest operation of this session)" in html
    assert "<td>created</td><td>pending</td>" in html and "<td>cancelled</td>" in html
    code, _, err = run(capsys, "report", "--html", str(out), "--session", SESSION, "--config",
                       str(config), "--op", other.operation_id)
    assert code == 0 and other.operation_id in out.read_text("utf-8")


def test_an_unknown_operation_or_session_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    session(project)
    config = config_file(tmp_path, project)
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", "--html", str(out), "--session", SESSION, "--config",
                       str(config), "--op", "op-20260101T000000.000000Z-abcdef")
    assert code == 1 and err.startswith("tl-rebuild: error: no operation ")
    assert err.count("\n") == 1 and not out.exists()
    code, _, err = run(capsys, "report", "--html", str(out), "--session", "nope", "--config",
                       str(config))
    assert code == 1 and err.count("\n") == 1 and "nope.jsonl" in err


def test_a_codex_session_id_finds_its_rollout_under_codex_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rollout = Rollout()
    rollout.exchange("hello codex", "hello human")
    rollout.write(tmp_path / "codex" / "sessions" / "2026" / "12" / "03")
    config = tmp_path / "threadline.toml"
    config.write_text(f'agent = "codex"\ncodex_home = "{tmp_path / "codex"}"\n')
    out = tmp_path / "r.html"
    code, stdout, err = run(capsys, "report", "--html", str(out), "--session", rollout.id,
                            "--config", str(config), "--json")
    assert code == 0, err
    result = json.loads(stdout)
    assert (result["agent"], result["session_id"], result["utterances"]) == (
        "codex", rollout.id, 2)
    code, _, err = run(capsys, "report", "--html", str(out), "--session", "0000-missing",
                       "--config", str(config))
    assert code == 1 and err == ("tl-rebuild: error: no rollout of session '0000-missing' "
                                 f"under {str(tmp_path / 'codex' / 'sessions')!r}\n")


def test_the_conversation_chart_books_each_utterances_bytes_at_its_hour_beside_the_noise(
    tmp_path: Path
) -> None:
    text = "é naïve ünïcode — 🙂"  # bytes, not characters: 4-byte and 2-byte ones
    t = Transcript(SESSION)
    t.user("first question", timestamp="2026-04-26T10:00:00.000Z")
    t.assistant([thinking("x" * 3000), tool_use("Read")], timestamp="2026-04-26T10:00:05.000Z")
    t.user([{"type": "tool_result", "tool_use_id": "t1", "content": [image(20_000)]}],
           timestamp="2026-04-26T13:00:00.000Z")
    t.assistant(text, timestamp="2026-04-26T13:00:09.000Z")
    t.user("later", timestamp="2026-04-26T15:59:59.000Z")
    t.assistant("done", timestamp="2026-04-26T16:00:00.000Z")
    source = t.write(tmp_path / f"{SESSION}.jsonl")
    html = page(gather(source, Config(), AgentKind.CLAUDE, None))
    seen = Page(html)
    hours = {"10:00": 14, "13:00": len(text.encode()), "15:45": 5, "16:00": 4}  # 15-min bars
    assert [(n, tip) for n, tip in seen.carried] == [
        (n, f"carried conversation: {size(n)} from 2026-04-26 {hour} UTC")
        for hour, n in hours.items()]
    assert sum(n for n, _ in seen.carried) == sum(len(x.encode()) for x in seen.texts) == 51
    assert 'id="carried-bytes" data-bytes="51">51 B</span> of text (51 bytes, UTF-8) in 4 ' \
        "utterances" in html
    noise = html.index('id="noise-chart"')
    assert noise < html.index('id="conversation-chart"') < html.index('id="conversation"')
    assert seen.bars == ledger(source)  # the noise chart is unchanged by its neighbour


def test_a_session_with_noise_but_nothing_carried_says_so_in_the_conversation_chart(
    tmp_path: Path
) -> None:
    t = Transcript(SESSION)
    t.assistant([thinking("x" * 3000), tool_use("Read")], timestamp="2026-04-26T10:00:05.000Z")
    html = page(gather(t.write(tmp_path / f"{SESSION}.jsonl"), Config(), AgentKind.CLAUDE, None))
    assert "nothing carried: nothing to chart" in html and Page(html).carried == []


def test_the_summary_line_counts_one_as_one(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    t = Transcript(SESSION)
    t.user("only question", timestamp="2026-01-05T10:00:00.000Z")
    t.assistant("only answer", timestamp="2026-01-05T10:00:05.000Z")
    code, stdout, _ = run(capsys, "report", "--html", str(tmp_path / "r.html"),
                          "--transcript", str(t.write(tmp_path / f"{SESSION}.jsonl")))
    assert code == 0
    assert ": 2 utterances, " in stdout and " over 1 bar, " in stdout
