"""Channel messages that arrive while the model is busy — the common case over Telegram: the
human sends two or three messages in a row while the assistant still works. Claude Code
2.1.328 stores one that lands while a model request is pending as a user line (after
``queue-operation`` echoes) and one that lands during a tool run as a ``queued_command``
attachment with a channel origin, sent to the model as "A message arrived … while you were
working". Made by the real CLI with a real channel server; the source resumed is the oracle,
the fork resumed must send every one of them, once each."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude]

WORDS = ["TYPED-1 SLOW-ONE", "TYPED-2 RUN-WAIT", "CH-WHILE-HELD one", "CH-WHILE-HELD two",
         "CH-DURING-TOOL three"]


def test_channel_messages_sent_while_the_model_works_are_carried_once_each(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi, tmp_path: Path) -> None:
    release = threading.Event()
    fake_api.add_cue(Cue("SLOW-ONE", "", hold=release, hold_timeout=60))
    gate, started = tmp_path / "gate", tmp_path / "started"
    fake_api.add_cue(Cue("RUN-WAIT", "Bash", {
        "command": f"touch '{started}'; python3 -c \"import os,time; t=time.time()\n"
                   f"while not os.path.exists('{gate}') and time.time()-t<60: time.sleep(0.05)\"",
        "description": "wait for the gate"}, after_text="the gate opened"))
    pane.start(pane.launch_argv())
    wait_for(pane.channel_listening, timeout=60, what="the channel server to listen")
    pane.type_prompt(WORDS[0])
    fake_api.wait_for_text(WORDS[0])  # the model request is pending (held)
    machine.push_channel(WORDS[2])
    machine.push_channel(WORDS[3])
    pane.wait_said(WORDS[3])
    release.set()
    pane.wait_said("echo[")
    wait_for(pane.idle, timeout=60, what="claude idle after the held answer")
    pane.type_prompt(WORDS[1])
    wait_for(started.exists, timeout=60, what="the tool run to start")
    machine.push_channel(WORDS[4])
    pane.wait_said(WORDS[4])
    gate.touch()
    source, session = pane.finish("the gate opened")
    assert '"queued_command"' in source.read_text(encoding="utf-8")  # the shape under test

    for seen in machine.resume_both(fake_api, source, session)[::2]:  # the oracle, the fork
        assert all(word in seen for word in WORDS), seen[-3000:]
        assert all(seen.count(f"\n{word}\n</channel>") == 1 for word in WORDS[2:]), seen[-3000:]
