"""Scenario 1: a full rebuild through the tmux door, with the real Claude Code CLI 2.1.328.

Interactive ``claude --continue --dangerously-load-development-channels server:companion`` runs in a
private tmux pane. The conversation has typed prompts, a prompt typed while the assistant is
busy, channel messages, a channel reply and a tool call with a big result. The model (the fake
API) calls ``thread_rebuild_request`` through the real ``tl-rebuild mcp``; the real Stop hook
(``tl-rebuild hook-stop`` in settings.json) starts the worker, which respawns the pane on the
rebuilt session. Then the new process must carry every utterance (by the tests' own reading of
the old transcript), none of the tool output, and still hear the channel.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import (
    CHANNEL_FLAGS,
    CHANNEL_NAME,
    ClaudePane,
    Machine,
    install_threadline,
)
from tests.e2e.oracle import independent_utterances, normalized, read_jsonl
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]

TL_REBUILD = Path(sys.executable).with_name("tl-rebuild")
TL_PROVISION = Path(sys.executable).with_name("tl-provision")
REPLY_TOOL_PATTERN = f"^mcp__{CHANNEL_NAME}__reply$"
REPLY_TEXT = "reply through the channel"
PHASES = ("created", "scheduled", "worker_started", "stable", "frozen", "identity", "built",
          "verified", "switched", "health", "activated", "watch_ended")
TERMINAL = ("activated", "failed", "cancelled", "rolled_back", "session_conflict")


def tl(config: Path, *args: str) -> Any:
    done = subprocess.run([str(TL_REBUILD), *args, "--config", str(config), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wait_terminal(config: Path, timeout: float = 90.0,
                  states: tuple[str, ...] = TERMINAL) -> dict[str, Any]:
    """Wait until the newest operation is in one of ``states`` (``activated``: and its worker
    has ended the watch after activation); return its status."""
    def settled() -> dict[str, Any] | None:
        operations = tl(config, "list")
        if operations and operations[0]["state"] in states:
            op = tl(config, "status", "--operation", operations[0]["operation_id"])
            if op["state"] in states and (op["state"] != "activated" or any(
                    e["phase"] == "watch_ended" for e in op["events"])):
                return op
        return None
    return wait_for(settled, timeout=timeout, interval=0.2,  # type: ignore[return-value]
                    what="the rebuild operation to end")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def converse(pane: ClaudePane, fake_api: FakeApi, machine: Machine, tool_marker: str) -> None:
    """A conversation with every kind of speech and a tool call with a big result."""
    release = threading.Event()
    fake_api.add_cue(Cue("SLOW-ONE", "", hold=release, hold_timeout=60))
    fake_api.add_cue(Cue("RUN-BIG", "Bash", {
        "command": f"python3 -c \"print('{tool_marker} ' + 'z' * 40000)\"",
        "description": "a big output"}, after_text="the big output was seen"))
    fake_api.add_cue(Cue("PLEASE-REPLY", f"mcp__{CHANNEL_NAME}__reply",
                         {"text": REPLY_TEXT}, after_text="replied"))
    word = uuid.uuid4().hex[:6]
    pane.type_prompt(f"typed one {word}")
    fake_api.wait_for_text(f"typed one {word}")
    pane.type_prompt(f"typed two SLOW-ONE {word}")
    busy = fake_api.wait_for_text(f"typed two SLOW-ONE {word}")
    pane.type_prompt(f"typed while busy {word}")
    release.set()
    fake_api.wait_for_text(f"typed while busy {word}", after=busy.index)
    machine.push_channel(f"channel hello {word}")
    fake_api.wait_for_text(f"channel hello {word}")
    machine.push_channel(f"PLEASE-REPLY on the channel {word}")
    wait_for(machine.replies, timeout=60, what="the channel reply")
    pane.wait_said("replied")
    pane.type_prompt(f"now RUN-BIG {word}")
    pane.wait_said("the big output was seen")
    gate, started = machine.root / "gate", machine.root / "tool-started"
    fake_api.add_cue(Cue("RUN-WAIT", "Bash", {
        "command": f"touch '{started}'; python3 -c \"import os,time; t=time.time()\n"
                   f"while not os.path.exists('{gate}') and time.time()-t<60: time.sleep(0.05)\"",
        "description": "wait for the gate"}, after_text="the gate opened"))
    pane.type_prompt(f"now RUN-WAIT {word}")
    wait_for(started.exists, timeout=60, what="the tool run to start")
    pane.type_prompt(f"typed during the tool run {word}")
    gate.touch()
    pane.wait_said("the gate opened")


def provision_and_launch(pane: ClaudePane, fake_api: FakeApi, machine: Machine, root: Path,
                         deaf: bool = False) -> tuple[Path, str]:
    """claude running its launch argv in the pane, threadline installed by a real apply.

    The first start has nothing to ``--continue``; the pane then runs the real launch argv
    (``--continue`` + channel flags), apply introspects it, and claude is restarted so it loads
    the Stop hook and the MCP server. ``deaf``: the rendered resume argv is hand-edited to lose
    the channel flags. Returns the config path and the session id.
    """
    fake_api.add_cue(Cue("PLEASE-REBUILD", "mcp__threadline__thread_rebuild_request",
                         {"reason": "tool noise", "confirmation": "REBUILD"},
                         after_text="rebuild registered; it happens after this turn"))
    fake_api.add_cue(Cue("PLEASE-ROLLBACK", "mcp__threadline__thread_rebuild_rollback_request",
                         lambda text: {"operation_id": text.split("PLEASE-ROLLBACK ")[1].split()[0],
                                       "confirmation": "ROLLBACK"},
                         after_text="rollback registered"))
    pane.start(pane.launch_argv())
    pane.type_prompt("the first words")
    pane.wait_said("echo[")
    pane.respawn(pane.launch_argv(continue_=True))
    config = install_threadline(machine, pane, root / "install",
                                rebuild={"reply_tool_pattern": REPLY_TOOL_PATTERN})
    if deaf:
        flags = ", " + ", ".join(json.dumps(f) for f in CHANNEL_FLAGS) + "]"
        lines = [line.replace(flags, "]") if line.startswith("resume_argv") else line
                 for line in config.read_text().splitlines()]
        config.write_text("\n".join(lines) + "\n")
    session = pane.respawn(pane.launch_argv(continue_=True))
    return config, session  # from here on only the product respawns (and confirms the warning)


def test_full_rebuild_through_the_tmux_door_carries_everything_and_keeps_the_channel(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path) -> None:
    config, old_session = provision_and_launch(pane, fake_api, machine, tmp_path)
    tool_marker = f"TOOLOUT-{uuid.uuid4().hex[:8]}"
    converse(pane, fake_api, machine, tool_marker)
    old_pid = pane.pane_pid()

    pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)

    assert op["state"] == "activated", (op.get("failure"), pane.capture()[-1500:])
    assert op["bound_session_id"] == old_session
    new_session = op["facts"]["new_session_id"]
    new_pid = pane.pane_pid()
    assert new_pid != old_pid
    pane.pids.add(new_pid)
    old = machine.transcript(old_session)
    backup = Path(op["facts"]["backup"])
    assert sha256(backup) == op["facts"]["source_sha256"]
    # The old transcript is never rewritten: the frozen copy is a byte-prefix of it. The killed
    # claude itself appends bookkeeping lines on exit (2.1.328: last-prompt, cost-state), never
    # speech.
    old_bytes = old.read_bytes()
    assert old_bytes.startswith(backup.read_bytes())
    appended = [json.loads(line) for line in old_bytes[backup.stat().st_size:].splitlines()]
    assert not [e["type"] for e in appended if e.get("type") in ("user", "assistant")]
    wait_for(lambda: pane.channel_listening(new_pid), timeout=30, what="the new channel server")
    start = fake_api.last_index
    pane.type_prompt("after the switch")
    first = fake_api.wait_for_text("after the switch", after=start, timeout=60)
    assert first.session_id == new_session
    seen = normalized(first.joined())
    queued = [e for e in read_jsonl(old) if (e.get("attachment") or {}).get("type")
              == "queued_command"]
    assert any("typed during the tool run" in str(e["attachment"].get("prompt")) for e in queued)
    missing = [u for u in independent_utterances(old) if normalized(u) not in seen]
    assert missing == []
    assert REPLY_TEXT in first.joined()  # the channel reply is speech (reply_tool_pattern)
    assert tool_marker not in first.joined()
    probe = f"channel after switch {uuid.uuid4().hex[:6]}"
    machine.push_channel(probe)
    heard = fake_api.wait_for_text(probe, after=first.index, timeout=60)
    assert heard.session_id == new_session
    health = next(e for e in op["events"] if e["phase"] == "health")
    assert health["ok"] is True and health["warnings_confirmed"] >= 1  # by the product
    phases = [event["phase"] for event in op["events"]]
    assert [p for p in phases if p in PHASES] == list(PHASES), phases
    at = {e["phase"]: datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
          for e in op["events"]}
    switched = (at["switched"] - at["scheduled"]).total_seconds()
    activated = (at["activated"] - at["scheduled"]).total_seconds()
    watched = next(e for e in op["events"] if e["phase"] == "watch_ended")
    assert watched["outcome"] == "held", watched  # alive with its channel through the watch
    print(f"\nswitch latency: Stop->switched {switched:.2f}s, Stop->activated {activated:.2f}s "
          "(positive evidence held activation_stable_seconds)")


def test_resume_argv_without_the_channel_flag_is_refused_and_the_old_session_resumed(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path) -> None:
    config, old_session = provision_and_launch(pane, fake_api, machine, tmp_path,
                                               deaf=True)
    machine.push_channel("channel before the rebuild")
    fake_api.wait_for_text("channel before the rebuild")
    pane.wait_said("echo[")

    pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)

    assert op["state"] == "rolled_back", op
    assert op["failure"]["code"] == "unhealthy"
    assert "missing channel flag(s) '--dangerously-load-development-channels server:companion'" \
        in op["failure"]["message"]
    health = next(e for e in op["events"] if e["phase"] == "health")
    assert health["ok"] is False
    assert health["channel_servers"][CHANNEL_NAME]  # the server was spawned: deaf, not absent
    drift = subprocess.run([str(TL_PROVISION), "drift", str(config.parents[1] / "host.yml"),
                            "--json"], env=machine.env, capture_output=True, text=True,
                           timeout=120)
    assert drift.returncode == 1, drift.stdout + drift.stderr
    # Drift names the hand-edited config; the launch command itself is unchanged (the old
    # session runs again with its own argv, channel flags included).
    checks = {f["check"] for f in json.loads(drift.stdout)["findings"]}
    assert f"managed file edited: {config}" in checks, checks
    assert "resume argv stale" not in checks, checks
    wait_for(lambda: (pane.session_record() or {}).get("sessionId") == old_session,
             timeout=60, what="the pane to run the old session again")
    pane.pids.add(pane.pane_pid())
    start = fake_api.last_index
    pane.type_prompt("typed after the refusal")
    request = fake_api.wait_for_text("typed after the refusal", after=start, timeout=60)
    assert request.session_id == old_session
    # The old session was resumed with the old process's own argv: it still hears the channel.
    resumed = next(e for e in op["events"] if e["phase"] == "resumed_old")
    assert resumed["argv_source"] == "old_process"
    assert all(flag in resumed["argv"] for flag in CHANNEL_FLAGS), resumed["argv"]
    wait_for(lambda: pane.channel_listening(), timeout=30, what="a channel server to listen")
    start = fake_api.last_index
    probe = f"channel after the refusal {uuid.uuid4().hex[:6]}"
    machine.push_channel(probe)
    heard = fake_api.wait_for_text(probe, after=start, timeout=30)
    assert heard.session_id == old_session
    assert op["facts"]["resumed_healthy"] is True


def test_rollback_through_the_mcp_tool_brings_the_old_session_back(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path) -> None:
    config, old_session = provision_and_launch(pane, fake_api, machine, tmp_path)
    pane.type_prompt("please PLEASE-REBUILD now")
    op = wait_terminal(config)
    assert op["state"] == "activated", op.get("failure")
    new_session = op["facts"]["new_session_id"]
    wait_for(lambda: (pane.session_record() or {}).get("sessionId") == new_session,
             timeout=60, what="the pane to run the new session")
    switched_pid = pane.pane_pid()
    pane.pids.add(switched_pid)
    pane.type_prompt(f"said in the new session {uuid.uuid4().hex[:6]}")
    pane.wait_said("said in the new session")

    pane.type_prompt(f"please PLEASE-ROLLBACK {op['operation_id']} now")
    back = wait_terminal(config, states=("rolled_back", "failed"))

    assert back["state"] == "rolled_back", back.get("failure")
    assert back["facts"]["turns_since_switch"] >= 1  # reported before rolling back
    fake_api.wait_for_text("in the new session since the switch", timeout=30)
    assert pane.pane_pid() != switched_pid
    wait_for(lambda: (pane.session_record() or {}).get("sessionId") == old_session,
             timeout=60, what="the pane to run the old session again")
    pane.pids.add(pane.pane_pid())
    start = fake_api.last_index
    pane.type_prompt("back in the old session")
    request = fake_api.wait_for_text("back in the old session", after=start, timeout=60)
    assert request.session_id == old_session


def test_third_party_respawn_between_prepare_and_switch_fails_with_session_conflict(
        pane: ClaudePane, fake_api: FakeApi, machine: Machine, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    machine.env["THREADLINE_WORKER_FAULT"] = f"pause:verified:{gate}"  # the worker's own hook
    config, old_session = provision_and_launch(pane, fake_api, machine, tmp_path)
    pane.type_prompt("please PLEASE-REBUILD now")
    reached = Path(f"{gate}.reached")
    wait_for(reached.exists, timeout=60, what="the worker to pause after verification")

    third_party = pane.respawn(pane.launch_argv(resume=old_session))
    third_pid = pane.pane_pid()
    gate.touch()
    op = wait_terminal(config)

    assert third_party == old_session
    assert op["state"] == "failed", op
    # The killed claude appends last-prompt/cost-state to the old transcript on exit; the
    # recheck looks at the pane identity first, so the reason is the third party, not that.
    assert op["failure"]["code"] == "session_conflict", op["failure"]
    assert "identity changed" in op["failure"]["message"], op["failure"]
    assert "switched" not in [e["phase"] for e in op["events"]]
    assert pane.pane_pid() == third_pid  # nothing switched
    assert pane.session_record()["sessionId"] == old_session
