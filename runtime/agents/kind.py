"""The agent kinds, and what each kind means to the code outside ``runtime/agents/``.

``AgentKind`` is parsed once, where the runtime config (``agent``) and the host profile
(``agent``) are read, and where a session file's writer is detected (``detect``); everywhere
else an agent is a member, never a bare string. A question whose answer depends on the agent
is a property here (or a rule of its ``AgentCli``, ``kind.cli``), so callers ask the agent
instead of naming one. A StrEnum member serialises as its value: JSON, TOML and the manifest
read the same ``"claude"`` / ``"codex"`` as before.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.agents import AgentCli
    from runtime.doors.kind import DoorKind


class AgentKind(enum.StrEnum):
    """Which agent CLI Threadline rebuilds and switches: Claude Code or Codex."""

    CLAUDE = "claude"
    CODEX = "codex"

    @classmethod
    def parse(cls, value: str, key: str = "agent") -> AgentKind:
        """``value`` as an AgentKind; ConfigError naming ``key`` and the allowed values."""
        try:
            return cls(value)
        except ValueError:
            from runtime.errors import ConfigError

            names = ", ".join(kind.value for kind in cls)
            raise ConfigError(f"{key}: {value!r} is not one of {names}") from None

    @property
    def cli(self) -> AgentCli:
        """The command-line rules of this agent (``runtime/agents/<name>.py``)."""
        from runtime.agents import cli_for

        return cli_for(self)

    def door_problem(self, door: DoorKind, key: str) -> str | None:
        """Why this agent cannot be switched through ``door`` (named by its config ``key``), in
        one line; None when the door runs it (every door runs claude)."""
        from runtime.doors.kind import codex_door_problem

        return codex_door_problem(door, key) if self is AgentKind.CODEX else None

    @property
    def programs(self) -> frozenset[str]:
        """The program names (basename of argv[0]) this agent runs as."""
        from runtime.agents import claude, codex

        return codex.PROGRAMS if self is AgentKind.CODEX else frozenset({claude.NAME})

    @property
    def needs_home(self) -> bool:
        """The agent's state lives under a home the config must name (``codex_home``:
        CODEX_HOME); claude's is derived from ``project_dir``."""
        return self is AgentKind.CODEX

    @property
    def has_channel_flags(self) -> bool:
        """Channels are attached on the command line (claude's ``--channels``); codex has none."""
        return self is AgentKind.CLAUDE

    @property
    def hook_has_agent_ancestor(self) -> bool:
        """The Stop hook runs as a descendant of the agent process (claude's hooks); codex runs
        its notify detached, so no ancestor tells two companions apart."""
        return self is AgentKind.CLAUDE

    @property
    def sessions_nested(self) -> bool:
        """Session files live in dated folders below the store (codex ``sessions/Y/M/D/``),
        not directly in it (claude's project dir)."""
        return self is AgentKind.CODEX

    @property
    def session_suffix_in_uuid(self) -> bool:
        """A carried item's ``source_uuid`` ends in ``#<n>`` (codex: one rollout line may carry
        several items); claude's is the line's uuid itself."""
        return self is AgentKind.CODEX
