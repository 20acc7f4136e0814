"""Find how claude is really launched on the host, per door, with the live process as witness.

Sources, strongest first: the configured command (systemd ``ExecStart`` after drop-ins and
resets; a tmux pane's start command, or the tmux command of the unit that starts the tmux
session; the runner script's claude line) and the live process (``/proc/PID/cmdline`` + ``cwd``
of the claude found under the pane / MainPID). Configured ≠ live is an IntrospectError showing
both argvs unless the profile says ``prefer: configured|live``.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from provision.errors import HostError, IntrospectError
from provision.host import Host
from provision.parsers import facts as F
from provision.profile import Profile
from runtime.agents import SHELLS, claude, codex, decode_cmdline
from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind
from runtime.doors.tmux import tmux_argv
from runtime.doors.tmux_text import parse_tmux_environment

TL_LAUNCH = "tl-launch"
OWN_DROP_IN = "threadline-launch.conf"  # provision/tasks/files.py writes it


@dataclass(frozen=True)
class LiveProcess:
    """The running claude: pid, argv as exec'd (interpreter stripped), cwd."""

    pid: int
    argv: tuple[str, ...]
    cwd: str | None


@dataclass(frozen=True)
class Launch:
    """The launch command found on the host, with its provenance and evidence."""

    door: DoorKind
    source: str
    argv: tuple[str, ...]
    workdir: str | None
    env: tuple[tuple[str, str], ...] = ()
    live: LiveProcess | None = None
    evidence: tuple[str, ...] = ()
    need_daemon_reload: bool = False
    unit_files: tuple[str, ...] = ()
    via_tl_launch: bool = False
    in_tmux: bool = False  # systemd door: the unit runs claude in tmux (its terminal)
    live_env: tuple[tuple[str, str], ...] = ()  # the live claude's values of environment_names
    tmux: tuple[str, ...] = ()  # tmux door: the argv prefix that reaches the claude user's server
    agent: AgentKind = AgentKind.CLAUDE  # whose command-line rules read ``argv``

    def environment(self, names: tuple[str, ...]) -> dict[str, str]:
        """``name → value`` the launch runs with: its own assignments, else the live process's
        (e.g. ``CLAUDE_CONFIG_DIR`` exported by the user's shell); names neither has are left
        out. Values stay in memory: print them only as digests."""
        own, live = dict(self.env), dict(self.live_env)
        return {n: own[n] if n in own else live[n] for n in names if n in own or n in live}

    @property
    def channel_flags(self) -> tuple[str, ...]:
        """The channel options of the live (else configured) argv, as written there, in order
        (codex has none on its command line)."""
        if not self.agent.has_channel_flags:
            return ()
        return claude.channel_tokens(self.live.argv if self.live else self.argv)

    def to_dict(self) -> dict[str, object]:
        return {
            "door": self.door, "source": self.source, "argv": list(self.argv),
            "workdir": self.workdir, "env_keys": sorted(k for k, _ in self.env),
            "environment": {k: value_digest(v) for k, v in sorted(self.env)},
            "live": None if self.live is None else {
                "pid": self.live.pid, "argv": list(self.live.argv), "cwd": self.live.cwd},
            "channel_flags": list(self.channel_flags), "evidence": list(self.evidence),
            "need_daemon_reload": self.need_daemon_reload, "unit_files": list(self.unit_files),
            "via_tl_launch": self.via_tl_launch,
        }


CONFIG_DIR_VAR = claude.CONFIG_DIR_VAR


def environment_names(launch: Launch, configured_dir: str | None) -> tuple[str, ...]:
    """The variables a resume must carry (names only): every assignment of the launch (inline,
    ``env``, the tmux session's environment, the unit's ``Environment=``/``EnvironmentFile=``)
    and ``CLAUDE_CONFIG_DIR`` whenever the profile or the live claude sets it."""
    if launch.agent is AgentKind.CODEX:
        return codex.environment_names((name for name, _ in launch.env), True)
    in_use = bool(configured_dir) or CONFIG_DIR_VAR in dict(launch.live_env)
    return claude.environment_names((name for name, _ in launch.env), in_use)


def introspect(host: Host, profile: Profile) -> Launch:
    """The Launch for the profile's door; IntrospectError on ambiguity or disagreement."""
    match profile.door.kind:
        case DoorKind.TMUX:
            return _tmux(host, profile)
        case DoorKind.SYSTEMD:
            return _systemd(host, profile)
        case DoorKind.POINTER:
            return _runner(host, profile)


