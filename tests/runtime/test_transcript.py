"""runtime.transcript: input checks, streaming reader, speech allowlist (SPEC §3.1–3.3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.config import Config
from runtime.errors import OutsideProjectError, TranscriptError
from runtime.transcript import resolve_transcript, scan
from tests.conftest import REPO
from tests.fixtures.transcripts import (
    Transcript,
    image,
    slash_text,
    text,
    thinking,
    tool_result,
    tool_use,
)
from tests.runtime.helpers import build, config, kinds, texts

# -- input checks ----------------------------------------------------------------------------


def test_missing_transcript_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match=r"'.*nope\.jsonl' not found"):
        resolve_transcript(tmp_path / "nope.jsonl", Config())


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(TranscriptError, match="is a directory"):
        resolve_transcript(tmp_path / "dir.jsonl", Config())


def test_a_file_not_ending_in_jsonl_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("{}\n")
    with pytest.raises(TranscriptError, match=r"notes\.txt' is not a \.jsonl file"):
        resolve_transcript(tmp_path / "notes.txt", Config())


def test_a_path_outside_project_dir_is_refused_when_configured(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "other.jsonl"
    elsewhere.write_text("{}\n")
    with pytest.raises(OutsideProjectError, match="outside project_dir"):
        resolve_transcript(elsewhere, Config(project_dir=project))


def test_a_symlink_inside_project_dir_pointing_outside_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    target = tmp_path / "secret.jsonl"
    target.write_text("{}\n")
    link = project / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(OutsideProjectError, match="is a symlink to .*secret.jsonl"):
        resolve_transcript(link, Config(project_dir=project))


def test_a_symlink_to_a_non_jsonl_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    link = tmp_path / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(TranscriptError, match="not a .jsonl file"):
        resolve_transcript(link, Config())


def test_a_dangling_symlink_is_reported_as_such(tmp_path: Path) -> None:
    link = tmp_path / "s.jsonl"
    link.symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(TranscriptError, match="dangling symlink"):
        resolve_transcript(link, Config())


def test_a_file_inside_project_dir_resolves_to_its_real_path(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    real = project / "a.jsonl"
    real.write_text("{}\n")
    (project / "b.jsonl").symlink_to(real)
    assert resolve_transcript(project / "b.jsonl", Config(project_dir=project)) == real


def test_an_unreadable_transcript_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.jsonl"
    path.write_text('{"type": "user"}\n')
    path.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(TranscriptError, match="cannot be read: Permission denied"):
            resolve_transcript(path, Config())
        return
    # root reads everything: run the real CLI without the capabilities that bypass file modes
    argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    done = subprocess.run(
        [*argv, sys.executable, "-m", "runtime.cli", "plan", "--transcript", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"tl-rebuild: error: transcript '{path}' cannot be read: Permission denied"
    )


# -- the reader ------------------------------------------------------------------------------


def test_malformed_and_partial_lines_are_counted_and_reported(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b'{"type": "user", "message": ')
    t.assistant("hi")
    t.raw_line(b'{"type": "assistant", "mess')
    path = t.write(tmp_path / "s.jsonl", trailing_newline=False)
    stats, ledger = scan(path, config().rebuild)
    assert stats.malformed == 2
    assert stats.malformed_lines == [2, 4]
    assert stats.partial_tail is True
    assert ledger.malformed_bytes == len(b'{"type": "user", "message": \n') + len(
        b'{"type": "assistant", "mess'
    )


def test_a_line_that_is_not_utf8_is_malformed_and_counted(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b'{"type": "user", "message": {"content": "caf\xe9"}}')
    t.assistant("hi")
    built = build(tmp_path, t)
    assert built.read.malformed == 1
    assert built.read.malformed_non_utf8 == 1
    assert texts(built) == ["hello", "hi"]


def test_a_file_of_binary_junk_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(TranscriptError, match=r"junk\.jsonl' is not a JSONL transcript"):
        scan(path, config().rebuild)


def test_json_values_that_are_not_objects_are_malformed(tmp_path: Path) -> None:
    t = Transcript()
    t.raw([1, 2])
    t.raw("user")
    t.user("hello")
    built = build(tmp_path, t)
    assert built.read.malformed == 2
    assert texts(built) == ["hello"]


def test_unknown_event_types_are_counted_by_type_and_never_crash(tmp_path: Path) -> None:
    t = Transcript()
    t.raw({"type": "brand-new-thing", "payload": {"x": 1}})
    t.raw({"type": "brand-new-thing"})
    t.raw({"no": "type"})
    t.raw({"type": "user", "message": "not a dict"})
    t.raw({"type": "assistant", "message": {"content": 42}})
    t.user("hello")
    built = build(tmp_path, t)
    assert built.read.ignored_types["brand-new-thing"] == 2
    assert built.read.ignored_types["(no type)"] == 1
    assert built.ledger.other_by_type["brand-new-thing"] > 0
    assert texts(built) == ["hello"]


def test_blank_lines_are_skipped_not_malformed(tmp_path: Path) -> None:
    t = Transcript()
    t.user("hello")
    t.raw_line(b"")
    t.raw_line(b"   ")
    built = build(tmp_path, t)
    assert built.read.malformed == 0
    assert built.read.blank_lines == 2


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
