"""The systemd door, and the cgroup escape a worker needs when it runs under systemd.

Door (SPEC §4.3): the unit starts claude through ``tl-launch --pointer P -- <launch argv>``.
Switching writes the new session id into P atomically and runs ``systemctl restart UNIT``;
tl-launch turns the launch argv into the resume argv for that id. Identity (the CAS) is the
unit's ``MainPID``; 0, empty or unreadable is a conflict, never a match.

Escape (SPEC §4.1): a restart kills everything in the unit's cgroup, including a worker the
Stop hook spawned from inside it. ``escape_prefix`` reads the ``0::`` line of /proc/self/cgroup
(not the first line: on hybrid hosts the v1 lines come first and say ``/``) and, inside a
service, returns the ``systemd-run --scope -p KillMode=process --unit=tl-worker-NAME --`` prefix
that moves the worker into a scope of its own; when that is impossible it returns the reason,
and the caller fails the operation instead of spawning a worker that would kill itself.

Import-light on purpose (stdlib and ``runtime.doors.kind`` only at import): the Stop hook
calls ``escape_prefix``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.doors.kind import DoorKind

if TYPE_CHECKING:
    from runtime.config import Config
    from runtime.doors.base import Door

UNIT_CHARS = re.compile(r"[^A-Za-z0-9:_.\\-]")
SCOPE_CHARS = re.compile(r"[^A-Za-z0-9:_\\-]")  # no dot: a dot would end the name's prefix


@dataclass(frozen=True)
class ProcCgroup:
    """What /proc/PID/cgroup says: the cgroup2 (``0::``) path and the v1 ``name=systemd`` one."""

    unified: str | None
    named_systemd: str | None

    @property
    def path(self) -> str | None:
        """The path that names our unit: the ``0::`` one, else (legacy v1 hosts) name=systemd."""
        if self.unified not in (None, "/"):
            return self.unified
        if self.named_systemd not in (None, "/"):
            return self.named_systemd
        return self.unified

    @property
    def unit(self) -> str | None:
        """The innermost ``.service`` / ``.scope`` this process belongs to, or None."""
        for part in reversed((self.path or "").split("/")):
            if part.endswith((".service", ".scope")):
                return part
        return None

    @property
    def service(self) -> str | None:
        """The service a restart of which would kill this process, or None (scope / no unit)."""
        unit = self.unit
        return unit if unit is not None and unit.endswith(".service") else None

    @property
    def user_manager(self) -> bool:
        """True when the unit belongs to a user manager (``…/user@UID.service/…``)."""
        parts = (self.path or "").split("/")
        return any(p.startswith("user@") and p.endswith(".service") for p in parts[:-1])


def parse_proc_cgroup(text: str) -> ProcCgroup:
    """Parse the text of /proc/PID/cgroup (unified, hybrid or legacy layout)."""
    unified = named = None
    for line in text.splitlines():
        hierarchy, sep, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if not (sep and sep2):
            continue
        if hierarchy == "0" and controllers == "":
            unified = path
        elif "name=systemd" in controllers.split(","):
            named = path
    return ProcCgroup(unified=unified, named_systemd=named)


@dataclass(frozen=True)
class EscapePlan:
    """How to start a worker that survives a restart of the unit it was spawned from."""

    prefix: tuple[str, ...]
    unit: str | None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """False when the worker must not be started (``reason`` says why)."""
        return self.reason is None


def escape_prefix(name: str, cgroup_text: str | None = None,
                  systemd_run: str | None = None, sudo_user: str = "") -> EscapePlan:
    """The argv prefix that moves a worker named ``name`` out of our service's cgroup.

    ``sudo_user``: a claude user that is not root may not create scopes in the system
    manager; it runs ``sudo -n systemd-run … --uid=USER --`` instead — exactly the command the
    sudoers drop-in of ``tl-provision`` allows (``privileged_commands``), so ``name`` is then
    the unit, not the operation (one active operation at a time).
    """
    if cgroup_text is None:
        try:
            cgroup_text = Path("/proc/self/cgroup").read_text()
        except OSError as exc:
            return EscapePlan((), None, f"cannot read /proc/self/cgroup: {exc.strerror}")
    where = parse_proc_cgroup(cgroup_text)
    service = where.service
    if service is None:
        return EscapePlan((), where.unit)
    binary = systemd_run or shutil.which("systemd-run")
    if binary is None:
        return EscapePlan((), service, (
            f"running inside {service!r} but systemd-run is not installed; a worker started "
            f"here would be killed by the restart of its own unit"
        ))
    scope = worker_scope_name(name)
    if sudo_user and not where.user_manager:
        return EscapePlan(("sudo", "-n", *worker_scope(binary, scope, sudo_user)), service)
    user = ("--user",) if where.user_manager else ()
    return EscapePlan(
        (binary, *user, "--scope", "-p", "KillMode=process", f"--unit={scope}", "--"), service
    )


def worker_scope_name(name: str) -> str:
    """``tl-worker-NAME`` without a dot, so systemd-run makes it a ``.scope``: given
    ``--unit=tl-worker-claude.service`` it keeps the ``.service`` suffix and asks for a
    transient *service*, which systemd 252 refuses ("Cannot set property PIDs, or unknown
    property" — measured, with the sudo door whose scope is named after the unit)."""
    return "tl-worker-" + SCOPE_CHARS.sub("_", name)


def worker_scope(systemd_run: str, scope: str, user: str) -> tuple[str, ...]:
    """``systemd-run --scope … --uid=USER --``: the worker in its own scope, as the user."""
    return (systemd_run, "--scope", "-p", "KillMode=process", f"--unit={scope}",
            f"--uid={user}", "--")


def parse_main_pid(text: str) -> int | None:
    """MainPID from ``systemctl show -p MainPID --value`` output; None for 0, empty or junk."""
    value = text.strip()
    if not value.isdigit() or int(value) <= 0:
        return None
    return int(value)


@dataclass(frozen=True)
class SystemdDoor:
    """Switches a claude that runs as systemd unit ``unit`` through ``tl-launch``'s pointer.

    Claude is a TUI: started as a unit's bare ExecStart it gets no terminal and 2.1.328 exits
    at once ("Input must be provided either through stdin or as a prompt argument when using
    --print"). A unit therefore runs claude inside a terminal, normally tmux (``Type=forking``,
    ``tmux new-session -d … 'tl-launch --pointer P -- claude …'``). When ``switch.tmux.target``
    names that pane, it is the door's ``terminal``: the claude pid is the pane's pid, the
    screen is the pane's text and ``confirm`` presses Enter there (the development-channels
    warning after every restart). Without it, MainPID is the claude pid and nothing can be
    answered.
    """

    unit: str
    pointer_path: Path
    systemctl: tuple[str, ...] = ("systemctl",)
    timeout: float = 90.0
    terminal: Door | None = None
    name: DoorKind = DoorKind.SYSTEMD
    # the identity read, exactly as the sudoers rule of tl-provision allows it
    MAIN_PID = ("show", "-p", "MainPID", "--value")

    @classmethod
    def from_config(cls, config: Config) -> SystemdDoor:
        """The door of ``config.switch.systemd``; a missing unit or pointer is a ConfigError."""
        from runtime.errors import ConfigError

        section = config.switch.systemd
        if not section.unit:
            raise ConfigError("switch.systemd.unit: required for door 'systemd'")
        if not section.pointer_path:
            raise ConfigError("switch.systemd.pointer_path: required for door 'systemd'")
        systemctl = ("sudo", "-n", "systemctl") if section.sudo_user else ("systemctl",)
        terminal = None
        if config.switch.tmux.target:
            from runtime.doors.tmux import TmuxDoor

            terminal = TmuxDoor.from_config(config)
        return cls(unit=section.unit, pointer_path=Path(section.pointer_path),
                   systemctl=systemctl, terminal=terminal)

    def main_pid(self) -> int | None:
        """The unit's MainPID, or None when it is 0, empty or cannot be read."""
        from runtime import proc
        from runtime.errors import ProcError

        try:
            done = proc.run([*self.systemctl, *self.MAIN_PID, self.unit],
                            timeout=self.timeout)
        except ProcError:
            return None
        return parse_main_pid(done.stdout) if done.ok else None

    def identity(self) -> str:
        """The unit's MainPID as a string; raises IdentityConflictError when there is none."""
        from runtime.errors import IdentityConflictError

        pid = self.main_pid()
        if pid is None:
            raise IdentityConflictError(
                f"unit {self.unit!r} has no main process (MainPID 0, empty or unreadable)"
            )
        return str(pid)

    def process_pid(self, identity: str) -> int | None:
        """The claude pid: the terminal pane's, else the unit's MainPID (``identity``)."""
        from runtime.errors import DoorError

        if self.terminal is None:
            return int(identity) if identity.isdigit() else None
        try:
            return self.terminal.process_pid(self.terminal.identity())
        except DoorError:
            return None

    def screen(self) -> str:
        """The terminal pane's text; "" without a terminal."""
        return self.terminal.screen() if self.terminal is not None else ""

    def confirm(self) -> bool:
        """Press Enter in the terminal pane; False without a terminal."""
        return self.terminal.confirm() if self.terminal is not None else False

    def settle(self) -> None:
        """Nothing to give back: a unit restart borrows no setting."""

    def current_session(self) -> str | None:
        """The session id the pointer names now (what the next start resumes), or None."""
        from runtime.doors.pointer import pointed_session

        return pointed_session(self.pointer_path)

    def switch(self, session_id: str, resume_argv: Sequence[str] = (),
               workdir: Path | None = None) -> None:
        """Point tl-launch at ``session_id`` (atomic write), then restart the unit.

        ``resume_argv`` and ``workdir`` are unused: tl-launch builds the argv and the unit
        sets the cwd."""
        from runtime import proc
        from runtime.doors.pointer import write_pointer
        from runtime.errors import DoorError, ProcError

        del resume_argv, workdir
        write_pointer(self.pointer_path, session_id)
        try:
            done = proc.run([*self.systemctl, "restart", self.unit], timeout=self.timeout)
        except ProcError as exc:
            raise DoorError(f"systemctl restart {self.unit!r} failed: {exc}") from exc
        if not done.ok:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise DoorError(
                f"systemctl restart {self.unit!r} failed (rc={done.rc}): "
                f"{detail[-1] if detail else 'no output'}"
            )
