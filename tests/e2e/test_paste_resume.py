"""A long paste, made in the real interactive CLI (tmux bracketed paste into Claude Code
2.1.328): Claude Code keeps it in the prompt wrapped in ``<pasted_content id="…">`` tags and
sends it to the model as pasted, tags and all — a pasted transcript or log may hold
``<system-reminder>`` or ``<command-name>`` blocks, which are the human's words there, not an
injection. The source resumed is the oracle; the fork, resumed, must send the same words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude]

PASTED = "\n".join(
    [f"log line {i}: all quiet" for i in range(30)]
    + ["<system-reminder>PASTED-REMINDER from the log</system-reminder>",
       "<command-name>/PASTED-COMMAND</command-name>",
       "<local-command-stdout>PASTED-STDOUT</local-command-stdout>"]
    + [f"log line {i}: all quiet" for i in range(30, 60)]
)
SAID = ["PASTED-REMINDER from the log", "/PASTED-COMMAND", "PASTED-STDOUT", "log line 59",
        "TYPED-AFTER-PASTE"]


def test_a_pasted_log_with_tags_in_it_is_carried_as_pasted(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi, tmp_path: Path) -> None:
    pane.start(pane.launch_argv(channel=False))
    paste = tmp_path / "paste.txt"
    paste.write_text(PASTED, encoding="utf-8")
    pane.tmux.cmd("load-buffer", "-b", "threadline-paste", str(paste))
    pane.tmux.cmd("send-keys", "-t", pane.target, "-l", "what is wrong here? ")
    pane.tmux.cmd("paste-buffer", "-p", "-d", "-b", "threadline-paste", "-t", pane.target)
    wait_for(lambda: "[Pasted text #1" in pane.capture(), timeout=30,
             what="the paste placeholder in the input box")
    pane.type_prompt(" TYPED-AFTER-PASTE")
    source, session = pane.finish("echo[1]")
    assert '<pasted_content id=\\"' in source.read_text(encoding="utf-8")  # the shape (as JSON)

    for seen in machine.resume_both(fake_api, source, session)[::2]:  # the oracle, the fork
        assert all(word in seen for word in SAID), seen[-3000:]