def find_claude(host: Host, root_pid: int, binary: str | None = None,
                agent: AgentKind = AgentKind.CLAUDE) -> LiveProcess | None:
    """The first ``agent`` process at or under ``root_pid`` (breadth first, bounded); for codex
    that is the npm wrapper (``node …/.bin/codex``), whose argv the native child repeats."""
    queue, seen = [root_pid], 0
    while queue and seen < 200:
        pid = queue.pop(0)
        seen += 1
        argv = F.strip_interpreter(decode_cmdline(host.read_bytes(f"/proc/{pid}/cmdline") or b""))
        if argv and _is_agent(argv[0], binary, agent):
            return LiveProcess(pid, argv, host.readlink(f"/proc/{pid}/cwd"))
        queue.extend(host.proc_children(pid))
    return None


def _is_agent(program: str, binary: str | None, agent: AgentKind) -> bool:
    return os.path.basename(program) in agent.programs or (binary is not None and program == binary)


_SAME_USER: dict[tuple[int, str], int | None] = {}


def tmux_base(host: Host, profile: Profile) -> list[str]:
    """``tmux`` addressing the claude user's server: ``-S`` the profile's socket_path; else
    ``-L NAME`` when apply runs as that user; as another user (root), ``-S`` the user's socket
    (``user_socket_path``)."""
    return tmux_argv(profile.door.tmux_socket_name or "", user_socket_path(host, profile))


def user_socket_path(host: Host, profile: Profile) -> str:
    """The socket path that reaches the claude user's server, "" when ``-L`` does: the
    profile's ``door.tmux.socket_path`` as given (absolute, whoever runs provision); else
    ``$TMUX_TMPDIR/tmux-<claude uid>/NAME`` when who runs provision is not the claude user
    (root): ``-L`` would look in root's own socket folder (``tmux-0``) and never find the
    user's server."""
    if profile.door.tmux_socket_path:
        return profile.door.tmux_socket_path
    key = (id(host), profile.claude.user)
    if key not in _SAME_USER:
        _SAME_USER[key] = _other_uid(host, profile.claude.user)
    uid = _SAME_USER[key]
    return "" if uid is None else _named_socket(uid, profile.door.tmux_socket_name or "default")


def _named_socket(uid: int, name: str) -> str:
    """The socket of ``tmux -L NAME`` for user ``uid`` (tmux's own rule)."""
    folder = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return f"{folder.rstrip('/')}/tmux-{uid}/{name}"


def _other_uid(host: Host, user: str) -> int | None:
    """The claude user's uid when apply runs as someone else; None when it is the same."""
    try:
        mine, theirs = host.run(["id", "-u"], timeout=10), host.run(["id", "-u", user], timeout=10)
    except HostError:
        return None
    if not (mine.ok and theirs.ok) or mine.stdout.strip() == theirs.stdout.strip():
        return None
    value = theirs.stdout.strip()
    return int(value) if value.isdigit() else None


def _server_label(profile: Profile) -> str:
    """The tmux server the profile names, as messages say it."""
    if profile.door.tmux_socket_path:
        return f"socket path {profile.door.tmux_socket_path!r}"
    return f"socket {profile.door.tmux_socket_name or 'default'!r}"


def _tmux(host: Host, profile: Profile) -> Launch:
    target = profile.door.tmux_target or ""
    result = host.run([*tmux_base(host, profile), "list-panes", "-a", "-F", F.PANE_FORMAT])
    if not result.ok:
        _refuse_other_server(host, profile, f"tmux list-panes failed on {_server_label(profile)}")
        raise IntrospectError(f"tmux list-panes failed on {_server_label(profile)}: "
                              f"{result.stderr.strip()}")
    panes = F.parse_tmux_panes(result.stdout)
    pane = next((p for p in panes if target in (p.target, p.pane_id)), None)
    if pane is None:
        _refuse_other_server(host, profile,
                             f"tmux pane {target!r} not found on {_server_label(profile)}")
        raise IntrospectError(f"tmux pane {target!r} not found on {_server_label(profile)} "
                              f"(panes: {', '.join(p.target for p in panes) or 'none'})")
    evidence = [f"tmux pane {pane.target} ({pane.pane_id}) pid={pane.pid} "
                f"start_command={pane.start_command}"]
    if pane.dead:
        again = (f"tl-rebuild restart --config {profile.install.config_path} once threadline "
                 f"is installed, or tmux respawn-pane" if profile.agent is AgentKind.CLAUDE
                 else "tmux respawn-pane")
        raise IntrospectError(f"tmux pane {target!r} is dead; nothing runs {profile.agent.value} "
                              f"there — start it again first ({again})")
    evidence.extend(_tmux_hooks(host, profile))
    if profile.door.tmux_unit:
        files, _ = _unit(host, profile.door.tmux_unit)
        commands = _exec_commands(files, profile.door.tmux_unit)
        configured = F.tmux_command_in_argv(commands[0].argv)
        if configured is None:
            raise IntrospectError(f"unit {profile.door.tmux_unit!r} ExecStart does not start a "
                                  f"tmux session with a command: {commands[0].argv!r}")
        source = f"systemd unit {profile.door.tmux_unit} → tmux new-session command"
        evidence.append(f"unit {profile.door.tmux_unit} ExecStart={shlex.join(commands[0].argv)}")
    else:
        configured = _pane_command(host, profile, pane) if pane.start_command else None
        if configured is None or _shell_program(configured.argv):
            raise _shell_pane(host, profile, pane, configured)
        source = f"tmux pane {pane.target} start command"
    session_env = _tmux_session_env(host, profile, pane.target.rpartition(":")[0], evidence)
    configured = F.ShellCommand(configured.argv, tuple({**session_env,
                                                        **dict(configured.env)}.items()),
                                configured.cwd)
    live = find_claude(host, pane.pid, profile.claude.binary, profile.agent)
    workdir = configured.cwd or (live.cwd if live else None) or pane.start_path or None
    launch = _settle(host, profile, source, configured, live, workdir, evidence)
    return Launch(**{**launch.__dict__, "tmux": tuple(tmux_base(host, profile))})


