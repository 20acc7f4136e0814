"""Errors of the runtime package.

Every error the runtime raises on purpose derives from ``ThreadlineError``; the CLIs catch
it at the top, print its one-line message to stderr and exit non-zero.

    ThreadlineError
    ├── ConfigError            the runtime config file or a knob is invalid (names the key)
    ├── TranscriptError        a transcript cannot be read (names the path)
    │   └── OutsideProjectError    the path resolves outside ``project_dir``
    ├── NothingToCarryError    a transcript holds no speech to carry (fork refuses)
    ├── BlockedError           a rebuild is blocked (poison, carry cap with ``block``)
    ├── VerificationError      a written candidate failed verification (names the check)
    ├── ConfirmationError      a writing operation was called without its confirmation word
    ├── StoreError             the operation store is unusable or a revision check failed
    │   ├── IllegalTransitionError  a state change the transition table forbids
    │   └── BusyError               another operation is already active
    ├── DoorError              a door (tmux/systemd/pointer) command failed
    │   └── IdentityConflictError   the running process is not the one recorded (CAS failed)
    └── ProcError              a command run through ``runtime.proc`` failed or is missing
"""

from __future__ import annotations


class ThreadlineError(Exception):
    """Base of every error the runtime raises on purpose."""


class ConfigError(ThreadlineError):
    """The runtime config (or one of its keys) is invalid."""


class TranscriptError(ThreadlineError):
    """A transcript file cannot be read as a Claude Code JSONL transcript."""


class OutsideProjectError(TranscriptError):
    """A transcript path resolves outside the configured project_dir."""


class NothingToCarryError(ThreadlineError):
    """The transcript holds no human or assistant speech."""


class BlockedError(ThreadlineError):
    """A rebuild is blocked (poisoned context, carry cap with carry_overflow=block)."""


class VerificationError(ThreadlineError):
    """A written candidate does not pass verification."""


class ConfirmationError(ThreadlineError):
    """A writing operation was called without its exact confirmation word."""


class StoreError(ThreadlineError):
    """The operation store is unusable, or a revision check failed."""


class IllegalTransitionError(StoreError):
    """A state change that the transition table forbids."""


class BusyError(StoreError):
    """Another operation is already active."""


class DoorError(ThreadlineError):
    """A door (tmux, systemd, pointer) could not do what was asked."""


class IdentityConflictError(DoorError):
    """The running process's identity is not the recorded one (or is unreadable)."""


class ProcError(ThreadlineError):
    """A command run through runtime.proc failed, timed out or is missing."""
