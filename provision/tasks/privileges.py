"""``DoorPrivileges``: what the systemd door needs when the claude user is not root (issue 10 §6).

A switch through the systemd door runs, as the claude user, ``systemctl show -p MainPID`` (the
identity check), ``systemctl restart UNIT`` and ``systemd-run --scope …`` (the worker must
leave the unit's cgroup before the restart kills it). Without root the restart and the scope
ask polkit, which a VPS rarely has and which grants transient units only as a whole, and
without D-Bus even ``show`` fails ("Failed to connect to bus"; root's systemctl uses the
manager's private socket). The task therefore installs the narrowest rule that works
everywhere sudo exists: a sudoers drop-in for exactly these three command lines, no wildcard —

    claude ALL=(root) NOPASSWD: /usr/bin/systemctl restart claude.service, \
        /usr/bin/systemctl show -p MainPID --value claude.service, \
        /usr/bin/systemd-run --scope -p KillMode=process --unit=tl-worker-claude_service \
        --uid=claude -- /opt/threadline/bin/python -m runtime.switch.worker --scheduled --config C

(the runtime config's ``switch.systemd.sudo_user`` makes the door and the hook use them; the
worker takes the one scheduled operation, so no operation id appears in the rule). It is
written beside its final name with a dot in the name (sudo skips such files), checked with
``visudo -cf``, then moved into place (0440) — a broken file never reaches /etc/sudoers.d.
Proven with real sudo, a second user and systemd 252 in
tests/provision/tasks/test_privileges_systemd.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.actions import CLAUDE_ONLY, Action, RunCommand, Task, WriteFile
from provision.errors import FactError
from provision.render import MANAGED_MARK
from provision.tasks.files import find_console_script, owner_of
from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from provision.host import Host
    from provision.result import Context

SUDOERS_DIR = "/etc/sudoers.d"
MODE = 0o440


def rule_name(unit: str) -> str:
    """The drop-in's file name: no dot (sudo skips names with one), no ``~``."""
    return "threadline-" + re.sub(r"[^A-Za-z0-9_-]", "_", unit)


def sudoers_word(word: str) -> str:
    """One argument of a sudoers command: ``\\ , : =`` escaped; whitespace is refused."""
    if re.search(r"\s", word) or not word:
        raise FactError(f"cannot put {word!r} into a sudoers rule (empty or holds whitespace); "
                        f"install threadline and its config at paths without spaces")
    return re.sub(r"([\\,:=])", r"\\\1", word)


def privileged_commands(user: str, unit: str, systemctl: str, systemd_run: str,
                        python: str, config: str) -> tuple[tuple[str, ...], ...]:
    """The exact command lines the claude user runs through ``sudo -n``: the restart, the
    door's MainPID read (``SystemdDoor.main_pid``) and the worker in its scope."""
    from runtime.doors.systemd import SystemdDoor, worker_scope, worker_scope_name

    scope = worker_scope_name(unit)
    restart = (systemctl, "restart", unit)
    main_pid = (systemctl, *SystemdDoor.MAIN_PID, unit)
    worker = (*worker_scope(systemd_run, scope, user), python, "-m", "runtime.switch.worker",
              "--scheduled", "--config", config)
    return restart, main_pid, worker


# What the worker needs from the hook's environment, which sudo's env_reset drops: the tmux
# socket folder (the door of a unit running claude in tmux finds the user's server through it)
# and where claude keeps its files. systemd-run (root) ignores them; the worker runs as the user.
WORKER_ENV = ("TMUX_TMPDIR", "HOME", "CLAUDE_CONFIG_DIR")


def render_rule(user: str, host: str, commands: tuple[tuple[str, ...], ...]) -> bytes:
    """The sudoers drop-in text for ``commands`` (each an exact argv; the last one is the
    worker, which alone keeps ``WORKER_ENV`` through sudo)."""
    lines = [f"# {MANAGED_MARK} (host {host}): the claude user restarts its unit, reads its",
             "# MainPID and starts the switch worker in a scope of its own (exact commands).",
             f"Cmnd_Alias {worker_alias(user)} = "
             + " ".join(sudoers_word(w) for w in commands[-1]),
             f'Defaults!{worker_alias(user)} env_keep += "{" ".join(WORKER_ENV)}"']
    specs = [" ".join(sudoers_word(w) for w in argv) for argv in commands[:-1]]
    lines.append(f"{sudoers_word(user)} ALL=(root) NOPASSWD: "
                 + ", \\\n    ".join([*specs, worker_alias(user)]))
    return ("\n".join(lines) + "\n").encode()


