"""The harness itself, proven against the real Claude Code CLI 2.1.328 and the fake model.

Each test checks one thing the scenarios rely on: typed prompts, channel pushes, channel replies,
tool calls with big output, prompts typed while busy, the Stop hook, ``--continue`` starts.
"""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import CHANNEL_NAME, ClaudePane, Machine, encode_cwd
from tests.e2e.oracle import channel_user_events, speech_events
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]


def nonce(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def test_encode_cwd_replaces_every_non_alphanumeric_character() -> None:
    assert encode_cwd("/srv/wo.rk_x y") == "-srv-wo-rk-x-y"


def test_prepared_machine_registers_the_channel_server_through_the_real_cli(
        machine: Machine) -> None:
    config = json.loads(machine.user_config.read_text())
    server = config["mcpServers"][CHANNEL_NAME]
    assert server["type"] == "stdio"
    assert str(machine.spool) in server["args"]
    assert config["hasCompletedOnboarding"] is True
    shown = machine.run_claude(["mcp", "get", CHANNEL_NAME], timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "User config" in shown.stdout or "user" in shown.stdout.lower()


def test_typed_prompt_reaches_the_fake_model_with_the_pane_session_id(
        pane: ClaudePane, fake_api: FakeApi) -> None:
    session_id = pane.start(pane.launch_argv())
    text = nonce("typed")
    pane.type_prompt(f"hello {text}")

    request = fake_api.wait_for_text(text, timeout=60)

    assert request.session_id == session_id
    assert pane.session_record(pane.pane_pid())["cwd"] == str(pane.machine.workdir)
    wait_for(lambda: any(text in json.dumps(e) for e in speech_events(pane.transcript())),
             timeout=30, what="the typed prompt in the transcript")


def test_pushed_channel_message_reaches_the_next_request_as_a_channel_event(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine) -> None:
    session_id = pane.start(pane.launch_argv())
    text = nonce("chan")

    machine.push_channel(f"channel says {text}")
    request = fake_api.wait_for_text(text, timeout=60, session_id=session_id)

    assert f'<channel source="{CHANNEL_NAME}"' in request.joined()
    events = wait_for(lambda: [e for e in channel_user_events(machine.transcript(session_id))
                               if text in json.dumps(e)],
                      timeout=30, what="the channel event in the transcript")
    assert events[0]["isMeta"] is True  # type: ignore[index]
    pushed = machine.channel_events("pushed")
    assert [e["ppid"] for e in pushed] == [pane.pane_pid()]


def test_channel_reply_tool_call_is_recorded_by_the_channel_server(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine) -> None:
    answer = nonce("answer")
    fake_api.add_cue(Cue("PLEASE-REPLY", f"mcp__{CHANNEL_NAME}__reply", {"text": answer},
                         after_text="replied on the channel"))
    session_id = pane.start(pane.launch_argv())

    machine.push_channel("PLEASE-REPLY to me")

    replies = wait_for(machine.replies, timeout=60, what="a reply through the channel tool")
    assert replies[0]["text"] == answer  # type: ignore[index]
    fake_api.wait_for_text("sent", timeout=30, session_id=session_id)


def test_bash_tool_with_big_output_runs_without_a_permission_dialog(
        pane: ClaudePane, fake_api: FakeApi) -> None:
    marker = nonce("bigout")
    command = f"python3 -c \"print('{marker} ' + 'x' * 60000)\""
    fake_api.add_cue(Cue("RUN-BIG", "Bash", {"command": command, "description": "big output"}))
    session_id = pane.start(pane.launch_argv())

    pane.type_prompt("please RUN-BIG now")

    fake_api.wait_for_text(marker, timeout=60, session_id=session_id)
    results = wait_for(lambda: [e for e in speech_events(pane.transcript())
                                if '"tool_result"' in json.dumps(e) and marker in json.dumps(e)],
                       timeout=30, what="the tool result in the transcript")
    assert len(json.dumps(results)) > 20000  # a big result: 2.1.328 keeps ~30 KB of 60 KB
    wait_for(lambda: any("tool-done: Bash" in json.dumps(e)
                         for e in speech_events(pane.transcript())),
             timeout=30, what="the assistant's answer after the tool result")


def test_prompt_typed_while_the_assistant_is_busy_reaches_a_later_request(
        pane: ClaudePane, fake_api: FakeApi) -> None:
    release = threading.Event()
    fake_api.add_cue(Cue("SLOW-ONE", "", hold=release, hold_timeout=60))
    pane.start(pane.launch_argv())
    busy = nonce("busy")

    pane.type_prompt("first SLOW-ONE")
    first = fake_api.wait_for_text("SLOW-ONE", timeout=60)
    pane.type_prompt(f"typed while {busy}")
    release.set()

    later = fake_api.wait_for_text(busy, after=first.index, timeout=60)
    assert "SLOW-ONE" in later.joined()


def test_stop_hook_from_settings_fires_with_the_session_and_transcript(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine) -> None:
    session_id = pane.start(pane.launch_argv())
    pane.type_prompt(f"a turn {nonce('stop')}")

    calls = wait_for(machine.stop_hook_calls, timeout=60, what="a Stop hook call")

    payload = calls[0]["payload"]  # type: ignore[index]
    assert payload["hook_event_name"] == "Stop"
    assert payload["session_id"] == session_id
    assert payload["transcript_path"] == str(machine.transcript(session_id))
    assert payload["cwd"] == str(machine.workdir)


def test_continue_start_carries_the_conversation_and_hears_the_channel(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine) -> None:
    first_session = pane.start(pane.launch_argv())
    before = nonce("before")
    pane.type_prompt(f"remember {before}")
    fake_api.wait_for_text(before, timeout=60)
    wait_for(lambda: len(machine.stop_hook_calls()) >= 1, timeout=30, what="the first Stop")
    old_pid = pane.pane_pid()

    continued = pane.respawn(pane.launch_argv(continue_=True))
    after = nonce("after")
    pane.type_prompt(f"and now {after}")
    request = fake_api.wait_for_text(after, timeout=60)
    machine.push_channel(f"still hearing {nonce('ping')}")
    fake_api.wait_for_text("still hearing", after=request.index, timeout=60)

    assert pane.pane_pid() != old_pid
    assert before in request.joined()
    assert request.session_id == continued == first_session  # --continue appends to it
    assert pane.accepted_warnings == 2



def test_resume_start_reports_the_resumed_session_id(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine) -> None:
    first_session = pane.start(pane.launch_argv())
    said = nonce("said")
    pane.type_prompt(f"note {said}")
    fake_api.wait_for_text(said, timeout=60)
    wait_for(lambda: len(machine.stop_hook_calls()) >= 1, timeout=30, what="the first Stop")

    resumed = pane.respawn(pane.launch_argv(resume=first_session))
    pane.type_prompt("next")
    request = fake_api.wait_for_request(
        lambda r: r.is_conversation and r.session_id == first_session and "next" in r.joined()
        and said in r.joined(), timeout=60, what="the resumed session's request")

    assert resumed == first_session
    assert request.session_id == first_session