def _refuse_other_server(host: Host, profile: Profile, what: str) -> None:
    """When the profile names no server and the profile's agent runs under another tmux
    server (its ``TMUX`` names a socket other than the default one searched), the
    IntrospectError naming that socket, so "pane not found" does not send the user looking
    for a pane that is there."""
    if profile.door.tmux_socket_name or profile.door.tmux_socket_path:
        return
    searched = os.path.normpath(user_socket_path(host, profile)
                                or _named_socket(os.getuid(), "default"))
    for pid, path in _agent_tmux_sockets(host, profile):
        if os.path.normpath(path) == searched:
            continue
        folder, name = os.path.split(path)
        same_folder = folder == os.path.dirname(searched)
        raise IntrospectError(
            f"{what}, but {profile.agent.value} (pid {pid}) runs under the tmux server at "
            f"{path!r} (its TMUX); set door.tmux.socket_path: {path}"
            + (f" (or socket_name: {name})" if same_folder else ""))


def _agent_tmux_sockets(host: Host, profile: Profile) -> list[tuple[int, str]]:
    """``(pid, socket path)`` of each running agent of the profile (its program, its HOME or
    CODEX_HOME) whose ``TMUX`` names a tmux server; bounded, unreadable processes skipped."""
    from runtime.procfs import parse_environ

    found: list[tuple[int, str]] = []
    for name in host.listdir("/proc")[:4096]:
        argv = F.strip_interpreter(decode_cmdline(
            host.read_bytes(f"/proc/{name}/cmdline") or b"")) if name.isdigit() else ()
        if not argv or not _is_agent(argv[0], profile.claude.binary, profile.agent):
            continue
        env = parse_environ(host.read_bytes(f"/proc/{name}/environ") or b"")
        path = F.parse_tmux_variable(env.get("TMUX", ""))
        if path is not None and _agents_home(host, profile, env):
            found.append((int(name), path))
    return found


def _agents_home(host: Host, profile: Profile, env: dict[str, str]) -> bool:
    """True when a process with environment ``env`` is the profile's agent: codex with the
    profile's CODEX_HOME, claude with the profile's HOME (another user's, or a test's, is not)."""
    home = env.get("HOME", "")
    if profile.codex is not None:
        used = env.get(codex.HOME_VAR) or (f"{home.rstrip('/')}/.codex" if home else "")
        wanted = profile.codex.home
    else:
        used, wanted = home, profile.claude.home
    return bool(used) and host.realpath(os.path.normpath(used)) == \
        host.realpath(os.path.normpath(wanted))


def _pane_command(host: Host, profile: Profile, pane: F.Pane) -> F.ShellCommand:
    """The pane's start command: the lossless ``pane_start_command_list`` when this tmux has it
    (newer than 3.7c; older servers print nothing), else ``pane_start_command``."""
    try:
        listed = host.run([*tmux_base(host, profile), "display-message", "-p", "-t", pane.pane_id,
                           "#{pane_start_command_list}"])
    except HostError:
        listed = None
    text = listed.stdout.strip() if listed is not None and listed.ok else ""
    if text:
        words = shlex.split(text)
        return F.parse_shell_command(words[0]) if len(words) == 1 else F.ShellCommand(
            tuple(words))
    return F.parse_pane_start_command(pane.start_command)


