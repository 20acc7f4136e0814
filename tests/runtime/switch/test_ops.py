"""The Operations API and its CLI: confirmation words, coalescing, one active operation."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from runtime.config import Config
from runtime.errors import (
    BusyError,
    ConfigError,
    ConfirmationError,
    IllegalTransitionError,
    StoreError,
)
from runtime.switch import ops
from runtime.switch.state import State
from tests.fixtures.switch_world import TL_REBUILD, World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.mark.parametrize("word", [None, "", "rebuild", "YES", "REBUILD "])
def test_request_without_the_exact_word_is_refused_and_writes_nothing(
    world: World, word: str | None
) -> None:
    with pytest.raises(ConfirmationError, match="'REBUILD'"):
        ops.request(world.config, "why", word)  # type: ignore[arg-type]
    assert not world.state_dir.exists()


def test_request_registers_a_pending_operation_bound_to_its_session(world: World) -> None:
    result = ops.request(world.config, "context full", "REBUILD", session_id="s-1", source="mcp")
    assert result["state"] == "pending" and result["bound_session_id"] == "s-1"
    assert result["reasons"] == ["context full"] and "after this turn" in result["message"]
    op = world.store.read(result["operation_id"])
    assert op.reasons[0]["source"] == "mcp"


def test_pending_requests_coalesce_their_reasons_into_one_operation(world: World) -> None:
    first = ops.request(world.config, "one", "REBUILD", session_id="s-1")
    second = ops.request(world.config, "two", "REBUILD", source="cli")
    assert second["operation_id"] == first["operation_id"]
    assert second["reasons"] == ["one", "two"] and "coalesced" in second["message"]
    assert len(world.store.ids()) == 1


def test_request_of_another_session_supersedes_a_pending_one_so_nothing_blocks(
    world: World,
) -> None:
    first = ops.request(world.config, "one", "REBUILD", session_id="s-1")["operation_id"]
    second = ops.request(world.config, "two", "REBUILD", session_id="s-2")
    assert second["operation_id"] != first and second["bound_session_id"] == "s-2"
    assert "superseding" in second["message"]
    assert world.store.read(first).state == State.CANCELLED
    assert "superseded" in world.events(first)


def test_request_while_a_worker_runs_is_busy(world: World) -> None:
    op_id = ops.request(world.config, "one", "REBUILD")["operation_id"]
    world.store.transition(op_id, State.SCHEDULED, phase="scheduled",
                           worker={"pid": 1, "start_time": None})
    with pytest.raises(BusyError, match="'scheduled'"):
        ops.request(world.config, "two", "REBUILD")


def test_operations_need_a_state_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="state_dir"):
        ops.request(Config(), "why", "REBUILD")


def test_cancel_needs_its_word_and_only_cancels_pending_work(world: World) -> None:
    op_id = ops.request(world.config, "one", "REBUILD")["operation_id"]
    with pytest.raises(ConfirmationError, match="'CANCEL'"):
        ops.cancel(world.config, op_id, "REBUILD")
    assert world.store.read(op_id).state == State.PENDING
    assert ops.cancel(world.config, op_id, "CANCEL")["state"] == "cancelled"
    with pytest.raises(IllegalTransitionError, match="'cancelled'"):
        ops.cancel(world.config, op_id, "CANCEL")


def test_rollback_needs_its_word_and_an_activated_operation(world: World) -> None:
    op_id = ops.request(world.config, "one", "REBUILD")["operation_id"]
    with pytest.raises(ConfirmationError, match="'ROLLBACK'"):
        ops.rollback_request(world.config, op_id, "yes")
    ops.cancel(world.config, op_id, "CANCEL")
    with pytest.raises(IllegalTransitionError, match="only an activated"):
        ops.rollback_request(world.config, op_id, "ROLLBACK")


def test_status_and_list_report_the_operation_and_its_timeline(world: World) -> None:
    assert ops.status(world.config)["state"] is None
    op_id = ops.request(world.config, "one", "REBUILD")["operation_id"]
    status = ops.status(world.config)
    assert status["operation_id"] == op_id and status["worker_status"] == "none"
    assert [e["phase"] for e in status["events"]] == ["created"]
    assert [row["operation_id"] for row in ops.list_operations(world.config)] == [op_id]


def test_gc_keeps_the_newest_finished_operations(world: World) -> None:
    ids = []
    for n in range(4):
        op_id = ops.request(world.config, f"r{n}", "REBUILD")["operation_id"]
        ops.cancel(world.config, op_id, "CANCEL")
        ids.append(op_id)
    result = ops.gc(world.config, keep=1)
    assert result["deleted"] == ids[:3] and world.store.ids() == ids[3:]


def test_cli_request_with_a_wrong_word_exits_1_and_writes_nothing(world: World) -> None:
    done = world.cli("request", "--reason", "x", "--confirm", "nope")
    assert done.returncode == 1
    assert done.stderr.startswith("tl-rebuild: error: request needs the confirmation word")
    assert not world.state_dir.exists()


def test_cli_request_status_list_cancel_print_json_and_tables(world: World) -> None:
    done = world.cli("request", "--reason", "from cli", "--confirm", "REBUILD", "--json")
    assert done.returncode == 0, done.stderr
    op_id = json.loads(done.stdout)["operation_id"]
    status = json.loads(world.cli("status", "--json").stdout)
    assert status["operation_id"] == op_id and status["reasons"][0]["reason"] == "from cli"
    table = world.cli("status").stdout
    assert table.startswith("pending, created ") and op_id in table.splitlines()[0]
    assert op_id in world.cli("list").stdout
    assert json.loads(world.cli("list", "--json").stdout)[0]["state"] == "pending"
    cancel = world.cli("cancel", "--operation", op_id, "--confirm", "CANCEL", "--json")
    assert json.loads(cancel.stdout)["state"] == "cancelled"
    assert "deleted" in world.cli("gc", "--keep", "5").stdout


def test_concurrent_requests_from_cli_processes_api_threads_and_hooks_make_one_operation(
    world: World,
) -> None:
    argv = [TL_REBUILD, "request", "--confirm", "REBUILD", "--json",
            "--config", str(world.config_path)]
    procs = [subprocess.Popen([*argv, "--reason", f"cli-{n}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    hooks = [subprocess.Popen([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    results: list[dict] = []
    threads = [threading.Thread(target=lambda n=n: results.append(
        ops.request(world.config, f"api-{n}", "REBUILD", source="mcp"))) for n in range(4)]
    for t in threads:
        t.start()
    for h in hooks:
        h.communicate(json.dumps({"session_id": "someone-else", "hook_event_name": "Stop"}))
    for t in threads:
        t.join()
    outs = [json.loads(p.communicate()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs) and all(h.returncode == 0 for h in hooks)
    ids = {r["operation_id"] for r in results} | {o["operation_id"] for o in outs}
    assert len(ids) == 1 and world.store.ids() == list(ids)
    reasons = [r["reason"] for r in world.store.read(ids.pop()).reasons]
    assert sorted(reasons) == sorted([f"cli-{n}" for n in range(4)] +
                                     [f"api-{n}" for n in range(4)])


def test_status_only_reads_and_shows_a_lost_worker_for_recover_to_settle(world: World) -> None:
    import subprocess as sp

    op_id = ops.request(world.config, "one", "REBUILD")["operation_id"]
    gone = sp.Popen(["true"])
    gone.wait()
    world.store.transition(op_id, State.SCHEDULED, phase="scheduled",
                           worker={"pid": gone.pid, "start_time": None})
    before = world.store.read(op_id).revision
    status = ops.status(world.config)
    assert status["state"] == "scheduled" and status["worker_status"] == "gone"
    assert world.store.read(op_id).revision == before


def test_turns_since_the_switch_are_judged_by_the_speech_allowlist(tmp_path: Path) -> None:
    from types import MappingProxyType

    from runtime.switch.store import Operation
    from tests.fixtures.transcripts import Transcript

    t = Transcript()
    t.user("carried question")
    t.assistant("carried answer")
    carried = len(t.lines)
    t.queued("typed while claude was busy")  # a turn (an attachment, not a user line)
    t.assistant("answer one")
    t.channel("from the phone")  # a turn (isMeta, channel origin)
    t.tool_round()  # tool_use + tool_result: not a turn
    t.assistant("answer two")
    t.queued("another busy prompt")  # a turn
    t.assistant("answer three")
    t.user("<system-reminder>injected only</system-reminder>")  # nothing human left
    path = t.write(tmp_path / "new.jsonl")
    op = Operation("op-1", State.ACTIVATED, 1, "", "", facts=MappingProxyType(
        {"candidate_path": str(path), "candidate_lines": carried}))
    assert ops.turns_since_switch(op) == 3
    unknown = Operation("op-2", State.ACTIVATED, 1, "", "")
    assert ops.turns_since_switch(unknown) is None


def _age(world: World, operation_id: str, hours: float) -> None:
    from tests.runtime.cli.test_hook import age_request

    age_request(world, operation_id, hours)


def test_a_request_into_an_expired_pending_one_starts_a_new_operation(world: World) -> None:
    old = ops.request(world.config, "old", "REBUILD", session_id="s-1")["operation_id"]
    _age(world, old, hours=30)

    new = ops.request(world.config, "new", "REBUILD", session_id="s-1")

    assert new["operation_id"] != old and new["reasons"] == ["new"]
    assert world.store.read(old).state == State.CANCELLED
    assert world.store.events(old)[-1]["by"] == "request"


def test_the_maximum_request_age_is_a_config_key(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert world.config.switch.request_max_age_hours == 24
    text = world.config_path.read_text()
    world.config_path.write_text(
        text.replace("[switch]\n", "[switch]\nrequest_max_age_hours = 0.5\n"))
    assert world.config.switch.request_max_age_hours == 0.5
    op_id = ops.request(world.config, "x", "REBUILD", session_id="s-1")["operation_id"]
    _age(world, op_id, hours=1)

    assert ops.status(world.config, op_id)["state"] == "pending"  # status only reads
    ops.request(world.config, "y", "REBUILD", session_id="s-1")

    assert world.store.read(op_id).fact("cancel_reason") == "expired"


def test_status_shows_the_age_of_a_pending_request_and_when_it_expires(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD")["operation_id"]
    _age(world, op_id, hours=2)

    status = json.loads(world.cli("status", "--json").stdout)

    assert 2 * 3600 - 60 < status["request_age_s"] < 2 * 3600 + 60
    assert 22 * 3600 - 60 < status["request_expires_in_s"] < 22 * 3600 + 60
    shown = world.cli("status").stdout
    assert "request age         2h00m" in shown and "request expires in  21h59m" in shown
    ops.cancel(world.config, op_id, "CANCEL")
    assert ops.status(world.config, op_id)["request_age_s"] is None  # waits on nothing


def test_an_expired_rollback_request_leaves_the_new_session_active(world: World) -> None:
    import calendar

    from runtime.switch.recover import expire_if_stale

    op = world.store.create(reason={"reason": "r"}, bound_session_id="s-1", door="tmux",
                            state=State.ACTIVATING)
    op = world.store.transition(op.operation_id, State.ACTIVATED, phase="activated")
    op = world.store.transition(op.operation_id, State.ROLLBACK_PENDING, phase="rollback_pending",
                                facts={"rollback_requested_at": "2026-01-01T00:00:00.000Z"})
    later = calendar.timegm((2026, 1, 2, 1, 0, 0))  # 25 h after the rollback request

    assert expire_if_stale(world.config, world.store, op, by="stop", now=later) is None

    final = world.store.read(op.operation_id)
    assert final.state == State.ACTIVATED and final.fact("rollback_cancel_reason") == "expired"
    assert world.store.events(op.operation_id)[-1]["phase"] == "rollback_expired"
def _finished(world: World, state: State, artifact: bytes = b"backup") -> str:
    op = world.store.create(reason={"reason": "old", "source": "test"}, bound_session_id=None,
                            door="tmux", state=state)
    (world.store.artifacts(op.operation_id) / "source.jsonl").write_bytes(artifact)
    return op.operation_id


def test_doctor_and_status_say_how_much_space_the_state_dir_holds(world: World) -> None:
    op_id = _finished(world, State.FAILED, artifact=b"x" * 5000)
    size = ops.doctor(world.config)["checks"]["state_dir_size"]
    on_disk = sum(p.stat().st_size for p in world.state_dir.rglob("*") if p.is_file())
    assert size["ok"] is True and size["detail"]["bytes"] == on_disk >= 5000
    assert ops.status(world.config, op_id)["state_dir_size"].endswith("KiB")


def test_doctor_fails_the_state_dir_check_when_it_names_a_file_or_sits_below_one(
    tmp_path: Path,
) -> None:
    """The state_dir row said ok for a path that can never hold operations; a state_dir that
    does not exist yet is still fine (the first request creates it)."""
    world = make_world(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("")
    for bad in (afile, afile / "below"):
        check = ops.doctor(world.config.replace(state_dir=bad))["checks"]["state_dir"]
        assert check["ok"] is False and str(bad) in check["detail"]
    fresh = ops.doctor(world.config.replace(state_dir=tmp_path / "not" / "yet"))
    assert fresh["checks"]["state_dir"]["ok"] is True


def test_a_request_bound_to_a_name_that_is_no_session_id_writes_nothing(world: World) -> None:
    """``--session`` took any text (paths, blanks, newlines that broke ``list``) and bound the
    operation to a session no Stop can ever name."""
    for bad in ("../../etc/passwd", "a b", "a\nb", "s-1\n"):
        with pytest.raises(ConfirmationError, match="is not a session id"):
            ops.request(world.config, "x", "REBUILD", session_id=bad)
    assert ops.list_operations(world.config) == []


@pytest.mark.parametrize("damage", [b"", b'{"operation_id": "op-', b"not json\n", b"[1, 2]\n"])
def test_an_unreadable_active_record_stops_new_work_and_every_command_says_where(
    world: World, damage: bytes
) -> None:
    """The active record cut short, emptied or overwritten (by hand, a restored backup, a
    disk fault): a request started a second operation beside it — whose switch may be half
    done — and recover said "no active operation". Now each says, in one line, which file."""
    op_id = ops.request(world.config, "one", "REBUILD", session_id="s-1")["operation_id"]
    path = world.store.record_path(op_id)
    path.write_bytes(damage)

    with pytest.raises(StoreError, match=rf"{op_id}\.json.*active operation"):
        ops.request(world.config, "two", "REBUILD", session_id="s-2")
    assert world.store.ids() == [op_id] and path.read_bytes() == damage  # nothing new, kept
    for command in ("recover", "status", "request"):
        extra = ("--reason", "x", "--confirm", "REBUILD") if command == "request" else ()
        done = world.cli(command, *extra)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], (command, done.stderr)
    hook = world.hook(session_id="s-1")
    assert hook.returncode == 0 and hook.stdout.strip() == "{}"
    assert world.store.ids() == [op_id]


def test_one_unreadable_old_record_leaves_list_and_gc_working_and_doctor_names_it(
    world: World,
) -> None:
    """A damaged finished record made every command that reads all records fail — list,
    rollback, gc and the pruning after each operation (so artifacts were never pruned)."""
    old = ops.request(world.config, "one", "REBUILD", session_id="s-1")["operation_id"]
    ops.cancel(world.config, old, "CANCEL")
    newer = ops.request(world.config, "two", "REBUILD", session_id="s-2")["operation_id"]
    world.store.record_path(old).write_text("")

    rows = ops.list_operations(world.config)
    assert [(r["operation_id"], r["state"]) for r in rows] == [(newer, "pending"),
                                                               (old, "unreadable")]
    assert str(world.store.record_path(old)) in rows[1]["error"]
    store_check = ops.doctor(world.config)["checks"]["store"]
    assert store_check["ok"] is False and old in " ".join(store_check["detail"]["unreadable"])
    assert ops.gc(world.config, keep=5)["deleted"] == []
    listed = world.cli("list")
    assert listed.returncode == 0 and newer in listed.stdout and "unreadable" in listed.stdout


def test_an_old_codex_thread_is_resumable_while_a_rollout_of_it_exists(tmp_path: Path) -> None:
    from runtime.config import config_from_mapping
    from runtime.switch.rollback import old_session_gone

    sessions = tmp_path / "codex" / "sessions"
    config = config_from_mapping({"agent": "codex", "codex_home": str(tmp_path / "codex"),
                                  "project_dir": str(sessions), "workdir": str(tmp_path),
                                  "state_dir": str(tmp_path / "state")}, tmp_path / "c.toml")
    thread = "019a0b1c-2d3e-7f40-8a51-62c7d8e9f0a1"
    assert "is gone" in old_session_gone(config, thread)
    day = sessions / "2026" / "12" / "07"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-07T03-00-00-{thread}.jsonl").write_text("{}\n")
    assert old_session_gone(config, thread) == ""
