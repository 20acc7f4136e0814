"""The engine on every real transcript of the shared corpus (and live-2.1.328 recordings).

For each file the expected outcome is written down: a fork that verifies (recognition audit
included, every carried text found verbatim in its source event) or a refusal for a stated
reason. The slash-command turns an earlier system lost are pinned by exact lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from runtime.config import Config
from runtime.engine import candidate
from runtime.engine.verify import verify_candidate
from runtime.errors import NothingToCarryError
from tests.conftest import corpus_dir

pytestmark = pytest.mark.corpus

SIDECHAIN = "only subagent (sidechain) speech"
# file name -> None (fork succeeds) or the reason fork refuses with
EXPECTED: dict[str, str | None] = {
    "DRMacIver__claude-reliability__coverage-test-fix__transcript.jsonl": None,
    "DRMacIver__claude-reliability__python-to-rust-port__transcript.jsonl": None,
    "Reinhartsamuel__TokenForge__claude-session.jsonl": None,
    "bastion-defend__bastion__claude-session.jsonl": None,
    "chiphuyen__sniffly__d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl": None,
    "chiphuyen__sniffly__fed8ce56-bc79-401f-a83e-af084253362f.jsonl": None,
    "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": None,
    "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": None,
    "iansherr__claude-code-log__03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl": None,
    "iansherr__claude-code-log__0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl": None,
    "iansherr__claude-code-log__29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl": None,
    "iansherr__claude-code-log__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl": None,
    "iansherr__claude-code-log__4379d1bf-ccb1-414e-a856-9791b73f3af2.jsonl": None,
    "iansherr__claude-code-log__4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl": "only summary lines",
    "iansherr__claude-code-log__4fe49c7c-ff82-4ac7-b3f2-79c22036bd58.jsonl": "is empty",
    "iansherr__claude-code-log__9e953218-585f-4692-89df-9e0747a31c68.jsonl": None,
    "iansherr__claude-code-log__a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl": None,
    "iansherr__claude-code-log__agent-3430b97e.jsonl": SIDECHAIN,
    "iansherr__claude-code-log__agent-a2271d1.jsonl": SIDECHAIN,
    "iansherr__claude-code-log__agent-a4ca7529859c158c2.jsonl": SIDECHAIN,
    "iansherr__claude-code-log__agent-ea02459f.jsonl": SIDECHAIN,
    "iansherr__claude-code-log__cb2e607c-c758-415a-8b45-c49e4631906a.jsonl": None,
    "iansherr__claude-code-log__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl": None,
    "iansherr__claude-code-log__fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl": None,
    "lanegrid__agtrace__7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9.jsonl": None,
    "lanegrid__agtrace__agent-0c4c3cf8.jsonl": SIDECHAIN,
    "samar-58__scout__claude-session.jsonl": None,
    "thejamesnick__agentic-wallet__claude-session.jsonl": None,
    "live-2.1.328/01-print-mode-basic-with-stop-hook.jsonl": None,
    "live-2.1.328/02-stop-hook-exit2-isMeta-feedback.jsonl": None,
    "live-2.1.328/03-tool-use-bash.jsonl": None,
    "live-2.1.328/04-tool-use-mcp-via-toolsearch.jsonl": None,
    "live-2.1.328/05-thinking-block.jsonl": None,
    "live-2.1.328/06-interactive-queued-between-turns.jsonl": None,
    "live-2.1.328/07-interactive-queued-midturn-and-compact.jsonl": None,
    "live-2.1.328/08-channel-message.jsonl": None,
    "live-2.1.328/09-handmade-ending-with-user-synthetic-reply.jsonl": None,
    "live-2.1.328/10-subagent-parent.jsonl": None,
    "live-2.1.328/10-subagent-sidechain.jsonl": SIDECHAIN,
    "live-2.1.328/11-e2e-original-session.jsonl": None,
    "live-2.1.328/11-e2e-rebuilt-session-after-switch-with-channel.jsonl": None,
}


def _corpus_files() -> list[str]:
    root = corpus_dir()
    if root is None:
        return []
    found = sorted(p.relative_to(root).as_posix() for p in root.glob("*.jsonl"))
    found += sorted(p.relative_to(root).as_posix() for p in root.glob("live-2.1.328/*.jsonl"))
    return found


FILES = _corpus_files()


def _source_texts(path: Path) -> dict[str, list[str]]:
    """Every string a source event holds, by event uuid (text blocks, prompts, tool inputs)."""
    found: dict[str, list[str]] = {}
    for line in path.read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and isinstance(event.get("uuid"), str):
            found[event["uuid"]] = list(_strings(event.get("message") or event.get("attachment")))
    return found


def _strings(value: Any) -> Any:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_every_corpus_file_has_a_stated_expectation(corpus: Path) -> None:
    assert sorted(FILES) == sorted(EXPECTED)


@pytest.mark.parametrize("name", FILES)
def test_fork_verifies_or_refuses_for_the_stated_reason(
    name: str, corpus: Path, tmp_path: Path
) -> None:
    source = corpus / name
    before = source.read_bytes()
    built = candidate.build(source, Config())
    reason = EXPECTED[name]
    if reason is not None:
        assert built.empty_reason is not None and reason in built.empty_reason
        with pytest.raises(
            NothingToCarryError, match=reason.replace("(", r"\(").replace(")", r"\)")
        ):
            candidate.write(built, tmp_path)
        return
    assert built.empty_reason is None and built.blocked_reason is None
    report = verify_candidate(candidate.write(built, tmp_path), built)
    for kind, row in report.audit.items():
        assert row["source"] == row["candidate"], kind  # default knobs leave nothing out
    assert sum(row["candidate"] for row in report.audit.values()) > 0
    assert source.read_bytes() == before


@pytest.mark.parametrize("name", [n for n in FILES if EXPECTED.get(n) is None])
def test_every_carried_text_is_found_verbatim_in_its_source_event(name: str, corpus: Path) -> None:
    source = corpus / name
    built = candidate.build(source, Config())
    strings = _source_texts(source)
    for entry, item in zip(built.manifest, built.items, strict=True):
        carried = item["message"]["content"][-1]["text"]
        held = strings[entry.source_uuid]
        if entry.kind == "slash":
            name_part, _, args = carried.partition(" ")
            assert any(f"<command-name>{name_part}</command-name>" in s for s in held)
            assert not args or any(f"<command-args>{args}</command-args>" in s for s in held)
        else:
            assert any(carried in s for s in held), (entry.kind, carried[:80])


def _carried(corpus: Path, name: str) -> list[tuple[str, str]]:
    built = candidate.build(corpus / name, Config())
    return [
        (e.kind, i["message"]["content"][-1]["text"])
        for e, i in zip(built.manifest, built.items, strict=True)
    ]


def test_claude_code_viewer_orchestrator_turn_keeps_its_args_and_reply(corpus: Path) -> None:
    carried = _carried(
        corpus, "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    )
    assert carried[0] == ("slash", "/orchestrator create TODO app by Next.js")
    assert carried[1][0] == "assistant_text"
    assert carried[1][1].startswith("I'll help you create a TODO app using Next.js")
    assert ("typed", "Thanks! Please update CLAUDE.md for current changes") in carried


def test_claude_code_viewer_japanese_orchestrator_args_are_carried(corpus: Path) -> None:
    carried = _carried(
        corpus, "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    )
    assert carried[0] == (
        "slash",
        "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください",
    )
    assert carried[1][1].startswith("I'll help you update the CLAUDE.md file to the latest state.")
    assert carried[-1][1].startswith("CLAUDE.mdファイルを最新の状態にアップデートしました。")


def test_tokenforge_skill_command_is_carried_with_its_reply_and_exit_is_dropped(
    corpus: Path,
) -> None:
    carried = _carried(corpus, "Reinhartsamuel__TokenForge__claude-session.jsonl")
    assert carried[0] == ("slash", "/colosseum-copilot")
    assert carried[1][1].startswith("Authenticated. PAT is valid through June 27, 2026.")
    assert all(text != "/exit" for _, text in carried)
    assert all(text != "No response requested." for _, text in carried)  # <synthetic>
    assert carried[-1][1].startswith("**Net Asset Value**")
    assert ("typed", "quick, what is nav?") in carried


def test_live_channel_messages_are_carried_once_each(corpus: Path) -> None:
    carried = _carried(corpus, "live-2.1.328/08-channel-message.jsonl")
    channel = [text for kind, text in carried if kind == "channel"]
    assert channel == [
        '<channel source="chan" source_file="msg1.txt" sender="probe-harness">\n'
        "hello from the channel PING-1\n</channel>",
        '<channel source="chan" source_file="msg3.txt" sender="probe-harness">\n'
        "third PING-3 after respawn with flag\n</channel>",
    ]


def test_live_queued_prompt_is_carried_once_and_the_compaction_summary_is_not(
    corpus: Path,
) -> None:
    carried = _carried(corpus, "live-2.1.328/07-interactive-queued-midturn-and-compact.jsonl")
    assert [text for kind, text in carried if kind == "queued"] == ["typed during tool run"]
    assert sum(text == "typed during tool run" for _, text in carried) == 1
    assert all(kind != "compact_summary" for kind, _ in carried)
    assert all("/compact" not in text for _, text in carried)


def test_live_stop_hook_feedback_is_not_speech(corpus: Path) -> None:
    carried = _carried(corpus, "live-2.1.328/02-stop-hook-exit2-isMeta-feedback.jsonl")
    assert [kind for kind, _ in carried] == ["typed", "assistant_text", "assistant_text"]
    assert all(not text.startswith("Stop hook feedback") for _, text in carried)
