"""The engine: statuses, check mode, re-verification, recap and JSON, with small fake tasks."""

from __future__ import annotations

import json
from dataclasses import dataclass

from provision import engine
from provision.actions import Action, EnsureDir, RunCommand, Task, WriteFile
from provision.errors import FactError
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from tests.fakes import FakeHost

PROFILE = profile_from_mapping({
    "host": "box", "claude": {"user": "u", "home": "/home/u"},
    "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
    "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"},
})


@dataclass(frozen=True)
class Found:
    content: bytes | None


class FileTask(Task):
    """Keeps /etc/motd equal to ``wanted``."""

    name = "Motd"

    def __init__(self, wanted: bytes = b"hello\n") -> None:
        self.wanted = wanted

    def facts(self, host, ctx) -> Found:
        return Found(host.read_bytes("/etc/motd"))

    def plan(self, facts: Found, ctx) -> list[Action]:
        if facts.content == self.wanted:
            return []
        return [WriteFile("/etc/motd", self.wanted, before=facts.content,
                          summary="write /etc/motd")]

    def ok_message(self, facts: Found, ctx) -> str:
        return "/etc/motd already says hello"


class Liar(FileTask):
    """Its action never converges (the file it writes is not what it checks)."""

    name = "Liar"

    def plan(self, facts: Found, ctx) -> list[Action]:
        return [WriteFile("/etc/other", b"x", summary="write /etc/other")]


class Broken(Task):
    name = "Broken"

    def facts(self, host, ctx):
        raise FactError("cannot read 'x'")


class Skipper(Task):
    name = "Skipper"

    def skip_reason(self, ctx) -> str:
        return "not for this door"


def _ctx(check: bool = False) -> Context:
    return Context(PROFILE, check=check)


def test_changed_then_ok_on_the_second_run() -> None:
    host = FakeHost()
    first = engine.run([FileTask()], host, _ctx())
    assert first.results[0].status is Status.CHANGED
    assert host.files["/etc/motd"] == b"hello\n"
    second = engine.run([FileTask()], host, _ctx())
    assert second.results[0].status is Status.OK
    assert second.results[0].message == "/etc/motd already says hello"
    assert second.recap() == "box : ok=1 changed=0 failed=0 skipped=0"


def test_check_mode_says_would_and_writes_nothing() -> None:
    host = FakeHost(files={"/etc/motd": b"old\n"})
    report = engine.run([FileTask()], host, _ctx(check=True))
    assert report.results[0].status is Status.CHANGED
    assert report.results[0].message == "would write /etc/motd"
    assert host.written == [] and host.files["/etc/motd"] == b"old\n"
    assert report.check and report.exit_code == 0


def test_diff_is_unified_with_before_and_after_paths() -> None:
    host = FakeHost(files={"/etc/motd": b"old\n"})
    (result,) = engine.run([FileTask()], host, _ctx(check=True)).results
    assert "--- before: /etc/motd\n+++ after: /etc/motd\n" in result.diff
    assert "-old\n+hello\n" in result.diff
    assert "+hello" in engine.format_result(result, "box", show_diff=True)
    assert "+hello" not in engine.format_result(result, "box", show_diff=False)


def test_replaced_file_is_backed_up_and_the_note_reported() -> None:
    host = FakeHost(files={"/etc/motd": b"old\n"})
    (result,) = engine.run([FileTask()], host, _ctx()).results
    assert host.files["/etc/motd.bak~"] == b"old\n"
    assert "backup /etc/motd.bak~" in result.notes


def test_a_plan_that_does_not_converge_fails_after_apply() -> None:
    (result,) = engine.run([Liar()], FakeHost(), _ctx()).results
    assert result.status is Status.FAILED
    assert result.message == "still differs after apply: write /etc/other"


def test_errors_fail_one_task_and_later_tasks_still_run() -> None:
    report = engine.run([Broken(), Skipper(), FileTask()], FakeHost(), _ctx())
    assert [r.status for r in report.results] == [Status.FAILED, Status.SKIPPED, Status.CHANGED]
    assert report.results[0].message == "cannot read 'x'"
    assert report.results[1].message == "not for this door"
    assert report.exit_code == 2
    assert report.recap() == "box : ok=1 changed=1 failed=1 skipped=1"


def test_json_report_lists_tasks_recap_and_exit_code() -> None:
    report = engine.run([FileTask(), Skipper()], FakeHost(), _ctx())
    data = json.loads(engine.report_json(report))
    assert data["recap"] == {"ok": 1, "changed": 1, "failed": 0, "skipped": 1}
    assert [t["status"] for t in data["tasks"]] == ["changed", "skipped"]
    assert data["exit_code"] == 0