def _shell_program(argv: tuple[str, ...]) -> bool:
    """``bash``, ``-zsh``, ``bash -l``, ``bash -lc 'claude …'``: a shell (interactive, or
    running a command line), not the agent; ``bash ~/start.sh`` runs a script, a wrapper."""
    if not argv or os.path.basename(argv[0]).lstrip("-") not in SHELLS:
        return False
    options = [a for a in argv[1:] if a.startswith("-")]
    command = any(o[1:2] != "-" and "c" in o[1:] for o in options)
    return command or len(options) == len(argv) - 1


def _shell_pane(host: Host, profile: Profile, pane: F.Pane,
                configured: F.ShellCommand | None) -> IntrospectError:
    """The refusal for a pane whose own command is a shell (empty: tmux's default-shell),
    naming the live agent and the pane command that would make it switchable. The door
    respawns the pane's own process and takes the old process's argv, environment and session
    record from it: a shell in between would be replaced, and what it exported (PATH, keys)
    lost."""
    shell = shlex.join(configured.argv) if configured else "the default-shell"
    live = find_claude(host, pane.pid, profile.claude.binary, profile.agent)
    agent = profile.agent.value
    if live is None:
        return IntrospectError(
            f"tmux pane {pane.target} runs a shell ({shell}) and no {agent} runs in it; start "
            f"the pane with {agent}'s own command, e.g. tmux respawn-pane -k -t {pane.target} "
            f"'{agent} {'--continue' if profile.agent is AgentKind.CLAUDE else '--no-daemon'} …'")
    try:
        argv = _absolute(host, profile, F.ShellCommand(live.argv), live)
    except IntrospectError:
        argv = live.argv
    from runtime.procfs import parse_environ

    env = parse_environ(host.read_bytes(f"/proc/{live.pid}/environ") or b"")
    # the agent's own directory variable (CLAUDE_CONFIG_DIR, CODEX_HOME): a path, no secret
    keep = [f"{n}={env[n]}" for n in profile.agent.cli.environment_names((), True) if n in env]
    command = shlex.join(["env", *keep, *argv] if keep else argv)
    where = f" -c {shlex.quote(live.cwd)}" if live.cwd else ""
    return IntrospectError(
        f"tmux pane {pane.target} runs a shell ({shell}) with {agent} (pid {live.pid}) started "
        f"from it; a switch respawns the pane's own command, so the pane must run {agent} "
        f"itself — at a quiet moment (this restarts {agent}; put what your shell exports for "
        f"it, e.g. API keys, into the tmux session: set-environment): tmux respawn-pane -k -t "
        f"{pane.target}{where} {shlex.quote('exec ' + command)}")


def _tmux_session_env(host: Host, profile: Profile, session: str,
                      evidence: list[str]) -> dict[str, str]:
    """The tmux session's own environment (``new-session -e``, ``set-environment``): a respawned
    pane gets it too. Variables in ``update-environment`` (SSH_AUTH_SOCK, DISPLAY …) are
    refreshed on every attach, so they are no part of the launch and are left out."""
    base = tmux_base(host, profile)
    try:
        shown = host.run([*base, "show-environment", "-t", session])
        updated = host.run([*base, "show-options", "-gv", "update-environment"])
    except HostError as exc:
        evidence.append(f"tmux session {session} environment unreadable: {exc}")
        return {}
    if not shown.ok:
        evidence.append(f"tmux session {session} environment unreadable: "
                        f"{shown.stderr.strip()}")
        return {}
    refreshed = set(updated.stdout.split()) if updated.ok else set()
    env = {k: v for k, v in parse_tmux_environment(shown.stdout).items()
           if k not in refreshed}
    if env:
        evidence.append(f"tmux session {session} environment: {', '.join(sorted(env))}")
    return env


def _tmux_hooks(host: Host, profile: Profile) -> list[str]:
    """Respawn wiring as evidence: remain-on-exit and pane-died/pane-exited hooks (global
    window scope: where tmux 3.3a keeps them)."""
    lines = []
    try:
        remain = host.run([*tmux_base(host, profile), "show-options", "-gw", "remain-on-exit"])
        hooks = host.run([*tmux_base(host, profile), "show-hooks", "-gw"])  # window hooks (3.3a)
    except HostError:
        return []  # evidence only: never fatal
    if remain.ok and remain.stdout.strip():
        lines.append(f"tmux {remain.stdout.strip()}")
    for line in hooks.stdout.splitlines() if hooks.ok else []:
        if line.startswith(("pane-died", "pane-exited")) and " " in line:
            lines.append(f"tmux hook {line.strip()}")
    return lines


