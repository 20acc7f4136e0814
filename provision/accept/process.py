"""The live claude process behind the door, and argv comparisons, for accept's lines."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runtime.agents import claude

if TYPE_CHECKING:
    from runtime.config import Config


def fmt_argv_diff(wanted: Sequence[str], actual: Sequence[str]) -> dict[str, object]:
    """Token-by-token difference of two argvs (position, wanted, actual)."""
    width = max(len(wanted), len(actual))
    diffs = []
    for i in range(width):
        left = wanted[i] if i < len(wanted) else None
        right = actual[i] if i < len(actual) else None
        if left != right:
            diffs.append({"position": i, "wanted": left, "actual": right})
    return {"wanted": list(wanted), "actual": list(actual), "differences": diffs}


def trim_to_binary(argv: Sequence[str], binary: str) -> list[str] | None:
    """``argv`` from the claude program on (drops an interpreter in front), or None."""
    for i, token in enumerate(argv):
        if token == binary or os.path.basename(token) in claude.PROGRAMS:
            return list(argv[i:])
    return None


def claude_pid(config: Config, binary: str) -> int | None:
    """The live claude process behind the door (the door's pid or one of its descendants)."""
    from runtime.doors.base import open_door
    from runtime.procfs import cmdline, descendants

    try:
        door = open_door(config)
        pid = door.process_pid(door.identity())
    except Exception:  # noqa: BLE001 - no live process is a fact, reported by the caller
        return None
    if pid is None or not door.name.runs_process:
        return None
    for candidate in (pid, *descendants(pid)):
        if trim_to_binary(cmdline(candidate) or (), binary) is not None:
            return candidate
    return None


def claude_argv(pid: int, binary: str) -> list[str]:
    """The live argv of claude ``pid`` from its program on."""
    from runtime.procfs import cmdline

    return trim_to_binary(cmdline(pid) or (), binary) or []
