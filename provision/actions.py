"""Tasks plan, the engine acts: the Task interface and the Actions a plan is made of.

How to write a task (pyinfra-style; read this before adding one under ``provision/tasks/``):

    class StopHook(Task):
        name = "StopHook"                       # a noun of the resource

        def facts(self, host: Host, ctx: Context) -> SettingsFacts:
            # read-only, runs also under --check; ONLY through ``host`` (provision/host.py):
            #   host.read_bytes(path) -> bytes | None, host.stat(path) -> FileStat | None,
            #   host.run(argv, env=..., cwd=..., timeout=...) -> Result (rc/stdout/stderr)
            # return a frozen dataclass, parsed by a pure function (provision/parsers/facts.py
            # style)
            ...

        def plan(self, facts: SettingsFacts, ctx: Context) -> list[Action]:
            # PURE: no I/O. [] means "ok"; a non-empty list means "changed".
            # Raise a ProvisionError subclass (one-sentence message) to make the task "failed".
            return [WriteFile(path, new_bytes, before=facts.raw, mode=facts.mode,
                              summary="add the Stop hook to /h/.claude/settings.json")]

        def ok_message(self, facts: SettingsFacts, ctx: Context) -> str:
            # what was found, e.g. "Stop hook already present in /h/.claude/settings.json"
            ...

Optional hooks of a task:
- ``skip_reason(ctx) -> str | None``: a non-None reason makes the task ``skipped``.
- ``diff(facts, actions) -> str``: a custom --diff text (default: each action's ``diff()``);
  a settings merge shows only the ``hooks.Stop`` subtree this way.
- ``details(facts, ctx) -> list[str]``: extra lines printed under the status line.
- ``reverify = False`` (class attribute) for tasks whose action is a one-shot command
  (a restart) rather than a state to converge to.
- ``agents = CLAUDE_ONLY`` (or ``CODEX_ONLY``) for a task of one agent CLI: the engine skips it
  on a host of the other agent ("agent is codex; StopHook is claude's").
- ``halt_on_failure = True`` for tasks everything after depends on (the launch command, the
  runtime config): when one fails, the rest of the run is ``skipped`` with the reason.

The engine (provision/engine.py) runs, per task: ``skip_reason`` → ``facts`` → ``plan`` →
(unless --check) ``Action.execute(host)`` for each action → ``facts`` + ``plan`` again, and a
non-empty second plan makes the task ``failed`` ("still differs after apply"), which is the
generic re-read-and-verify. A task never reads a check-mode flag.

``ctx`` (provision/result.py: Context) carries the validated ``profile`` (provision/profile.py:
Profile), the ``host`` name, the ``launch`` found by introspection and the computed
``resume_argv`` (set by the launcher tasks), and ``facts_of(task_name)`` for facts of earlier
tasks (the verify step reads the McpServer facts this way). Actions available here:
``WriteFile`` (atomic + backup + optional validator), ``EnsureDir``, ``RunCommand`` (argv, no
shell). Add a new Action subclass only for a new kind of side effect.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from provision.errors import HostError

if TYPE_CHECKING:
    from provision.host import Host
    from provision.result import Context
    from runtime.proc import Runner


class Action:
    """One side effect the engine performs unless --check; subclasses are frozen dataclasses."""

    # what to do, as an imperative phrase that starts with its verb ("add the Stop hook to
    # PATH", "write manifest PATH"); the engine prefixes "would " under --check (engine.wording)
    summary: str

    def execute(self, host: Host) -> str | None:
        """Perform the change through ``host``; return a note for the report (a backup path)."""
        raise NotImplementedError

    def diff(self) -> str:
        """A unified diff (or a one-line before → after) shown under --diff; "" when none."""
        return ""


def unified_diff(before: str, after: str, path: str) -> str:
    """The --diff text for a file: ``--- before: PATH`` / ``+++ after: PATH`` and its hunks."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"before: {path}", tofile=f"after: {path}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text


