"""``--restart-claude``: restart the live claude on the session it runs, and wait until ready.

The restart is ``tl-rebuild restart`` run through the host (so it runs where claude runs,
also inside a private systemd): the runtime's own door and readiness check (runtime.switch.restart),
the same code that judges a switch: the development-channels warning answered where the door can
(tmux), claude's session record naming the session it ran before, every expected channel
server of the rendered config up. Anything less fails the task with one line naming what is
missing — never a claude left deaf at a prompt while apply says ``changed``.

The session comes from the live claude's own ``sessions/<pid>.json`` (read through the host,
judged by ``runtime.agents.claude.running_session``: a record an earlier process with the same
pid left does not count); without it a restart would start a new conversation, so the task
refuses instead.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from provision.actions import Action
from provision.errors import FactError, RestartError
from runtime.agents import RunningFacts, claude
from runtime.procfs import parse_stat

if TYPE_CHECKING:
    from provision.host import Host


def live_session(host: Host, claude_dir: str, pid: int) -> str:
    """The session claude ``pid`` runs, from its session record; FactError when unknown."""
    path = claude.session_record_path(Path(claude_dir), pid)
    stat = parse_stat(host.read_text(f"/proc/{pid}/stat") or "")
    facts = RunningFacts(started=stat[2] if stat else None,
                         session_record=host.read_bytes(str(path)))
    session = claude.running_session(pid, facts)
    if session is None:
        raise FactError(f"cannot tell which session claude pid {pid} runs: no session id of "
                        f"this process in {str(path)!r}; a restart would start a new conversation")
    return session


@dataclass(frozen=True)
class RestartReady(Action):
    """Run ``tl-rebuild restart --session ID --config C`` through the host: the runtime door
    restarts claude on ``session_id`` and waits until it is ready; any other outcome is a
    RestartError carrying the runtime's one line."""

    tl_rebuild: str
    config_path: str
    session_id: str
    argv: tuple[str, ...]
    timeout: float = 180.0
    summary: str = ""
    as_user: str | None = None  # tmux door, apply run by another user: reach claude's own server


    def execute(self, host: Host) -> str | None:
        from provision.errors import HostError

        command: tuple[str, ...] = (self.tl_rebuild, "restart", "--session", self.session_id,
                                    "--config", self.config_path)
        if self.as_user:
            command = ("runuser", "-u", self.as_user, "--", *command)
        try:
            result = host.run(command, timeout=self.timeout)
        except HostError as exc:
            raise RestartError(f"restart of claude did not finish: {exc}") from exc
        lines = (result.stderr or result.stdout).strip().splitlines()
        if result.rc != 0:
            raise RestartError(lines[-1].removeprefix("tl-rebuild: error: ") if lines
                               else f"tl-rebuild restart failed (rc={result.rc})")
        said = result.stdout.strip().splitlines()
        return said[-1] if said else None

    def diff(self) -> str:
        return f"run: {shlex.join(self.argv)} (resuming {self.session_id}), then wait ready\n"
