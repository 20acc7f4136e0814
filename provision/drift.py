"""``tl-provision drift``: re-read the facts and compare them with the last apply's manifest.

Each finding says what drifted, before (manifest) → after (now). The headline check is
**resume argv stale**: the resume argv recomputed from today's launch command differs from the
one installed. Exit 0 clean, 1 drift; a missing manifest or invalid profile is an error (2).

Besides the launch: the tmux pane dead, or its ``remain-on-exit`` / respawn hooks changed; the
systemd unit's FragmentPath, drop-ins or Environment changed; the launch environment a resume
carries (inline ``VAR=x``, ``env``, the tmux session's, ``CLAUDE_CONFIG_DIR``; digests only)
changed; our Stop hook missing (or, with ``hook.enabled: false``, present);
``disableAllHooks: true`` in settings.json; the MCP server; managed files; the session store;
the state dir, pointer dir and config no longer the claude user's (or no longer 0700/0600).
"""

from __future__ import annotations

import difflib
import hashlib
import shlex
from dataclasses import dataclass, field, replace

from provision.errors import (
    HostError,
    IntrospectError,
    McpRegistrationError,
    ProvisionError,
    SettingsError,
)
from provision.host import Host
from provision.introspect import Launch, introspect, tmux_base
from provision.profile import Profile
from provision.result import Context
from provision.resume import resume_argv
from provision.tasks.manifest import (
    Recorded,
    launch_environment,
    load_manifest,
    tmux_wiring,
    unit_topology,
)
from runtime.agents import claude
from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind
from runtime.doors.tmux import exact_target
from runtime.doors.tmux_text import parse_start_command

DIFF_LINES = 20  # an edited managed file's diff is cut here without -v ("… N more lines")


@dataclass(frozen=True)
class Finding:
    """One drift: the check's name, the recorded value and the value found now; ``diff`` (human
    output only, not in --json) the unified diff of an edited managed file."""

    check: str
    before: str
    after: str
    diff: tuple[str, ...] = field(default=(), compare=False)

    def line(self) -> str:
        return f"DRIFT {self.check}: {self.before} → {self.after}"

    def lines(self, verbose: int = 0, colour: bool = False) -> list[str]:
        """The finding line, then its diff (if any) indented under it: its first
        ``DIFF_LINES`` lines, the whole of it with ``verbose``."""
        from provision.engine import diff_line
        from runtime.cli.render import ansi

        diff = list(self.diff)
        if not verbose and len(diff) > DIFF_LINES:
            diff = [*diff[:DIFF_LINES], f"… {len(diff) - DIFF_LINES} more lines (-v shows "
                                        "the whole diff)"]
        head = ansi(self.line(), "yellow") if colour else self.line()
        return [head, *(f"    {diff_line(x, colour)}" for x in diff)]


def _join(argv: tuple[str, ...] | list[str]) -> str:
    return shlex.join(argv)


def check_drift(host: Host, profile: Profile) -> list[Finding]:
    """Every finding, headline (resume argv stale) first."""
    recorded = load_manifest(host, profile)
    ctx = Context(profile, check=True)
    findings: list[Finding] = []
    # introspect what is *configured*, and report a live process that disagrees separately,
    # so an edited unit still yields the headline (resume argv stale)
    configured = replace(profile, prefer=profile.prefer or "configured")
    try:
        launch: Launch | None = introspect(host, configured)
    except IntrospectError as exc:
        launch = None
        findings.append(_pane_dead(host, profile)
                        or Finding("launch command unreadable", _join(recorded.launch_argv),
                                   str(exc)))
    if launch is not None:
        ctx.launch = launch
        findings.extend(_launch_findings(host, recorded, launch))
        findings.extend(_unit_findings(recorded, launch))
        findings.extend(_environment_findings(profile, recorded, launch))
        if launch.live is not None and not launch.agent.cli.same_launch(launch.argv,
                                                                        launch.live.argv):
            findings.append(Finding("live argv differs from configured (restart pending)",
                                    _join(launch.argv), _join(launch.live.argv)))
    findings.extend(_tmux_findings(host, profile, recorded))
    findings.extend(_task_findings(host, ctx, recorded))
    findings.extend(_codex_findings(host, ctx))
    findings.extend(_file_findings(host, recorded, ctx))
    findings.extend(_ownership_findings(host, ctx))
    store = host.stat(recorded.session_store)
    if store is None or not store.is_dir:
        findings.append(Finding("session store missing", recorded.session_store, "absent"))
    return findings


