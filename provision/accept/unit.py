"""The scratch unit of a systemd deployment's drill: the systemd door, drilled harmlessly.

A systemd deployment runs claude in tmux inside its unit, through ``tl-launch --pointer P``
(HANDOFF §7). The drill reproduces that shape as a transient unit of its own,
``tl-drill-<id>.service``: ``systemd-run --unit=… --collect -p Type=forking`` running
``tmux -L tl-drill-<id> new-session -d … "exec tl-launch --pointer <scratch pointer> -- <the
deployment's launch argv>"`` in the scratch workdir with the scratch HOME (measured in a
systemd 252 sandbox: such a unit restarts with a new MainPID and is gone after ``systemctl
stop``; no unit file, no daemon-reload). The scratch config points the systemd door at that
unit and pointer, so the drill's switch is a ``systemctl restart`` of the scratch unit.

What cannot be reproduced harmlessly is said, never implied (``not_drilled``): a unit without
tmux (the drill falls back to a private tmux pane), a claude user that restarts its unit
through a sudo rule allowing only the real unit (likewise), and — always — the worker's escape
from the unit's cgroup: the drill's Stop hook runs outside the scratch unit.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime.doors.tmux import tmux_argv

if TYPE_CHECKING:
    from provision.accept.checklist import Scene
    from provision.host import Host
    from runtime.proc import Result

FALLBACK = "; this drill switched a private tmux pane instead"
ESCAPE_NOT_DRILLED = ("not drilled: the drill's Stop hook runs outside the scratch unit, so the "
                      "worker's escape from the unit's cgroup (systemd-run --scope) is not "
                      "exercised")


def shape_problem(scene: Scene) -> str | None:
    """Why the deployment's unit cannot be reproduced as a scratch unit, or None."""
    assert scene.config is not None
    sw = scene.config.switch
    if not sw.tmux.target:
        return (f"not drilled: unit {sw.systemd.unit!r} runs claude without tmux "
                f"(switch.tmux.target is unset), a shape no scratch unit reproduces" + FALLBACK)
    if sw.systemd.sudo_user:
        return (f"not drilled: claude user {sw.systemd.sudo_user!r} restarts units through a "
                f"sudo rule that allows only {sw.systemd.unit!r}, never a scratch unit"
                + FALLBACK)
    if main_pid_of(scene.host, sw.systemd.unit) is None:
        return (f"not drilled: unit {sw.systemd.unit!r} has no main process here (systemctl "
                f"show MainPID), so its shape cannot be reproduced as a scratch unit" + FALLBACK)
    if scene.manifest is None or not scene.manifest.launch_argv:
        return "not drilled: the manifest records no launch argv for the scratch unit" + FALLBACK
    return None


@dataclass(frozen=True)
class ScratchUnit:
    """``tl-drill-<id>.service``: the deployment's unit shape on the scratch."""

    name: str

    def start(self, host: Host, *, socket: str, session: str, work: str, pointer: str,
              env: dict[str, str], launch_argv: tuple[str, ...], tl_launch: str
              ) -> Result:
        """``systemd-run`` the unit: tmux, then tl-launch on the scratch pointer, then claude."""
        inner = "exec " + shlex.join([tl_launch, "--pointer", pointer, "--", *launch_argv])
        setenv = [f"--setenv={key}={value}" for key, value in env.items()]
        return host.run(["systemd-run", f"--unit={self.name}", "--collect", "-p",
                         "Type=forking", "-p", f"WorkingDirectory={work}", *setenv, "--",
                         *tmux_argv(socket), "-f", "/dev/null", "new-session", "-d", "-s",
                         session, "-x", "200", "-y", "50", "-c", work, inner], timeout=60)

    def main_pid(self, host: Host) -> int | None:
        """The unit's MainPID, or None (0, not loaded, unreadable)."""
        from runtime.doors.systemd import parse_main_pid

        shown = host.run(["systemctl", "show", "-p", "MainPID", "--value", self.name],
                         timeout=30)
        return parse_main_pid(shown.stdout) if shown.ok else None

    def load_state(self, host: Host) -> str:
        shown = host.run(["systemctl", "show", "-p", "LoadState", "--value", self.name],
                         timeout=30)
        return shown.stdout.strip() if shown.ok else f"unreadable: {shown.stderr.strip()}"

    def remove(self, host: Host) -> dict[str, Any]:
        """Stop the unit and forget it if it failed; what ``systemctl`` says afterwards."""
        stopped = host.run(["systemctl", "stop", self.name], timeout=90)
        host.run(["systemctl", "reset-failed", self.name], timeout=30)  # rc 1 when not failed
        return {"unit": self.name, "stop_rc": stopped.rc,
                "load_state_after": self.load_state(host)}


def main_pid_of(host: Host, unit: str) -> int | None:
    """Read-only MainPID of another unit (the deployment's own: it must not change)."""
    return ScratchUnit(unit).main_pid(host) if unit else None
