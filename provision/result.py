"""Task statuses, per-task results, the run context and the recap of one provision run."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provision.introspect import Launch
    from provision.profile import Profile


class Status(enum.StrEnum):
    """What happened to one task (Ansible vocabulary)."""

    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class TaskResult:
    """One task's line in the report: status, one-line message, diff, notes from the actions."""

    task: str
    status: Status
    message: str
    diff: str = ""
    notes: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    evidence_notes: int = 0  # the first N notes are evidence: printed only with -v (or failed)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["evidence_notes"]  # the JSON report has every note, as before
        data["status"] = self.status.value
        data["notes"] = list(self.notes)
        data["actions"] = list(self.actions)
        return data


@dataclass
class Context:
    """What tasks of one run share: the profile, the check flag for reporting, and findings.

    Tasks never read ``check`` to decide what to do (the engine owns check mode); it is here so
    a message can say "would" instead of "did". ``launch``/``resume_argv`` are set by the
    launcher tasks; ``facts`` maps task name → the facts that task read in this run.
    """

    profile: Profile
    check: bool = False
    launch: Launch | None = None
    resume_argv: tuple[str, ...] | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.profile.host

    def missing_argv(self) -> str | None:
        """Why a task needing the launch and resume argv cannot run; None when both are set."""
        if self.launch is None or self.resume_argv is None:
            return "no launch/resume argv (LaunchCommand or ResumeCommand did not succeed)"
        return None

    def facts_of(self, task_name: str) -> Any:
        """Facts read by the task named ``task_name`` earlier in this run, or None."""
        return self.facts.get(task_name)


@dataclass(frozen=True)
class Report:
    """All task results of a run, in order, plus the recap counters and the exit code."""

    host: str
    results: tuple[TaskResult, ...]
    check: bool = False

    def count(self, status: Status) -> int:
        return sum(1 for result in self.results if result.status is status)

    @property
    def failed(self) -> bool:
        return self.count(Status.FAILED) > 0

    @property
    def exit_code(self) -> int:
        return 2 if self.failed else 0

    def recap(self) -> str:
        """``HOST : ok=N changed=N failed=N skipped=N`` (ok counts changed too, as Ansible)."""
        ok = self.count(Status.OK) + self.count(Status.CHANGED)
        return (f"{self.host} : ok={ok} changed={self.count(Status.CHANGED)} "
                f"failed={self.count(Status.FAILED)} skipped={self.count(Status.SKIPPED)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "check": self.check,
            "tasks": [result.to_dict() for result in self.results],
            "recap": {
                "ok": self.count(Status.OK) + self.count(Status.CHANGED),
                "changed": self.count(Status.CHANGED),
                "failed": self.count(Status.FAILED),
                "skipped": self.count(Status.SKIPPED),
            },
            "exit_code": self.exit_code,
        }
