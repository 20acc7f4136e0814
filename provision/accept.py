"""``tl-provision accept HOST.yml``: the post-install acceptance checklist (SPEC §5.4).

Every line is ``pass`` / ``fail`` / ``skip`` with its evidence. Stages:

- ``readonly`` — the manifest and the rendered runtime config, ``tl-rebuild doctor``/``plan``/
  ``dirty`` expectations: project dir, transcripts, door target, claude binary, workdir ↔
  project dir, source session, nothing blocked / dropped, noise ratio.
- ``wiring`` — the Stop hook exactly as settings.json holds it, run with a synthetic payload
  (exits 0 within its timeout, schedules nothing), the MCP server's 7 tools over stdio, resume
  argv ≡ launch argv except the session token, channel flags kept, ``server:NAME`` channels
  registered, the hook still there after a pause.
- ``drill`` (provision/accept_drill.py) and ``live`` (provision/accept_live.py).

Exit code: 0 every line passed (skips allowed), 1 a line failed; usage or profile errors are
raised as ProvisionError (the CLI exits 2).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provision.accept_checks import HINTS, claude_argv, claude_pid, fmt_argv_diff
from provision.errors import AcceptError
from runtime.errors import ThreadlineError

if TYPE_CHECKING:
    from provision.host import Host
    from provision.manifest import Recorded
    from provision.profile import Profile
    from runtime.config import Config

PASS, FAIL, SKIP = "pass", "fail", "skip"
TOKEN = "tlaccept0session0token"  # a valid session id, replaced in both argvs to compare them


@dataclass(frozen=True)
class Line:
    """One checklist line: stage, name, status, evidence (JSON-able) and what to do on fail."""

    stage: str
    name: str
    status: str
    evidence: Any

    @property
    def hint(self) -> str:
        return HINTS.get(self.name.split(" [")[0], "")

    def to_dict(self) -> dict[str, Any]:
        out = {"stage": self.stage, "name": self.name, "status": self.status,
               "evidence": self.evidence}
        if self.status == FAIL and self.hint:
            out["hint"] = self.hint
        return out


@dataclass
class Checklist:
    """Lines in order, plus measured numbers (hook ms, drill seconds)."""

    host: str
    lines: list[Line] = field(default_factory=list)
    numbers: dict[str, float] = field(default_factory=dict)
    stage: str = "readonly"

    def add(self, name: str, passed: bool | None, evidence: Any) -> bool:
        status = SKIP if passed is None else PASS if passed else FAIL
        self.lines.append(Line(self.stage, name, status, evidence))
        return bool(passed)

    @contextmanager
    def guard(self, name: str) -> Iterator[None]:
        """A line that raises becomes a ``fail`` line naming the error (the run goes on)."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - a checklist reports, it never stops early
            self.add(name, False, f"{type(exc).__name__}: {exc}")

    @property
    def failed(self) -> list[Line]:
        return [line for line in self.lines if line.status == FAIL]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        counts = {s: sum(1 for x in self.lines if x.status == s) for s in (PASS, FAIL, SKIP)}
        return {"host": self.host, "ok": not self.failed, "exit_code": self.exit_code,
                "counts": counts, "numbers": dict(self.numbers),
                "lines": [line.to_dict() for line in self.lines]}

    def table(self) -> str:
        out = []
        for line in self.lines:
            evidence = line.evidence if isinstance(line.evidence, str) else json.dumps(
                line.evidence, ensure_ascii=False, default=str)
            out.append(f"{line.status.upper():4}  {line.stage:8}  {line.name} — {evidence}")
            if line.status == FAIL and line.hint:
                out.append(f"{'':16}what to do: {line.hint}")
        data = self.to_dict()["counts"]
        out.append(f"{self.host} : pass={data[PASS]} fail={data[FAIL]} skip={data[SKIP]}")
        return "\n".join(out)


