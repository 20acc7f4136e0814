"""The agent CLI axis: what Threadline knows about the command line of the agent it switches.

Beside *which door* (``runtime/doors/``) stands *which agent CLI*: every rule about an
agent's argv — its channel flags, turning a launch into a resume, the environment a relaunch
carries, which session a running process holds — lives in that agent's module here and
nowhere else: ``claude`` and ``codex`` implement the same ``AgentCli`` protocol
(``runtime/agents/detect.py`` tells which agent wrote a session file; ``cli_for`` maps that
name to its rules).

Every function here is pure: bytes, argv lists and mappings in, values out; reading /proc or
a file is the caller's (``runtime/procfs.py``, ``provision/host.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

# Shells an agent or a channel server may be started through (``sh -c '… claude …'``): an
# argv whose program is one of them holds the real command line inside its script.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "fish"})


class RunningFacts(NamedTuple):
    """What the caller read about a live agent process, for ``AgentCli.running_session``.

    (A NamedTuple, immutable like a frozen dataclass: every command imports this package for
    ``AgentKind``, and a dataclass makes its methods at import, ≈ 0.6 ms — issue 13.)"""

    started: int | None = None           # kernel start time of the pid (None: gone)
    session_record: bytes | None = None  # claude: ``<config_dir>/sessions/<pid>.json``
    writer_locks: tuple[str, ...] = ()   # codex: threads whose writer lock the process holds


class AgentCli(Protocol):
    """The command-line rules of one agent CLI (a module satisfies it)."""

    def channel_flags(self, argv: Sequence[str]) -> tuple[str, ...]:
        """Each channel attached by ``argv`` as ``"FLAG VALUE"``."""

    def resumed_session(self, argv: Sequence[str]) -> str | None:
        """The session ``argv`` resumes, or None."""

    def resume_argv(self, launch_argv: Sequence[str], session_id: str) -> list[str]:
        """``launch_argv`` rewritten to resume ``session_id``."""

    def environment_names(self, launch_names: Iterable[str],
                          config_dir_in_use: bool) -> tuple[str, ...]:
        """The variables a relaunch carries."""

    def running_session(self, pid: int, facts: RunningFacts) -> str | None:
        """The session live process ``pid`` runs, from the facts read about it, or None."""

    def same_launch(self, a: Sequence[str], b: Sequence[str]) -> bool:
        """``a`` and ``b`` name the same launch (a session choice a switch added is no change)."""


def decode_cmdline(data: bytes) -> tuple[str, ...]:
    """argv from ``/proc/PID/cmdline`` bytes (NUL separated, NUL terminated; empty: a zombie).

    Non-UTF-8 bytes decode with ``surrogateescape``, so ``os.fsencode`` gives the very bytes
    back: an argv read here can be exec'd again (a resume) and compared with another one
    decoded the same way.
    """
    if not data:
        return ()
    parts = data.split(b"\0")
    if parts[-1] == b"":
        parts = parts[:-1]
    return tuple(part.decode("utf-8", "surrogateescape") for part in parts)


def carried_environment(names: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """``name → value`` of ``names`` in ``environ``; a name it does not set is left out (the
    relaunch runs without it, like the launch did)."""
    return {name: environ[name] for name in names if name in environ}


def cli_for(agent: str) -> AgentCli:
    """The command-line rules of ``agent`` (an ``AgentKind``, or its name)."""
    if agent == "claude":
        from runtime.agents import claude

        return claude
    if agent == "codex":
        from runtime.agents import codex

        return codex
    from runtime.errors import ConfigError

    raise ConfigError(f"agent {agent!r} has no command-line rules; one of 'claude', 'codex'")
