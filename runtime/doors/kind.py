"""The door kinds, and what each kind means to the code outside the doors.

``DoorKind`` is parsed once, where the runtime config (``switch.door``) and the host profile
(``door.kind``) are read; everywhere else a door kind is a member, never a bare string. A
question whose answer depends on the kind is a property here, so the callers ask the door
("does it run a process?") instead of naming one.
"""

from __future__ import annotations

import enum


class DoorKind(enum.StrEnum):
    """How the running claude is switched (SPEC §4): a tmux pane, a systemd unit, a pointer
    file a runner loop reads."""

    TMUX = "tmux"
    SYSTEMD = "systemd"
    POINTER = "pointer"

    @property
    def runs_process(self) -> bool:
        """A claude process stands behind the door (to watch, to judge by its screen and
        session record); the pointer door has only a file and a runner's next call."""
        return self is not DoorKind.POINTER

    @property
    def identity_is_session(self) -> bool:
        """The door's identity is the session id itself (the pointer file's content)."""
        return self is DoorKind.POINTER

    @property
    def carries_environment(self) -> bool:
        """A switch must carry the launch environment (``switch.environment``) from the
        running claude; a runner loop starts each call in its own environment."""
        return self is not DoorKind.POINTER

    @property
    def environment_in_argv(self) -> bool:
        """The carried environment goes in front of the argv (``env NAME=VALUE … claude``):
        the tmux door respawns through a shell without the launch's inline assignments, while
        a unit and a runner loop start claude in their own environment already."""
        return self is DoorKind.TMUX

    @property
    def worker_builds_argv(self) -> bool:
        """The worker starts claude with ``switch.resume_argv`` itself (tmux respawn);
        tl-launch (systemd) and the runner loop (pointer) build their own argv."""
        return self is DoorKind.TMUX

    @property
    def has_pointer_file(self) -> bool:
        """A pointer file names the session the next start resumes (tl-launch or the runner
        reads it)."""
        return self is not DoorKind.TMUX

    @property
    def restarts_claude(self) -> bool:
        """A switch kills and restarts a claude process (``tl-provision --restart-claude``
        has something to restart); the pointer door's runner starts each call anew."""
        return self is not DoorKind.POINTER

    @property
    def restarts_unit(self) -> bool:
        """A switch restarts the systemd unit the agent runs in, and with it everything in the
        unit's cgroup: a worker started from inside must escape it first (SPEC §4.1). The tmux
        door respawns a pane and leaves a unit that runs tmux alone — so a non-root user, who
        may not create scopes in the system manager, needs no escape there."""
        return self is DoorKind.SYSTEMD

    @property
    def runs_codex(self) -> bool:
        """The door can switch a Codex TUI: only the tmux door respawns ``codex resume`` so far
        (a Codex unit or runner loop has no launcher yet)."""
        return self is DoorKind.TMUX

    @property
    def tool_probe(self) -> tuple[str, ...]:
        """The command that shows the door's tool is installed (empty: no tool needed)."""
        return _TOOL_PROBES[self]


_TOOL_PROBES: dict[DoorKind, tuple[str, ...]] = {
    DoorKind.TMUX: ("tmux", "-V"),
    DoorKind.SYSTEMD: ("systemctl", "--version"),
    DoorKind.POINTER: (),
}


def codex_door_problem(kind: DoorKind, key: str) -> str | None:
    """Why ``agent: codex`` cannot use door ``kind`` (named by its config ``key``), in one line;
    None for a door that runs codex. The way to run a Codex from a systemd unit is named."""
    if kind.runs_codex:
        return None
    unit = (" (for a codex started by a systemd unit: run it in tmux inside the unit and use "
            "the tmux door on that pane, with tmux.unit naming the unit in the host profile)"
            if kind is DoorKind.SYSTEMD else "")
    return f"{key}: {kind.value!r} does not run codex yet; agent codex needs the tmux door{unit}"