@dataclass
class Scene:
    """What the stages share: the profile, the host door, the manifest and the runtime config."""

    profile: Profile
    host: Host
    manifest: Recorded | None = None
    config: Config | None = None
    hook: dict[str, Any] | None = None

    def claude_env_prefix(self, home: str | None = None,
                          config_dir: str | None = None) -> list[str]:
        """``env [-u CLAUDE_CONFIG_DIR] HOME=…`` for commands run as claude would run them."""
        spec = self.profile.claude
        cfg = config_dir if home is not None else spec.config_dir
        prefix = ["env", "-u", "TMUX", "-u", "TMUX_PANE"]
        prefix += [f"CLAUDE_CONFIG_DIR={cfg}"] if cfg else ["-u", "CLAUDE_CONFIG_DIR"]
        return [*prefix, f"HOME={home or spec.home}"]


def load_scene(profile: Profile, host: Host, out: Checklist) -> Scene:
    """Read the manifest and the rendered config; each is a checklist line."""
    from provision.manifest import load_manifest
    from runtime.config import load_config

    scene = Scene(profile, host)
    with out.guard("manifest readable"):
        scene.manifest = load_manifest(host, profile)
        out.add("manifest readable", True, {"path": profile.install.manifest_path,
                                            "launch_source": scene.manifest.launch_source})
    with out.guard("runtime config valid"):
        scene.config = load_config(profile.install.config_path)
        out.add("runtime config valid", True, profile.install.config_path)
    return scene


def readonly_stage(scene: Scene, out: Checklist) -> None:
    """Project dir, transcripts, door, binary, workdir, source session, plan and dirty."""
    from runtime.paths import encode_project_dir, is_session_file, latest_transcript

    out.stage = "readonly"
    config = scene.config
    if config is None or config.project_dir is None:
        out.add("project dir exists", False, "no runtime config / project_dir")
        return
    project = config.project_dir
    out.add("project dir exists", project.is_dir(), str(project))
    sessions = [p for p in project.glob("*.jsonl") if is_session_file(p)] \
        if project.is_dir() else []
    out.add("transcripts > 0", bool(sessions), {"count": len(sessions)})
    with out.guard("door target alive"):
        _door_alive(scene, out)
    binary = config.switch.resume_argv[0] if config.switch.resume_argv else ""
    st = scene.host.stat(binary) if binary.startswith("/") else None
    out.add("claude binary absolute", bool(st and st.executable and not st.is_dir),
            {"resume_argv[0]": binary,
             "manifest": scene.manifest.binary if scene.manifest else None})
    workdir = str(config.workdir) if config.workdir else ""
    encoded = encode_project_dir(workdir) if workdir else ""
    out.add("workdir matches project dir", bool(workdir) and project.name == encoded
            and project.parent.name == "projects",
            {"workdir": workdir, "encoded": encoded, "project_dir": str(project)})
    newest = latest_transcript(project) if project.is_dir() else None
    out.add("source session id non-empty", bool(newest and newest.stem),
            {"transcript": str(newest) if newest else None,
             "session_id": newest.stem if newest else ""})
    with out.guard("doctor"):
        from runtime.ops import doctor

        report = doctor(config)
        bad = {k: v for k, v in report["checks"].items() if not v["ok"]}
        out.add("doctor", not bad, bad or "every doctor check ok")
    if newest is None:
        for name in ("nothing blocked", "selected turns = source turns", "nothing dropped",
                     "noise ratio plausible"):
            out.add(name, False, "no source transcript")
        return
    with out.guard("nothing blocked"):
        _plan_lines(config, out)


def _door_alive(scene: Scene, out: Checklist) -> None:
    from runtime.doors.base import open_door
    from runtime.identity import alive, cmdline

    assert scene.config is not None
    door = open_door(scene.config)
    identity = door.identity()
    pid = door.process_pid(identity)
    if door.name == "pointer":
        project = scene.config.project_dir
        found = bool(project and (project / f"{identity}.jsonl").is_file())
        out.add("door target alive", found, {"door": "pointer", "session": identity})
        return
    argv = cmdline(pid) if pid else None
    out.add("door target alive", bool(pid and alive(pid)),
            {"door": door.name, "identity": identity, "pid": pid,
             "argv": list(argv) if argv else None})