def _launch_findings(host: Host, recorded: Recorded, launch: Launch) -> list[Finding]:
    from provision.tasks.launcher import claude_version

    found = []
    try:
        resume = resume_argv(launch.argv, agent=launch.agent)
    except ProvisionError as exc:
        resume = None
        found.append(Finding("resume argv stale", _join(recorded.resume_argv), str(exc)))
    if resume is not None and resume != recorded.resume_argv:
        found.append(Finding("resume argv stale", _join(recorded.resume_argv), _join(resume)))
        found.append(Finding(f"launch argv changed ({launch.source})",
                             _join(recorded.launch_argv), _join(launch.argv)))
    if launch.workdir != recorded.workdir:
        found.append(Finding("workdir changed (resume looks up sessions by cwd)",
                             recorded.workdir, str(launch.workdir)))
    if launch.channel_flags != recorded.channel_flags:
        found.append(Finding("live channel flags changed", _join(recorded.channel_flags),
                             _join(launch.channel_flags)))
    if launch.need_daemon_reload:
        found.append(Finding("unit needs daemon-reload", "NeedDaemonReload=no",
                             "NeedDaemonReload=yes"))
    if launch.argv[0] != recorded.binary:
        found.append(Finding(f"{launch.agent} binary changed", recorded.binary, launch.argv[0]))
    else:
        version = claude_version(host, launch.argv[0])
        if version != recorded.binary_version:
            found.append(Finding(f"{launch.agent} version changed", recorded.binary_version,
                                 version))
    return found


def _pane_dead(host: Host, profile: Profile) -> Finding | None:
    """The tmux pane still exists but its process exited (``remain-on-exit`` kept it)."""
    target = profile.door.tmux_target
    if profile.door.kind is not DoorKind.TMUX or not target:
        return None
    try:
        shown = host.run([*tmux_base(host, profile), "display-message",
                          "-p", "-t", exact_target(target),
                          "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|"
                          "#{pane_start_command}"])
    except HostError:
        return None
    dead, _, rest = shown.stdout.rstrip("\n").partition("|")
    if not shown.ok or dead != "1":
        return None
    status, _, rest = rest.partition("|")
    signal, _, command = rest.partition("|")
    how = f"exit status {status}" if status else f"signal {signal}" if signal else "unknown"
    again = ""
    if profile.agent is AgentKind.CLAUDE:  # the session it resumed, when its argv names one
        session = claude.resumed_session(parse_start_command(command)[0]) or "ID"
        again = (f"; start it again: tl-rebuild restart --session {session} --config "
                 f"{profile.install.config_path}")
    return Finding(f"tmux pane {target} dead (claude exited; nothing to switch)",
                   "pane_dead=0", f"pane_dead=1 ({how}{again})")


def _tmux_findings(host: Host, profile: Profile, recorded: Recorded) -> list[Finding]:
    if recorded.tmux is None:
        return []
    now = tmux_wiring(host, profile)
    if now is None:
        return []  # the pane is gone: the launch finding already says so
    found = []
    target = profile.door.tmux_target
    if now.remain_on_exit != recorded.tmux.remain_on_exit:
        found.append(Finding(f"tmux remain-on-exit changed for {target}",
                             f"remain-on-exit {recorded.tmux.remain_on_exit}",
                             f"remain-on-exit {now.remain_on_exit}"))
    if now.respawn_hooks != recorded.tmux.respawn_hooks:
        found.append(Finding(f"tmux respawn hooks changed for {target}",
                             "; ".join(recorded.tmux.respawn_hooks) or "none",
                             "; ".join(now.respawn_hooks) or "none"))
    return found


def _unit_findings(recorded: Recorded, launch: Launch) -> list[Finding]:
    now = unit_topology(launch)
    if recorded.unit is None or now is None:
        return []
    before = recorded.unit
    found = []
    if now.fragment != before.fragment:
        found.append(Finding("unit FragmentPath changed", before.fragment or "none",
                             now.fragment or "none"))
    for path in sorted(set(now.drop_ins) - set(before.drop_ins)):
        found.append(Finding("unit drop-in added", "absent", path))
    for path in sorted(set(before.drop_ins) - set(now.drop_ins)):
        found.append(Finding("unit drop-in removed", path, "absent"))
    old, new = dict(before.environment), dict(now.environment)
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            found.append(Finding(f"unit Environment {key} changed", old.get(key, "unset"),
                                 new.get(key, "unset")))
    return found


