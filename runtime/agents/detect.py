"""Which agent wrote a session file: Claude Code (a transcript) or Codex (a rollout).

A Codex rollout opens with a ``session_meta`` line (or, before mid-2025, a bare
``{id, timestamp, instructions}`` line), and a file named like one (``rollout-<time>-<uuid>``)
is read as one; anything else is read as a Claude Code transcript. ``--agent claude|codex``
forces the choice (``claude`` on a rollout is refused). A file that opens with a UTF-8
byte-order mark (an editor's, never the agents') is refused: its first line would not parse,
and that line is a rollout's session_meta or a transcript's first event.
"""

from __future__ import annotations

from pathlib import Path

from runtime.agents.kind import AgentKind

AGENTS: tuple[str, ...] = tuple(kind.value for kind in AgentKind)
HEAD_BYTES = 4096  # line 0 names its type before its payload
BOM = b"\xef\xbb\xbf"


def detect(path: Path, forced: str | None = None) -> AgentKind:
    """``forced`` when given, else ``codex`` when line 0 of ``path`` is a session_meta or its
    name is a rollout's (``rollout-<time>-<uuid>.jsonl``: the Codex reader then names what is
    wrong with line 0, where the Claude reader would find a silent nothing). A file opening
    with a byte-order mark is a TranscriptError either way, and so is ``claude`` forced on a
    Codex rollout (read as a transcript it holds no speech)."""
    if forced not in (None, "", "auto", *AGENTS):
        from runtime.errors import ConfigError

        raise ConfigError(f"agent {forced!r} is not one of claude, codex")
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:  # the agent's reader reports the unreadable file
        return AgentKind(forced) if forced in AGENTS else AgentKind.CLAUDE
    if head.startswith(BOM):
        from runtime.errors import TranscriptError

        raise TranscriptError(
            f"{str(path)!r} starts with a UTF-8 byte-order mark (Claude Code and Codex never "
            "write one; an editor did) and its first line would be lost; remove it with "
            f"sed -i '1s/^\\xEF\\xBB\\xBF//' {str(path)!r}"
        )
    if forced == AgentKind.CODEX:
        return AgentKind.CODEX
    if _rollout_line0(path, head):
        if forced == AgentKind.CLAUDE:
            from runtime.errors import TranscriptError

            raise TranscriptError(
                f"{str(path)!r} is a Codex rollout (line 0 is a session_meta), not a Claude "
                "Code transcript; leave out --agent claude"
            )
        return AgentKind.CODEX
    if forced == AgentKind.CLAUDE or not path.name.startswith("rollout-"):
        return AgentKind.CLAUDE
    from runtime.paths import codex_thread_of

    return AgentKind.CODEX if codex_thread_of(path) is not None else AgentKind.CLAUDE


def _rollout_line0(path: Path, head: bytes) -> bool:
    """Line 0 of ``path`` (``head``: its first bytes) is a Codex ``session_meta``."""
    if b'"session_meta"' not in head and b'"instructions"' not in head:
        return False  # a transcript's first line is never parsed twice
    from runtime.engine.codex.rollout import first_line, session_meta

    return session_meta(first_line(path)) is not None
