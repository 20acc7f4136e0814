"""Directories and rendered files (SPEC §5.2 steps 5–6): ``Directories``, ``RuntimeConfig``,
``LaunchDropIn`` (systemd door), ``RunnerWrapper`` (pointer door).

A rendered file is ``ok`` when the bytes on disk equal a fresh render and the mode matches;
otherwise one ``WriteFile`` (validated first, old file backed up, atomic replace).
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.actions import Action, EnsureDir, RunCommand, Task, WriteFile
from provision.errors import FactError
from provision.introspect import OWN_DROP_IN as DROP_IN_NAME
from provision.render import (
    MANAGED_MARK,
    render,
    validate_config,
    validate_drop_in,
    validate_runner,
)
from provision.resume import SESSION_TOKEN

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import Context

SYSTEMD_DIR = "/etc/systemd/system"


def project_dir(profile: Profile, workdir: str) -> str:
    """Where claude keeps the sessions of ``workdir`` for this profile's claude user."""
    from runtime.paths import encode_project_dir

    return f"{profile.claude.claude_dir}/projects/{encode_project_dir(workdir)}"


def pointer_path(profile: Profile) -> str:
    """The pointer file of the systemd / pointer door (default: state_dir/pointer)."""
    door = profile.door
    chosen = door.systemd_pointer_path if door.kind == "systemd" else door.pointer_path
    return chosen or f"{profile.install.state_dir.rstrip('/')}/pointer"


def find_console_script(host: Host, profile: Profile, name: str) -> str:
    """Absolute path of an installed console script (``install.prefix/bin``, then beside
    tl-provision's interpreter, then PATH)."""
    import sys

    candidates = [os.path.join(profile.install.prefix, "bin", name)] if profile.install.prefix \
        else []
    if profile.connection == "local":
        candidates.append(os.path.join(os.path.dirname(sys.executable), name))
    for candidate in candidates:
        found = host.stat(candidate)
        if found is not None and found.executable and not found.is_dir:
            return candidate
    found_path = host.which(name)
    if found_path:
        return found_path
    raise FactError(f"{name} not found (looked in {', '.join(map(repr, candidates))} and on "
                    f"PATH); install threadline or set install.prefix")


@dataclass(frozen=True)
class DirFacts:
    wanted: tuple[tuple[str, int], ...]
    found: tuple[tuple[str, int | None], ...]


class Directories(Task):
    """The state directory and the config file's directory exist with their modes."""

    name = "Directories"
    halt_on_failure = True

    def facts(self, host: Host, ctx: Context) -> DirFacts:
        profile = ctx.profile
        wanted = {profile.install.state_dir: 0o700}
        wanted.setdefault(os.path.dirname(profile.install.config_path), 0o755)
        if profile.door.kind in ("systemd", "pointer"):
            wanted.setdefault(os.path.dirname(pointer_path(profile)), 0o700)
        found = []
        for path in wanted:
            st = host.stat(path)
            if st is not None and not st.is_dir:
                raise FactError(f"{path!r} exists and is not a directory")
            found.append((path, st.mode if st else None))
        return DirFacts(tuple(wanted.items()), tuple(found))

    def plan(self, facts: DirFacts, ctx: Context) -> list[Action]:
        found = dict(facts.found)
        actions: list[Action] = []
        for path, mode in facts.wanted:
            if found[path] == mode:
                continue
            verb = "create" if found[path] is None else f"chmod {oct(found[path] or 0)} →"
            actions.append(EnsureDir(path, mode, found[path],
                                     summary=f"{verb} directory {path} ({oct(mode)})"))
        return actions

    def ok_message(self, facts: DirFacts, ctx: Context) -> str:
        return "directories present: " + ", ".join(f"{p} ({oct(m)})" for p, m in facts.wanted)


@dataclass(frozen=True)
class FileFacts:
    """A managed file on disk (None = absent) and what a fresh render gives."""

    path: str
    current: bytes | None
    mode: int | None
    rendered: bytes
    extra: tuple[Any, ...] = ()


class RenderedFile(Task):
    """Base of the tasks that keep one rendered file in place."""

    mode = 0o644

    def path(self, ctx: Context) -> str:
        raise NotImplementedError

    def content(self, host: Host, ctx: Context) -> bytes:
        raise NotImplementedError

    def validator(self, ctx: Context) -> Any:
        return None

    def after_write(self, ctx: Context) -> list[Action]:
        return []

    def facts(self, host: Host, ctx: Context) -> FileFacts:
        path = self.path(ctx)
        current = host.read_bytes(path)
        st = host.stat(path) if current is not None else None
        return FileFacts(path, current, st.mode if st else None, self.content(host, ctx))

    def plan(self, facts: FileFacts, ctx: Context) -> list[Action]:
        if facts.current == facts.rendered and facts.mode == self.mode:
            return []
        if facts.current is None:
            what = f"create {facts.path}"
        elif facts.current == facts.rendered:
            what = f"chmod {oct(facts.mode or 0)} → {oct(self.mode)} {facts.path}"
        else:
            what = f"update {facts.path} (backup kept)"
        return [WriteFile(facts.path, facts.rendered, before=facts.current, mode=self.mode,
                          summary=what, validate=self.validator(ctx)), *self.after_write(ctx)]

    def ok_message(self, facts: FileFacts, ctx: Context) -> str:
        digest = hashlib.sha256(facts.rendered).hexdigest()[:12]
        return f"{facts.path} up to date (sha256 {digest}…, mode {oct(self.mode)})"