def _plan_lines(config: Config, out: Checklist) -> None:
    from runtime.report import plan_report

    plan = plan_report(None, config)
    turns = plan["turns"]
    out.add("nothing blocked", plan["blocked_reason"] is None,
            plan["blocked_reason"] or {"transcript": plan["transcript"]})
    out.add("selected turns = source turns", turns["selected"] == turns["source"],
            {"source": turns["source"], "selected": turns["selected"]})
    out.add("nothing dropped", not turns["dropped_oldest_turns"]
            and not turns["excluded_open_tail"],
            {"dropped_oldest_turns": turns["dropped_oldest_turns"],
             "excluded_open_tail": turns["excluded_open_tail"]})
    ratio = plan["dirty"]["noise_ratio"]
    out.add("noise ratio plausible", ratio >= 0.5,
            {"noise_ratio": ratio, "noise_bytes": plan["dirty"]["noise_bytes"]})


def wiring_stage(scene: Scene, out: Checklist, pause: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
    """Hook, MCP tools, resume ≡ launch, channel flags and servers, hook persistence."""
    out.stage = "wiring"
    with out.guard("hook in settings.json"):
        _hook_present(scene, out, "hook in settings.json")
    with out.guard("hook exits 0 on a synthetic Stop"):
        _hook_fires(scene, out)
    with out.guard("MCP lists 7 tools"):
        _mcp_tools(scene, out)
    with out.guard("resume argv ≡ launch argv"):
        _resume_equiv(scene, out)
    with out.guard("channel flags kept"):
        _channels(scene, out)
    sleep(pause)
    with out.guard("hook still present after a pause"):
        _hook_present(scene, out, "hook still present after a pause", pause)


def _hook_present(scene: Scene, out: Checklist, name: str, pause: float | None = None) -> None:
    from provision.settings import find_stop_hook, parse_settings

    path = scene.profile.claude.settings_path
    entry = find_stop_hook(parse_settings(scene.host.read_bytes(path), path))
    wanted = scene.manifest.hook_command if scene.manifest else None
    same = entry is not None and (wanted is None or entry.get("command") == wanted)
    if pause is None:
        scene.hook = entry
    evidence: dict[str, Any] = {"path": path, "command": entry.get("command") if entry else None}
    if wanted is not None and not same:
        evidence["manifest"] = wanted
    if pause is not None:
        evidence["pause_s"] = pause
    out.add(name, same, evidence)


def _store_snapshot(config: Config) -> dict[str, tuple[str, int]]:
    from runtime.store import Store

    if config.state_dir is None:
        return {}
    return {op.operation_id: (op.state.value, op.revision) for op in Store(config.state_dir).all()}


def _hook_fires(scene: Scene, out: Checklist) -> None:
    name = "hook exits 0 on a synthetic Stop"
    if scene.hook is None or scene.config is None:
        out.add(name, False, "no Stop hook in settings.json (or no runtime config)")
        out.add("hook schedules nothing", False, "hook not run")
        return
    config = scene.config
    session = f"tl-accept-{uuid.uuid4()}"  # matches no transcript and no operation
    project = config.project_dir or "/nonexistent"
    payload = json.dumps({"session_id": session, "transcript_path": f"{project}/{session}.jsonl",
                          "cwd": str(config.workdir or "/"), "hook_event_name": "Stop",
                          "stop_hook_active": False})
    timeout = float(scene.hook.get("timeout") or 60)
    before = _store_snapshot(config)
    argv = [*scene.claude_env_prefix(), "sh", "-c", str(scene.hook["command"])]
    cwd = str(config.workdir) if config.workdir and config.workdir.is_dir() else "/"
    started = time.monotonic()
    result = scene.host.run(argv, cwd=cwd, timeout=timeout, input_text=payload)
    ms = round((time.monotonic() - started) * 1000, 1)
    out.numbers["hook_ms"] = ms
    out.add(name, result.ok, {"rc": result.rc, "ms": ms, "timeout_s": timeout,
                              "stdout": result.stdout.strip()[:200],
                              "stderr": result.stderr.strip()[:200]})
    after = _store_snapshot(config)
    changed = sorted(k for k in after if before.get(k) != after[k])
    out.add("hook schedules nothing", not changed,
            {"operations_before": len(before), "operations_after": len(after),
             "changed": changed})


def _mcp_tools(scene: Scene, out: Checklist) -> None:
    from types import SimpleNamespace

    from provision.result import Context
    from provision.tasks.mcp import EXPECTED_TOOLS, McpServer, McpTools

    ctx = Context(scene.profile, check=True)
    workdir = str(scene.config.workdir) if scene.config and scene.config.workdir else None
    ctx.launch = SimpleNamespace(workdir=workdir)  # type: ignore[assignment] - duck-typed
    ctx.facts[McpServer.name] = McpServer().facts(scene.host, ctx)
    facts = McpTools().facts(scene.host, ctx)
    missing = sorted(set(EXPECTED_TOOLS) - set(facts.tools))
    out.add("MCP lists 7 tools", not missing,
            {"tools": len(facts.tools), "missing": missing, "argv": list(facts.argv)})


def _resume_equiv(scene: Scene, out: Checklist) -> None:
    from runtime.identity import format_argv
    from runtime.resume import resume_argv

    name = "resume argv ≡ launch argv"
    if scene.manifest is None or scene.config is None:
        out.add(name, False, "needs the manifest and the runtime config")
        return
    wanted = resume_argv(scene.manifest.launch_argv, TOKEN)
    actual = list(format_argv(scene.config.switch.resume_argv, TOKEN))
    out.add(name, actual == wanted,
            fmt_argv_diff(wanted, actual) if actual != wanted else " ".join(actual))
    pid = claude_pid(scene.config, scene.manifest.binary)
    if pid is None:
        out.add("live argv ≡ launch argv", None, "no live claude process found behind the door")
        return
    live = claude_argv(pid, scene.manifest.binary)
    try:
        normal = resume_argv(live, TOKEN)
    except ThreadlineError as exc:
        out.add("live argv ≡ launch argv", False, {"pid": pid, "error": str(exc)})
        return
    out.add("live argv ≡ launch argv", normal == wanted,
            {"pid": pid, "argv": live} if normal == wanted else fmt_argv_diff(wanted, normal))


def _channels(scene: Scene, out: Checklist) -> None:
    from provision.result import Context
    from provision.verify import dev_channel_servers, mcp_registered, missing_channel_flags

    assert scene.manifest is not None and scene.config is not None
    resume = tuple(scene.config.switch.resume_argv)
    pid = claude_pid(scene.config, scene.manifest.binary)
    live = tuple(claude_argv(pid, scene.manifest.binary)) if pid else ()
    base = live or scene.manifest.launch_argv
    missing = missing_channel_flags(base, resume)
    configured = [f for f in scene.manifest.channel_flags if f not in resume]
    out.add("channel flags kept", not missing and not configured,
            {"source": "live process" if live else "manifest launch argv",
             "missing": missing + configured,
             "flags": list(scene.manifest.channel_flags)})
    servers = dev_channel_servers(base)
    if not servers:
        out.add("server channels registered", None, "no server:NAME development channel")
    workdir = str(scene.config.workdir or scene.profile.claude.home)
    for server in servers:
        check = mcp_registered(scene.host, Context(scene.profile), server, workdir)
        out.add(f"server channels registered [{server}]", check.passed, check.evidence)


def run_accept(profile: Profile, host: Host, *, drill: bool = False, live: bool = False,
               confirm: str = "", wait_minutes: float = 10.0, pause: float = 2.0) -> Checklist:
    """Run the stages asked for and return the checklist (never raises for a failed line)."""
    if live and confirm != "REBUILD":
        raise AcceptError(f"accept --live needs --confirm REBUILD, got {confirm!r}; "
                          "nothing was done")
    if wait_minutes <= 0:
        raise AcceptError(f"--wait-minutes must be > 0, got {wait_minutes:g}")
    out = Checklist(profile.host)
    scene = load_scene(profile, host, out)
    readonly_stage(scene, out)
    wiring_stage(scene, out, pause=pause)
    if drill:
        from provision.accept_drill import drill_stage

        out.stage = "drill"
        drill_stage(scene, out)
    if live:
        from provision.accept_live import live_stage

        out.stage = "live"
        live_stage(scene, out, wait_minutes * 60.0)
    return out


def cmd_accept(args: Any, profile: Profile, host: Host) -> int:
    """The CLI handler: table or ``--json`` on stdout, exit 0 / 1."""
    report = run_accept(profile, host, drill=args.drill, live=args.live, confirm=args.confirm,
                        wait_minutes=args.wait_minutes)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        print(report.table())
    return report.exit_code
