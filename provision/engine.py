"""Runs tasks in order: skip? → facts → plan → execute (unless --check) → re-read and verify.

Statuses follow Ansible: an empty plan is ``ok`` (the message says what was found), a
non-empty plan is ``changed`` (under --check: "would ...", see ``wording``), a ProvisionError
is ``failed``, a skip reason is ``skipped``. The recap counts them; the exit code is 0, or 2
when a task failed. Check and diff modes live here only; tasks never see them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from provision.actions import Action, Task
from provision.errors import ProvisionError
from provision.host import Host
from provision.result import Context, Report, Status, TaskResult
from runtime.cli.render import ansi

Callback = Callable[[TaskResult], None]


def run_task(task: Task, host: Host, ctx: Context) -> TaskResult:
    """One task through the whole cycle; never raises for a ProvisionError."""
    agent = ctx.profile.agent
    reason = None if agent in task.agents else \
        f"agent is {agent}; {task.name} is {'/'.join(sorted(task.agents))}'s"
    reason = reason or task.skip_reason(ctx)
    if reason is not None:
        return TaskResult(task.name, Status.SKIPPED, reason)
    try:
        facts = task.facts(host, ctx)
        ctx.facts[task.name] = facts
        actions = task.plan(facts, ctx)
        details = tuple(task.details(facts, ctx))
        evidence = len(details) if task.details_are_evidence else 0
        if not actions:
            return TaskResult(task.name, Status.OK, task.ok_message(facts, ctx), notes=details,
                              evidence_notes=evidence)
        diff = task.diff(facts, actions)
        summaries = tuple(_summary(a) for a in actions)
        if ctx.check:
            return TaskResult(task.name, Status.CHANGED, wording(summaries, check=True),
                              diff, details, summaries, evidence)
        notes = [note for a in actions if (note := a.execute(host))]
        if task.reverify:
            facts = task.facts(host, ctx)
            ctx.facts[task.name] = facts
            still = task.plan(facts, ctx)
            if still:
                return TaskResult(task.name, Status.FAILED, "still differs after apply: "
                                  + "; ".join(_summary(a) for a in still), diff,
                                  details, summaries, evidence)
        return TaskResult(task.name, Status.CHANGED, wording(summaries, check=False), diff,
                          (*details, *notes), summaries, evidence)
    except ProvisionError as exc:
        return TaskResult(task.name, Status.FAILED, str(exc))
    except Exception as exc:  # a bug must not hide the later tasks' results
        return TaskResult(task.name, Status.FAILED,
                          f"unexpected {type(exc).__name__} (a bug in {task.name}): {exc}")


def _summary(action: Action) -> str:
    return action.summary or type(action).__name__


def wording(summaries: Sequence[str], check: bool) -> str:
    """A changed task's message: its actions' summaries (each an imperative phrase, "add the
    Stop hook to …") as done, or under --check in the conditional ("would add the Stop hook to
    …; would write …"). The one rule for every task: tasks never word check mode themselves."""
    return "; ".join(f"would {s}" if check else s for s in summaries)


def run(tasks: Sequence[Task], host: Host, ctx: Context,
        on_result: Callback | None = None) -> Report:
    """Run ``tasks`` in order and return the report (``on_result`` sees each line as it ends)."""
    results = []
    halted: str | None = None
    for task in tasks:
        if halted is not None:
            result = TaskResult(task.name, Status.SKIPPED, f"{halted} failed; nothing after it ran")
        else:
            result = run_task(task, host, ctx)
            if result.status is Status.FAILED and task.halt_on_failure:
                halted = task.name
        results.append(result)
        if on_result is not None:
            on_result(result)
    return Report(ctx.host, tuple(results), ctx.check)


# Ansible's colours: what a status means is seen before it is read
STATUS_COLOUR = {Status.OK: "green", Status.CHANGED: "yellow", Status.FAILED: "red",
                 Status.SKIPPED: "cyan"}
DIFF_COLOUR = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def format_result(result: TaskResult, host: str, show_diff: bool, verbose: int = 0,
                  colour: bool = False) -> str:
    """``ok: [host] Task — message`` plus its warnings, its evidence (the launch evidence, the
    launch/resume token table, what was read) only with ``-v`` or when it failed, and, with
    --diff, the diff. ``colour``: the task line in its status's colour, diff lines in theirs
    (the caller decides: a terminal, ``NO_COLOR`` unset)."""
    head = f"{result.status.value}: [{host}] {result.task} — {result.message}"
    lines = [ansi(head, STATUS_COLOUR[result.status]) if colour else head]
    shown = result.notes if verbose or result.status is Status.FAILED \
        else result.notes[result.evidence_notes:]
    lines.extend(f"    {line}" for line in shown)
    if show_diff and result.diff:
        lines.extend(diff_line(line, colour) for line in result.diff.rstrip("\n").split("\n"))
    return "\n".join(lines)


def diff_line(line: str, colour: bool) -> str:
    """One unified-diff line, coloured by its kind when ``colour``."""
    if colour:
        for prefix, name in DIFF_COLOUR:
            if line.startswith(prefix):
                return ansi(line, name)
    return line


def format_recap(report: Report, colour: bool = False) -> str:
    """``PLAY RECAP`` and ``HOST : ok=N changed=N failed=N skipped=N``; with ``colour`` each
    non-zero counter in its status's colour (ok counts changed too, as Ansible)."""
    title = "PLAY RECAP (check mode) " if report.check else "PLAY RECAP "
    if not colour:
        return f"{title:*<60}\n{report.recap()}"
    ok = report.count(Status.OK) + report.count(Status.CHANGED)
    counters = [("ok", ok, Status.OK)] + [
        (s.value, report.count(s), s) for s in (Status.CHANGED, Status.FAILED, Status.SKIPPED)]
    worst = next((s for s in (Status.FAILED, Status.CHANGED) if report.count(s)), Status.OK)
    cells = [ansi(f"{name}={n}", STATUS_COLOUR[status]) if n else f"{name}={n}"
             for name, n, status in counters]
    return f"{title:*<60}\n{ansi(report.host, STATUS_COLOUR[worst])} : {' '.join(cells)}"


def report_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
