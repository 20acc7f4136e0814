"""``accept --drill`` on a Codex host: a real switch of a scratch codex in a private tmux.

The scratch lives in ``<state_dir>/accept-drill/<id>/``:

    home/                 the scratch codex's HOME
    home/.codex/          its CODEX_HOME: a copy of the rollout the pane's codex runs (and of
                          the rollouts a fork/revert copy names in ``history_base``), a
                          config.toml of the deployment's model settings only, an auth.json
                          with a dummy API key
    state/                the scratch operations store
    threadline.toml       the deployment's runtime config pointed at the above and at pane
                          ``drill:0.0`` of the private tmux server ``tl-drill-<id>``

No model is ever asked. Nobody types into the scratch codex, ``codex resume`` sends nothing
until a prompt, and the turn end is a synthetic notify call — as the Claude drill runs the Stop
hook itself. Still, codex is never pointed at a real model: every provider of the scratch
config.toml (``openai_base_url`` for the built-in ``openai``, ``base_url`` of each
``[model_providers.*]`` the user had, with ``env_key`` a drill variable) points at a loopback
stand-in that refuses and records everything (provision/accept/model_standin.py), and the only
credential is a dummy key (``auth.json`` ``{"auth_mode": "apikey"}``, measured with ``codex login
--with-api-key`` of 0.169.0: without it the TUI stops at its sign-in screen and locks no
thread). The user's ``[mcp_servers]``, hooks and own notify program are not copied (evidence
``mcp_servers_not_started``); the scratch notify is our head on the scratch config. The
scratch codex runs with ``env -i`` (PATH, LANG, TMUX_TMPDIR, HOME, CODEX_HOME, the drill key):
no key of the operator's environment reaches it. ``-c`` options of the resume argv are kept —
they are what is drilled — and win over the scratch config.

The scratch codex runs in the deployment's workdir: the resume argv's ``--cd`` is part of what
is drilled, and codex asks where to run when a thread is resumed elsewhere. Without a turn it
writes nothing there; everything it writes goes to the scratch CODEX_HOME.

The drill runs the real path: the resume argv of the copied thread in the scratch pane
(``drill old codex running``: it holds that thread's writer lock), ``runtime.switch.ops.request``
bound to the thread, then ``tl-rebuild hook-notify`` with the thread's turn-end payload, whose
detached worker rebuilds the copy and respawns the pane. A line whose input an earlier line
failed to produce is SKIP naming it (checklist.NEEDS). Afterwards the scratch tmux server is
killed and anything left of the scratch HOME (a ``codex app-server --managed-daemon`` too) is
killed and listed (``drill no orphans``); the scratch is removed when every drill line passed.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.accept.drill import (
    backup_line,
    cleanup,
    old_copy_line,
    request_and_trigger,
    timeline_line,
    tl_rebuild_of,
)
from provision.accept.scratch import TARGET, Scratch, drill_root
from provision.errors import AcceptError
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.accept.checklist import Checklist, Scene

# config.toml keys that shape a session and start nothing (a profile, ``-p``, may set them too)
KEEP = ("model", "model_provider", "model_reasoning_effort", "model_reasoning_summary",
        "model_verbosity", "approval_policy", "sandbox_mode", "profile", "model_context_window",
        "model_auto_compact_token_limit")
DRILL_KEY = "TL_DRILL_MODEL_KEY"
DUMMY = "tl-drill-stand-in"
PHASES = ("scheduled", "worker_spawned", "worker_started", "stable", "frozen", "identity",
          "built", "verifying", "verified", "activating", "rechecked", "switched", "health",
          "activated")


def scratch_codex_config(real: dict[str, Any], model_url: str, workdir: str,
                         notify: list[str]) -> dict[str, Any]:
    """The scratch config.toml (pure): the deployment's model settings, every provider on the
    stand-in with the drill key, the workdir trusted, our notify head; nothing that starts a
    process (mcp_servers, hooks, the user's notify) and no credential."""
    data: dict[str, Any] = {k: real[k] for k in KEEP if k in real}
    data.update(notify=notify, check_for_update_on_startup=False, openai_base_url=model_url)
    providers = real.get("model_providers")
    if isinstance(providers, dict) and providers:
        data["model_providers"] = {
            name: {"name": str(spec.get("name", name)) if isinstance(spec, dict) else name,
                   "base_url": model_url, "env_key": DRILL_KEY,
                   "wire_api": (spec.get("wire_api") if isinstance(spec, dict) else None)
                   or "responses",
                   "request_max_retries": 0, "stream_max_retries": 0}
            for name, spec in providers.items()}
    profiles = real.get("profiles")
    if isinstance(profiles, dict) and profiles:
        data["profiles"] = {name: {k: v for k, v in spec.items() if k in KEEP}
                            for name, spec in profiles.items() if isinstance(spec, dict)}
    data["analytics"] = {"enabled": False}
    data["feedback"] = {"enabled": False}
    data["projects"] = {workdir: {"trust_level": "trusted"}}
    return data


def _rollouts_to_copy(sessions: Path, rollout: Path, limit: int = 16) -> list[Path]:
    """The rollout and, for a fork/revert copy, the rollouts its ``history_base`` names (Codex
    pulls those in by thread id on resume: notes/codex-live.md §5)."""
    found, todo = [rollout], [rollout]
    while todo and len(found) < limit:
        with todo.pop().open("rb") as handle:
            try:
                meta = json.loads(handle.readline()).get("payload") or {}
            except (ValueError, AttributeError):
                continue
        parent = (meta.get("history_base") or {}).get("thread_id") if isinstance(
            meta, dict) else None
        if not isinstance(parent, str) or not parent or "/" in parent:
            continue
        for path in sorted(sessions.rglob(f"rollout-*{parent}*.jsonl")):
            if path not in found:
                found.append(path)
                todo.append(path)
    return found


def prepare_codex_scratch(scene: Scene, tag: str, model_url: str) -> Scratch:
    """Create the scratch world for the thread the pane's codex holds (``scene.thread``)."""
    import tomllib

    import tomlkit

    host, profile, config = scene.host, scene.profile, scene.config
    assert config is not None and config.project_dir is not None and profile.codex is not None
    if scene.rollout is None or not scene.thread:
        raise AcceptError("no source thread to drill on (line 'source thread held by the pane')")
    if config.workdir is None:
        raise AcceptError("the runtime config has no workdir; re-run apply")
    root = drill_root(scene, tag)
    home, state = f"{root}/home", f"{root}/state"
    codex_home = f"{home}/.codex"
    for path in (root, home, codex_home, state):
        host.ensure_dir(path, 0o700)
    copies = {}
    for source in _rollouts_to_copy(config.project_dir, scene.rollout):
        target = f"{codex_home}/sessions/{source.relative_to(config.project_dir)}"
        host.ensure_dir(target.rsplit("/", 1)[0], 0o700)
        host.write_file(target, host.read_bytes(str(source)) or b"", mode=0o600, backup=False)
        copies[str(source)] = target
    raw = host.read_bytes(profile.codex.config_path) or b""
    real = tomllib.loads(raw.decode("utf-8"))
    config_path = f"{root}/threadline.toml"
    notify = [tl_rebuild_of(scene), "hook-notify", "--config", config_path]
    host.write_file(f"{codex_home}/config.toml", tomlkit.dumps(scratch_codex_config(
        real, model_url, str(config.workdir), notify)).encode(), mode=0o600, backup=False)
    host.write_file(f"{codex_home}/auth.json", json.dumps(
        {"auth_mode": "apikey", "OPENAI_API_KEY": DUMMY}, indent=2).encode(), mode=0o600,
        backup=False)
    runtime = tomllib.loads((host.read_bytes(profile.install.config_path) or b"").decode())
    runtime.update(codex_home=codex_home, project_dir=f"{codex_home}/sessions",
                   state_dir=state)
    switch = runtime.setdefault("switch", {})
    switch.update(door=DoorKind.TMUX.value, worker_log=f"{state}/worker.log",
                  tmux={"target": TARGET, "socket_name": f"tl-drill-{tag}"})
    host.write_file(config_path, tomlkit.dumps(runtime).encode(), mode=0o600, backup=False)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TMUX_TMPDIR") if k in os.environ}
    prefix = ["env", "-i", *(f"{k}={v}" for k, v in keep.items()), f"HOME={home}",
              f"CODEX_HOME={codex_home}", f"{DRILL_KEY}={DUMMY}"]
    servers = real.get("mcp_servers")
    dropped = tuple(sorted(servers)) if isinstance(servers, dict) else ()
    return Scratch(root, home, None, str(config.workdir), state, config_path,
                   copies[str(scene.rollout)], scene.thread, f"tl-drill-{tag}", tuple(prefix),
                   dropped)


def codex_drill_stage(scene: Scene, out: Checklist) -> None:
    """Prepare the scratch, switch its codex through notify, judge it, clean up."""
    from provision.accept.model_standin import ModelStandIn

    started = time.monotonic()
    if scene.config is None or scene.manifest is None or scene.rollout is None:
        out.cannot_judge("drill scratch ready",
                         "needs the manifest, the runtime config and the pane's thread")
        return
    scratch: Scratch | None = None
    with ModelStandIn() as model:
        try:
            with out.guard("drill scratch ready"):
                scratch = prepare_codex_scratch(scene, uuid.uuid4().hex[:10], model.url)
                out.add("drill scratch ready", True,
                        {**_evidence(scratch), "model_stand_in": model.url})
            if scratch is not None:
                with out.guard("drill error"):
                    _switch(scene, scratch, out)
        finally:
            if scratch is not None:
                out.add("drill no model request", not model.requests,
                        {"stand_in": model.url, "requests": list(model.requests)})
                cleanup(scene, scratch, out)
            out.numbers["drill_seconds"] = round(time.monotonic() - started, 2)


def _evidence(scratch: Scratch) -> dict[str, Any]:
    return {"root": scratch.root, "tmux_socket": scratch.socket, "target": TARGET,
            "thread": scratch.session, "rollout_copy": scratch.transcript,
            "workdir": scratch.work, "mcp_servers_not_started": list(scratch.dropped_servers)}


def _codex_home(scratch: Scratch) -> Path:
    return Path(scratch.home) / ".codex"


def _start_old(scene: Scene, scratch: Scratch, out: Checklist) -> tuple[int, list[str]] | None:
    """The copied thread's resume argv in the scratch pane, until it holds the thread's lock."""
    from runtime import procfs

    host = scene.host
    pid = scratch.start_old(host, timeout=60.0)
    threads: tuple[str, ...] = ()
    deadline = time.monotonic() + 90.0
    while pid is not None and time.monotonic() < deadline:
        threads = procfs.codex_writer_locks(_codex_home(scratch), pid)
        if threads or not procfs.alive(pid):
            break
        time.sleep(0.1)
    argv = list(procfs.cmdline(procfs.command_pid(pid)) or ()) if pid else []
    ok = pid is not None and threads == (scratch.session,)
    out.add("drill old codex running", ok,
            {"pid": pid, "argv": argv, "threads": list(threads)} if ok else
            {"pid": pid, "argv": argv, "threads": list(threads),
             "screen": scratch.screen(host)[-800:]})
    return (pid, argv) if ok and pid is not None else None


def _switch(scene: Scene, scratch: Scratch, out: Checklist) -> None:
    host = scene.host
    old = _start_old(scene, scratch, out)
    if old is None:
        for name in ("drill activated", "drill new codex holds the new thread",
                     "drill old rollout byte-identical", "drill backup present",
                     "drill timeline complete"):
            out.cannot_judge(name, "no scratch codex on the copied thread")
        return
    old_pid, old_argv = old
    payload = json.dumps({"type": "agent-turn-complete", "thread-id": scratch.session,
                          "turn-id": "tl-drill", "cwd": scratch.work, "client": "codex-tui",
                          "input-messages": [], "last-assistant-message": ""})

    def notify(host: Any, tl_rebuild: str) -> Any:  # the turn end codex's notify would be
        return host.run([*scratch.env_prefix, tl_rebuild, "hook-notify", "--config",
                         scratch.config_path, payload], cwd=scratch.work, timeout=60)

    record, before = request_and_trigger(scene, scratch, out, notify)
    state, op_id = record.state.value, record.operation_id
    if state == "activated":
        _new_codex(scene, scratch, out, record, old_pid, old_argv)
    else:
        out.cannot_judge("drill new codex holds the new thread", {"state": state})
    backup = record.fact("backup") or ""
    old_copy_line(host, scratch, out, record, before,
                  host.read_bytes(backup) if backup else None,
                  "drill old rollout byte-identical", {"response_item"}, "codex")
    backup_line(scene, out, record)
    if state == "activated":
        timeline_line(scratch, out, record)  # codex's worker has the same phases
    else:
        out.cannot_judge("drill timeline complete", {"phases": [
            e.get("phase") for e in scratch.events(op_id)]})


def _new_codex(scene: Scene, scratch: Scratch, out: Checklist, record: Any, old_pid: int,
               old_argv: list[str]) -> None:
    """The pane runs a new codex holding the NEW thread's lock, resumed with every option."""
    from runtime import procfs
    from runtime.agents import codex

    new_id = str(record.fact("new_session_id") or "")
    now = scratch.pane_pid(scene.host)
    argv = list(procfs.cmdline(procfs.command_pid(now)) or ()) if now else []
    threads = procfs.codex_writer_locks(_codex_home(scratch), now) if now else ()
    try:
        wanted = codex.resume_argv(old_argv, new_id) if new_id else None
    except codex.ResumeArgvError as exc:
        wanted, problem = None, str(exc)
    else:
        problem = ""
    out.add("drill new codex holds the new thread",
            bool(new_id) and now is not None and now != old_pid and threads == (new_id,)
            and argv == wanted,
            {"pane_pid_before": old_pid, "pane_pid_now": now, "new_thread": new_id,
             "threads": list(threads), "argv": argv, "wanted_argv": wanted,
             **({"error": problem} if problem else {})})
