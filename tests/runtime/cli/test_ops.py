"""Human output of ``request``, ``cancel``, ``rollback``, ``recover`` and ``gc``: one summary
line first, the recorded facts only with ``-v``, the next step last; ``--json`` unchanged but
for ``schema_version`` first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.switch import ops
from runtime.switch.state import State
from tests.fixtures.switch_world import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def run(world: World, capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code = main([*argv, "--config", str(world.config_path)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out.splitlines()


def op_id(lines: list[str]) -> str:
    return next(word for word in lines[0].split() if word.startswith("op-"))


def again(world: World) -> str:
    return f"tl-rebuild {{}} --config {world.config_path}"


def test_request_says_what_it_registered_and_how_to_watch_it(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run(world, capsys, "request", "--reason", "context full", "--confirm", "REBUILD",
                "--session", "s-1")
    op = op_id(lines)
    assert lines == [
        f"requested rebuild {op} of session s-1; it runs after the current turn ends",
        "watch it: " + again(world).format("status") + f" --operation {op}",
    ]
    coalesced = run(world, capsys, "request", "--reason", "still full", "--confirm", "REBUILD")
    assert coalesced[0] == (f"added your reason to the pending rebuild {op} of session s-1 "
                            "(2 requests); it runs after the current turn ends")


def test_request_shows_the_recorded_facts_only_with_v(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run(world, capsys, "request", "--reason", "why", "--confirm", "REBUILD", "-v")
    op = op_id(lines)
    assert lines[0].startswith(f"requested rebuild {op} of the session whose turn ends next;")
    assert lines[1:3] == ["", "facts:"]
    facts = lines[3:lines.index("", 3)]
    assert f"  operation_id      {op}" in facts and "  state             pending" in facts
    assert "  reasons           why" in facts
    assert not any(f.startswith("  message") for f in facts)  # the summary line says it
    assert lines[-1].startswith("watch it: ")


def test_json_keeps_the_result_and_puts_schema_version_first(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["request", "--reason", "why", "--confirm", "REBUILD", "--json",
                 "--config", str(world.config_path)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and list(data)[0] == "schema_version" and data["schema_version"] == 1
    assert set(data) == {"schema_version", "operation_id", "state", "reasons",
                         "bound_session_id", "message"}
    assert data["reasons"] == ["why"] and data["state"] == "pending"
    code = main(["gc", "--keep", "5", "--json", "--config", str(world.config_path)])
    assert json.loads(capsys.readouterr().out) == {"schema_version": 1, "deleted": [], "kept": 1}


def test_cancel_of_a_pending_rebuild_says_nothing_was_switched(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    op = ops.request(world.config, "why", "REBUILD")["operation_id"]
    lines = run(world, capsys, "cancel", "--operation", op, "--confirm", "CANCEL")
    assert lines == [f"cancelled rebuild {op}; nothing was switched",
                     "next: request a new one when needed: " + again(world).format("request")
                     + " --reason '…' --confirm REBUILD"]
    assert world.store.read(op).state == State.CANCELLED


def test_rollback_says_when_it_runs_what_is_lost_and_how_to_undo(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    op = world.store.create(reason={"reason": "r"}, bound_session_id="s-1", door="tmux",
                            state=State.ACTIVATING).operation_id
    world.store.transition(op, State.ACTIVATED, phase="activated")
    lines = run(world, capsys, "rollback", "--operation", op, "--confirm", "ROLLBACK")
    assert lines[0] == (f"requested the rollback of {op} to the old session; it runs after the "
                        "current turn ends")
    assert lines[1] == "the turns said in the new session since the switch are not counted"
    assert lines[-1] == ("watch it: " + again(world).format("status") + f" --operation {op}  "
                         "(undo: " + again(world).format("cancel") + f" --operation {op} "
                         "--confirm CANCEL)")
    undone = run(world, capsys, "cancel", "--operation", op, "--confirm", "CANCEL")
    assert undone[0] == f"cancelled the rollback of {op}; the new session stays"


def test_recover_names_the_transition_it_made_or_that_there_was_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(world, capsys, "recover") == ["nothing to recover: no active operation",
                                             "next: nothing to do"]
    op = ops.request(world.config, "one", "REBUILD")["operation_id"]
    assert run(world, capsys, "recover")[0] == (
        f"nothing to recover: {op} is pending, its worker alive or not yet needed")
    gone = subprocess.Popen(["true"])
    gone.wait()
    world.store.transition(op, State.SCHEDULED, phase="scheduled",
                           worker={"pid": gone.pid, "start_time": None})
    lines = run(world, capsys, "recover")
    final = world.store.read(op)
    assert lines[0] == f"recovered {op}: scheduled → {final.state.value}"
    if final.failure:
        assert lines[1] == f"failure: {final.failure['code']} — {final.failure['message']}"
    assert lines[-1] == "see what happened: " + again(world).format("status") + f" --operation {op}"


def test_gc_counts_what_it_deleted_and_kept(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for n in range(3):
        ids.append(ops.request(world.config, f"r{n}", "REBUILD")["operation_id"])
        ops.cancel(world.config, ids[-1], "CANCEL")
    lines = run(world, capsys, "gc", "--keep", "1")
    assert lines == ["deleted 2 finished operations and their artifacts, kept 1",
                     "see what is kept: " + again(world).format("list")]
    verbose = run(world, capsys, "gc", "--keep", "0", "-v")
    assert verbose[0] == "deleted 1 finished operation and their artifacts, kept 0"
    assert f"  deleted  {ids[2]}" in verbose


def test_status_leads_with_the_state_and_ends_with_the_next_step_for_this_config(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    op = op_id(run(world, capsys, "request", "--reason", "context full", "--confirm", "REBUILD",
                   "--session", "s-1"))
    lines = run(world, capsys, "status")
    assert lines[0].startswith("pending, created ") and lines[0].endswith(f"(operation {op})")
    assert "bound session       s-1" in lines and "reason              context full" in lines
    assert lines[lines.index("timeline (1 phase):") + 1] == "  +0.00s created → pending"
    assert lines[-1] == ("next: it runs after the current turn ends (call it off: "
                         + again(world).format("cancel") + f" --operation {op} --confirm CANCEL)")
    run(world, capsys, "cancel", "--operation", op, "--confirm", "CANCEL")
    lines = run(world, capsys, "status", "--operation", op)
    assert lines[0].startswith("cancelled, created ")
    assert lines[-1] == ("next: nothing to do; request a new one when needed: "
                         + again(world).format("request"))


def test_root_on_a_state_dir_of_a_uid_without_a_passwd_entry_is_told_to_run_as_that_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    from runtime.cli.ops import act_as_state_owner
    from runtime.errors import ThreadlineError

    if os.geteuid() != 0:
        pytest.skip("needs root: the state dir is given to a uid without a passwd entry")
    orphan = next(uid for uid in range(54321, 60000) if not _has_entry(pwd, uid))
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, orphan, orphan)
    with pytest.raises(ThreadlineError, match=f"belongs to uid {orphan}, which has no passwd "
                                              "entry; run tl-rebuild as that user"):
        act_as_state_owner(state)
    assert os.geteuid() == 0  # still root


def test_the_caller_stays_who_it_is_unless_root_meets_another_users_state_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.cli.ops import act_as_state_owner

    def never(*args: object) -> None:
        raise AssertionError(f"dropped privileges: {args}")

    for name in ("setuid", "setgid", "initgroups"):
        monkeypatch.setattr(f"os.{name}", never)
    act_as_state_owner(tmp_path / "not-yet")  # no state dir yet
    act_as_state_owner(tmp_path)  # root's own (the tests run as root) or the caller's
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    act_as_state_owner(tmp_path)  # not root: nothing to drop


def test_root_without_a_config_is_told_state_dir_is_needed_not_shown_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """``sudo tl-rebuild status --json`` with no config: os.stat(None) raised a TypeError."""
    monkeypatch.delenv("THREADLINE_CONFIG", raising=False)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    for command in ("status", "list", "recover", "gc"):
        assert main([command, "--json"]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err == (
            "tl-rebuild: error: state_dir: required for operations (set it in the runtime "
            "config)\n")


def _has_entry(pwd: object, uid: int) -> bool:
    try:
        pwd.getpwuid(uid)  # type: ignore[attr-defined]
    except KeyError:
        return False
    return True
