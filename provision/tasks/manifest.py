"""The manifest of the last apply (``state_dir/provision.json``): what ``drift`` compares against.

It holds no timestamps or run ids, so an apply that changed nothing rewrites nothing: the
launch argv (and where it came from), the resume argv, channel flags, the claude binary and its
version, digests of the managed files, the Stop-hook entry and the MCP spec; per door, the
wiring ``drift`` re-checks: a tmux pane's ``remain-on-exit`` and respawn hooks, a systemd
unit's FragmentPath, drop-ins (ours excluded) and Environment (values as digests only).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.actions import Action, Task, WriteFile
from provision.errors import HostError, ManifestError
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.introspect import Launch
    from provision.profile import Profile
    from provision.result import Context

MANIFEST_VERSION = 1
MANAGED_FILE_TASKS = ("RuntimeConfig", "LaunchDropIn", "RunnerWrapper")
RESPAWN_HOOKS = ("pane-died", "pane-exited")


@dataclass(frozen=True)
class TmuxWiring:
    """What keeps (or respawns) the claude pane: effective ``remain-on-exit`` for the pane and
    the pane-died/pane-exited hooks set at global-window, window and pane scope."""

    remain_on_exit: str
    respawn_hooks: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"remain_on_exit": self.remain_on_exit, "respawn_hooks": list(self.respawn_hooks)}


@dataclass(frozen=True)
class UnitTopology:
    """The unit's FragmentPath, its drop-ins (without ours) and Environment as value digests."""

    fragment: str
    drop_ins: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"fragment": self.fragment, "drop_ins": list(self.drop_ins),
                "environment": dict(self.environment)}




def tmux_wiring(host: Host, profile: Profile) -> TmuxWiring | None:
    """The pane's respawn wiring now; None when not a tmux door or tmux cannot be asked."""
    if profile.door.kind is not DoorKind.TMUX or not profile.door.tmux_target:
        return None
    from provision.introspect import tmux_base
    from runtime.doors.tmux import exact_target

    target = exact_target(profile.door.tmux_target)  # never a session that merely starts alike

    base = tmux_base(host, profile)
    scopes = (("global", ["-gw"]), ("window", ["-w", "-t", target]), ("pane", ["-p", "-t", target]))
    try:
        # display-message answers for a missing target too (tmux 3.3a: rc 0, the global
        # value): the pane id tells whether the pane exists
        remain = host.run([*base, "display-message", "-p", "-t", target,
                           "#{pane_id}|#{remain-on-exit}"])
        pane_id, _, value = remain.stdout.strip().partition("|")
        if not remain.ok or not pane_id:
            return None
        hooks: list[str] = []
        for scope, args in scopes:
            shown = host.run([*base, "show-hooks", *args])
            hooks.extend(f"{scope} {line.strip()}" for line in
                         (shown.stdout.splitlines() if shown.ok else [])
                         if line.startswith(RESPAWN_HOOKS) and " " in line.strip())
    except HostError:
        return None
    return TmuxWiring(value, tuple(hooks))


def unit_topology(launch: Launch) -> UnitTopology | None:
    """The systemd files the launch came from (fragment first, as ``systemctl cat`` lists them)
    minus our own tl-launch drop-in; None for a launch not read from a unit."""
    from provision.introspect import OWN_DROP_IN

    if launch.door is not DoorKind.SYSTEMD or not launch.unit_files:
        return None
    files = [f for f in launch.unit_files if not f.endswith("/" + OWN_DROP_IN)]
    env = tuple(sorted((key, value_digest(value)) for key, value in launch.env))
    return UnitTopology(files[0] if files else "", tuple(files[1:]), env)


def value_digest(value: str) -> str:
    """A short digest standing in for an environment value (secrets never enter the manifest);
    the rule is ``runtime.procfs.value_digest``, shared with the health check."""
    from runtime.procfs import value_digest as digest

    return digest(value)


def launch_environment(launch: Launch, profile: Profile) -> dict[str, str]:
    """``name → value digest`` of the environment a resume carries (``unset`` when neither
    the launch nor the live claude has it)."""
    from provision.introspect import environment_names

    names = environment_names(launch, profile.claude.config_dir)
    values = launch.environment(names)
    return {name: value_digest(values[name]) if name in values else "unset" for name in names}


@dataclass(frozen=True)
class Recorded:
    """The manifest as read back, typed."""

    launch_argv: tuple[str, ...]
    launch_source: str
    resume_argv: tuple[str, ...]
    workdir: str
    channel_flags: tuple[str, ...]
    binary: str
    binary_version: str
    files: tuple[tuple[str, str], ...]
    hook_command: str | None
    mcp: str | None
    session_store: str
    tmux: TmuxWiring | None = None
    unit: UnitTopology | None = None
    environment: tuple[tuple[str, str], ...] | None = None  # None: written before it existed


