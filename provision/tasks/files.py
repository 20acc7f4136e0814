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

from provision.actions import CLAUDE_ONLY, Action, EnsureDir, RunCommand, Task, WriteFile
from provision.errors import FactError
from provision.host import FileStat
from provision.introspect import OWN_DROP_IN as DROP_IN_NAME
from provision.introspect import environment_names
from provision.render import (
    MANAGED_MARK,
    render,
    validate_config,
    validate_drop_in,
    validate_runner,
)
from provision.resume import SESSION_TOKEN
from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import Context

SYSTEMD_DIR = "/etc/systemd/system"


def project_dir(profile: Profile, workdir: str) -> str:
    """Where the agent keeps the sessions of ``workdir``: claude's projects/<encoded workdir>,
    codex's ``$CODEX_HOME/sessions`` (one tree for every workdir)."""
    from runtime.paths import encode_project_dir

    if profile.codex is not None:
        return profile.codex.sessions_dir

    return f"{profile.claude.claude_dir}/projects/{encode_project_dir(workdir)}"


def pointer_path(profile: Profile) -> str:
    """The pointer file of the systemd / pointer door (default: state_dir/pointer)."""
    door = profile.door
    chosen = door.systemd_pointer_path if door.kind is DoorKind.SYSTEMD else door.pointer_path
    return chosen or profile.install.default_pointer_path


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


def user_ids(host: Host, user: str | None, where: str) -> tuple[int, int]:
    """``(uid, gid)`` of ``user`` on the host (``id -u`` / ``id -g``); None: who runs apply."""
    ids = []
    for flag in ("-u", "-g"):
        result = host.run(["id", flag, *([user] if user else [])], timeout=10)
        value = result.stdout.strip()
        if not result.ok or not value.isdigit():
            raise FactError(f"user {user or '(apply)'!r} unknown on {where!r} "
                            f"(id {flag}: {result.stderr.strip() or value!r})")
        ids.append(int(value))
    return ids[0], ids[1]


def claude_owner(host: Host, profile: Profile) -> tuple[int, int]:
    """``(uid, gid)`` of the profile's claude user."""
    return user_ids(host, profile.claude.user, profile.host)


def chown_action(path: str, found: tuple[int, int] | None, owners: Owners | None,
                 what: str = "") -> list[Action]:
    """``chown -h`` (never follows a symlink) when ``found`` (uid, gid; ``NEW`` for what this
    run creates, which belongs to whoever runs apply) is not the claude user's."""
    if found is None or owners is None:
        return []
    current = owners.writer if found == NEW else found
    if current == owners.claude:
        return []
    uid, gid = owners.claude
    before = "" if found == NEW else f"{found[0]}:{found[1]} → "
    return [RunCommand(("chown", "-h", f"{uid}:{gid}", path),
                       summary=f"chown {before}{uid}:{gid} {what}{path}")]


@dataclass(frozen=True)
class Owners:
    """The claude user's (uid, gid) and those of whoever runs apply."""

    claude: tuple[int, int]
    writer: tuple[int, int]


NEW = (-1, -1)  # stands for the owner of what this run creates: Directories' ``writer``


STATE_WALK_LIMIT = 5000
PRIVATE_FILES = ("worker.log",)  # written by the hook and the worker: the claude user's, 0600


@dataclass(frozen=True)
class DirFacts:
    wanted: tuple[tuple[str, int, bool], ...]  # path, mode, owned by the claude user
    found: tuple[tuple[str, int | None, tuple[int, int] | None], ...]
    owners: Owners = Owners((0, 0), (0, 0))
    foreign: tuple[tuple[str, int, int], ...] = ()  # state-dir entries owned by someone else
    loose: tuple[tuple[str, int], ...] = ()  # private files with a mode other than 0600


def _walk(host: Host, root: str, limit: int = STATE_WALK_LIMIT) -> list[tuple[str, FileStat]]:
    """Every entry below ``root`` (bounded), with its stat."""
    found: list[tuple[str, FileStat]] = []
    todo = [root]
    while todo and len(found) < limit:
        folder = todo.pop()
        for name in host.listdir(folder):
            path = f"{folder.rstrip('/')}/{name}"
            st = host.stat(path)
            if st is None:
                continue
            found.append((path, st))
            if st.is_dir and host.readlink(path) is None:
                todo.append(path)
    return found