def _environment_findings(profile: Profile, recorded: Recorded,
                          launch: Launch) -> list[Finding]:
    """The environment a resume carries, by value digest (a unit's own Environment= lines are
    reported by _unit_findings already)."""
    if recorded.environment is None:
        return []
    before, now = dict(recorded.environment), launch_environment(launch, profile)
    unit = unit_topology(launch)
    covered = {k for k, _ in recorded.unit.environment} if recorded.unit else set()
    covered |= {k for k, _ in unit.environment} if unit else set()
    return [Finding(f"launch environment {key} changed", before.get(key, "not carried"),
                    now.get(key, "not carried"))
            for key in sorted(before.keys() | now.keys())
            if key not in covered and before.get(key) != now.get(key)]


def _ownership_findings(host: Host, ctx: Context) -> list[Finding]:
    """Installed paths no longer the claude user's, or no longer private (0700/0600)."""
    from provision.tasks.files import ownership_problems

    try:
        problems = ownership_problems(host, ctx)
    except ProvisionError as exc:
        return [Finding("ownership unreadable", ctx.profile.claude.user, str(exc))]
    want = f"the claude user {ctx.profile.claude.user}'s, 0700/0600"
    return [Finding("owner or mode of an installed path", want, line) for line in problems]


def _hook_change(command: str, wanted: dict[str, object], current: dict[str, object] | None,
                 raw: bytes | None, path: str) -> tuple[str, str]:
    """Before → after of our Stop handler: its command, and every other field that differs
    (a hand-edited ``timeout`` alone read "X → X"); a handler listed twice says so."""
    import json

    from provision.parsers.settings import parse_settings

    if current is None:
        return command, "absent"
    keys = sorted(k for k in {*wanted, *current} - {"command"} if wanted.get(k) != current.get(k))

    def shown(handler: dict[str, object], head: object) -> str:
        fields = [f"{k}={json.dumps(handler[k]) if k in handler else '(unset)'}" for k in keys]
        return " ".join([str(head), *fields])

    before, after = shown(wanted, command), shown(current, current.get("command"))
    if before == after:
        groups = parse_settings(raw, path).get("hooks", {}).get("Stop", [])
        copies = sum(h == current for g in groups for h in g.get("hooks", []))
        after = f"{after} (listed {copies} times)"
    return before, after


def _task_findings(host: Host, ctx: Context, recorded: Recorded) -> list[Finding]:
    from provision.parsers.settings import parse_settings
    from provision.tasks.mcp import McpServer
    from provision.tasks.settings import StopHook

    found = []
    if recorded.hook_command is not None:
        path = ctx.profile.claude.settings_path
        try:
            hook_facts = StopHook().facts(host, ctx)
            if StopHook().plan(hook_facts, ctx):
                current = hook_facts.ours(parse_settings(hook_facts.raw, path))
                after = "absent" if current is None else str(current.get("command"))
                if hook_facts.present:
                    before, after = _hook_change(recorded.hook_command, hook_facts.wanted,
                                                 current, hook_facts.raw, path)
                    found.append(Finding(f"Stop hook missing or altered in {path}",
                                         before, after))
                else:
                    found.append(Finding(f"Stop hook present in {path} although hook.enabled "
                                         "is false", "absent", after))
            doc = parse_settings(hook_facts.raw, path)
            if hook_facts.present and doc.get("disableAllHooks") is True:
                found.append(Finding(f"disableAllHooks is true in {path} (our Stop hook never "
                                     "fires)", "disableAllHooks unset or false",
                                     "disableAllHooks: true"))
        except SettingsError as exc:
            found.append(Finding("settings.json invalid", path, str(exc)))
    if recorded.mcp is not None:
        try:
            mcp_facts = McpServer().facts(host, ctx)
            if McpServer().plan(mcp_facts, ctx):
                spec = mcp_facts.in_scope(mcp_facts.scope)
                found.append(Finding(f"MCP server {mcp_facts.name!r} missing or changed",
                                     recorded.mcp, spec.describe() if spec else "absent"))
        except McpRegistrationError as exc:
            found.append(Finding("MCP server shadowed", recorded.mcp, str(exc)))
    return found


def _codex_findings(host: Host, ctx: Context) -> list[Finding]:
    """Codex host: our notify chain and ``[mcp_servers.NAME]`` still in config.toml (the rest of
    that file is the user's and Codex's own — the TUI writes ``[tui]`` and hook trust there)."""
    from provision.parsers import codex_config as cc
    from provision.tasks.codex_config import wanted_of

    codex = ctx.profile.codex
    if codex is None:
        return []
    wanted = wanted_of(host, ctx)
    raw = host.read_bytes(codex.config_path)
    if raw is None:
        return [Finding("Codex config.toml missing (no notify trigger, no MCP server)",
                        codex.config_path, "absent")]
    try:
        data = cc.load(raw.decode("utf-8", "replace"), codex.config_path)
    except ProvisionError as exc:
        return [Finding("Codex config.toml invalid", codex.config_path, str(exc))]
    return [Finding(f"Codex config.toml: {problem}", "as installed", "changed")
            for problem in cc.findings(data, wanted)]


