"""A tool call rejected with words, made in the real interactive CLI: Claude Code 2.1.328's
permission dialog, "No", Tab to amend, the human types what to do instead. Claude Code writes
those words into the call's error result and sends them to the model; the source resumed is
the oracle, and the fork, resumed, must send them too (a rebuild used to drop them with the
tool result they sit in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude]

WORDS = "REJECT-WORDS write it to notes.md instead"


def test_words_given_when_rejecting_a_tool_call_are_carried(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    fake_api.add_cue(Cue("PLEASE-WRITE", "Write", {"file_path": str(target), "content": "hi"},
                         after_text="understood"))  # Write is not pre-allowed: a dialog asks
    pane.start(pane.launch_argv(channel=False))
    pane.type_prompt("TYPED-1 PLEASE-WRITE the file")
    wait_for(lambda: "Do you want to create out.txt?" in pane.capture(), timeout=60,
             what="the permission dialog")
    pane.tmux.cmd("send-keys", "-t", pane.target, "Down")
    pane.tmux.cmd("send-keys", "-t", pane.target, "Down")
    wait_for(lambda: "❯ 3. No" in pane.capture(), timeout=30, what='"No" chosen')
    pane.tmux.cmd("send-keys", "-t", pane.target, "Tab")  # amend: say what to do instead
    wait_for(lambda: "3. No, and tell Claude what to do differently" in pane.capture(),
             timeout=30, what="the field for what to do instead")
    pane.type_into_field(WORDS)
    source, session = pane.finish(WORDS)
    assert not target.exists()

    for seen in machine.resume_both(fake_api, source, session)[::2]:  # the oracle, the fork
        assert "TYPED-1 PLEASE-WRITE the file" in seen and WORDS in seen, seen[-2000:]