def _needs_launch(ctx: Context) -> str | None:
    if ctx.launch is None or ctx.resume_argv is None:
        return "no launch/resume argv (LaunchCommand or ResumeCommand did not succeed)"
    return None


class RuntimeConfig(RenderedFile):
    """The runtime config (install.config_path) rendered from the profile and the launch."""

    name = "RuntimeConfig"
    halt_on_failure = True

    def skip_reason(self, ctx: Context) -> str | None:
        return _needs_launch(ctx)

    def path(self, ctx: Context) -> str:
        return ctx.profile.install.config_path

    def content(self, host: Host, ctx: Context) -> bytes:
        return render("config.toml.j2", config_context(ctx))

    def validator(self, ctx: Context) -> Any:
        return validate_config


def config_context(ctx: Context) -> dict[str, Any]:
    """Every variable config.toml.j2 uses (StrictUndefined: a missing one fails the render)."""
    profile, launch = ctx.profile, ctx.launch
    assert launch is not None and ctx.resume_argv is not None and launch.workdir is not None
    flags = launch.channel_flags
    expected = profile.channels_expected or tuple(
        value.split(":", 1)[1] for value in flags if value.startswith("server:"))
    door = profile.door
    return {
        "managed_mark": MANAGED_MARK, "profile_source": profile.source or "(profile)",
        "host": profile.host, "launch_source": launch.source,
        "project_dir": project_dir(profile, launch.workdir), "workdir": launch.workdir,
        "state_dir": profile.install.state_dir, "rebuild": sorted(profile.rebuild.items()),
        "door": door.kind, "resume_argv": list(ctx.resume_argv),
        "launch_argv": list(launch.argv), "channel_flags": list(flags),
        "expected_channel_servers": [e.removeprefix("server:") for e in expected
                                     if not e.startswith("plugin:")],
        "tmux_target": door.tmux_target or "", "tmux_socket_name": door.tmux_socket_name or "",
        "systemd_unit": door.systemd_unit or "",
        "systemd_pointer_path": pointer_path(profile) if door.kind == "systemd" else "",
        "pointer_path": pointer_path(profile) if door.kind == "pointer" else "",
    }


class LaunchDropIn(RenderedFile):
    """systemd door: a drop-in that resets ExecStart= and starts claude through tl-launch."""

    name = "LaunchDropIn"

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.door.kind != "systemd":
            return f"door is {ctx.profile.door.kind}, not systemd"
        if ctx.launch is not None and ctx.launch.in_tmux:
            return "the unit already starts claude through tl-launch inside tmux"
        return _needs_launch(ctx)

    def path(self, ctx: Context) -> str:
        unit = ctx.profile.door.systemd_unit
        return f"{SYSTEMD_DIR}/{unit}.d/{DROP_IN_NAME}"

    def content(self, host: Host, ctx: Context) -> bytes:
        assert ctx.launch is not None
        return render("tl-launch.conf.j2", {
            "managed_mark": MANAGED_MARK, "host": ctx.profile.host,
            "unit": ctx.profile.door.systemd_unit, "pointer_path": pointer_path(ctx.profile),
            "tl_launch": find_console_script(host, ctx.profile, "tl-launch"),
            "launch_argv": list(ctx.launch.argv)})

    def validator(self, ctx: Context) -> Any:
        assert ctx.launch is not None
        return validate_drop_in(ctx.launch.argv)

    def after_write(self, ctx: Context) -> list[Action]:
        return [RunCommand(("systemctl", "daemon-reload"),
                           summary="systemctl daemon-reload (the unit's ExecStart changed)")]


class RunnerWrapper(RenderedFile):
    """pointer door: the wrapper a runner loop calls instead of claude."""

    name = "RunnerWrapper"
    mode = 0o755

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.door.kind != "pointer":
            return f"door is {ctx.profile.door.kind}, not pointer"
        return _needs_launch(ctx)

    def path(self, ctx: Context) -> str:
        base = ctx.profile.install.prefix or ctx.profile.install.state_dir
        return f"{base.rstrip('/')}/bin/tl-runner"

    def content(self, host: Host, ctx: Context) -> bytes:
        assert ctx.launch is not None and ctx.resume_argv is not None
        resume = " ".join('"$session"' if token == SESSION_TOKEN else shlex.quote(token)
                          for token in ctx.resume_argv)
        hook = shlex.join([find_console_script(host, ctx.profile, "tl-rebuild"), "hook-stop",
                           "--config", ctx.profile.install.config_path])
        return render("tl-runner.sh.j2", {
            "managed_mark": MANAGED_MARK, "host": ctx.profile.host,
            "workdir": ctx.launch.workdir, "pointer_path": pointer_path(ctx.profile),
            "resume_shell": resume, "launch_argv": list(ctx.launch.argv),
            "hook_command": hook})

    def validator(self, ctx: Context) -> Any:
        return validate_runner