def _file_findings(host: Host, recorded: Recorded, ctx: Context) -> list[Finding]:
    found = []
    for path, digest in recorded.files:
        data = host.read_bytes(path)
        now = "absent" if data is None else hashlib.sha256(data).hexdigest()
        if now != digest:
            expected = _recorded_content(host, ctx, recorded, path, digest) if data else None
            diff = file_diff(path, expected, data) if expected is not None and data else ()
            found.append(Finding(f"managed file edited: {path}", f"sha256 {digest[:12]}…",
                                 now if data is None else f"sha256 {now[:12]}…", diff))
    return found


def _recorded_content(host: Host, ctx: Context, recorded: Recorded, path: str,
                      digest: str) -> bytes | None:
    """The bytes the last apply wrote to ``path``: the manifest keeps only their sha256, so the
    file is re-rendered from the templates with the manifest's resume argv and today's
    (configured) launch, and used only if it hashes to the recorded digest — otherwise the
    inputs changed since (other findings say how) and there is no honest "before" to show."""
    from provision.tasks import files

    if ctx.launch is None:
        return None
    render_ctx = Context(ctx.profile, check=True, launch=ctx.launch,
                         resume_argv=recorded.resume_argv)
    try:  # the owners decide the rendered sudo user of a systemd config
        render_ctx.facts["Directories"] = files.Directories().facts(host, render_ctx)
        for task in (files.RuntimeConfig(), files.LaunchDropIn(), files.RunnerWrapper()):
            if task.skip_reason(render_ctx) is None and task.path(render_ctx) == path:
                content = task.content(host, render_ctx)
                return content if hashlib.sha256(content).hexdigest() == digest else None
    except ProvisionError:
        return None
    return None


def file_diff(path: str, before: bytes, after: bytes, limit: int | None = None
              ) -> tuple[str, ...]:
    """``difflib.unified_diff`` of the recorded content vs the file now (cut at ``limit``)."""
    lines = list(difflib.unified_diff(
        before.decode("utf-8", "replace").splitlines(),
        after.decode("utf-8", "replace").splitlines(),
        f"{path} (last apply)", f"{path} (now)", lineterm=""))
    if limit is not None and len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more lines"]
    return tuple(lines)


def evidence(recorded: Recorded, manifest_path: str) -> list[str]:
    """What ``drift -v`` prints first: the manifest it compared the machine with, and each
    value recorded there (environment values as digests, as the manifest holds them)."""
    rows = [("launch", f"{recorded.launch_source}: {_join(recorded.launch_argv)}"),
            ("resume argv", _join(recorded.resume_argv)), ("workdir", recorded.workdir),
            ("channel flags", _join(recorded.channel_flags) or "none"),
            ("binary", f"{recorded.binary} ({recorded.binary_version})"),
            *(("managed file", f"{path} sha256 {digest[:12]}…") for path, digest in recorded.files),
            ("Stop hook", recorded.hook_command or "not managed"),
            ("MCP server", recorded.mcp or "not managed"),
            ("session store", recorded.session_store)]
    if recorded.tmux is not None:
        rows.append(("tmux wiring", f"remain-on-exit {recorded.tmux.remain_on_exit}, respawn "
                                    f"hooks: {'; '.join(recorded.tmux.respawn_hooks) or 'none'}"))
    if recorded.unit is not None:
        rows.append(("unit", f"{recorded.unit.fragment or 'none'}, drop-ins: "
                             f"{', '.join(recorded.unit.drop_ins) or 'none'}"))
    if recorded.environment is not None:
        rows.append(("environment", ", ".join(f"{k} {v}" for k, v in recorded.environment)
                     or "none carried"))
    width = max(len(name) for name, _ in rows)
    return [f"compared with the last apply's manifest {manifest_path}:",
            *(f"    {name.ljust(width)}  {value}" for name, value in rows)]


def findings_json(findings: list[Finding]) -> dict[str, object]:
    return {"drift": bool(findings),
            "findings": [{"check": f.check, "before": f.before, "after": f.after}
                         for f in findings],
            "exit_code": 1 if findings else 0}
