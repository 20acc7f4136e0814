"""Which turn end escapes the unit's cgroup before it starts the worker (SPEC §4.1).

Only a switch that restarts the unit the agent runs in (the systemd door) would kill a worker
started from inside it. A tmux door on a pane of a tmux server that a unit runs (a Codex or
claude service: ``Type=forking``, ``tmux new-session -d …``) respawns the pane and leaves the
unit alone; asking for a ``systemd-run --scope`` there failed the whole switch for a non-root
user, who may not create scopes in the system manager ("Failed to connect to bus", measured in
tests/e2e/test_codex_systemd_unit.py). Here the hook runs "inside a service where the escape
is impossible" (the cgroup text of a real service, no systemd-run on PATH).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.config import Config, config_from_mapping
from runtime.doors.kind import DoorKind
from runtime.switch import ops, schedule
from runtime.switch.store import Store
from tests.runtime.doors.test_systemd import UNIFIED_SERVICE


def _config(tmp_path: Path, door: str) -> Config:
    switch: dict[str, Any] = {"door": door, "tmux": {"target": "codex:0.0"}}
    if door == "systemd":
        switch["systemd"] = {"unit": "tl-door-test.service",
                             "pointer_path": str(tmp_path / "pointer")}
    return config_from_mapping({"state_dir": str(tmp_path / "state"),
                                "project_dir": str(tmp_path / "p"), "workdir": str(tmp_path),
                                "switch": switch}, tmp_path / "config.toml")


@pytest.fixture
def spawned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Inside ``tl-door-test.service`` with no systemd-run; the worker argv spawned, if any."""
    real = schedule.escape_prefix
    monkeypatch.setattr(schedule, "escape_prefix",
                        lambda name, **kw: real(name, cgroup_text=UNIFIED_SERVICE, **kw))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it: no systemd-run
    argvs: list[list[str]] = []

    def spawn(argv: list[str], **_: object) -> int:
        argvs.append(list(argv))
        return 4242
    monkeypatch.setattr(schedule.proc, "spawn_detached", spawn)
    return argvs


def _start(config: Config) -> str:
    op_id = str(ops.request(config, "noise", "REBUILD")["operation_id"])
    store = Store(config.state_dir)  # type: ignore[arg-type]
    schedule._start_worker(config, store, store.read(op_id))
    return op_id


def test_a_tmux_door_inside_a_unit_starts_the_worker_without_an_escape(
        tmp_path: Path, spawned: list[list[str]]) -> None:
    config = _config(tmp_path, "tmux")
    op_id = _start(config)
    [argv] = spawned
    assert argv == schedule.worker_argv(config, op_id)  # no systemd-run prefix
    store = Store(config.state_dir)  # type: ignore[arg-type]
    assert store.read(op_id).failure is None
    [event] = [e for e in store.events(op_id) if e["phase"] == "worker_spawned"]
    assert event["escaped_unit"] is None


def test_the_systemd_door_inside_its_unit_still_refuses_a_worker_its_restart_would_kill(
        tmp_path: Path, spawned: list[list[str]]) -> None:
    config = _config(tmp_path, "systemd")
    op_id = _start(config)
    assert spawned == []
    failure = Store(config.state_dir).read(op_id).failure  # type: ignore[arg-type]
    assert failure is not None and failure["code"] == "cgroup_escape_failed"
    assert "'tl-door-test.service'" in failure["message"]


@pytest.mark.parametrize("kind", list(DoorKind))
def test_only_the_systemd_door_restarts_a_unit(kind: DoorKind) -> None:
    assert kind.restarts_unit is (kind is DoorKind.SYSTEMD)
