"""Codex's turn-end trigger ``tl-rebuild hook-notify``: always exit 0, chain the user's notify
program, act only on the thread a pending operation is bound to.

Run as Codex runs it (notes/codex-live.md §8): the notify argv from config.toml with the JSON
payload appended as the last argument. The config is an agent=codex one whose tmux door
names a private socket no server listens on (harmless: a spawned worker fails there).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.config import Config, load_config
from runtime.switch import ops
from runtime.switch.store import Store
from tests.fixtures.switch_world import NO_SOCKET, NO_TARGET, TL_REBUILD, toml_value
from tests.fixtures.tmux import wait_for
from tests.runtime.cli.test_hook import heavy_imports
from tests.runtime.codex_rollouts import Rollout

# A user's own notify program: records its argv, then (with a gate) waits for the gate file.
USER_NOTIFY = """
import json, os, sys, time
record, gate = sys.argv[1], sys.argv[2]
while gate != "-" and not os.path.exists(gate):
    time.sleep(0.02)
with open(record, "a") as out:
    out.write(json.dumps({"argv": sys.argv[3:], "ppid": os.getppid()}) + "\\n")
"""


@dataclass
class CodexWorld:
    root: Path
    codex_home: Path
    config_path: Path
    thread: str
    rollout: Path

    @property
    def config(self) -> Config:
        return load_config(self.config_path)

    @property
    def store(self) -> Store:
        return Store(self.root / "state")

    def payload(self, thread: str | None = None) -> str:
        return json.dumps({"type": "agent-turn-complete", "thread-id": thread or self.thread,
                           "turn-id": str(uuid.uuid4()), "cwd": str(self.root / "work"),
                           "client": "codex-tui", "input-messages": ["hi"],
                           "last-assistant-message": "hello"})

    def notify(self, payload: str, chained: list[str] | None = None,
               ) -> subprocess.CompletedProcess[str]:
        argv = [TL_REBUILD, "hook-notify", "--config", str(self.config_path)]
        if chained is not None:
            argv += ["--", *chained]
        return subprocess.run([*argv, payload], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def phases(self, op_id: str) -> list[str]:
        return [e["phase"] for e in self.store.events(op_id)]


@pytest.fixture
def world(tmp_path: Path) -> CodexWorld:
    home = tmp_path / "codex home"
    rollout = Rollout()
    rollout.exchange("please remember the blue door", "noted: the blue door", trigger="user")
    path = rollout.write(home / "sessions" / "2026" / "12" / "03")
    (tmp_path / "work").mkdir()
    config_path = tmp_path / "threadline.toml"
    config_path.write_text("\n".join([
        'agent = "codex"',
        f"codex_home = {toml_value(str(home))}",
        f"project_dir = {toml_value(str(home / 'sessions'))}",
        f"workdir = {toml_value(str(tmp_path / 'work'))}",
        f"state_dir = {toml_value(str(tmp_path / 'state'))}",
        "[switch]",
        'door = "tmux"',
        f"resume_argv = {toml_value(['codex', 'resume', '{session_id}'])}",
        'environment = ["CODEX_HOME"]',
        "[switch.tmux]",
        f"target = {toml_value(NO_TARGET)}",
        f"socket_name = {toml_value(NO_SOCKET)}",
    ]) + "\n")
    return CodexWorld(tmp_path, home, config_path, rollout.id, path)


def user_notify(world: CodexWorld, gate: str = "-") -> tuple[list[str], Path]:
    record = world.root / "user-notify.jsonl"
    return [sys.executable, "-c", USER_NOTIFY, str(record), gate, "--its-own-flag"], record


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_nothing_pending_exits_0_silently_and_writes_nothing(world: CodexWorld) -> None:
    done = world.notify(world.payload())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (world.root / "state").exists()


@pytest.mark.parametrize("payload", ["", "not json", "[1,2]", '{"type": "agent-turn-complete"}',
                                     '{"type": "other", "thread-id": "x"}'])
def test_any_payload_still_exits_0_and_acts_on_nothing(world: CodexWorld, payload: str) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    done = world.notify(payload)
    assert done.returncode == 0
    assert world.store.read(op_id).state.value == "pending"


def test_the_users_notify_program_runs_with_the_payload_and_is_not_waited_for(
        world: CodexWorld) -> None:
    gate = world.root / "gate"
    program, record = user_notify(world, str(gate))
    payload = world.payload()
    try:
        done = world.notify(payload, program)  # returns although the program waits for it
        assert done.returncode == 0 and not records(record)
    finally:
        gate.touch()  # never leave the program waiting
    wait_for(lambda: records(record), timeout=30, what="the user's notify program to run")
    (ran,) = records(record)
    assert ran["argv"] == ["--its-own-flag", payload]  # its own args, then Codex's payload


def test_the_users_program_runs_also_when_an_operation_is_scheduled(world: CodexWorld) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    program, record = user_notify(world)
    assert world.notify(world.payload(), program).returncode == 0
    wait_for(lambda: records(record), timeout=30, what="the user's notify program to run")
    assert "worker_spawned" in world.phases(op_id)


def test_a_missing_user_program_is_reported_and_the_turn_end_still_handled(
        world: CodexWorld) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    done = world.notify(world.payload(), [str(world.root / "no-such-notify")])
    assert done.returncode == 0
    assert "no-such-notify" in (world.root / "state" / "worker.log").read_text()
    assert "worker_spawned" in world.phases(op_id)


def test_a_turn_end_of_a_foreign_thread_is_ignored_with_a_timeline_entry(
        world: CodexWorld) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    title_thread = str(uuid.uuid4())  # the TUI's title generation: its own id, no rollout
    assert world.notify(world.payload(title_thread)).returncode == 0
    op = world.store.read(op_id)
    assert op.state.value == "pending"
    ignored = [e for e in world.store.events(op_id) if e["phase"] == "stop_ignored"]
    assert ignored and ignored[0]["session_id"] == title_thread


def test_the_bound_threads_turn_end_schedules_with_its_rollout(world: CodexWorld) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    assert world.notify(world.payload()).returncode == 0
    phases = world.phases(op_id)
    assert "scheduled" in phases and "worker_spawned" in phases
    op = world.store.read(op_id)
    assert op.fact("transcript_path") == str(world.rollout.resolve())
    assert op.fact("old_session_id") == world.thread


def test_a_reverted_threads_turn_end_schedules_with_its_newest_revision(
        world: CodexWorld) -> None:
    """``thread/revert`` leaves the rollout as it was and writes ``…-<thread>_<revision>.jsonl``
    (base: the thread), which the thread continues in (measured with 0.169.0)."""
    revision = Rollout(world.thread, first_ordinal=1, history_base={
        "thread_id": world.thread, "end_ordinal_exclusive": 1, "end_byte_offset": 0})
    revision.exchange("after the revert", "reply after the revert", trigger="user")
    path = revision.write(world.rollout.parent, f"rollout-2026-12-03T11-00-00-{world.thread}"
                          "_01a24916-263a-7b23-9a45-119d92d0f8b8.jsonl")
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.thread)["operation_id"]
    assert world.notify(world.payload()).returncode == 0
    op = world.store.read(op_id)
    assert "worker_spawned" in world.phases(op_id)
    assert op.fact("transcript_path") == str(path.resolve())
    assert op.fact("old_session_id") == world.thread  # the thread, not the revision id


def test_an_unbound_request_binds_to_the_first_thread_that_has_a_rollout(
        world: CodexWorld) -> None:
    op_id = ops.request(world.config, "x", "REBUILD")["operation_id"]
    assert world.notify(world.payload(str(uuid.uuid4()))).returncode == 0
    assert world.store.read(op_id).state.value == "pending"  # ephemeral thread: no rollout
    assert world.notify(world.payload()).returncode == 0
    op = world.store.read(op_id)
    assert op.bound_session_id == world.thread
    assert "worker_spawned" in world.phases(op_id)


def test_the_idle_path_imports_nothing_heavy(world: CodexWorld) -> None:
    done, heavy = heavy_imports("", ["hook-notify", "--config", str(world.config_path),
                                     world.payload()])
    assert done.returncode == 0 and heavy == "[]"