def build_manifest(ctx: Context, tmux: TmuxWiring | None = None) -> dict[str, Any]:
    """The manifest content for this run's facts (deterministic)."""
    from provision.tasks.files import project_dir

    launch, resume = ctx.launch, ctx.resume_argv
    assert launch is not None and resume is not None and launch.workdir is not None
    files = {}
    for name in MANAGED_FILE_TASKS:
        facts = ctx.facts_of(name)
        if facts is not None:
            files[facts.path] = hashlib.sha256(facts.rendered).hexdigest()
    hook = ctx.facts_of("StopHook")
    mcp = ctx.facts_of("McpServer")
    launch_facts = ctx.facts_of("LaunchCommand")
    wiring: dict[str, Any] = {}
    if tmux is not None:
        wiring["tmux"] = tmux.to_dict()
    unit = unit_topology(launch)
    if unit is not None:
        wiring["unit"] = unit.to_dict()
    manifest = {
        "version": MANIFEST_VERSION,
        "host": ctx.profile.host,
        "door": ctx.profile.door.kind,
        # what the launch *is*, not how it was wired before this run (our drop-in changes that)
        "launch": {"source": launch.source, "argv": list(launch.argv),
                   "workdir": launch.workdir},
        "resume_argv": list(resume),
        "channel_flags": list(launch.channel_flags),
        "claude": {"binary": launch.argv[0],
                   "version": getattr(launch_facts, "binary_version", "unknown")},
        "files": dict(sorted(files.items())),
        "hook": {"command": hook.wanted.get("command"), "timeout": hook.wanted.get("timeout")}
        if hook is not None else None,
        "mcp": {"name": mcp.name, "scope": mcp.scope, "spec": mcp.wanted.describe()}
        if mcp is not None else None,
        "session_store": project_dir(ctx.profile, launch.workdir),
        "environment": launch_environment(launch, ctx.profile),
    }
    codex = ctx.facts_of("CodexConfig")
    if codex is not None:  # what config.toml must keep: drift re-reads it against this
        manifest["codex"] = {"config": codex.path, "notify": codex.wanted.notify_head,
                             "mcp": {"name": codex.wanted.mcp_name,
                                     "command": codex.wanted.tl_rebuild,
                                     "args": codex.wanted.mcp_args}}
    if wiring:  # absent for the pointer door, and in manifests written before it existed
        manifest["wiring"] = wiring
    return manifest


def dump(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def load_manifest(host: Host, profile: Profile) -> Recorded:
    """Read the manifest of the last apply; ManifestError when absent or malformed."""
    path = profile.install.manifest_path
    raw = host.read_bytes(path)
    if raw is None:
        raise ManifestError(f"no manifest at {path!r}; run 'tl-provision apply' first")
    try:
        data = json.loads(raw)
        wiring = data.get("wiring") or {}
        tmux, unit = wiring.get("tmux"), wiring.get("unit")
        return Recorded(
            tuple(data["launch"]["argv"]), data["launch"]["source"], tuple(data["resume_argv"]),
            data["launch"]["workdir"], tuple(data["channel_flags"]), data["claude"]["binary"],
            data["claude"]["version"], tuple(sorted(data["files"].items())),
            (data.get("hook") or {}).get("command"),
            (data.get("mcp") or {}).get("spec"), data["session_store"],
            TmuxWiring(tmux["remain_on_exit"], tuple(tmux["respawn_hooks"])) if tmux else None,
            UnitTopology(unit["fragment"], tuple(unit["drop_ins"]),
                         tuple(sorted(unit["environment"].items()))) if unit else None,
            tuple(sorted(data["environment"].items())) if "environment" in data else None)
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"manifest {path!r} is unreadable: {exc!r}") from exc


@dataclass(frozen=True)
class ManifestFacts:
    path: str
    current: bytes | None
    tmux: TmuxWiring | None = None
    ids: tuple[int, int] | None = None  # uid, gid on disk


class Manifest(Task):
    """state_dir/provision.json records this run's facts (rewritten only when they changed)."""

    name = "Manifest"

    def skip_reason(self, ctx: Context) -> str | None:
        return ctx.missing_argv()

    def facts(self, host: Host, ctx: Context) -> ManifestFacts:
        path = ctx.profile.install.manifest_path
        current = host.read_bytes(path)
        st = host.stat(path) if current is not None else None
        return ManifestFacts(path, current, tmux_wiring(host, ctx.profile),
                             (st.uid, st.gid) if st else None)

    def plan(self, facts: ManifestFacts, ctx: Context) -> list[Action]:
        from provision.tasks.files import NEW, chown_action, owner_of

        # it lives in the state dir, which belongs to the claude user through and through
        owner = owner_of(ctx)
        content = dump(build_manifest(ctx, facts.tmux))
        if content == facts.current:
            return chown_action(facts.path, facts.ids, owner) if owner else []
        verb = "write" if facts.current is None else "update"
        return [WriteFile(facts.path, content, before=facts.current, mode=0o600,
                          summary=f"{verb} manifest {facts.path}"),
                *(chown_action(facts.path, facts.ids or NEW, owner) if owner else [])]

    def ok_message(self, facts: ManifestFacts, ctx: Context) -> str:
        return f"manifest {facts.path} already records this state"
