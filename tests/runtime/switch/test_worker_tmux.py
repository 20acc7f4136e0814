# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""The whole switch through a real tmux server: request → Stop → worker → respawn → health."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from runtime.errors import TranscriptError
from runtime.procfs import cmdline
from runtime.switch import ops
from tests.fixtures.standin_claude import append_events, exchange, last_uuid
from tests.fixtures.switch_world import CHANNEL, World, tmux_world
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def request(world: World) -> str:
    result = ops.request(world.config, "test rebuild", "REBUILD", session_id=world.old_session)
    return str(result["operation_id"])


def switch(world: World, tmux: TmuxServer, expect: str = "activated",
           extra_env: dict[str, str] | None = None) -> str:
    """Start claude in the pane, request a rebuild, let claude stop; the op ends in ``expect``."""
    world.start_pane(tmux, extra_env=extra_env)
    op_id = request(world)
    world.send("stop")
    assert world.wait_state(op_id) == expect, world.store.read(op_id).failure
    return op_id


def test_request_stop_worker_respawn_health_ends_activated(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, servers=("companion",))
    world.start_pane(tmux_server)
    before_pid = tmux_server.pane_pid(world.target)
    before_digest = digest(world.transcript)
    before_size = world.transcript.stat().st_size
    op_id = request(world)

    world.send("stop")  # the hook runs inside the pane's process tree, like Claude Code's

    assert world.wait_state(op_id) == "activated"
    op = world.store.read(op_id)
    new_id = op.fact("new_session_id")
    after_pid = tmux_server.pane_pid(world.target)
    assert after_pid != before_pid
    argv = cmdline(after_pid)
    assert argv is not None and new_id in argv and all(flag in argv for flag in CHANNEL)
    assert os.readlink(f"/proc/{after_pid}/cwd") == str(world.workdir)
    # Untouched since the freeze (claude's own late summary line came before it).
    backup = Path(op.fact("backup"))
    assert digest(world.transcript) == digest(backup) == op.fact("source_sha256")
    assert hashlib.sha256(backup.read_bytes()[:before_size]).hexdigest() == before_digest
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.parent.stat().st_mode) == 0o700
    phases = world.events(op_id)
    for phase in ("scheduled", "worker_spawned", "worker_started", "stable", "frozen",
                  "identity", "built", "verified", "activating", "rechecked", "switched",
                  "health", "activated"):
        assert phase in phases
    hook_runs = [json.loads(line) for line in world.record.read_text().splitlines()
                 if '"hook"' in line]
    assert hook_runs and hook_runs[0]["rc"] == 0 and hook_runs[0]["stdout"].strip() == "{}"


