"""The manifest of the last apply (``state_dir/provision.json``): what ``drift`` compares against.

It holds no timestamps or run ids, so an apply that changed nothing rewrites nothing: the
launch argv (and where it came from), the resume argv, channel flags, the claude binary and its
version, digests of the managed files, the Stop-hook entry and the MCP spec.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.actions import Action, Task, WriteFile
from provision.errors import ManifestError

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import Context

MANIFEST_VERSION = 1
MANAGED_FILE_TASKS = ("RuntimeConfig", "LaunchDropIn", "RunnerWrapper")


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


def build_manifest(ctx: Context) -> dict[str, Any]:
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
    return {
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
    }


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
        return Recorded(
            tuple(data["launch"]["argv"]), data["launch"]["source"], tuple(data["resume_argv"]),
            data["launch"]["workdir"], tuple(data["channel_flags"]), data["claude"]["binary"],
            data["claude"]["version"], tuple(sorted(data["files"].items())),
            (data.get("hook") or {}).get("command"),
            (data.get("mcp") or {}).get("spec"), data["session_store"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"manifest {path!r} is unreadable: {exc!r}") from exc


@dataclass(frozen=True)
class ManifestFacts:
    path: str
    current: bytes | None


class Manifest(Task):
    """state_dir/provision.json records this run's facts (rewritten only when they changed)."""

    name = "Manifest"

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.resume_argv is None:
            return "no launch/resume argv (LaunchCommand or ResumeCommand did not succeed)"
        return None

    def facts(self, host: Host, ctx: Context) -> ManifestFacts:
        path = ctx.profile.install.manifest_path
        return ManifestFacts(path, host.read_bytes(path))

    def plan(self, facts: ManifestFacts, ctx: Context) -> list[Action]:
        content = dump(build_manifest(ctx))
        if content == facts.current:
            return []
        verb = "write" if facts.current is None else "update"
        return [WriteFile(facts.path, content, before=facts.current, mode=0o600,
                          summary=f"{verb} manifest {facts.path}")]

    def ok_message(self, facts: ManifestFacts, ctx: Context) -> str:
        return f"manifest {facts.path} already records this state"