@dataclass(frozen=True)
class WriteFile(Action):
    """Write ``content`` to ``path`` atomically (temp + fsync + rename), backing up the old file.

    ``validate`` gets the new bytes and raises a ProvisionError when they are unusable; it runs
    before anything on disk changes. ``mode`` None keeps the existing mode (0644 for new files).
    """

    path: str
    content: bytes
    before: bytes | None = None
    mode: int | None = None
    summary: str = ""
    validate: Callable[[bytes], None] | None = field(default=None, compare=False)
    backup: bool = True
    overwrite_read_only: bool = False

    def execute(self, host: Host) -> str | None:
        if self.validate is not None:
            self.validate(self.content)
        backup = host.write_file(self.path, self.content, mode=self.mode, backup=self.backup,
                                 overwrite_read_only=self.overwrite_read_only)
        return f"backup {backup}" if backup else None

    def diff(self) -> str:
        before = (self.before or b"").decode("utf-8", "replace")
        return unified_diff(before, self.content.decode("utf-8", "replace"), self.path)


@dataclass(frozen=True)
class EnsureDir(Action):
    """Create directory ``path`` (and parents) with ``mode``, or fix the mode of an existing one."""

    path: str
    mode: int = 0o700
    before_mode: int | None = None
    summary: str = ""

    def execute(self, host: Host) -> str | None:
        host.ensure_dir(self.path, self.mode)
        return None

    def diff(self) -> str:
        before = "absent" if self.before_mode is None else oct(self.before_mode)
        return f"{self.path}: {before} -> directory {oct(self.mode)}\n"


@dataclass(frozen=True)
class RunCommand(Action):
    """Run one argv (no shell) through the host; a non-zero exit is a HostError naming it."""

    argv: tuple[str, ...]
    summary: str = ""
    env: Mapping[str, str] | None = field(default=None, compare=False)
    cwd: str | None = None
    timeout: float = 60.0

    def execute(self, host: Runner) -> str | None:  # any runner: only run() is needed
        result = host.run(self.argv, env=self.env, cwd=self.cwd, timeout=self.timeout)
        if result.rc != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise HostError(
                f"command failed (rc={result.rc}): {' '.join(self.argv)!r}: "
                f"{tail[-1] if tail else ''}"
            )
        return None

    def diff(self) -> str:
        return f"run: {' '.join(self.argv)}\n"


CLAUDE_ONLY = frozenset({"claude"})
CODEX_ONLY = frozenset({"codex"})


class Task:
    """Base of every provision task: a named resource with read-only facts and a pure plan."""

    name: ClassVar[str] = "Task"
    reverify: ClassVar[bool] = True  # re-read facts after acting; False for one-shot commands
    halt_on_failure: ClassVar[bool] = False  # later tasks are skipped when this one fails
    # True: details() is evidence (what was read, the argv token table), printed only with -v
    # or when the task failed; False: they are warnings the operator must always see
    details_are_evidence: ClassVar[bool] = False
    # the agents (profile ``agent``) this task serves; the engine skips it for the others
    agents: ClassVar[frozenset[str]] = frozenset({"claude", "codex"})

    def skip_reason(self, ctx: Context) -> str | None:
        """A reason to skip this task for this profile, or None to run it."""
        return None

    def facts(self, host: Host, ctx: Context) -> Any:
        """Read what the task needs from the host (read-only, runs under --check too)."""
        raise NotImplementedError

    def plan(self, facts: Any, ctx: Context) -> list[Action]:
        """The actions still needed (pure); [] means the resource is already as desired."""
        raise NotImplementedError

    def ok_message(self, facts: Any, ctx: Context) -> str:
        """One line saying what was found when nothing needs to change."""
        return f"{self.name} is as desired"

    def diff(self, facts: Any, actions: list[Action]) -> str:
        """The --diff text of a plan; by default each action's own diff."""
        return "".join(action.diff() for action in actions)

    def details(self, facts: Any, ctx: Context) -> list[str]:
        """Extra lines printed under the status line (e.g. launch vs resume token table)."""
        return []
