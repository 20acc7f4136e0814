"""Printing results: JSON on ``--json``, a readable table otherwise."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

# first key of the --json output of plan, dirty, status, doctor, report and the ops, and of
# every tl-provision command's
SCHEMA_VERSION = 1


def emit_json(obj: Any, out: TextIO | None = None) -> None:
    """Print ``obj`` as indented JSON (keys kept in insertion order)."""
    stream = out or sys.stdout
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str)
    # a lone surrogate (a non-UTF-8 argv byte) is printed as its JSON escape, never a crash
    stream.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))
    stream.write("\n")


def table(rows: Iterable[tuple[str, Any]], out: TextIO | None = None) -> None:
    """Print two-column ``key  value`` rows, keys left-aligned."""
    stream = out or sys.stdout
    items = [(str(k), "" if v is None else str(v)) for k, v in rows]
    width = max((len(k) for k, _ in items), default=0)
    for key, value in items:
        stream.write(f"{key.ljust(width)}  {value}\n")


def flatten(obj: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Flatten nested mappings into dotted ``(key, value)`` rows for ``table``."""
    rows: list[tuple[str, Any]] = []
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            rows.extend(flatten(value, name + "."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            rows.append((name, f"{len(value)} item(s)"))
        else:
            rows.append((name, value))
    return rows