def test_the_startup_snapshot_is_kept_0600_in_the_artifacts_with_only_its_digest_recorded(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    block = ("<system-reminder>\nAs you answer the user's questions, you can use the following "
             "context:\n# claudeMd\nContents of /srv/app/CLAUDE.md:\nBe brief.\n</system-reminder>")
    events = [json.loads(line) for line in world.transcript.read_text("utf-8").splitlines()]
    events[0]["message"]["content"] = block + "\n" + events[0]["message"]["content"]
    world.transcript.write_text("".join(json.dumps(e) + "\n" for e in events), "utf-8")
    op_id = switch(world, tmux_server)
    op = world.store.read(op_id)
    kept = Path(op.fact("startup_snapshot"))
    assert kept.parent == world.store.artifacts(op_id)
    assert kept.read_text("utf-8") == block and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert op.fact("startup_snapshot_sha256") == hashlib.sha256(block.encode()).hexdigest()
    assert "claudeMd" not in world.store.record_path(op_id).read_text("utf-8")
    assert "claudeMd" not in world.store.events_path(op_id).read_text("utf-8")


def test_the_manifest_is_kept_0600_with_its_digest_and_status_prints_it_checked(
    tmp_path: Path, tmux_server: TmuxServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.cli import main

    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    op = world.store.read(op_id)
    kept = Path(op.fact("manifest"))
    assert kept == world.store.artifacts(op_id) / "manifest.jsonl"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert op.fact("manifest_sha256") == digest(kept)
    candidate = [json.loads(line) for line in Path(op.fact("candidate_path")).read_text()
                 .splitlines()[: op.fact("candidate_lines")]]
    config = str(world.config.source)

    assert main(["status", "--config", config, "--operation", op_id, "--manifest",
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["manifest"]
    assert [e["item_id"] for e in shown] == [e["uuid"] for e in candidate]
    assert main(["status", "--config", config, "--operation", op_id, "--manifest"]) == 0
    table = capsys.readouterr().out
    assert all(e["uuid"] in table for e in candidate)

    kept.write_bytes(kept.read_bytes().replace(b'"typed"', b'"queued"', 1))
    assert main(["status", "--config", config, "--operation", op_id, "--manifest"]) == 1
    assert "has digest" in capsys.readouterr().err


def test_worker_survives_the_respawn_of_the_pane_it_was_started_from(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    op = world.store.read(op_id)
    spawner = world.starts()[0]["pid"]
    assert op.worker is not None and op.worker["pid"] != spawner
    # The worker wrote the last phases after its grandparent (the old claude) was killed. The
    # record is written before its timeline line (Store.transition), so the lines are polled.
    assert not os.path.exists(f"/proc/{spawner}")
    wait_for(lambda: world.events(op_id)[-2:] == ["activated", "watch_ended"], timeout=10,
             what="the 'activated' and 'watch_ended' lines in the timeline")


def test_audit_records_hold_no_conversation_text(tmp_path: Path, tmux_server: TmuxServer) -> None:
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    audit = (world.state_dir / "operations" / f"{op_id}.json").read_text()
    audit += (world.state_dir / "operations" / f"{op_id}.events.jsonl").read_text()
    for word in ("blue door", "4711", "reply to"):
        assert word not in audit
    assert "blue door" in Path(world.store.read(op_id).fact("backup")).read_text()


def test_resume_argv_without_a_channel_flag_fails_health_and_resumes_the_old_session(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, resume_channels=())
    op_id = switch(world, tmux_server, "rolled_back")
    op = world.store.read(op_id)
    assert op.failure is not None and "missing channel flag" in op.failure["message"]
    health = [e for e in world.store.events(op_id) if e["phase"] == "health"][0]
    assert health["ok"] is False and health["missing_channel_flags"]
    # The old session is resumed with the old process's own argv, not the deaf resume_argv.
    argv = cmdline(tmux_server.pane_pid(world.target))
    assert argv is not None and world.old_session in argv
    assert all(flag in argv for flag in CHANNEL), argv
    resumed = [e for e in world.store.events(op_id) if e["phase"] == "resumed_old"][0]
    assert resumed["argv_source"] == "old_process"
    assert all(flag in resumed["argv"] for flag in CHANNEL)
    resumed_health = [e for e in world.store.events(op_id) if e["phase"] == "resumed_health"][0]
    assert resumed_health["ok"] is True, resumed_health
    assert op.fact("resumed_healthy") is True
    assert op.fact("resumed_argv_source") == "old_process"


def test_candidate_changed_after_verification_fails_before_the_switch(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    gate = tmp_path / "gate"
    world.start_pane(tmux_server)
    before_pid = tmux_server.pane_pid(world.target)
    op_id = request(world)
    assert world.hook(extra_env={"THREADLINE_WORKER_FAULT": f"pause:verified:{gate}"}
                      ).returncode == 0
    wait_for(lambda: Path(str(gate) + ".reached").exists(), what="worker paused")
    candidate = Path(world.store.read(op_id).fact("candidate_path"))
    candidate.unlink()
    gate.touch()
    assert world.wait_state(op_id) == "failed"
    assert world.store.read(op_id).failure["code"] == "candidate_changed"  # type: ignore[index]
    assert tmux_server.pane_pid(world.target) == before_pid


def test_new_process_exiting_with_no_conversation_found_is_rolled_back(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server)
    op_id = request(world)
    gate = tmp_path / "gate"
    world.hook(extra_env={"THREADLINE_WORKER_FAULT": f"pause:switch:{gate}"})
    wait_for(lambda: Path(str(gate) + ".reached").exists(), what="worker at the switch")
    candidate = Path(world.store.read(op_id).fact("candidate_path"))
    candidate.unlink()  # after every check: the new claude will not find its session
    gate.touch()
    assert world.wait_state(op_id) == "rolled_back", (
        world.store.read(op_id).failure, world.store.events(op_id))
    op = world.store.read(op_id)
    assert op.failure is not None
    argv = cmdline(tmux_server.pane_pid(world.target))
    assert argv is not None and world.old_session in argv


def test_session_said_after_activation_is_counted_before_rollback_and_rollback_resumes_old(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    new_id = world.store.read(op_id).fact("new_session_id")
    new_file = world.project_dir / f"{new_id}.jsonl"
    append_events(new_file, exchange(new_id, "one more thing", "ok", last_uuid(new_file),
                                     str(world.workdir)))
    result = ops.rollback_request(world.config, op_id, "ROLLBACK")
    assert result["state"] == "rollback_pending" and result["turns_since_switch"] == 1
    world.hook(session_id=world.old_session)  # the old session no longer runs: ignored
    assert world.store.read(op_id).state.value == "rollback_pending"
    world.hook(session_id=new_id)
    assert world.wait_state(op_id) == "rolled_back"
    argv = cmdline(tmux_server.pane_pid(world.target))
    assert argv is not None and world.old_session in argv and all(f in argv for f in CHANNEL)


def test_rollback_refuses_when_the_pane_was_replaced_after_activation(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    new_id = world.store.read(op_id).fact("new_session_id")
    tmux_server.cmd("respawn-pane", "-k", "-t", world.target, "sleep 600")
    ops.rollback_request(world.config, op_id, "ROLLBACK")
    world.hook(session_id=new_id)
    world.failure(op_id, "session_conflict")
    assert "sleep" in " ".join(cmdline(tmux_server.pane_pid(world.target)) or ())


def paused_world(tmp_path: Path, tmux: TmuxServer, phase: str = "verified",
                 **kwargs: object) -> tuple[World, str, Path, int]:
    """A world whose worker waits at ``phase`` until the returned gate file exists."""
    world = tmux_world(tmp_path, tmux, **kwargs)  # type: ignore[arg-type]
    world.start_pane(tmux)
    pid = tmux.pane_pid(world.target)
    op_id = request(world)
    gate = tmp_path / "gate"
    assert world.hook(extra_env={"THREADLINE_WORKER_FAULT": f"pause:{phase}:{gate}"}
                      ).returncode == 0
    wait_for(lambda: Path(str(gate) + ".reached").exists(), what=f"worker paused at {phase}")
    return world, op_id, gate, pid


def test_source_changed_after_freeze_fails_and_switches_nothing(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world, op_id, gate, pid = paused_world(tmp_path, tmux_server)
    candidate = Path(world.store.read(op_id).fact("candidate_path"))
    world.send("say a late word")
    wait_for(lambda: "said: a late word" in tmux_server.capture(world.target), what="late turn")
    gate.touch()
    world.failure(op_id, "source_changed")
    assert tmux_server.pane_pid(world.target) == pid
    assert not candidate.exists()  # the unused candidate is removed


def test_pane_replaced_by_a_third_party_is_a_session_conflict(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world, op_id, gate, _ = paused_world(tmp_path, tmux_server)
    tmux_server.cmd("respawn-pane", "-k", "-t", world.target, "sleep 600")
    third = tmux_server.pane_pid(world.target)
    # Like the real CLI, the killed claude appends its exit bookkeeping to the transcript:
    # the changed identity, not the changed source, is the reason reported.
    append_events(world.transcript, [{"type": "last-prompt", "lastPrompt": "x",
                                      "sessionId": world.old_session}])
    gate.touch()
    world.failure(op_id, "session_conflict", "identity changed")
    assert tmux_server.pane_pid(world.target) == third


def test_empty_identity_is_a_conflict_never_a_match(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, target="nowhere:0.0")
    world.start_pane(tmux_server)
    pid = tmux_server.pane_pid(world.target)
    op_id = request(world)
    assert world.hook().returncode == 0
    world.failure(op_id, "session_conflict", "nowhere:0.0")
    assert tmux_server.pane_pid(world.target) == pid
    assert not any(p.name != world.transcript.name for p in world.project_dir.glob("*.jsonl"))


def test_another_transcript_becoming_active_after_freeze_is_a_conflict(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world, op_id, gate, pid = paused_world(tmp_path, tmux_server)
    other = world.project_dir / "99999999-0000-4000-8000-000000000000.jsonl"
    other.write_text("{}\n")
    gate.touch()
    world.failure(op_id, "session_conflict", other.name)
    assert tmux_server.pane_pid(world.target) == pid


def test_own_candidate_is_never_mistaken_for_another_session(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world, op_id, gate, _ = paused_world(tmp_path, tmux_server)
    op = world.store.read(op_id)
    candidate = Path(op.fact("candidate_path"))
    frozen = [e for e in world.store.events(op_id) if e["phase"] == "frozen"][0]
    assert candidate.stat().st_mtime_ns > world.transcript.stat().st_mtime_ns
    assert frozen["other_sessions"] == 0
    gate.touch()
    assert world.wait_state(op_id) == "activated"
    rechecked = [e for e in world.store.events(op_id) if e["phase"] == "rechecked"][0]
    assert rechecked["candidate_excluded"] == candidate.name


def test_worker_waits_while_claude_is_busy_and_freezes_after_its_late_summary_line(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    # Claude writes its stop_hook_summary after the hook returns; here 1 s later, far past the
    # 0.2 s quiet period: only the busy flag in sessions/<pid>.json keeps the worker waiting.
    op_id = switch(world, tmux_server, extra_env={"STANDIN_AFTER_HOOK_DELAY": "1.0"})
    # no timed assertion: the late line being in the frozen copy proves the worker waited
    backup = Path(world.store.read(op_id).fact("backup")).read_text()
    assert backup.rstrip().splitlines()[-1].count("stop_hook_summary") == 1


def test_a_pane_that_runs_another_session_is_a_conflict(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    from tests.fixtures.standin_claude import write_transcript

    world = tmux_world(tmp_path, tmux_server)
    other = "0e0e0e0e-0000-4000-8000-00000000000b"
    write_transcript(world.project_dir / f"{other}.jsonl", other, str(world.workdir),
                     [("another conversation", "indeed")])
    world.old_session, stopping = other, world.old_session
    world.start_pane(tmux_server)  # the pane runs `other`
    op_id = ops.request(world.config, "x", "REBUILD", session_id=stopping)["operation_id"]
    assert world.hook(session_id=stopping).returncode == 0
    world.failure(op_id, "session_conflict", f"runs session {other!r}")


def test_the_development_channels_warning_after_the_respawn_is_confirmed_like_the_user_did(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server, extra_env={"STANDIN_DEV_WARNING": "1"})
    health = [e for e in world.store.events(op_id) if e["phase"] == "health"][0]
    assert health["warnings_confirmed"] >= 1
    accepted = [json.loads(line) for line in world.record.read_text().splitlines()
                if '"warning_accepted"' in line]
    assert len(accepted) == 2  # the first start (by the test) and the respawn (by the worker)
    assert "ready" in tmux_server.capture(world.target)


def test_a_claude_that_stays_busy_fails_the_operation_without_switching(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    world = tmux_world(tmp_path, tmux_server, stable_timeout=1.5)
    world.start_pane(tmux_server)
    pid = tmux_server.pane_pid(world.target)
    world.send("busy")
    wait_for(lambda: "status: busy" in tmux_server.capture(world.target), what="busy")
    op_id = request(world)
    assert world.hook().returncode == 0
    world.failure(op_id, "transcript_unstable", "claude stayed busy")
    assert tmux_server.pane_pid(world.target) == pid


def test_a_rollback_to_an_old_session_whose_transcript_is_gone_leaves_the_new_one_running(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    """Claude Code deletes transcripts older than ``cleanupPeriodDays`` (30 by default), and
    users clean ``projects/`` by hand: a rollback then stopped the healthy new claude and
    resumed a session claude no longer has ("No conversation found"), leaving nothing
    running. The request is refused at once, and a transcript gone after the request is
    refused by the worker before the pane is touched; the operation stays activated."""
    world = tmux_world(tmp_path, tmux_server)
    op_id = switch(world, tmux_server)
    new_id = world.store.read(op_id).fact("new_session_id")
    running = tmux_server.pane_pid(world.target)
    world.transcript.unlink()

    backup = str(world.store.read(op_id).fact("backup"))
    with pytest.raises(TranscriptError, match="transcript .* is gone") as refused:
        ops.rollback_request(world.config, op_id, "ROLLBACK")
    assert backup in str(refused.value)  # where the frozen copy is, to put it back by hand
    assert world.store.read(op_id).state.value == "activated"

    world.transcript.write_text("")  # there at the request, gone by the Stop
    ops.rollback_request(world.config, op_id, "ROLLBACK")
    world.transcript.unlink()
    world.hook(session_id=new_id)
    wait_for(lambda: "rollback_refused" in world.events(op_id) or world.store.read(
        op_id).state.value in ("failed", "rolled_back"), what="the rollback's end")
    assert world.store.read(op_id).state.value == "activated", world.events(op_id)
    assert "rollback_refused" in world.events(op_id)
    assert tmux_server.pane_pid(world.target) == running
    assert new_id in " ".join(cmdline(running) or ())


def test_the_warning_wrapped_by_claude_in_a_narrow_pane_is_still_answered(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    """In a pane under ~48 columns (a side-by-side split) claude wraps its own warning line
    ``I am using this for local`` / ``development`` (measured, 2.1.328, 40 columns): the
    worker never recognised the warning, never pressed Enter, and the switch rolled back into
    a claude that waited at the same warning — deaf."""
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server, extra_env={"STANDIN_DEV_WARNING": "1"}, width=40)
    op_id = request(world)
    world.send("stop")
    assert world.wait_state(op_id) == "activated", world.store.read(op_id).failure
    health = [e for e in world.store.events(op_id) if e["phase"] == "health"][0]
    assert health["warnings_confirmed"] >= 1
