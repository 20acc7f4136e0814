"""``accept --drill``: a full rebuild on an isolated scratch target (SPEC §5.4, §6).

The drill uses the deployment's own door where that is harmless: a pointer deployment is
drilled with a scratch pointer file and the runner's own ``tl-rebuild hook-stop`` call (no
``claude -p`` is run: that would send the conversation to the model); a tmux deployment on a
private tmux server; a systemd deployment through the systemd door against a scratch unit
``tl-drill-<id>.service`` (provision/accept/unit.py: tmux in the unit, tl-launch on a scratch
pointer, the switch a ``systemctl restart`` of that unit; line ``drill scratch unit
restarted``). What is not drilled gets a SKIP line saying "not drilled: …", so the report never
implies it was: always the worker's escape from the unit's cgroup (``drill worker escape``),
and — with a fallback to the private tmux pane — a unit shape no scratch unit reproduces
(claude without tmux) or a sudo rule that allows only the real unit (``drill systemd door``).

The scratch lives in ``<state_dir>/accept-drill/<id>/`` and holds its own HOME, workdir, project
dir (a 0600 copy of the newest session transcript), state dir and runtime config; the target is a
pane on a private tmux server (``tmux -L tl-drill-<id> -f /dev/null``). The real pane, store and
transcript are never addressed.

Channel isolation (the drill that stole the Telegram token): the scratch claude keeps every
channel flag on its argv — that is what the drill checks — but its HOME has none of the user's
plugins or MCP servers (scratch workdir without ``.mcp.json``) and a settings.json without
hooks or status line, so no real channel server, plugin or user hook is started. Instead each
expected channel (``switch.expected_channel_servers``, kept as the deployment renders it) gets
a harmless stand-in (provision/accept/standins.py): a ``server:NAME`` one is registered under
its own name with the same argv shape; a ``plugin:P@M`` one is a stand-in plugin installed in
the scratch config dir as Claude Code lays one out, resolved from the real install the way the
health check resolves it. So the drill's health check recognises channels exactly as the real
switch will — and a deployment where it cannot (a plugin not installed, a server not where
claude reads it) fails here, with the reason (``drill channel servers recognised``). Channel
*reachability* is ``--live``'s job.

The drill runs the real path: ``runtime.switch.ops.request`` on the scratch config, then the
``tl-rebuild hook-stop`` of settings.json with a Stop payload, whose detached worker switches the
scratch pane. Afterwards the scratch tmux server is killed and every process whose cwd is in the
scratch or whose HOME is the scratch HOME is waited for, then killed and listed. The scratch
folder is removed when every line passed, kept (path in the evidence) when one failed.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provision.accept.process import claude_argv
from provision.accept.scratch import (
    Scratch,
    give_to_state_owner,
    prepare_scratch,
    processes_of,
)
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.accept.checklist import Checklist, Scene
    from provision.host import Host
    from runtime.proc import Result

PHASES = ("scheduled", "worker_spawned", "worker_started", "stable", "frozen", "identity",
          "built", "verifying", "verified", "activating", "rechecked", "switched", "health",
          "activated")
TERMINAL = ("activated", "failed", "cancelled", "rolled_back")
REQUIRED = ("drill activated", "drill pane pid changed", "drill old transcript byte-identical",
            "drill backup present", "drill channel flags on the new process",
            "drill channel servers recognised", "drill timeline complete")
REQUIRED_SYSTEMD = (*REQUIRED, "drill scratch unit restarted")
REQUIRED_POINTER = ("drill activated", "drill pointer names the new session",
                    "drill old transcript byte-identical", "drill backup present",
                    "drill timeline complete")


def drill_stage(scene: Scene, out: Checklist) -> None:
    """Prepare the scratch, rebuild it through the hook, judge it, clean up."""
    started = time.monotonic()
    if scene.config is None or scene.manifest is None:
        out.cannot_judge("drill scratch ready", "needs the manifest and the runtime config")
        return
    door = own = scene.config.switch.door
    if own is DoorKind.SYSTEMD:  # said, never implied
        from provision.accept.unit import ESCAPE_NOT_DRILLED, shape_problem

        problem = shape_problem(scene)
        if problem:
            door = DoorKind.TMUX
            out.add("drill systemd door", None, problem)
        else:
            out.add("drill worker escape", None, ESCAPE_NOT_DRILLED)
    scratch: Scratch | None = None
    try:
        with out.guard("drill scratch ready"):
            scratch = prepare_scratch(scene, uuid.uuid4().hex[:10], door)
            out.add("drill scratch ready", True,
                    {**scratch.evidence(), "door": door, "deployment_door": own})
        if scratch is not None:
            with out.guard("drill error"):
                (_rebuild_pointer if door is DoorKind.POINTER else _rebuild)(scene, scratch, out)
        named = {line.name for line in out.lines}
        wanted = {DoorKind.POINTER: REQUIRED_POINTER,
                  DoorKind.SYSTEMD: REQUIRED_SYSTEMD}.get(door, REQUIRED)
        out.not_reached([name for name in wanted if name not in named])
    finally:
        if scratch is not None:
            cleanup(scene, scratch, out)
        out.numbers["drill_seconds"] = round(time.monotonic() - started, 2)


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _rebuild(scene: Scene, scratch: Scratch, out: Checklist) -> None:
    """The old claude in the scratch pane (in the scratch unit for the systemd door), then the
    Stop hook's detached worker switches it."""
    from provision.accept.unit import ScratchUnit, main_pid_of

    host = scene.host
    unit = ScratchUnit(scratch.unit) if scratch.unit else None
    if unit is not None and scene.manifest is not None:
        tl_launch = tl_rebuild_of(scene).rsplit("/", 1)[0] + "/tl-launch"
        old_pid = scratch.start_unit(host, scene.manifest.launch_argv, tl_launch)
    else:
        old_pid = scratch.start_old(host)
    if old_pid is None:
        out.add("drill old claude running", False, {"screen": scratch.screen(host)[-600:]})
        return
    old_argv = claude_argv(old_pid, scene.manifest.binary) if scene.manifest else []
    out.add("drill old claude running", True,
            {"pid": old_pid, "argv": old_argv, "uid": _uid(host, old_pid)})
    real_unit = scene.config.switch.systemd.unit if scene.config else ""
    main_before = unit.main_pid(host) if unit else None
    real_before = main_pid_of(host, real_unit) if unit else None
    record, before = request_and_trigger(scene, scratch, out, scratch.run_hook)
    after = unit.main_pid(host) if unit is not None else None
    if unit is not None:
        restarted = main_before is not None and after is not None and after != main_before
        unit_evidence = {"unit": unit.name, "main_pid_before": main_before,
                         "main_pid_after": after, "deployment_unit": real_unit,
                         "deployment_main_pid_before": real_before,
                         "deployment_main_pid_after": main_pid_of(host, real_unit)}
        if restarted or _activated(record):
            out.add("drill scratch unit restarted", restarted, unit_evidence)
        else:
            out.cannot_judge("drill scratch unit restarted", unit_evidence)
    _judge(scene, scratch, out, record, old_pid, old_argv, after)
    _common(scene, scratch, out, record, before)


