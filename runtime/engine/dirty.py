"""The dirty ledger (SPEC §3.9): bytes of runtime noise per category, speech kept apart.

The categories are the Claude Code ones unless the reader names its own (Codex rollouts:
``runtime.engine.codex.rules.NOISE_CATEGORIES``).

The reader attributes every line's bytes to exactly one place: a noise category, the
conversation, or the malformed count. Mixed lines (an assistant line holding text and a
tool call) are split by block sizes; nothing is re-serialised for whole lines.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

NOISE_CATEGORIES: tuple[str, ...] = (
    "tool_result",
    "tool_use",
    "thinking",
    "image",
    "injected_block",
    "meta_injection",
    "attachment",
    "sidechain",
    "system",
    "other",
)


class Ledger:
    """Running byte counts of one transcript read (mutable while reading, then reported)."""

    def __init__(self, categories: tuple[str, ...] = NOISE_CATEGORIES) -> None:
        self.noise: dict[str, int] = dict.fromkeys(categories, 0)
        self.other_by_type: Counter[str] = Counter()
        self.conversation_bytes = 0
        self.malformed_bytes = 0
        self.image_seen = False

    def add(self, category: str, nbytes: int) -> None:
        self.noise[category] += nbytes

    def add_other(self, kind: str, nbytes: int) -> None:
        self.noise["other"] += nbytes
        self.other_by_type[kind] += nbytes

    @property
    def noise_bytes(self) -> int:
        return sum(self.noise.values()) + self.malformed_bytes

    @property
    def noise_ratio(self) -> float:
        total = self.noise_bytes + self.conversation_bytes
        return round(self.noise_bytes / total, 4) if total else 0.0

    def report(self, budget_bytes: int, rebuild_on_image: bool) -> dict[str, Any]:
        """The ``dirty`` JSON: categories, totals, ratio and the advisory verdict with reasons."""
        noise = self.noise_bytes
        reasons = []
        if noise >= budget_bytes:
            reasons.append(f"noise_bytes {noise} >= dirty_budget_bytes {budget_bytes}")
        if rebuild_on_image and self.image_seen:
            reasons.append("the model viewed an original image")
        return {
            "categories": dict(self.noise),
            "other_by_type": dict(self.other_by_type.most_common()),
            "malformed_bytes": self.malformed_bytes,
            "noise_bytes": noise,
            "conversation_bytes": self.conversation_bytes,
            "noise_ratio": self.noise_ratio,
            "dirty_budget_bytes": budget_bytes,
            "image_seen": self.image_seen,
            "should_rebuild": bool(reasons),
            "reasons": reasons,
        }
