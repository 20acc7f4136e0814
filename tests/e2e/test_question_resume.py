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


def _type_answer(pane: ClaudePane, answer: str) -> None:
    """Type into the answer field; keys sent while it is still being drawn are lost, so a
    try that does not show within 2 s is cleared and typed again (5 tries, each polled)."""
    for _ in range(5):
        pane.tmux.cmd("send-keys", "-t", pane.target, "-l", answer)
        try:
            wait_for(lambda: answer in pane.capture().replace("\n", ""), timeout=2,
                     what="the typed answer to show")
            return
        except AssertionError:
            pane.tmux.cmd("send-keys", "-t", pane.target, "C-u")
    raise AssertionError(f"the answer never showed in the pane:\n{pane.capture()[-1500:]}")


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
    _type_answer(pane, ANSWER)
    pane.tmux.cmd("send-keys", "-t", pane.target, "Enter")
    wait_for(lambda: "Submit" in pane.capture() or "answer noted" in pane.capture()
             or ANSWER in pane.transcript().read_text(encoding="utf-8"), timeout=30,
             what="the answer taken or the review step")
    if ANSWER not in pane.transcript().read_text(encoding="utf-8"):
        pane.tmux.cmd("send-keys", "-t", pane.target, "Enter")  # the review step: submit
    pane.wait_said("answer noted")
    wait_for(pane.idle, timeout=60, what="claude idle after the answer")
    source, session = pane.transcript(), pane.session_id()
    pane.close()

    seen = machine.resume_sees(fake_api, session)  # the oracle
    assert QUESTION in seen and ANSWER in seen, seen[-2000:]

    result = machine.fork(source)
    seen = machine.resume_sees(fake_api, result["new_session_id"])
    assert QUESTION in seen and ANSWER in seen, seen[-2000:]