def _unit(host: Host, unit: str) -> tuple[tuple[F.UnitFile, ...], F.UnitShow]:
    cat = host.run(["systemctl", "cat", unit])
    if not cat.ok:
        raise IntrospectError(f"systemctl cat {unit!r} failed: {cat.stderr.strip()}")
    show = host.run(["systemctl", "show", "-p", "MainPID", "-p", "NeedDaemonReload",
                     "-p", "FragmentPath", "-p", "DropInPaths", "-p", "ActiveState", unit])
    parsed = F.parse_systemctl_show(show.stdout)
    if "changed on disk" in cat.stderr and not parsed.need_daemon_reload:
        # systemd 252 omits NeedDaemonReload from `show -p` lists; cat's warning says it
        parsed = F.UnitShow(**{**parsed.__dict__, "need_daemon_reload": True})
    return F.parse_systemctl_cat(cat.stdout), parsed


def _exec_commands(files: tuple[F.UnitFile, ...], unit: str) -> list[F.ExecCommand]:
    commands = F.effective_exec_start(files)
    if len(commands) != 1:
        raise IntrospectError(f"unit {unit!r} has {len(commands)} effective ExecStart commands; "
                              f"expected exactly one")
    return commands


def _unit_workdir(files: tuple[F.UnitFile, ...], unit: str, profile: Profile) -> str:
    """The unit's last ``WorkingDirectory=`` as a path: ``~`` is the home of ``User=`` (root
    without one), which must be the profile's user; a ``%`` specifier is refused (its value
    is the manager's, e.g. ``%h`` is /root for the system manager, whatever ``User=`` says)."""
    value = F.effective_values(files, "WorkingDirectory")[-1].lstrip("-")
    if profile.claude.workdir:
        return profile.claude.workdir
    if value == "~":
        users = F.effective_values(files, "User")
        user = users[-1] if users else "root"
        if user != profile.claude.user:
            raise IntrospectError(f"WorkingDirectory=~ of unit {unit!r} is the home of User="
                                  f"{user}, not of claude.user {profile.claude.user!r}; set "
                                  f"claude.workdir in the profile")
        return profile.claude.home
    if re.search(r"%[^%]", value.replace("%%", "")):
        raise IntrospectError(f"WorkingDirectory={value} of unit {unit!r} uses a systemd "
                              f"specifier; pin the path in the unit or set claude.workdir")
    return value.replace("%%", "%")


def _systemd(host: Host, profile: Profile) -> Launch:
    unit = profile.door.systemd_unit or ""
    files, show = _unit(host, unit)
    # our own tl-launch drop-in wraps the argv of the files below it: introspect those, so a
    # change the operator makes to the unit is seen even while our drop-in overrides it
    own = tuple(f for f in files if f.path.endswith("/" + OWN_DROP_IN))
    underlying = tuple(f for f in files if f not in own)
    command = _exec_commands(underlying if own and F.effective_exec_start(underlying)
                             else files, unit)[0]
    env = F.parse_environment(F.effective_values(files, "Environment"))
    for name in F.effective_values(files, "EnvironmentFile"):
        optional = name.startswith("-")
        text = host.read_text(name.lstrip("-"))
        if text is None and not optional:
            raise IntrospectError(f"EnvironmentFile {name!r} of unit {unit!r} is missing")
        env.update(F.parse_environment_file(text or ""))
    argv = F.resolve_specifiers(command.argv)
    if ":" not in command.prefixes:
        argv, missing = F.expand_systemd_env(argv, env)
        if missing:
            raise IntrospectError(f"ExecStart of unit {unit!r} uses unresolvable "
                                  f"{', '.join('$' + m for m in missing)}; pin it in the unit")
    inner = F.tmux_command_in_argv(argv)
    if inner is not None:  # claude in tmux inside the unit: the pane command is the launch
        argv = F.resolve_specifiers(inner.argv)
        if os.path.basename(argv[0]) != TL_LAUNCH:
            raise IntrospectError(f"unit {unit!r} runs claude in tmux without tl-launch: start "
                                  f"it as 'tl-launch --pointer P -- claude …' (HANDOFF §7)")
        if not profile.door.tmux_target:
            raise IntrospectError(f"unit {unit!r} runs claude in tmux: name its pane in "
                                  f"door.tmux.target (and socket_name or socket_path) so a "
                                  f"restart can answer claude's warnings")
        from runtime.doors.systemd_launch import parse_args

        try:
            unit_pointer, _ = parse_args(argv[1:])
        except ValueError as exc:
            raise IntrospectError(f"tl-launch in unit {unit!r}: {exc}") from exc
        wanted = profile.door.systemd_pointer_path or profile.install.default_pointer_path
        if unit_pointer != wanted:
            raise IntrospectError(f"tl-launch in unit {unit!r} reads pointer {unit_pointer!r} but "
                                  f"the door writes {wanted!r}: set door.systemd.pointer_path")
    via = os.path.basename(argv[0]) == TL_LAUNCH or bool(own)
    if os.path.basename(argv[0]) == TL_LAUNCH:
        if "--" not in argv:
            raise IntrospectError(f"tl-launch in unit {unit!r} has no '--' before the claude "
                                  f"argv: {argv!r}")
        argv = argv[argv.index("--") + 1:]
    argv, wrapped = F.split_env_wrapper(argv)
    env.update(wrapped)
    workdirs = F.effective_values(files, "WorkingDirectory")
    configured = F.ShellCommand(argv, tuple(sorted(env.items())),
                                _unit_workdir(files, unit, profile) if workdirs else None)
    live = find_claude(host, show.main_pid, profile.claude.binary) if show.main_pid else None
    evidence = [f"# {f.path}" for f in files] + [
        f"ExecStart{'(tl-launch)' if via else ''}={shlex.join(command.argv)}",
        f"MainPID={show.main_pid} NeedDaemonReload={'yes' if show.need_daemon_reload else 'no'}"]
    launch = _settle(host, profile, f"systemd unit {unit} ExecStart", configured, live,
                     configured.cwd or (live.cwd if live else None), evidence)
    return Launch(**{**launch.__dict__, "need_daemon_reload": show.need_daemon_reload,
                     "unit_files": tuple(f.path for f in files), "via_tl_launch": via,
                     "in_tmux": inner is not None})


