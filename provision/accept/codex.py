"""``tl-provision accept`` on a Codex host (issue 17): the read-only and wiring lines.

Read-only: the sessions dir (``project_dir = $CODEX_HOME/sessions``) and its rollouts, the
installed paths' owner, the pane, codex's absolute path, the one thread the pane's codex holds
the writer lock for (the source of a rebuild) and its rollout, ``doctor``, and what a rebuild
of that rollout would carry (``plan``/``dirty``).

Wiring: ``$CODEX_HOME/config.toml`` holds our notify head (the user's program chained after
``--``) and ``[mcp_servers.<name>]``; our notify head alone — never the user's chained program,
which may notify a human — run as the codex user with the payload of a thread that matches
nothing exits 0 and schedules nothing; the real ``codex mcp list --json`` sees the server and
the server lists its 7 tools over stdio; resume argv ≡ launch argv (codex's rule); the live
codex was started that way and holds its thread in the pane (``--no-daemon`` or ``-c``); the
notify head is still there after a pause (a running codex rewrites config.toml).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from provision.accept.process import fmt_argv_diff
from provision.accept.readonly import _plan_lines, agent_lines
from provision.accept.wiring import schedules_nothing, store_snapshot
from provision.errors import HostError

if TYPE_CHECKING:
    from provision.accept.checklist import Checklist, Scene
    from provision.parsers.codex_config import Wanted

TOKEN = "tlaccept0thread0token"  # a valid thread id, put in both argvs to compare them
TOOLS = "MCP server lists its 7 tools"
NOTIFY_TIMEOUT = 10.0  # Codex runs notify detached; ours must return at once all the same


def codex_readonly_stage(scene: Scene, out: Checklist) -> None:
    """Sessions, owner, pane, binary, the pane's thread and rollout, doctor, plan/dirty."""
    out.stage = "readonly"
    config = scene.config
    if config is None or config.project_dir is None:
        for name in ("sessions dir exists", "door target alive", "codex binary absolute",
                     "source thread held by the pane", "doctor"):
            out.cannot_judge(name, "no runtime config")
        return
    sessions = config.project_dir
    out.add("sessions dir exists", sessions.is_dir(), str(sessions))
    rollouts = sorted(sessions.rglob("rollout-*.jsonl")) if sessions.is_dir() else []
    out.add("rollouts > 0", bool(rollouts), {"count": len(rollouts)})
    agent_lines(scene, out)
    with out.guard("source thread held by the pane"):
        _source_thread(scene, out)
    with out.guard("doctor"):
        from runtime.switch.ops import doctor

        report = doctor(config)
        bad = {k: v for k, v in report["checks"].items() if not v["ok"]}
        out.add("doctor", not bad, bad or "every doctor check ok")
    if scene.rollout is None:
        for name in ("nothing blocked", "selected turns = source turns", "nothing dropped",
                     "noise ratio plausible"):
            out.cannot_judge(name, "no source rollout")
        return
    with out.guard("nothing blocked"):
        _plan_lines(config, out, scene.rollout)


def live_codex(scene: Scene) -> tuple[int | None, list[str]]:
    """(the pane's pid, codex's live argv) — the npm wrapper's or the native binary's."""
    from runtime import procfs
    from runtime.doors.base import open_door

    assert scene.config is not None
    try:
        door = open_door(scene.config)
        pid = door.process_pid(door.identity())
    except Exception:  # noqa: BLE001 - no live process is a fact, reported by the caller
        return None, []
    if not pid:
        return None, []
    return pid, list(procfs.cmdline(procfs.command_pid(pid)) or ())


def _source_thread(scene: Scene, out: Checklist) -> None:
    """The one thread whose writer lock the pane's codex holds, and its rollout."""
    from runtime.errors import TranscriptError
    from runtime.paths import codex_rollout
    from runtime.procfs import codex_writer_locks

    name = "source thread held by the pane"
    config = scene.config
    assert config is not None and config.project_dir is not None
    pid, _ = live_codex(scene)
    if pid is None or config.codex_home is None:
        out.cannot_judge(name, {"pid": pid, "codex_home": str(config.codex_home)})
        return
    threads = codex_writer_locks(config.codex_home, pid)
    try:
        rollout = codex_rollout(config.project_dir, threads[0]) if len(threads) == 1 else None
    except TranscriptError as exc:  # two copies of the thread's rollout: not one to judge
        out.add(name, False, {"pid": pid, "threads": list(threads), "error": str(exc)})
        return
    scene.thread, scene.rollout = (threads[0], rollout) if rollout else ("", None)
    out.add(name, rollout is not None,
            {"pid": pid, "threads": list(threads), "rollout": str(rollout) if rollout else None})


