"""Human output of ``tl-rebuild``: units, yes/no, aligned rows, colour only on a terminal,
and the operation timeline (one line per phase, shared with the MCP status brief).

Plain text and ANSI only (no dependency); never imported on the ``hook-stop`` path.
Colour is used when stdout is a terminal and ``NO_COLOR`` is unset (https://no-color.org).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TextIO

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
COLOURS = {"green": "32", "red": "31", "yellow": "33", "cyan": "36", "dim": "2", "bold": "1"}


def size(nbytes: int | float | None) -> str:
    """``512 B``, ``1.4 KiB``, ``2.1 MiB``: binary units, one decimal above bytes."""
    if nbytes is None:
        return "-"
    value = float(nbytes)
    for unit in UNITS:
        if abs(value) < 1024 or unit == UNITS[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def percent(ratio: float | None) -> str:
    """A 0..1 ratio as ``98.9 %``."""
    if ratio is None:
        return "-"
    return "<0.1 %" if 0 < ratio < 0.0005 else f"{100 * ratio:.1f} %"


def yes_no(flag: Any) -> str:
    return "yes" if flag else "no"


def counts(mapping: dict[str, Any]) -> str:
    """``a 2, b 1`` for the non-zero entries, ``-`` when there are none."""
    return ", ".join(f"{k} {v}" for k, v in mapping.items() if v) or "-"


def use_colour(out: TextIO | None = None) -> bool:
    stream = out or sys.stdout
    if "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, colour: str, out: TextIO | None = None) -> str:
    """``text`` in ``colour`` when colour is on for ``out``, else as it is."""
    return ansi(text, colour) if use_colour(out) else text


def ansi(text: str, colour: str) -> str:
    """``text`` wrapped in the ANSI escape of ``colour`` (the caller decided colour is on)."""
    return f"\033[{COLOURS[colour]}m{text}\033[0m"


def aligned(rows: Iterable[Sequence[Any]], indent: str = "") -> list[str]:
    """Rows of cells as lines, every column but the last padded to its widest cell."""
    cells = [["-" if c is None else str(c) for c in row] for row in rows]
    if not cells:
        return []
    columns = max(len(r) for r in cells)
    widths = [max((len(r[i]) for r in cells if i < len(r) - 1), default=0)
              for i in range(columns)]
    lines = []
    for row in cells:
        parts = [c.ljust(widths[i]) if i < len(row) - 1 else c for i, c in enumerate(row)]
        lines.append((indent + "  ".join(parts)).rstrip())
    return lines


def write(lines: Iterable[str], out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    for line in lines:
        stream.write(line + "\n")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(stamp: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


def span(seconds: float) -> str:
    """A duration in the shortest readable unit: ``0.28s``, ``4m05s``, ``2h03m``."""
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def timeline_lines(events: list[dict[str, Any]], created_at: str | None = None) -> list[str]:
    """One short line per recorded phase: time since the operation was created, the phase, and
    the state it entered when the phase is not named after it (``+0.28s scheduled``,
    ``+0.34s worker_started → running``, ``+1.20s health not ok: cwd differs``)."""
    start = when(created_at) if created_at else None
    lines = []
    state_before = None
    for event in events:
        at = when(event.get("at"))
        if start is None:
            start = at
        offset = f"+{span(max(0.0, (at - start).total_seconds()))}" if at and start else "+?"
        phase = str(event.get("phase", "?"))
        line = f"{offset} {phase}"
        state = event.get("state")
        if state and state != phase and state != state_before:
            line += f" → {state}"
        state_before = state
        if event.get("ok") is False:
            line += f" not ok: {clip(str(event.get('reason', '')), 60)}"
        elif phase in ("failed", "rolled_back") and event.get("code"):
            line += f" {event['code']}"
        lines.append(line)
    return lines