class Directories(Task):
    """The state directory (0700), the pointer directory (0700) and everything in the state
    directory belong to the claude user (the hook and the worker run as that user and must
    write there; a root-owned file left by an earlier run blocks every switch); the config
    file's directory exists (0755)."""

    name = "Directories"
    halt_on_failure = True

    def facts(self, host: Host, ctx: Context) -> DirFacts:
        profile = ctx.profile
        state = profile.install.state_dir
        wanted = {state: (0o700, True)}
        wanted.setdefault(os.path.dirname(profile.install.config_path), (0o755, False))
        if profile.door.kind.has_pointer_file:
            wanted.setdefault(os.path.dirname(pointer_path(profile)), (0o700, True))
        owners = Owners(claude_owner(host, profile), user_ids(host, None, profile.host))
        owner = owners.claude
        found = []
        for path in wanted:
            st = host.stat(path)
            if st is not None and not st.is_dir:
                raise FactError(f"{path!r} exists and is not a directory")
            found.append((path, st.mode if st else None, (st.uid, st.gid) if st else None))
        entries = _walk(host, state) if host.stat(state) is not None else []
        foreign = tuple((p, st.uid, st.gid) for p, st in entries if (st.uid, st.gid) != owner)
        loose = tuple((p, st.mode) for p, st in entries
                      if os.path.basename(p) in PRIVATE_FILES and st.mode != 0o600)
        return DirFacts(tuple((p, m, o) for p, (m, o) in wanted.items()), tuple(found), owners,
                        foreign, loose)

    def plan(self, facts: DirFacts, ctx: Context) -> list[Action]:
        found = {path: (mode, ids) for path, mode, ids in facts.found}
        actions: list[Action] = []
        for path, mode, owned in facts.wanted:
            current, ids = found[path]
            if current != mode:
                verb = "create" if current is None else f"chmod {oct(current or 0)} →"
                actions.append(EnsureDir(path, mode, current,
                                         summary=f"{verb} directory {path} ({oct(mode)})"))
            if owned:
                # a directory created above belongs to whoever runs apply
                ids = ids if current is not None else NEW
                actions.extend(chown_action(path, ids, facts.owners, "directory "))
        for path, uid, gid in facts.foreign:
            actions.extend(chown_action(path, (uid, gid), facts.owners))
        for path, mode in facts.loose:
            actions.append(RunCommand(("chmod", "600", path),
                                      summary=f"chmod {oct(mode)} → 0o600 {path}"))
        return actions

    def ok_message(self, facts: DirFacts, ctx: Context) -> str:
        uid, gid = facts.owners.claude
        return ("directories present: " + ", ".join(
            f"{p} ({oct(m)}{f', {uid}:{gid}' if o else ''})" for p, m, o in facts.wanted))


def ownership_problems(host: Host, ctx: Context) -> list[str]:
    """What is not the claude user's (or not private enough) among the state dir, the pointer
    dir, everything in the state dir and the runtime config — one line each, as ``drift`` and
    ``accept`` report it (apply's Directories/RuntimeConfig would fix each)."""
    task = Directories()
    facts = task.facts(host, ctx)
    problems = [action.summary.replace("create directory", "missing directory")
                for action in task.plan(facts, ctx)]
    path, (uid, gid) = ctx.profile.install.config_path, facts.owners.claude
    st = host.stat(path)
    if st is not None and ((st.uid, st.gid) != (uid, gid) or st.mode != RuntimeConfig.mode):
        problems.append(f"{path} is {st.uid}:{st.gid} {oct(st.mode)}, wanted {uid}:{gid} "
                        f"{oct(RuntimeConfig.mode)}")
    return problems


@dataclass(frozen=True)
class FileFacts:
    """A managed file on disk (None = absent) and what a fresh render gives."""

    path: str
    current: bytes | None
    mode: int | None
    rendered: bytes
    extra: tuple[Any, ...] = ()
    ids: tuple[int, int] | None = None  # uid, gid on disk


class RenderedFile(Task):
    """Base of the tasks that keep one rendered file in place."""

    mode = 0o644
    owned = False  # True: the file belongs to the claude user (Directories' owner)

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
        return FileFacts(path, current, st.mode if st else None, self.content(host, ctx),
                         ids=(st.uid, st.gid) if st else None)

    def plan(self, facts: FileFacts, ctx: Context) -> list[Action]:
        owner = owner_of(ctx) if self.owned else None
        if facts.current == facts.rendered and facts.mode == self.mode:
            return chown_action(facts.path, facts.ids, owner) if owner else []
        if facts.current is None:
            what = f"create {facts.path}"
        elif facts.current == facts.rendered:
            what = f"chmod {oct(facts.mode or 0)} → {oct(self.mode)} {facts.path}"
        else:
            what = f"update {facts.path} (backup kept)"
        write: list[Action] = [WriteFile(facts.path, facts.rendered, before=facts.current,
                                         mode=self.mode, summary=what,
                                         validate=self.validator(ctx),
                                          overwrite_read_only=ctx.profile.install.overwrite_read_only)]
        if owner:  # a replaced file keeps its owner; a new one is the writer's
            write.extend(chown_action(facts.path, facts.ids or NEW, owner))
        return [*write, *self.after_write(ctx)]

    def ok_message(self, facts: FileFacts, ctx: Context) -> str:
        digest = hashlib.sha256(facts.rendered).hexdigest()[:12]
        return f"{facts.path} up to date (sha256 {digest}…, mode {oct(self.mode)})"


