"""A rewind made in the real interactive CLI (Claude Code 2.1.328 in a tmux pane, double Esc,
"Restore conversation"), not one written by hand: the transcript Claude Code itself writes
for a rewind is what the engine must recognise. The source resumed is the oracle; the fork,
resumed, must send the same words, never the retracted prompt nor its answer."""

from __future__ import annotations

import re
from pathlib import Path

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
    source, session = pane.finish("echo[3]: KEEP-TYPED-3 gamma")
    assert "GONE-TYPED-2" in source.read_text(encoding="utf-8")  # the branch stays in the file
    kept = ["KEEP-TYPED-1 alpha", "KEEP-TYPED-3 gamma", "echo[3]: KEEP-TYPED-3 gamma"]

    before, result, after = machine.resume_both(fake_api, source, session)
    for seen in (before, after):  # the source (the oracle), then its fork
        assert all(k in seen for k in kept) and "GONE-TYPED-2" not in seen, seen[-2000:]
    assert result["stats"]["read"]["rewound_speech"] == {"typed": 1, "assistant_text": 1}


@pytest.mark.parametrize("choice", ["2", "3"], ids=["summarize-from-here", "summarize-up-to-here"])
def test_a_summary_made_from_the_rewind_menu_is_undone_and_every_word_carried(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi, choice: str) -> None:
    """The rewind menu's "Summarize from here" / "Summarize up to here" (Claude Code 2.1.328)
    replace part of the conversation with a model-written summary (a ``compact_boundary`` and
    a summary line with ``summarizeMetadata.direction`` "from" / "up_to"); the resumed source
    sends the summary instead of those turns. Nothing was taken back, so the rebuild carries
    every turn verbatim and not the summary, as it does for any compaction."""
    pane.start(pane.launch_argv(channel=False))
    for number, word in enumerate(["alpha", "beta", "gamma"], 1):
        pane.type_prompt(f"TYPED-{number} {word}")
        pane.wait_said(f"echo[{number}]")
        wait_for(pane.idle, timeout=30, what=f"claude idle after answer {number}")
    _keys(pane, "Escape")
    _keys(pane, "Escape")
    _shown(pane, "Rewind", "the rewind selector")
    _keys(pane, "Up")
    _keys(pane, "Up")  # the second prompt
    _keys(pane, "Enter")
    _shown(pane, "Summarize up to here", "the rewind choices")
    _keys(pane, choice)
    _shown(pane, "Conversation summarized", "the summary made")
    _keys(pane, "C-u")
    pane.type_prompt("TYPED-4 delta")
    source, session = pane.finish("TYPED-4 delta")
    every = ["TYPED-1 alpha", "TYPED-2 beta", "TYPED-3 gamma", "TYPED-4 delta",
             "echo[2]: TYPED-2 beta", "echo[3]: TYPED-3 gamma"]
    direction = "from" if choice == "2" else "up_to"
    assert f'"direction":"{direction}"' in source.read_text(encoding="utf-8").replace(" ", "")

    before, result, after = machine.resume_both(fake_api, source, session)
    assert not all(word in before for word in every)  # the oracle: some turns as a summary
    candidate = Path(result["candidate_path"]).read_text(encoding="utf-8")
    assert "This session is being continued" not in candidate  # the summary is not carried
    assert all(word in after for word in every), after[-2000:]


def test_a_rewind_after_a_compaction_is_not_carried(
        machine: Machine, pane: ClaudePane, fake_api: FakeApi) -> None:
    """After ``/compact`` the menu offers only the prompts after it, and Claude Code hangs the
    new prompt on the line before the ``/compact`` command's own lines (not on the line the
    replaced prompt hung on). The rebuild carries the conversation before the compaction
    verbatim and not the summary, as always, and never the rewound prompt."""
    pane.start(pane.launch_argv(channel=False))
    for number, word in enumerate(["alpha", "beta"], 1):
        pane.type_prompt(f"KEEP-TYPED-{number} {word}")
        pane.wait_said(f"echo[{number}]")
        wait_for(pane.idle, timeout=30, what=f"claude idle after answer {number}")
    pane.type_prompt("/compact")
    _shown(pane, "Compacted", "the compaction done")
    pane.type_prompt("GONE-TYPED-3 gamma")
    pane.wait_said("GONE-TYPED-3 gamma")
    wait_for(pane.idle, timeout=30, what="claude idle after the third answer")
    _keys(pane, "Escape")
    _keys(pane, "Escape")
    _shown(pane, "Rewind", "the rewind selector")
    _keys(pane, "Up")
    _keys(pane, "Enter")
    _shown(pane, "Restore conversation", "the restore choice")
    _keys(pane, "Enter")
    wait_for(lambda: re.search(r"─\n❯\s+GONE-TYPED-3 gamma", pane.capture()), timeout=30,
             what="the rewound prompt back in the input box")
    _keys(pane, "C-u")
    wait_for(lambda: not re.search(r"─\n❯\s+GONE-TYPED-3", pane.capture()), timeout=30,
             what="the input box emptied")
    pane.type_prompt("KEEP-TYPED-4 delta")
    source, session = pane.finish("KEEP-TYPED-4 delta")

    before, result, after = machine.resume_both(fake_api, source, session)
    assert "KEEP-TYPED-4 delta" in before and "GONE-TYPED-3" not in before, before[-2000:]
    assert result["stats"]["read"]["rewound_speech"]["typed"] == 1
    kept = ["KEEP-TYPED-1 alpha", "KEEP-TYPED-2 beta", "KEEP-TYPED-4 delta",
            "echo[2]: KEEP-TYPED-2 beta"]
    assert all(k in after for k in kept) and "GONE-TYPED-3" not in after, after[-2000:]