def worker_alias(user: str) -> str:
    """The Cmnd_Alias naming the worker's command (upper case, as sudoers wants)."""
    return "TL_WORKER_" + re.sub(r"[^A-Z0-9]", "_", user.upper())


@dataclass(frozen=True)
class PrivilegeFacts:
    path: str
    current: bytes | None
    mode: int | None
    rendered: bytes
    needs: tuple[str, ...]  # what the claude user could not do by itself, in words


class DoorPrivileges(Task):
    """systemd door with a non-root claude user: the sudoers rule for exactly the restart and
    the worker's scope (skipped for root, and for the other doors)."""

    name = "DoorPrivileges"
    agents = CLAUDE_ONLY

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.profile.door.kind is not DoorKind.SYSTEMD:
            return f"door is {ctx.profile.door.kind}: no privileged command"
        owners = owner_of(ctx)
        if owners is None:
            return "claude user unknown (Directories did not run)"
        if owners.claude[0] == 0:
            return "claude runs as root: systemctl and systemd-run need no rule"
        return None

    def facts(self, host: Host, ctx: Context) -> PrivilegeFacts:
        profile = ctx.profile
        unit = profile.door.systemd_unit or ""
        tools = {}
        for name in ("systemctl", "systemd-run", "visudo"):
            found = host.which(name)
            if found is None:
                hint = "install sudo" if name == "visudo" else "the systemd door needs it"
                raise FactError(f"{name} not found on {profile.host!r}; the systemd door with "
                                f"claude.user {profile.claude.user!r} needs sudo ({hint})")
            tools[name] = found
        tl_rebuild = find_console_script(host, profile, "tl-rebuild")
        shebang = (host.read_bytes(tl_rebuild) or b"").split(b"\n", 1)[0].decode()
        if not shebang.startswith("#!/"):
            raise FactError(f"cannot tell the Python of {tl_rebuild!r} (first line {shebang!r})")
        commands = privileged_commands(profile.claude.user, unit, tools["systemctl"],
                                       tools["systemd-run"], shebang[2:].split()[0],
                                       profile.install.config_path)
        path = f"{SUDOERS_DIR}/{rule_name(unit)}"
        current = host.read_bytes(path)
        st = host.stat(path) if current is not None else None
        needs = (f"systemctl restart {unit}", f"systemctl show -p MainPID {unit}",
                 "systemd-run --scope (the worker's escape)")
        return PrivilegeFacts(path, current, st.mode if st else None,
                              render_rule(profile.claude.user, profile.host, commands), needs)

    def plan(self, facts: PrivilegeFacts, ctx: Context) -> list[Action]:
        if facts.current == facts.rendered and facts.mode == MODE:
            return []
        staging = f"{facts.path}.new"  # the dot: sudo ignores it until it is checked
        why = f"{ctx.profile.claude.user} may not run {', '.join(facts.needs)}"
        return [WriteFile(staging, facts.rendered, before=facts.current, mode=MODE,
                          backup=False, summary=f"write sudoers rule {staging} ({why})"),
                RunCommand(("visudo", "-cf", staging), summary=f"check {staging} with visudo"),
                RunCommand(("mv", "-f", staging, facts.path),
                           summary=f"install {facts.path} (0440)")]

    def diff(self, facts: PrivilegeFacts, actions: list[Action]) -> str:
        return actions[0].diff().replace(f"{facts.path}.new", facts.path) if actions else ""

    def ok_message(self, facts: PrivilegeFacts, ctx: Context) -> str:
        return (f"sudoers rule {facts.path} grants {ctx.profile.claude.user} exactly: "
                + "; ".join(facts.needs))
