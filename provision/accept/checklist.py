"""Checklist lines and the scene the stages share (profile, host, manifest, config, hook)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.accept.hints import HINTS

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.tasks.manifest import Recorded
    from runtime.config import Config

PASS, FAIL, SKIP = "pass", "fail", "skip"
COLOUR = {PASS: "green", FAIL: "red", SKIP: "cyan"}  # as Ansible's ok / failed / skipped

MANIFEST, CONFIG = "manifest readable", "runtime config valid"
CODEX_SOURCE = "source thread held by the pane"

# line → the lines it needs: when a stage lacks a line's input (no config, no manifest, no hook
# entry…) it calls Checklist.cannot_judge, which records ``skip`` naming the root cause — the
# needed line that failed, followed through lines skipped for the same reason — never a second
# FAIL with a hint that would send the operator the wrong way. Names without their `` [x]``.
NEEDS: dict[str, tuple[str, ...]] = {
    "project dir exists": (CONFIG,),
    "transcripts > 0": ("project dir exists",),
    "door target alive": (CONFIG,),
    "claude binary absolute": (CONFIG,),
    "workdir matches project dir": (CONFIG,),
    "source session id non-empty": ("project dir exists",),
    "doctor": (CONFIG,),
    "nothing blocked": ("source session id non-empty", CODEX_SOURCE),
    "selected turns = source turns": ("source session id non-empty", CODEX_SOURCE),
    "nothing dropped": ("source session id non-empty", CODEX_SOURCE),
    "noise ratio plausible": ("source session id non-empty", CODEX_SOURCE),
    "hook exits 0 on a synthetic Stop": (CONFIG, "hook in settings.json"),
    "hook schedules nothing": (CONFIG, "hook in settings.json"),
    "hook still present after a pause": ("hook in settings.json",),
    "MCP lists 7 tools": (CONFIG,),  # the server serves the rendered config
    "resume argv ≡ launch argv": (MANIFEST, CONFIG),
    "live argv ≡ launch argv": (MANIFEST, CONFIG),
    "codex holds its thread in the pane": (MANIFEST, CONFIG),
    "channel flags kept": (MANIFEST, CONFIG),
    "server channels registered": (MANIFEST, CONFIG),
    "drill scratch ready": (MANIFEST, CONFIG, CODEX_SOURCE),
    "live requested": (CONFIG,),
    # a drill that did not activate leaves nothing to judge on the new process, its timeline
    # or its backup (those lines then name it); the old transcript is judged regardless
    **{name: ("drill activated",) for name in (
        "drill pane pid changed", "drill channel flags on the new process",
        "drill channel servers recognised", "drill timeline complete",
        "drill pointer names the new session", "drill scratch unit restarted")},
    # a Codex drill's backup needs its scratch codex, a Claude one's the activation
    "drill backup present": ("drill old codex running", "drill activated"),
    # Codex host (accept/codex.py, accept/codex_drill.py)
    "sessions dir exists": (CONFIG,),
    "rollouts > 0": ("sessions dir exists",),
    "codex binary absolute": (CONFIG,),
    CODEX_SOURCE: ("door target alive",),
    "notify exits 0 on a synthetic turn end": (CONFIG, "notify runs tl-rebuild hook-notify"),
    "notify schedules nothing": (CONFIG, "notify runs tl-rebuild hook-notify"),
    "notify still present after a pause": ("notify runs tl-rebuild hook-notify",),
    "codex mcp list shows the server": ("MCP server in config.toml", CONFIG),
    "MCP server lists its 7 tools": ("MCP server in config.toml", CONFIG),
    "drill old codex running": ("drill scratch ready",),
    "drill activated": ("drill old codex running",),
    "drill new codex holds the new thread": ("drill activated",),
    "drill old rollout byte-identical": ("drill old codex running",),
}


def base_name(name: str) -> str:
    """``server channels registered [companion]`` → ``server channels registered``."""
    return name.split(" [")[0]


@dataclass(frozen=True)
class Line:
    """One checklist line: stage, name, status, evidence (JSON-able) and what to do on fail;
    ``because`` names the failed line that kept a ``skip`` line from being judged."""

    stage: str
    name: str
    status: str
    evidence: Any
    because: str = ""

    @property
    def hint(self) -> str:
        return HINTS.get(base_name(self.name), "")

    def to_dict(self) -> dict[str, Any]:
        out = {"stage": self.stage, "name": self.name, "status": self.status,
               "evidence": self.evidence}
        if self.because:
            out["because"] = self.because
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

    def cannot_judge(self, name: str, evidence: Any) -> None:
        """A line whose input is missing: ``skip`` naming the failed line it needs (NEEDS);
        ``fail`` if no needed line failed (then the missing input is this line's own fault)."""
        because = self.root_cause(name)
        if because:
            self.lines.append(Line(self.stage, name, SKIP, evidence, because))
        else:
            self.add(name, False, evidence)

    def not_reached(self, names: Iterable[str]) -> None:
        """Lines an earlier failure kept from running at all: ``skip`` naming the first line of
        this stage that failed; ``fail`` when none did (then not running them is the fault)."""
        cause = next((x.name for x in self.lines if x.stage == self.stage
                      and x.status == FAIL), "")
        for name in names:
            if cause:
                self.lines.append(Line(self.stage, name, SKIP, "not reached", cause))
            else:
                self.add(name, False, "not reached, and no earlier line failed")

    def root_cause(self, name: str) -> str:
        """The failed line that keeps ``name`` from being judged, or ``""``."""
        for needed in NEEDS.get(base_name(name), ()):
            for line in self.lines:
                if line.name == needed and line.status == FAIL:
                    return line.name
                if line.name == needed and line.because:
                    return line.because
        return ""

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

    def table(self, verbose: int = 0, colour: bool = False) -> str:
        """One line per check, then the recap. A FAIL shows its evidence and what to do; a
        line skipped because another failed names it; other evidence only with ``verbose``.
        ``colour``: each line's status word in its colour (pass green, fail red, skip cyan)."""
        from runtime.cli.render import ansi

        out = []
        for line in self.lines:
            evidence = line.evidence if isinstance(line.evidence, str) else json.dumps(
                line.evidence, ensure_ascii=False, default=str)
            status = f"{line.status.upper():4}"
            status = ansi(status, COLOUR[line.status]) if colour else status
            if line.because:
                evidence = f"skipped (because '{line.because}' failed)"
            elif not verbose and line.status != FAIL:
                out.append(f"{status}  {line.stage:8}  {line.name}")
                continue
            out.append(f"{status}  {line.stage:8}  {line.name} — {evidence}")
            if line.status == FAIL and line.hint:
                out.append(f"{'':16}what to do: {line.hint}")
        data = self.to_dict()["counts"]
        cells = [f"{name}={data[name]}" for name in (PASS, FAIL, SKIP)]
        if colour:
            cells = [ansi(c, COLOUR[n]) if data[n] else c for c, n in zip(
                cells, (PASS, FAIL, SKIP), strict=True)]
        out.append(f"{self.host} : {' '.join(cells)}")
        return "\n".join(out)


@dataclass
class Scene:
    """What the stages share: the profile, the host door, the manifest and the runtime config."""

    profile: Profile
    host: Host
    manifest: Recorded | None = None
    config: Config | None = None
    hook: dict[str, Any] | None = None
    thread: str = ""  # Codex: the thread the pane's codex holds, and its rollout
    rollout: Path | None = None

    def claude_env_prefix(self, home: str | None = None, config_dir: str | None = None,
                          *, as_user: bool = False) -> list[str]:
        """``[runuser -u USER --] env [-u CLAUDE_CONFIG_DIR] HOME=…``: run as claude runs.

        Without ``home``: as the profile's claude user. With ``home`` (the drill's scratch
        HOME): as that user too when ``as_user`` and root runs the drill (the scratch is then
        given to the user: claude refuses ``--dangerously-skip-permissions`` as root, and the
        drill should run what the user runs), else as the current user, who owns the scratch.
        """
        import pwd

        spec = self.profile.claude
        cfg = config_dir if home is not None else spec.config_dir
        prefix = []
        other = spec.user != pwd.getpwuid(os.getuid()).pw_name
        if other and (home is None or (as_user and os.geteuid() == 0)):
            prefix = ["runuser", "-u", spec.user, "--"]
        prefix += ["env", "-u", "TMUX", "-u", "TMUX_PANE"]
        prefix += [f"CLAUDE_CONFIG_DIR={cfg}"] if cfg else ["-u", "CLAUDE_CONFIG_DIR"]
        return [*prefix, f"HOME={home or spec.home}"]


def load_scene(profile: Profile, host: Host, out: Checklist) -> Scene:
    """Read the manifest and the rendered config; each is a checklist line."""
    from provision.tasks.manifest import load_manifest
    from runtime.config import load_config

    scene = Scene(profile, host)
    with out.guard("manifest readable"):
        scene.manifest = load_manifest(host, profile)
        out.add("manifest readable", True, {"path": profile.install.manifest_path,
                                            "launch_source": scene.manifest.launch_source})
    with out.guard("runtime config valid"):
        scene.config = users_tmux(load_config(profile.install.config_path), host, profile)
        out.add("runtime config valid", True, profile.install.config_path)
    return scene


def users_tmux(config: Config, host: Host, profile: Profile) -> Config:
    """``config`` whose tmux door addresses the agent user's server by its socket path: the
    profile's ``door.tmux.socket_path`` (the rendered config has it already), or, when accept
    runs as someone else (root), the user's ``-L NAME`` socket: the door's ``-L NAME`` would
    look in root's own socket folder and find no pane (apply reaches it the same way,
    provision.introspect.tmux_base)."""
    from provision.introspect import user_socket_path
    from runtime.doors.kind import DoorKind

    path = user_socket_path(host, profile) if config.switch.door is DoorKind.TMUX else ""
    if not path:
        return config
    tmux = config.switch.tmux.replace(socket_path=path)
    return config.replace(switch=config.switch.replace(tmux=tmux))


