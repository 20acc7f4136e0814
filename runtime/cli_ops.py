"""Sub-commands of operations (placeholder until the switch lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the engine's sub-commands to ``sub``."""
    del sub


def _unused(args: argparse.Namespace) -> int:  # pragma: no cover
    return 0