def _runner(host: Host, profile: Profile) -> Launch:
    runner = profile.door.pointer_runner or ""
    text = host.read_text(runner)
    if text is None:
        raise IntrospectError(f"runner script {runner!r} not found")
    cwd, env, found = None, {}, []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("cd ") and "&&" not in line:
            cwd = shlex.split(line[3:])[0]
        elif line.startswith("export ") and "=" in line:
            key, _, value = line[7:].partition("=")
            env[key.strip()] = " ".join(shlex.split(value)) if value else ""
        elif claude.NAME in line and not line.startswith(("tl-", "echo")):
            found.append(line)
    if len(found) != 1:
        raise IntrospectError(f"runner script {runner!r} has {len(found)} claude command lines; "
                              f"expected exactly one")
    command = F.parse_shell_command(found[0].removeprefix("do ").strip())
    argv, missing = F.expand_systemd_env(command.argv, {**env, **dict(command.env)})
    if missing:
        raise IntrospectError(f"runner script {runner!r} uses unresolvable "
                              f"{', '.join('$' + m for m in missing)} on its claude line")
    configured = F.ShellCommand(argv, command.env, command.cwd or cwd)
    return _settle(host, profile, f"runner script {runner}", configured, None,
                   configured.cwd or profile.claude.workdir, [f"claude line: {found[0]}"])


# Where the claude executable really lives (after symlinks): npm's package (the native
# binary, its per-platform package, or the older cli.js) or the native installer's versions.
_CLAUDE_LAYOUT = re.compile(
    r".*/node_modules/@anthropic-ai/claude-code(?:-[a-z0-9-]+)?/(?:bin/claude\.exe|cli\.js|claude)"
    r"|.*/claude/versions/[0-9][0-9A-Za-z.+-]*")


# The pinned npm package: .bin/codex → @openai/codex/bin/codex.js, which spawns the native
# binary of its platform package (@openai/codex-linux-x64/vendor/<triple>/bin/codex).
_CODEX_LAYOUT = re.compile(
    r".*/node_modules/@openai/codex/bin/codex\.js"
    r"|.*/node_modules/@openai/codex-[a-z0-9-]+/vendor/[^/]+/(?:bin/)?codex(?:/codex)?")


# agent → (its install layout, how that evidence is named, the npm package it comes from)
_LAYOUTS = {"claude": (_CLAUDE_LAYOUT, "the Claude Code package layout",
                       "@anthropic-ai/claude-code"),
            "codex": (_CODEX_LAYOUT, "the @openai/codex package layout", "@openai/codex")}


def agent_identity(agent: str, real: str, binary_real: str | None,
                   live_exe: str | None) -> str | None:
    """How the executable at ``real`` (symlinks resolved) is known to be ``agent``, or None:
    the profile's binary, the agent's package layout, or the live process's executable."""
    layout, label, _ = _LAYOUTS[agent]
    if binary_real is not None and real == binary_real:
        return f"the profile's {agent}.binary"
    if layout.fullmatch(real):
        return label
    if live_exe is not None and real == live_exe:
        return f"the live {agent} process's executable"
    return None


def codex_identity(real: str, binary_real: str | None, live_exe: str | None) -> str | None:
    return agent_identity("codex", real, binary_real, live_exe)


def claude_identity(real: str, binary_real: str | None, live_exe: str | None) -> str | None:
    return agent_identity("claude", real, binary_real, live_exe)


