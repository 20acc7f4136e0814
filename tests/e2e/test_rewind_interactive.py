"""A rewind made in the real interactive CLI (Claude Code 2.1.328 in a tmux pane, double Esc,
"Restore conversation"), not one written by hand: the transcript Claude Code itself writes
for a rewind is what the engine must recognise. The source resumed is the oracle; the fork,
resumed, must send the same words, never the retracted prompt nor its answer."""

from __future__ import annotations

import re

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude]


def _keys(pane: ClaudePane, *keys: str) -> None:
    pane.tmux.cmd("send-keys", "-t", pane.target, *keys)


def _shown(pane: ClaudePane, text: str, what: str) -> None:
    wait_for(lambda: text in pane.capture(), timeout=30, what=what)


def test_a_rewind_made_in_the_interactive_cli_is_not_carried(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi) -> None:
    pane.start(pane.launch_argv(channel=False))
    pane.type_prompt("KEEP-TYPED-1 alpha")
    pane.wait_said("echo[1]")
    pane.type_prompt("GONE-TYPED-2 beta")
    pane.wait_said("echo[2]: GONE-TYPED-2 beta")
    wait_for(pane.idle, timeout=30, what="claude idle after the second answer")

    _keys(pane, "Escape")
    _keys(pane, "Escape")  # double Esc: the rewind selector
    _shown(pane, "Rewind", "the rewind selector")
    _keys(pane, "Up")  # from "(current)" to the last prompt
    _keys(pane, "Enter")
    _shown(pane, "Restore conversation", "the restore choice")
    _keys(pane, "Enter")  # 1. Restore conversation: the prompt comes back into the input box
    # (the input box's prompt sign is followed by a no-break space)
    wait_for(lambda: "echo[2]" not in (screen := pane.capture()) and re.search(
        r"─\n❯\s+GONE-TYPED-2 beta", screen), timeout=30,
        what="the answer gone and the rewound prompt back in the input box")
    _keys(pane, "C-u")
    wait_for(lambda: "GONE-TYPED-2" not in pane.capture(), timeout=30,
             what="the input box emptied")
    pane.type_prompt("KEEP-TYPED-3 gamma")
    pane.wait_said("echo[3]: KEEP-TYPED-3 gamma")
    wait_for(pane.idle, timeout=30, what="claude idle after the third answer")
    source = pane.transcript()
    session = pane.session_id()
    pane.close()
    assert "GONE-TYPED-2" in source.read_text(encoding="utf-8")  # the branch stays in the file
    kept = ["KEEP-TYPED-1 alpha", "KEEP-TYPED-3 gamma", "echo[3]: KEEP-TYPED-3 gamma"]

    seen = machine.resume_sees(fake_api, session)  # the oracle
    assert all(k in seen for k in kept) and "GONE-TYPED-2" not in seen, seen[-2000:]

    result = machine.fork(source)
    assert result["stats"]["read"]["rewound_speech"] == {"typed": 1, "assistant_text": 1}
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert all(k in seen for k in kept) and "GONE-TYPED-2" not in seen, seen[-2000:]
