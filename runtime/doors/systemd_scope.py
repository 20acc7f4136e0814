"""Leaving a systemd unit's cgroup: a worker started from inside ``X.service`` would be killed
by that unit's own restart, so it is wrapped in ``systemd-run --scope -p KillMode=process``.

Stdlib only: the Stop hook imports it.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from runtime.errors import DoorError

SCOPE_PREFIX = ("--scope", "-p", "KillMode=process", "--quiet", "--collect")


def service_unit_of(cgroup_text: str) -> str | None:
    """The ``*.service`` unit named by a ``/proc/PID/cgroup`` text, or None.

    The unified line (``0::/system.slice/x.service``) is read first; on hybrid hosts the
    ``name=systemd`` line is the fallback. A ``.scope`` below a service is not inside it.
    """
    unified, named = None, None
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
        elif parts[1] == "name=systemd":
            named = parts[2]
    for path in (unified, named):
        if not path:
            continue
        leaf = path.rstrip("/").rsplit("/", 1)[-1]
        if leaf.endswith(".service"):
            return leaf
    return None


def current_service_unit(pid: int | str = "self") -> str | None:
    """The service unit the process ``pid`` runs inside, or None (not under systemd)."""
    try:
        return service_unit_of(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None


def escape_argv(argv: Sequence[str], unit: str) -> list[str]:
    """``argv`` wrapped so it runs in its own scope outside ``unit``; DoorError if impossible."""
    runner = shutil.which("systemd-run")
    if runner is None:
        raise DoorError(
            f"running inside {unit!r} and systemd-run is not available, so a worker would be "
            "killed by the unit's own restart"
        )
    return [runner, *SCOPE_PREFIX, "--", *argv]