def identify_claude(host: Host, profile: Profile, program: str,
                    live: LiveProcess | None) -> str:
    """Evidence that ``program`` is the profile's agent (claude or codex); IntrospectError when
    nothing identifies it, so no unidentified program is ever run (``--version``) or given a
    resume argv."""
    real = host.realpath(program)
    binary = host.realpath(profile.claude.binary) if profile.claude.binary else None
    exe = host.readlink(f"/proc/{live.pid}/exe") if live is not None else None
    agent = profile.agent
    how = agent_identity(agent, real, binary, host.realpath(exe) if exe else None)
    if how is None:
        raise IntrospectError(
            f"launch command {program!r} (resolves to {real!r}) is not {agent}: it is not "
            f"{agent}.binary, not in an {_LAYOUTS[agent][2]} install and not the live "
            f"{agent}'s executable; nothing was run — set {agent}.binary if it is a wrapper")
    return f"{agent} identified by {how}: {real}"


def _settle(host: Host, profile: Profile, source: str, configured: F.ShellCommand,
            live: LiveProcess | None, workdir: str | None, evidence: list[str]) -> Launch:
    """Resolve argv[0], compare configured with live, apply ``prefer``, build the Launch."""
    argv = _absolute(host, profile, configured, live)
    chosen = argv
    if live is not None:
        evidence.append(f"live pid {live.pid} argv={shlex.join(live.argv)} cwd={live.cwd}")
        if not profile.agent.cli.same_launch(argv, live.argv):
            if profile.prefer is None:
                raise IntrospectError(
                    f"configured and live claude argv differ ({source}): configured "
                    f"{shlex.join(argv)!r} vs live {shlex.join(live.argv)!r}; set "
                    f"'prefer: configured' or 'prefer: live' in the profile")
            if profile.prefer == "live":  # the live program itself, not the pane's wrapper
                chosen = _absolute(host, profile, F.ShellCommand(live.argv), live)
            evidence.append(f"configured ≠ live; profile prefers {profile.prefer}")
    evidence.append(identify_claude(host, profile, chosen[0], live))
    if profile.claude.workdir:
        workdir = profile.claude.workdir
    if workdir is None:
        raise IntrospectError(f"cannot tell the working directory of claude ({source}); "
                              f"set claude.workdir in the profile")
    live_env = _live_environment(host, profile, configured, live, evidence)
    redacted = tuple(redact(line, (*configured.env, *live_env)) for line in evidence)
    return Launch(profile.door.kind, source, tuple(chosen), workdir, configured.env, live,
                  redacted, live_env=live_env, agent=profile.agent)


def _codex_home(profile: Profile, configured: F.ShellCommand, live_env: dict[str, str],
                current: dict[str, str] | None) -> None:
    """The codex runs with the profile's CODEX_HOME (its threads, locks and config.toml are
    there); another one is an IntrospectError naming both."""
    assert profile.codex is not None
    own = dict(configured.env)
    in_use = own.get(codex.HOME_VAR) or live_env.get(codex.HOME_VAR)
    if in_use is None and current is not None and current.get("HOME"):
        in_use = f"{current['HOME'].rstrip('/')}/.codex"  # codex's default
    if in_use is not None and os.path.normpath(in_use) != os.path.normpath(profile.codex.home):
        raise IntrospectError(
            f"codex runs with CODEX_HOME={in_use} but the profile says codex.home: "
            f"{profile.codex.home}; set codex.home to the directory codex really uses")


def _live_environment(host: Host, profile: Profile, configured: F.ShellCommand,
                      live: LiveProcess | None,
                      evidence: list[str]) -> tuple[tuple[str, str], ...]:
    """The live claude's values of the launch's variables (and CLAUDE_CONFIG_DIR), compared
    with the launch; a config dir other than the profile's is an IntrospectError (the
    sessions, settings and MCP config would be looked for in the wrong place)."""
    from runtime.procfs import parse_environ

    own = dict(configured.env)
    if live is None:
        current = None
    else:
        data = host.read_bytes(f"/proc/{live.pid}/environ")
        current = parse_environ(data) if data is not None else None
        if current is None:
            evidence.append(f"live pid {live.pid} environment unreadable")
    names = profile.agent.cli.environment_names(own, True)
    live_env = {k: v for k, v in (current or {}).items() if k in names}
    for name in sorted(set(own) & set(live_env)):
        if own[name] != live_env[name]:
            evidence.append(f"live pid {live.pid if live else '?'} {name} differs from the "
                            f"launch ({value_digest(live_env[name])} vs "
                            f"{value_digest(own[name])})")
    if profile.agent is AgentKind.CODEX:
        _codex_home(profile, configured, live_env, current)
        return tuple(sorted(live_env.items()))
    known = CONFIG_DIR_VAR in own or current is not None
    in_use = own.get(CONFIG_DIR_VAR, live_env.get(CONFIG_DIR_VAR)) or None
    wanted = profile.claude.config_dir or None
    if known and (in_use is None or wanted is None or
                  os.path.normpath(in_use) != os.path.normpath(wanted)) and in_use != wanted:
        raise IntrospectError(
            f"claude runs with CLAUDE_CONFIG_DIR={in_use or '(unset: ~/.claude)'} but the "
            f"profile says claude.config_dir: {wanted or '(unset)'}; set claude.config_dir "
            f"to the directory claude really uses")
    home = (current or {}).get("HOME")
    if in_use is None and home and host.realpath(os.path.normpath(home)) != \
            host.realpath(os.path.normpath(profile.claude.home)):  # /home → /data/home is one
        raise IntrospectError(
            f"claude (pid {live.pid if live else '?'}) runs with HOME={home}, so it reads "
            f"{home.rstrip('/')}/.claude/settings.json, but the profile says claude.home: "
            f"{profile.claude.home}; set claude.user and claude.home to the user claude runs as")
    return tuple(sorted(live_env.items()))