def codex_wiring_stage(scene: Scene, out: Checklist, pause: float = 2.0,
                       sleep: Callable[[float], None] = time.sleep) -> None:
    """config.toml, notify, MCP, resume ≡ launch, own server, notify after a pause."""
    out.stage = "wiring"
    wanted: Wanted | None = None
    notify = server = False
    with out.guard("notify runs tl-rebuild hook-notify"):
        wanted, notify, server = _config_lines(scene, out)
    with out.guard("notify exits 0 on a synthetic turn end"):
        _notify_fires(scene, out, wanted if notify else None)
    with out.guard("codex mcp list shows the server"):
        _mcp_listed(scene, out, wanted if server else None)
    with out.guard(TOOLS):
        _mcp_tools(scene, out, wanted if server else None)
    with out.guard("resume argv ≡ launch argv"):
        _resume_equiv(scene, out)
    sleep(pause)
    name = "notify still present after a pause"
    if wanted is None or not notify:
        out.cannot_judge(name, "no notify head before the pause")
        return
    with out.guard(name):
        problems = _problems(scene, wanted)
        out.add(name, not [p for p in problems if "notify" in p],
                {"pause_s": pause, "problems": problems})


def _problems(scene: Scene, wanted: Wanted) -> list[str]:
    from provision.parsers import codex_config as cc

    assert scene.profile.codex is not None
    path = scene.profile.codex.config_path
    raw = scene.host.read_bytes(path)
    return cc.findings(cc.load((raw or b"").decode("utf-8"), path), wanted)


def _config_lines(scene: Scene, out: Checklist) -> tuple[Wanted, bool, bool]:
    """Our notify head and MCP table in config.toml (as apply merged them): (what we want
    there, notify as wanted, server as wanted)."""
    from provision.result import Context
    from provision.tasks.codex_config import wanted_of

    assert scene.profile.codex is not None
    path = scene.profile.codex.config_path
    wanted = wanted_of(scene.host, Context(scene.profile, check=True))
    problems = _problems(scene, wanted)
    notify = [p for p in problems if "notify" in p]
    server = [p for p in problems if "mcp_servers" in p]
    out.add("notify runs tl-rebuild hook-notify", not notify,
            {"path": path, "problems": notify} if notify else
            {"path": path, "head": wanted.notify_head})
    out.add("MCP server in config.toml", not server,
            {"path": path, "problems": server} if server else
            {"path": path, "server": wanted.mcp_name,
             "argv": [wanted.tl_rebuild, *wanted.mcp_args]})
    return wanted, not notify, not server


def codex_env_prefix(scene: Scene) -> list[str]:
    """``[runuser -u USER --] env -u TMUX -u TMUX_PANE CODEX_HOME=…``: as codex runs."""
    import os
    import pwd

    spec = scene.profile.codex
    assert spec is not None
    user = scene.profile.claude.user  # the codex user on a Codex host (profile.py)
    prefix = ["runuser", "-u", user, "--"] if user != pwd.getpwuid(os.getuid()).pw_name else []
    return [*prefix, "env", "-u", "TMUX", "-u", "TMUX_PANE", f"CODEX_HOME={spec.home}"]


def _notify_fires(scene: Scene, out: Checklist, wanted: Wanted | None) -> None:
    """Our head (not the user's chained program) with a turn end of a thread that matches
    nothing: exit 0 within the bound, no operation created or changed."""
    name = "notify exits 0 on a synthetic turn end"
    if wanted is None or scene.config is None:
        out.cannot_judge(name, "no notify head in config.toml (or no runtime config)")
        out.cannot_judge("notify schedules nothing", "notify not run")
        return
    config = scene.config
    thread = str(uuid.uuid4())  # matches no rollout and no operation
    payload = json.dumps({"type": "agent-turn-complete", "thread-id": thread,
                          "turn-id": "tl-accept", "cwd": str(config.workdir or "/"),
                          "client": "codex-tui", "input-messages": [],
                          "last-assistant-message": ""})
    before = store_snapshot(config)
    argv = [*codex_env_prefix(scene), *wanted.notify_head, payload]
    cwd = str(config.workdir) if config.workdir and config.workdir.is_dir() else "/"
    started = time.monotonic()
    try:
        result = scene.host.run(argv, cwd=cwd, timeout=NOTIFY_TIMEOUT)
    except HostError as exc:
        out.add(name, False, {"error": str(exc), "timeout_s": NOTIFY_TIMEOUT})
    else:
        ms = round((time.monotonic() - started) * 1000, 1)
        out.numbers["notify_ms"] = ms
        out.add(name, result.ok, {"rc": result.rc, "ms": ms, "thread": thread,
                                  "user_program_run": False,
                                  "stderr": result.stderr.strip()[:200]})
    schedules_nothing(out, "notify schedules nothing", before, store_snapshot(config))


