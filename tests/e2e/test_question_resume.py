"""The model asks, the human answers — made in the real interactive CLI: the fake model calls
Claude Code 2.1.328's AskUserQuestion tool, the human picks "Type something." and types an
answer. Claude Code sends the question and the answer to the model; the source resumed is
the oracle, and the fork, resumed, must send both too (a rebuild used to drop them with the
tool call and its result)."""

from __future__ import annotations

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import ClaudePane, Machine
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude]

QUESTION = "Which color should the button be?"
ANSWER = "ANSWER-WORDS green like the logo"


def test_a_question_to_the_human_and_their_answer_are_carried(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi) -> None:
    fake_api.add_cue(Cue("PLEASE-ASK", "AskUserQuestion", {"questions": [{
        "question": QUESTION, "header": "Color", "multiSelect": False,
        "options": [{"label": "Red", "description": "warm"},
                    {"label": "Blue", "description": "cool"}]}]}, after_text="answer noted"))
    pane.start(pane.launch_argv(channel=False))
    pane.type_prompt("TYPED-1 PLEASE-ASK me")
    wait_for(lambda: "3. Type something." in pane.capture(), timeout=60, what="the question")
    pane.tmux.cmd("send-keys", "-t", pane.target, "Down")
    pane.tmux.cmd("send-keys", "-t", pane.target, "Down")
    wait_for(lambda: "❯ 3. Type something." in pane.capture(), timeout=30,
             what='"Type something." chosen')
    pane.type_into_field(ANSWER)  # typed, then Enter: the answer is sent
    source, session = pane.finish("answer noted")

    for seen in machine.resume_both(fake_api, source, session)[::2]:  # the oracle, the fork
        assert QUESTION in seen and ANSWER in seen, seen[-2000:]