def value_digest(value: str) -> str:
    from runtime.procfs import value_digest as digest

    return digest(value)


def redact(text: str, env: tuple[tuple[str, str], ...]) -> str:
    """``text`` with every environment value replaced by its digest (secrets never printed)."""
    for name, value in env:
        if name == CONFIG_DIR_VAR or not value:
            continue  # a path the profile names anyway
        if len(value) >= 6:
            text = text.replace(value, f"<{value_digest(value)}>")
        else:
            text = text.replace(f"{name}={value}", f"{name}=<{value_digest(value)}>")
    return text


def _absolute(host: Host, profile: Profile, configured: F.ShellCommand,
              live: LiveProcess | None) -> tuple[str, ...]:
    program = configured.argv[0]
    if program.startswith("/"):
        return configured.argv
    if live is not None and live.argv[0].startswith("/") and \
            os.path.basename(live.argv[0]) == os.path.basename(program):
        return (live.argv[0], *configured.argv[1:])
    if profile.claude.binary and os.path.basename(profile.claude.binary) == program:
        return (profile.claude.binary, *configured.argv[1:])
    # the launch's own PATH, then the live process's (what the user's shell or the unit had):
    # tl-provision's PATH (root's, sudo's secure_path) may find another claude, or none
    exe = _live_exe(host, live)
    own = [(d, False) for d in dict(configured.env).get("PATH", "").split(":")]
    for directory, check in [*own, *((d, True) for d in _live_path(host, live).split(":"))]:
        candidate = f"{directory.rstrip('/')}/{program}"
        if directory.startswith("/") and (st := host.stat(candidate)) and st.executable \
                and not (check and exe is not None
                         and not same_program(host.realpath(candidate), exe)):
            return (candidate, *configured.argv[1:])  # (a unit's PATH may name another one)
    try:
        found = host.which(program)
    except HostError:
        found = None
    if found is None:
        raise IntrospectError(f"cannot resolve {program!r} to an absolute path; set "
                              f"claude.binary in the profile")
    if exe is not None and not same_program(host.realpath(found), exe):
        raise IntrospectError(
            f"{program!r} on tl-provision's PATH is {found!r} ({host.realpath(found)}), but the "
            f"live {os.path.basename(program)} (pid {live.pid if live else '?'}) runs {exe}; "
            f"set claude.binary to the path the user runs")
    return (found, *configured.argv[1:])


def same_program(real: str, live_exe: str) -> bool:
    """True when the executable ``real`` (symlinks resolved) is the program a live process
    runs from ``live_exe``: the same file, or another version of one native install — the
    installer updates in the background (``…/claude/versions/2.1.328`` → ``2.1.329``, the old
    version kept while it runs), and the link the user starts names the newer one."""
    if real == live_exe:
        return True
    folder = os.path.dirname(real)
    return folder == os.path.dirname(live_exe) and os.path.basename(folder) == "versions"


def _live_path(host: Host, live: LiveProcess | None) -> str:
    """The live process's PATH ("" when there is none or its environ is unreadable)."""
    from runtime.procfs import parse_environ

    data = host.read_bytes(f"/proc/{live.pid}/environ") if live is not None else None
    return parse_environ(data).get("PATH", "") if data else ""


def _live_exe(host: Host, live: LiveProcess | None) -> str | None:
    """The program the live process runs (symlinks resolved); None when unknown or when it is
    an interpreter running a script (the script is the program then)."""
    exe = host.readlink(f"/proc/{live.pid}/exe") if live is not None else None
    if exe is None or exe.endswith(" (deleted)"):
        return None
    real = host.realpath(exe)
    return None if os.path.basename(real) in F.INTERPRETERS | SHELLS else real