def _mcp_listed(scene: Scene, out: Checklist, wanted: Wanted | None) -> None:
    """The real ``codex mcp list --json`` with this CODEX_HOME lists our server as merged."""
    name = "codex mcp list shows the server"
    if wanted is None or scene.config is None or not scene.config.switch.resume_argv:
        out.cannot_judge(name, "needs our MCP table, the runtime config and codex's path")
        return
    codex = scene.config.switch.resume_argv[0]
    result = scene.host.run([*codex_env_prefix(scene), codex, "mcp", "list", "--json"],
                            timeout=60)
    try:
        servers = {s.get("name"): s for s in json.loads(result.stdout or "[]")}
    except (ValueError, AttributeError) as exc:
        out.add(name, False, {"rc": result.rc, "error": str(exc),
                              "stderr": result.stderr.strip()[-300:]})
        return
    transport = (servers.get(wanted.mcp_name) or {}).get("transport") or {}
    argv = [transport.get("command"), *(transport.get("args") or [])]
    want = [wanted.tl_rebuild, *wanted.mcp_args]
    out.add(name, argv == want, {"listed": argv if argv[0] else None, "wanted": want,
                                 "servers": sorted(map(str, servers))})


def _mcp_tools(scene: Scene, out: Checklist, wanted: Wanted | None) -> None:
    from provision.tasks.mcp import EXPECTED_TOOLS, list_mcp_tools

    name = TOOLS
    if wanted is None or scene.config is None or scene.profile.codex is None:
        out.cannot_judge(name, "the MCP server needs the runtime config")
        return
    import os

    argv = [wanted.tl_rebuild, *wanted.mcp_args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **scene.profile.codex.env}
    cwd = str(scene.config.workdir) if scene.config.workdir else "/"
    tools = list_mcp_tools(argv, env, cwd)
    missing = sorted(set(EXPECTED_TOOLS) - set(tools))
    out.add(name, not missing, {"tools": len(tools), "missing": missing, "argv": argv})


def _resume_equiv(scene: Scene, out: Checklist) -> None:
    """Resume argv ≡ codex's rule applied to the launch; the live codex launched that way and
    holding its thread in the pane."""
    from provision.tasks.verify import own_server_check
    from runtime.agents import codex
    from runtime.agents.claude import format_argv

    name = "resume argv ≡ launch argv"
    if scene.manifest is None or scene.config is None:
        for line in (name, "live argv ≡ launch argv", "codex holds its thread in the pane"):
            out.cannot_judge(line, "needs the manifest and the runtime config")
        return
    wanted = codex.resume_argv(scene.manifest.launch_argv, TOKEN)
    actual = list(format_argv(scene.config.switch.resume_argv, TOKEN))
    out.add(name, actual == wanted,
            fmt_argv_diff(wanted, actual) if actual != wanted else " ".join(actual))
    pid, live = live_codex(scene)
    if not live:
        out.add("live argv ≡ launch argv", None, "no live codex process behind the door")
        out.add("codex holds its thread in the pane", None, "no live codex process")
        return
    # the pane's process is the npm wrapper (``node …/codex …``): compare from codex on
    program = next((i for i, t in enumerate(live) if Path(t).name in codex.PROGRAMS), 0)
    live = live[program:]
    try:
        normal = codex.resume_argv(live, TOKEN)
    except codex.ResumeArgvError as exc:
        out.add("live argv ≡ launch argv", False, {"pid": pid, "error": str(exc)})
    else:
        same = codex.same_launch(scene.manifest.launch_argv, live)
        out.add("live argv ≡ launch argv", same,
                {"pid": pid, "argv": live} if same else fmt_argv_diff(wanted, normal))
    check = own_server_check(tuple(live))
    out.add("codex holds its thread in the pane", check.passed,
            {"pid": pid, "evidence": check.evidence})

