"""Three generations through the tmux door with the real Claude Code CLI 2.1.328 (issue 12 §1).

A companion is rebuilt again and again, each new session starting with the items of the last
rebuild. Here: talk (typed, channel, a channel reply) → rebuild → talk → rebuild → talk →
rebuild, each rebuild asked for by the model through the real MCP tool and carried out by the
real Stop hook and worker. The first request of the last session must carry every utterance of
all three periods exactly once and in order, each turn with one time stamp, and the carried
channel messages must still say they came from the channel.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_api import Cue, FakeApi, Recorded
from tests.e2e.harness import CHANNEL_NAME, ClaudePane, Machine
from tests.e2e.oracle import read_jsonl
from tests.e2e.test_tmux_rebuild import provision_and_launch, tl
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]

STAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d UTC\]")


def talk(pane: ClaudePane, fake_api: FakeApi, machine: Machine, period: int, word: str,
         reply: bool) -> tuple[list[str], list[str]]:
    """One period of conversation; returns the human and the reply markers, in order."""
    humans = [f"p{period} typed {word}", f"p{period} channel {word}"]
    pane.type_prompt(humans[0])
    pane.wait_said(f"p{period} typed")
    wait_for(pane.channel_listening, timeout=60, what="the channel server to listen")
    machine.push_channel(humans[1])
    fake_api.wait_for_text(humans[1])
    replies = []
    if reply:
        trigger = f"PLEASE-REPLY-{period}"
        replies.append(f"reply {period} {word}")
        fake_api.add_cue(Cue(trigger, f"mcp__{CHANNEL_NAME}__reply", {"text": replies[0]},
                             after_text=f"replied {period}"))
        humans.append(f"{trigger} {word}")
        machine.push_channel(humans[-1])
        wait_for(lambda: len(machine.replies()) >= period, timeout=60, what="the channel reply")
        pane.wait_said(f"replied {period}")
    return humans, replies


def rebuild(pane: ClaudePane, config: Path, generation: int, word: str) -> dict[str, Any]:
    """Ask for a rebuild through the model; wait for that operation to end."""
    prompt = f"please PLEASE-REBUILD now g{generation} {word}"
    pane.type_prompt(prompt)

    def ended() -> dict[str, Any] | None:
        listed = tl(config, "list")
        if len(listed) >= generation and listed[0]["state"] in ("activated", "failed",
                                                                 "rolled_back"):
            return tl(config, "status", "--operation", listed[0]["operation_id"])  # type: ignore[no-any-return]
        return None

    op: dict[str, Any] = wait_for(ended, timeout=120, interval=0.2,  # type: ignore[assignment]
                                  what=f"rebuild {generation} to end")
    assert op["state"] == "activated", (op.get("failure"), pane.capture()[-1500:])
    new_session = op["facts"]["new_session_id"]
    wait_for(lambda: (pane.session_record() or {}).get("sessionId") == new_session,
             timeout=60, what=f"the pane to run generation {generation}")
    pane.pids.add(pane.pane_pid())
    return op


def blocks(request: Recorded) -> list[tuple[str, str]]:
    """``(role, text)`` of every text block the model saw, in order."""
    out = []
    for message in request.body.get("messages") or []:
        content = message.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if block.get("type") == "text":
                out.append((message["role"], block["text"]))
    return out


def positions(seen: list[tuple[str, str]], role: str, marker: str) -> list[int]:
    return [i for i, (r, text) in enumerate(seen) if r == role and marker in text]


def test_three_generations_carry_every_utterance_of_every_period_once_in_order(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path) -> None:
    config, _ = provision_and_launch(pane, fake_api, machine, tmp_path)
    word = uuid.uuid4().hex[:6]
    humans, replies = ["the first words"], []
    for period in (1, 2, 3):
        said, answered = talk(pane, fake_api, machine, period, word, reply=period < 3)
        humans += [*said, f"PLEASE-REBUILD now g{period} {word}"]
        replies += answered
        op = rebuild(pane, config, period, word)

    last = op["facts"]["new_session_id"]
    start = fake_api.last_index
    pane.type_prompt(f"after three generations {word}")
    first = fake_api.wait_for_text(f"after three generations {word}", after=start, timeout=60)

    assert first.session_id == last
    seen = blocks(first)
    found = [positions(seen, "user", marker) for marker in humans]
    assert [len(p) for p in found] == [1] * len(humans), list(zip(humans, found, strict=True))
    order = [p[0] for p in found]
    assert order == sorted(order)
    answered = [positions(seen, "assistant", marker) for marker in replies]
    assert [len(p) for p in answered] == [1] * len(replies)
    assert order[-1] < positions(seen, "user", "after three generations")[0]
    # One stamp per carried human turn, never read back as speech and never stacked.
    # (Claude Code may end a merged block with a line break: compare stripped.)
    stamps = [i for i, (role, text) in enumerate(seen) if STAMP.fullmatch(text.strip())]
    assert len(stamps) == len(humans)  # each human line here opened its own turn
    assert not any(b - a == 1 for a, b in zip(stamps, stamps[1:], strict=False))
    assert all(seen[i + 1][0] == "user" and not STAMP.fullmatch(seen[i + 1][1].strip())
               for i in stamps)
    carried = read_jsonl(Path(op["facts"]["candidate_path"]))[: op["facts"]["candidate_lines"]]
    channel_items = [e for e in carried if (e.get("origin") or {}).get("kind") == "channel"]
    assert len(channel_items) == len([h for h in humans if "channel" in h or "REPLY" in h])
    kinds = json.dumps([e["threadline"]["kind"] for e in carried])
    assert kinds.count('"channel_reply"') == len(replies)