def test_run_command_failure_names_the_command() -> None:
    host = FakeHost()
    host.add_command(["systemctl", "daemon-reload"], rc=1, stderr="Access denied")

    class Reload(Task):
        name = "Reload"
        reverify = False

        def facts(self, host, ctx):
            return None

        def plan(self, facts, ctx):
            return [RunCommand(("systemctl", "daemon-reload"), summary="daemon-reload")]

    (result,) = engine.run([Reload()], host, _ctx()).results
    assert result.status is Status.FAILED
    assert "'systemctl daemon-reload': Access denied" in result.message


def test_ensure_dir_diff_shows_mode_before_and_after() -> None:
    action = EnsureDir("/var/lib/tl", 0o700, None, summary="create")
    assert action.diff() == "/var/lib/tl: absent -> directory 0o700\n"
    host = FakeHost()
    action.execute(host)
    assert host.dirs["/var/lib/tl"] == 0o700


def test_a_failed_halting_task_skips_the_rest_with_the_reason() -> None:
    class Fatal(Broken):
        halt_on_failure = True

    host = FakeHost()
    report = engine.run([Fatal(), FileTask()], host, _ctx())
    assert [r.status for r in report.results] == [Status.FAILED, Status.SKIPPED]
    assert report.results[1].message == "Broken failed; nothing after it ran"
    assert host.written == []


class Evidenced(FileTask):
    """Its details are evidence: printed only with -v or when it fails."""

    name = "Evidenced"
    details_are_evidence = True

    def details(self, facts: Found, ctx) -> list[str]:
        return [f"read: {facts.content!r}"]


class Warned(FileTask):
    name = "Warned"

    def details(self, facts: Found, ctx) -> list[str]:
        return ["warning: restart it"]


def test_evidence_is_printed_only_with_v_but_warnings_and_backups_always() -> None:
    host = FakeHost(files={"/etc/motd": b"old\n"})
    evidenced, warned = engine.run([Evidenced(), Warned()], host, _ctx()).results
    assert engine.format_result(evidenced, "box", False).splitlines() == [
        "changed: [box] Evidenced — write /etc/motd", "    backup /etc/motd.bak~"]
    assert engine.format_result(evidenced, "box", False, verbose=1).splitlines() == [
        "changed: [box] Evidenced — write /etc/motd", "    read: b'old\\n'",
        "    backup /etc/motd.bak~"]
    assert engine.format_result(warned, "box", False).splitlines() == [
        "ok: [box] Warned — /etc/motd already says hello", "    warning: restart it"]
    assert evidenced.to_dict()["notes"] == ["read: b'old\\n'", "backup /etc/motd.bak~"]
    assert "evidence_notes" not in evidenced.to_dict()


def test_a_failed_task_shows_its_evidence_without_v() -> None:
    class FailingEvidence(Evidenced):
        name = "FailingEvidence"

        def plan(self, facts: Found, ctx) -> list[Action]:
            return [WriteFile("/etc/other", b"x", summary="write /etc/other")]

    (result,) = engine.run([FailingEvidence()], FakeHost(files={}), _ctx()).results
    assert result.status is Status.FAILED
    assert engine.format_result(result, "box", False).splitlines()[1] == "    read: None"


def test_colour_paints_each_status_and_diff_line_like_ansible_and_plain_is_unchanged() -> None:
    host = FakeHost(files={"/etc/motd": b"old\n"})
    report = engine.run([Evidenced()], host, _ctx(check=True))
    (changed,) = report.results
    plain = engine.format_result(changed, "box", True)
    painted = engine.format_result(changed, "box", True, colour=True).splitlines()
    assert painted[0] == "\x1b[33mchanged: [box] Evidenced — would write /etc/motd\x1b[0m"
    assert [x for x in painted if x.startswith("\x1b[32m+")] == ["\x1b[32m+hello\x1b[0m"]
    assert [x for x in painted if x.startswith("\x1b[31m-")] == ["\x1b[31m-old\x1b[0m"]
    assert "\x1b[" not in plain and plain.splitlines()[0] == \
        "changed: [box] Evidenced — would write /etc/motd"
    assert engine.format_recap(report, colour=True).splitlines()[1] == (
        "\x1b[33mbox\x1b[0m : \x1b[32mok=1\x1b[0m \x1b[33mchanged=1\x1b[0m failed=0 skipped=0")
    assert engine.format_recap(report).splitlines()[1] == \
        "box : ok=1 changed=1 failed=0 skipped=0"