def _rebuild_pointer(scene: Scene, scratch: Scratch, out: Checklist) -> None:
    """Request, then the runner's hook call switches the scratch pointer in the foreground."""
    host = scene.host
    record, before = request_and_trigger(scene, scratch, out, scratch.run_runner_hook)
    state = record.state.value
    new_id = record.fact("new_session_id")
    named = (host.read_bytes(scratch.pointer) or b"").decode("utf-8", "replace").strip()
    project = scratch.transcript.rsplit("/", 1)[0]
    present = bool(new_id) and host.stat(f"{project}/{new_id}.jsonl") is not None
    pointer = {"pointer": scratch.pointer, "names": named, "new_session": new_id,
               "session_file_present": present}
    if state == "activated":
        out.add("drill pointer names the new session", named == new_id and present, pointer)
    else:
        out.cannot_judge("drill pointer names the new session", pointer)
    # The runner's call runs the worker in the foreground: no worker_spawned line.
    _common(scene, scratch, out, record, before,
            tuple(p for p in PHASES if p != "worker_spawned"))


def _uid(host: Host, pid: int) -> int | None:
    """The real uid of ``pid`` (``Uid:`` of /proc/PID/status), None when unreadable."""
    for line in (host.read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("Uid:") and len(line.split()) > 1 and line.split()[1].isdigit():
            return int(line.split()[1])
    return None


def request_and_trigger(scene: Scene, scratch: Scratch, out: Checklist,
                        hook_call: Callable[[Host, str], Result]) -> tuple[Any, bytes]:
    """Request a rebuild of the scratch session, make the door's hook call, wait for the end;
    the final record and the copied transcript as it was before (``drill activated``)."""
    from runtime.switch.ops import request

    host = scene.host
    before = host.read_bytes(scratch.transcript) or b""
    op = request(scratch.config(), "tl-provision accept --drill", "REBUILD",
                 session_id=scratch.session, source="accept-drill")
    op_id = op["operation_id"]
    if scratch.runs_as_user:  # the request was written by root: the user's hook updates it
        give_to_state_owner(scene, scratch.state, recursive=True)
    switch_started = time.monotonic()
    hook = hook_call(host, tl_rebuild_of(scene))
    record = scratch.wait_terminal(op_id, TERMINAL)
    out.numbers["drill_switch_seconds"] = round(time.monotonic() - switch_started, 2)
    state = record.state.value
    out.add("drill activated", state == "activated",
            {"operation_id": op_id, "state": state,
             "failure": dict(record.failure) if record.failure else None,
             "hook_rc": hook.rc, "scratch": scratch.root, "door": scratch.door})
    return record, before


def _common(scene: Scene, scratch: Scratch, out: Checklist, record: Any,
            before: bytes, wanted: tuple[str, ...] = PHASES) -> None:
    """The lines every door shares: old transcript intact, backup present, timeline complete."""
    backup = record.fact("backup") or ""
    saved = scene.host.read_bytes(backup) if backup else None
    _old_transcript(scene.host, scratch, out, record, before, saved)
    backup_line(scene, out, record)
    timeline_line(scratch, out, record, wanted)


def backup_line(scene: Scene, out: Checklist, record: Any) -> bytes | None:
    """``drill backup present``: the frozen copy, 0600, with the source's digest; its bytes.

    A switch stopped before the backup made none: then the line names why (cannot_judge)."""
    backup = record.fact("backup") or ""
    saved = scene.host.read_bytes(backup) if backup else None
    found = scene.host.stat(backup) if backup else None
    kept = {"backup": backup, "mode": oct(found.mode) if found else None, "sha256": _sha(saved)}
    if backup or _activated(record):
        out.add("drill backup present", saved is not None and found is not None
                and _sha(saved) == record.fact("source_sha256") and found.mode == 0o600, kept)
    else:
        out.cannot_judge("drill backup present", kept)
    return saved


def timeline_line(scratch: Scratch, out: Checklist, record: Any,
                  wanted: tuple[str, ...] = PHASES) -> None:
    phases = [event.get("phase") for event in scratch.events(record.operation_id)]
    absent = [phase for phase in wanted if phase not in phases]
    if _activated(record):
        out.add("drill timeline complete", not absent, {"phases": phases, "missing": absent})
    else:  # where it stopped is the failed 'drill activated' line's evidence
        out.cannot_judge("drill timeline complete", {"phases": phases, "missing": absent})


def _activated(record: Any) -> bool:
    return bool(record.state.value == "activated")


def tl_rebuild_of(scene: Scene) -> str:
    """The deployment's ``tl-rebuild``: the installed hook's program, else where apply finds it."""
    if scene.hook is not None:
        return shlex.split(str(scene.hook["command"]))[0]
    from provision.tasks.settings import find_tl_rebuild

    return find_tl_rebuild(scene.host, scene.profile)


def _judge(scene: Scene, scratch: Scratch, out: Checklist, record: Any, old_pid: int,
           old_argv: list[str], unit_pid: int | None = None) -> None:
    """What a process door shows: the pane's new pid, its channel flags and channel servers.
    The systemd door's identity is the scratch unit's MainPID (``unit_pid``, its tmux)."""
    from runtime.agents.claude import channel_flags

    activated = _activated(record)
    judge = out.add if activated else lambda name, _passed, evidence: out.cannot_judge(
        name, evidence)  # nothing new to judge: skipped, naming 'drill activated'
    after_id = record.fact("identity_after")
    now = scratch.pane_pid(scene.host)
    identity_now = str(unit_pid) if scratch.unit else str(now)
    judge("drill pane pid changed", bool(after_id) and now is not None and now != old_pid
          and identity_now == after_id,
          {"before": old_pid, "identity_after": after_id, "pane_pid_now": now,
           **({"unit_main_pid_now": unit_pid} if scratch.unit else {})})
    new_argv = claude_argv(now, scene.manifest.binary) if now and scene.manifest else []
    wanted = list(dict.fromkeys([*channel_flags(old_argv),
                                 *channel_flags(scratch.config().switch.channel_flags)]))
    have = channel_flags(new_argv)
    missing = [flag for flag in wanted if flag not in have]
    new_session = record.fact("new_session_id")
    judge("drill channel flags on the new process",
          not missing and bool(new_session) and new_session in new_argv,
          {"pid": now, "argv": new_argv, "required": wanted, "missing": missing})
    _servers_recognised(scratch, out, scratch.events(record.operation_id))


def _servers_recognised(scratch: Scratch, out: Checklist,
                        events: list[dict[str, Any]]) -> None:
    """Every expected channel server — plugin ones too — was recognised by the switch's own
    health check; one without a stand-in fails with the reason."""
    expected = list(scratch.config().switch.expected_channel_servers)
    health = next((e for e in events if e.get("phase") == "health"), {})
    found = health.get("channel_servers") or {}
    status = {name: (found.get(name) or {}).get("status", "not checked") for name in expected}
    bad = {name: s for name, s in status.items() if s != "running"}
    reason = health.get("reason", "") if bad else ""
    found_now = {"expected": expected, "status": status, "health_reason": reason,
                 "standins": list(scratch.standins), "without_standin": dict(scratch.no_standin)}
    if health or scratch.no_standin:  # what the health check saw, or what it could not see
        out.add("drill channel servers recognised", bool(health) and not bad
                and not scratch.no_standin, found_now)
    else:  # the switch ended before its health check
        out.cannot_judge("drill channel servers recognised", found_now)


def _old_transcript(host: Host, scratch: Scratch, out: Checklist, record: Any, before: bytes,
                    saved: bytes | None) -> None:
    """The copy is what it was: the frozen bytes are still its exact prefix.

    Real claude 2.1.328 appends a ``cost-state`` line to its session file when ``respawn-pane
    -k`` ends it: bookkeeping written by the old process itself, after the switch. Such lines
    are reported; a changed byte, or an appended user/assistant line, fails.
    """
    old_copy_line(host, scratch, out, record, before, saved,
                  "drill old transcript byte-identical", {"user", "assistant"}, "claude")


def old_copy_line(host: Host, scratch: Scratch, out: Checklist, record: Any, before: bytes,
                  saved: bytes | None, name: str, speech: set[str], agent: str) -> None:
    """``name``: the frozen bytes (``before`` when the worker froze nothing) are still an exact
    prefix of the scratch copy, and no line of a type in ``speech`` was appended after them."""
    current = host.read_bytes(scratch.transcript) or b""
    frozen = saved if saved is not None and _sha(saved) == record.fact("source_sha256") else None
    reference = frozen if frozen is not None else before  # not frozen: the worker stopped early
    appended = current[len(reference):]
    types = [_type_of(line) for line in appended.splitlines() if line.strip()]
    intact = (current.startswith(reference) and reference.startswith(before)
              and not speech & set(types))
    out.add(name, intact,
            {"frozen_sha256": record.fact("source_sha256"), "frozen_bytes": len(frozen or b""),
             "now_bytes": len(current), f"appended_by_the_old_{agent}": types})


def _type_of(line: bytes) -> str:
    try:
        event = json.loads(line)
    except ValueError:
        return "unparsable"
    return str(event.get("type")) if isinstance(event, dict) else "unparsable"


def _remove_socket(host: Host, scratch: Scratch, path: str) -> str | None:
    """Unlink the scratch tmux server's socket file once the server is gone: tmux leaves it
    behind on kill-server and SIGTERM alike (measured, tmux 3.3a), and the systemd door's
    scratch unit puts it in the default socket folder, outside the scratch. Only a socket named
    exactly like our server, never anything else."""
    if not path or path.rsplit("/", 1)[-1] != scratch.socket:
        return None
    if scratch.tmux(host, "has-session").ok:  # a server answers there: not ours to remove
        return None
    if not host.run(["test", "-S", path], timeout=10).ok:
        return None
    return path if host.run(["rm", "-f", "--", path], timeout=10).ok else None


def cleanup(scene: Scene, scratch: Scratch, out: Checklist) -> None:
    """Stop the scratch unit (systemd door) and kill the scratch tmux server, wait 10 s for
    their processes, kill what is left (listed); remove the scratch folder unless a drill line
    failed."""
    from provision.accept.unit import ScratchUnit

    host = scene.host
    shown = scratch.tmux(host, "display-message", "-p", "#{socket_path}")
    socket_path = shown.stdout.strip() if shown.ok else ""
    unit = ScratchUnit(scratch.unit).remove(host) if scratch.unit else None
    scratch.kill_server(host)
    deadline = time.monotonic() + 10.0
    left = processes_of(host, scratch)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_of(host, scratch)
    killed = []
    for pid, argv in left:
        host.run(["kill", "-KILL", str(pid)], timeout=10)
        killed.append({"pid": pid, "argv": argv})
    # SIGKILL is delivered at once but the process takes a moment to exit (a loaded machine
    # showed it still there on the next look): wait for that, bounded, before calling it left.
    deadline = time.monotonic() + 5.0
    remaining = processes_of(host, scratch)
    while remaining and killed and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = processes_of(host, scratch)
    removed = _remove_socket(host, scratch, socket_path) if not remaining else None
    out.add("drill no orphans", not remaining and (
        unit is None or unit["load_state_after"] == "not-found"),
            {"killed_after_grace": killed, "remaining": [p for p, _ in remaining],
             "tmux_socket": scratch.socket, "tmux_socket_removed": removed,
             "scratch_unit": unit})
    drill_failed = any(line.stage == "drill" and line.status == "fail" for line in out.lines)
    if drill_failed:
        out.numbers["drill_kept_scratch"] = 1
        with out.guard("drill kept scratch given to the state dir's owner"):
            give_to_state_owner(scene, scratch.root, recursive=True)  # the user can read, rm it
    else:
        scratch.remove(host)
