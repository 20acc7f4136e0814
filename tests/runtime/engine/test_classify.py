"""runtime.engine.classify: the speech allowlist (SPEC §3.2–3.3), rule by rule, on hand-made
events."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.transcripts import (
    Transcript,
    image,
    slash_text,
    text,
    thinking,
    tool_result,
    tool_use,
)
from tests.runtime.helpers import build, kinds, texts

# -- human speech ----------------------------------------------------------------------------


def test_typed_prompt_as_string_or_blocks_is_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("as a string")
    t.assistant("a")
    t.user([text("first block"), image(), text("second block")])
    built = build(tmp_path, t)
    assert texts(built) == ["as a string", "a", "first block", "second block"]
    assert kinds(built).count("typed") == 3


def test_strip_then_judge_keeps_human_text_after_a_leading_reminder(tmp_path: Path) -> None:
    t = Transcript()
    t.user("<system-reminder>\nThe date changed.\n</system-reminder>\n  keep  my\ttext \n")
    built = build(tmp_path, t)
    assert texts(built) == ["  keep  my\ttext \n"]
    assert built.ledger.noise["injected_block"] > 0


def test_a_message_of_injected_blocks_only_is_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("<ide_opened_file>The user opened a.py</ide_opened_file>")
    t.user(
        "<system-reminder>x</system-reminder><user-prompt-submit-hook>y</user-prompt-submit-hook>"
    )
    t.user("hello")
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]
    assert built.read.ignored_reasons["empty_after_strip"] == 2


def test_lone_tags_go_but_the_surrounding_whitespace_stays(tmp_path: Path) -> None:
    t = Transcript()
    t.user("look here <ide_selection>sel</ide_selection> please\n<system-reminder>tail</heartbeat>")
    built = build(tmp_path, t)
    assert texts(built) == ["look here  please\ntail"]


def test_the_injected_tag_list_is_configuration(tmp_path: Path) -> None:
    t = Transcript()
    t.user("<house-note>internal</house-note>real words")
    t.user("<system-reminder>kept because not listed</system-reminder>")
    built = build(tmp_path, t, injected_tags=["house-note"])
    assert texts(built) == [
        "real words",
        "<system-reminder>kept because not listed</system-reminder>",
    ]


def test_channel_message_with_channel_envelope_is_speech_and_keeps_the_envelope(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.channel("from my phone", origin=False)
    built = build(tmp_path, t)
    assert texts(built) == ['<channel source="companion" chat_id="42">\nfrom my phone\n</channel>']
    assert kinds(built) == ["channel"]


def test_channel_envelope_after_an_injected_reminder_is_still_a_channel_message(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.meta(
        '<system-reminder>r</system-reminder>\n<channel source="tg" chat_id="1">\nhi\n</channel>'
    )
    built = build(tmp_path, t)
    assert texts(built) == ['<channel source="tg" chat_id="1">\nhi\n</channel>']
    assert kinds(built) == ["channel"]


def test_channel_message_with_origin_kind_channel_is_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("pushed text without envelope", isMeta=True, origin={"kind": "channel", "server": "c"})
    built = build(tmp_path, t)
    assert kinds(built) == ["channel"]


def test_a_channel_message_not_marked_meta_still_counts_as_channel(tmp_path: Path) -> None:
    t = Transcript()
    t.user('<channel source="companion">\nhi\n</channel>')
    t.user("typed", origin={"kind": "human"})
    built = build(tmp_path, t)
    assert kinds(built) == ["channel", "typed"]


def test_channel_message_lands_once_despite_queue_operation_echoes(tmp_path: Path) -> None:
    t = Transcript()
    t.channel("ping")
    t.assistant("pong")
    built = build(tmp_path, t)
    assert kinds(built) == ["channel", "assistant_text"]
    assert built.read.ignored_types["queue-operation"] == 2


def test_queued_prompt_lands_exactly_once_from_the_attachment(tmp_path: Path) -> None:
    t = Transcript()
    t.user("run the tests")
    t.tool_round()
    t.queued("typed while you were busy")
    t.assistant("done, and noted")
    built = build(tmp_path, t)
    assert texts(built) == ["run the tests", "typed while you were busy", "done, and noted"]
    assert kinds(built) == ["typed", "queued", "assistant_text"]


def test_queued_prompt_without_command_mode_or_as_blocks_is_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.queued("no mode", mode=None)
    t.queued([text("<system-reminder>r</system-reminder>as blocks")])
    built = build(tmp_path, t)
    assert texts(built) == ["no mode", "as blocks"]


def test_queued_task_notification_is_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.queued("<task-notification>done</task-notification>", mode="task-notification")
    t.user("hello")
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]


def test_slash_command_with_args_is_carried_when_the_model_answers(tmp_path: Path) -> None:
    t = Transcript()
    t.user(slash_text("/orchestrator", "create TODO app by Next.js"))
    t.meta("Split complex tasks into independent subtasks (the expanded command body)")
    t.assistant("I'll create the TODO app.")
    built = build(tmp_path, t)
    assert texts(built) == ["/orchestrator create TODO app by Next.js", "I'll create the TODO app."]
    assert kinds(built) == ["slash", "assistant_text"]


@pytest.mark.parametrize("said", [
    "why does the log show <command-name>/orchestrator</command-name> and not my request?",
    slash_text("/orchestrator", "create TODO app") + "\nand keep the blue door",
])
def test_command_tags_quoted_beside_human_words_are_typed_text_not_a_slash_command(
    tmp_path: Path, said: str,
) -> None:
    """Claude Code writes a slash command as its tags alone; the words beside quoted tags were
    lost (carried as ``/orchestrator``), and the audit, matching one item per line, agreed."""
    t = Transcript()
    t.user(said)
    t.assistant("Those are Claude Code's command tags.")
    built = build(tmp_path, t)
    assert kinds(built) == ["typed", "assistant_text"]
    kept = texts(built)[0]
    assert ("why does the log show" in kept) or ("and keep the blue door" in kept)
    assert "<command-name>" not in kept  # the tags are still injected blocks (SPEC §3.3)
    assert built.blocked_reason is None


def test_slash_command_answered_by_tool_calls_only_is_still_carried(tmp_path: Path) -> None:
    t = Transcript()
    t.user(slash_text("/review"))
    t.assistant(thinking())
    t.tool_round()
    built = build(tmp_path, t)
    assert texts(built) == ["/review"]


def test_local_slash_command_with_stdout_is_dropped(tmp_path: Path) -> None:
    t = Transcript()
    t.meta("<local-command-caveat>Caveat: local commands below</local-command-caveat>")
    t.user(slash_text("/model", "opus"))
    t.user("<local-command-stdout>Set model to opus</local-command-stdout>")
    t.user("hello")
    t.assistant("hi")
    built = build(tmp_path, t)
    assert texts(built) == ["hello", "hi"]
    assert built.stats()["slash_commands"]["local_dropped"] == 1


def test_slash_command_followed_by_human_text_before_any_reply_is_dropped(tmp_path: Path) -> None:
    t = Transcript()
    t.user(slash_text("/clear"))
    t.user("new topic")
    t.assistant("sure")
    built = build(tmp_path, t)
    assert texts(built) == ["new topic", "sure"]


def test_slash_command_still_unanswered_at_the_end_is_dropped_and_counted(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.user(slash_text("/exit"))
    built = build(tmp_path, t)
    assert texts(built) == ["hello", "hi"]
    assert built.stats()["slash_commands"]["unanswered_dropped"] == 1


@pytest.mark.parametrize(
    "said",
    [
        "[Request interrupted by user]",
        "[Request interrupted by user for tool use]",
        "<bash-input>ls</bash-input>",
        "<bash-stdout>a.txt</bash-stdout><bash-stderr></bash-stderr>",
        "<local-command-stdout>Compacted</local-command-stdout>",
        "<task-notification>\n<task-id>a1</task-id>\n</task-notification>",
    ],
)
def test_runtime_markers_are_not_speech(tmp_path: Path, said: str) -> None:
    t = Transcript()
    t.user("hello")
    t.user(said)
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]


def test_stop_hook_feedback_and_skill_bodies_are_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.meta("Stop hook feedback:\n[/srv/hooks/exit.sh 2]: stderr from exit2 hook\n")
    t.meta("Base directory for this skill: /x\n\n# Skill\n" + "body " * 1000)
    built = build(tmp_path, t)
    assert texts(built) == ["hello", "hi"]
    assert built.ledger.noise["meta_injection"] > 5000


def test_task_notification_origin_is_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.user("agent a1 finished", origin={"kind": "task-notification"})
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]


def test_tool_results_and_sidechain_lines_are_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.user([tool_result("out"), text("text next to a tool result")])
    t.user("subagent prompt", isSidechain=True)
    t.assistant("subagent answer", isSidechain=True)
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]
    assert built.read.ignored_reasons["sidechain"] == 2


def test_words_said_on_a_voice_call_are_human_speech_carried_as_claude_code_stores_them(
    tmp_path: Path,
) -> None:
    """Claude Code 2.1.328 stores them as ``voice_call_talk`` system lines; verbatim (tags and
    all: Claude Code sends the content as it is), their origin kept, no time stamp added."""
    t = Transcript()
    t.voice("<b>said</b> aloud: call me at noon", origin={"kind": "voice-call", "requestUuid": "r"})
    t.assistant("noon it is")
    t.voice("and bring the key", fold={"command": {"commandMode": "prompt"}, "rendered": None})
    t.assistant("key noted")
    built = build(tmp_path, t)
    assert texts(built) == ["<b>said</b> aloud: call me at noon", "noon it is",
                            "and bring the key", "key noted"]
    assert kinds(built) == ["voice", "assistant_text", "voice", "assistant_text"]
    first = built.items[0]
    assert (first["type"], first["subtype"], first["isMeta"], first["msgV"]) == (
        "system", "voice_call_talk", True, 1)
    assert first["origin"] == {"kind": "voice-call", "requestUuid": "r"}
    assert "fold" not in built.items[2] and "message" not in first
    assert [e.stamp for e in built.manifest] == [None, None, None, None]
    assert built.counts["source"]["voice"] == built.counts["candidate"]["voice"] == 2
    assert built.ledger.conversation_bytes > 0 and built.ledger.noise.get("system", 0) == 0


def test_a_voice_line_that_keeps_its_block_list_carries_the_words_of_its_text_blocks(
    tmp_path: Path,
) -> None:
    """Claude Code stores a voice message that was a block list with ``content`` = its text
    blocks' texts joined by newlines and the list as ``blocks`` (which its loader sends): the
    words are carried as that content; the image is noise as everywhere, no ``blocks`` is
    written (a written list would be sent instead of the verified content)."""
    t = Transcript()
    t.voice([{"type": "text", "text": "the gate code"},
             {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
             {"type": "text", "text": "is 4471"}])
    t.assistant("noted")
    built = build(tmp_path, t)
    assert texts(built) == ["the gate code\nis 4471", "noted"]
    assert kinds(built) == ["voice", "assistant_text"]
    assert "blocks" not in built.items[0] and built.items[0]["content"] == "the gate code\nis 4471"


@pytest.mark.parametrize(
    "extra",
    [{"origin": None}, {"origin": {"kind": "channel"}}, {"content": ["a list"]},
     {"content": " \n "}, {"fold": None}, {"fold": {"rendered": None}},
     {"fold": {"command": "prompt"}}, {"isSidechain": True}],
    ids=["no origin", "another origin", "content not a string", "blank", "fold null",
         "fold without command", "fold command not an object", "sidechain"],
)
def test_a_voice_line_claude_code_keeps_as_a_system_row_is_not_speech(
    tmp_path: Path, extra: dict[str, object]
) -> None:
    """Where Claude Code's loader (``iyr``) leaves the line a system row, the model never sees
    it: it is not speech here either (the independent audit still looks at its words)."""
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.voice("said on a call", **extra)
    built = build(tmp_path, t)
    assert kinds(built) == ["typed", "assistant_text"]
    assert built.counts["source"]["voice"] == 0


@pytest.mark.parametrize(
    "blocks",
    [[{"type": "text", "text": "said on a call, and more"}],
     [{"type": "text", "text": "said on a call"}, {"type": "text", "text": None}]],
    ids=["other words", "a text that is not a string"],
)
def test_a_voice_line_whose_blocks_are_not_its_content_is_not_carried(
    tmp_path: Path, blocks: list[object]
) -> None:
    """Claude Code sends the kept ``blocks``, not ``content``: where the content is not what
    it makes of them, carrying the content would carry other words than the model was sent.
    Not carried here; the independent audit blocks the rebuild on it (test_audit)."""
    t = Transcript()
    t.user("hello")
    t.assistant("hi")
    t.voice("said on a call", blocks=blocks)
    built = build(tmp_path, t)
    assert kinds(built) == ["typed", "assistant_text"]
    assert built.counts["source"]["voice"] == 0


# -- assistant speech ------------------------------------------------------------------------


def test_assistant_text_split_over_lines_sharing_a_message_id_is_all_carried(
    tmp_path: Path,
) -> None:
    t = Transcript()
    t.user("explain")
    t.assistant(thinking(), message_id="msg_1")
    t.assistant("part one", message_id="msg_1")
    t.assistant(tool_use(), message_id="msg_1")
    t.assistant("part two", message_id="msg_1")
    built = build(tmp_path, t)
    assert texts(built) == ["explain", "part one", "part two"]
    assert [i["message"]["id"] for i in built.items[1:]] == ["msg_1", "msg_1"]


def test_api_errors_synthetic_and_thinking_only_lines_are_not_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant("API Error: 529 overloaded", isApiErrorMessage=True)
    t.assistant("No response requested.", model="<synthetic>")
    t.assistant(thinking("only thinking"))
    t.assistant(text(""), text("   \n"))
    built = build(tmp_path, t)
    assert texts(built) == ["hello"]


def test_channel_reply_tool_is_assistant_speech(tmp_path: Path) -> None:
    t = Transcript()
    t.channel("how are you?")
    reply = {"chat_id": "42", "text": "fine, thanks"}
    t.assistant(tool_use("mcp__plugin_telegram_telegram__reply", reply))
    t.assistant(tool_use("mcp__companion__reply", {"text": "also here"}))
    t.assistant(tool_use("mcp__companion__send", {"text": "not a reply tool"}))
    built = build(tmp_path, t)
    assert texts(built)[1:] == ["fine, thanks", "also here"]
    assert kinds(built) == ["channel", "channel_reply", "channel_reply"]


def test_reply_tool_pattern_argument_and_chat_ids_are_configurable(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant(tool_use("mcp__slack__post", {"channel": "7", "message": "to seven"}))
    t.assistant(tool_use("mcp__slack__post", {"chat_id": "7", "message": "allowed chat"}))
    t.assistant(tool_use("mcp__slack__post", {"chat_id": 8, "message": "other chat"}))
    built = build(
        tmp_path,
        t,
        reply_tool_pattern="^mcp__slack__post$",
        reply_tool_argument="message",
        reply_chat_ids=["7"],
    )
    assert texts(built) == ["hello", "allowed chat"]


def test_speech_tools_carry_the_argument_at_their_path(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.assistant(tool_use("mcp__x__relay", {"payload": {"text": "a long relayed message"}}))
    t.assistant(tool_use("mcp__x__relay", {"payload": {"other": 1}}))
    built = build(tmp_path, t, speech_tools=[{"name": "mcp__x__relay", "path": "payload.text"}])
    assert texts(built) == ["hello", "a long relayed message"]
    assert kinds(built) == ["typed", "speech_tool"]