def owner_of(ctx: Context) -> Owners | None:
    """The owners as Directories found them (None when it did not run)."""
    facts = ctx.facts_of("Directories")
    return facts.owners if isinstance(facts, DirFacts) else None


class RuntimeConfig(RenderedFile):
    """The runtime config (install.config_path) rendered from the profile and the launch."""

    name = "RuntimeConfig"
    halt_on_failure = True
    mode = 0o600  # read by the hook, the worker and the MCP server: the claude user's only
    owned = True

    def skip_reason(self, ctx: Context) -> str | None:
        return ctx.missing_argv()

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
    values = (flag.partition("=")[2] if flag.startswith("--") else flag for flag in flags)
    expected = profile.channels_expected or tuple(
        value for value in values if value.startswith(("server:", "plugin:")))
    door = profile.door
    agent = (codex_context(ctx) if profile.agent is AgentKind.CODEX
             else {"agent": AgentKind.CLAUDE.value})
    return {**{
        "managed_mark": MANAGED_MARK, "profile_source": profile.source or "(profile)",
        "host": profile.host, "launch_source": launch.source,
        "project_dir": project_dir(profile, launch.workdir), "workdir": launch.workdir,
        "state_dir": profile.install.state_dir, "rebuild": sorted(profile.rebuild.items()),
        "door": door.kind, "resume_argv": list(ctx.resume_argv),
        "launch_argv": list(launch.argv), "channel_flags": list(flags),
        # server:NAME → NAME; plugin:P@M kept: the health check finds its installed server.
        "expected_channel_servers": [e.removeprefix("server:") for e in expected],
        "request_max_age_hours": float(profile.request_max_age_hours),
        "environment": list(environment_names(launch, profile.claude.config_dir)),
        "tmux_target": door.tmux_target or "", "tmux_socket_name": door.tmux_socket_name or "",
        "tmux_socket_path": door.tmux_socket_path or "",
        "systemd_unit": door.systemd_unit or "",
        "systemd_pointer_path": pointer_path(profile) if door.kind is DoorKind.SYSTEMD else "",
        "systemd_sudo_user": profile.claude.user if door.kind is DoorKind.SYSTEMD and (
            owners := owner_of(ctx)) is not None and owners.claude[0] != 0 else "",
        "pointer_path": pointer_path(profile) if door.kind is DoorKind.POINTER else "",
    }, **agent}


def codex_context(ctx: Context) -> dict[str, Any]:
    """What a Codex host renders differently: its CODEX_HOME, the sessions under it, no
    channels, and the environment codex's rule carries (always CODEX_HOME)."""
    from runtime.agents import codex

    assert ctx.profile.codex is not None and ctx.launch is not None
    return {"agent": "codex", "codex_home": ctx.profile.codex.home,
            "project_dir": ctx.profile.codex.sessions_dir, "channel_flags": [],
            "expected_channel_servers": [],
            "environment": list(codex.environment_names(
                (name for name, _ in ctx.launch.env), True))}


class LaunchDropIn(RenderedFile):
    """systemd door: a drop-in that resets ExecStart= and starts claude through tl-launch."""

    name = "LaunchDropIn"
    agents = CLAUDE_ONLY

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.door.kind is not DoorKind.SYSTEMD:
            return f"door is {ctx.profile.door.kind}, not systemd"
        if ctx.launch is not None and ctx.launch.in_tmux:
            return "the unit already starts claude through tl-launch inside tmux"
        return ctx.missing_argv()

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
                           summary="run systemctl daemon-reload (the unit's ExecStart changed)")]


class RunnerWrapper(RenderedFile):
    """pointer door: the wrapper a runner loop calls instead of claude."""

    name = "RunnerWrapper"
    agents = CLAUDE_ONLY
    mode = 0o755

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.door.kind is not DoorKind.POINTER:
            return f"door is {ctx.profile.door.kind}, not pointer"
        return ctx.missing_argv()

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

