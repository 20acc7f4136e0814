"""accept: read-only and wiring stages against a host prepared by a real ``tl-provision apply``.

The host is tests/provision/conftest.py's deployment (temp HOME, private tmux socket, stand-in
claude in the pane) made ``ready`` by test_apply_tmux.py's fixture (pinned claude CLI as
claude.binary, ``companion`` registered as a user MCP server), plus one session transcript.
"""

from __future__ import annotations

import json
import uuid

import pytest

from provision import engine
from provision.accept import FAIL, PASS, SKIP, Checklist, run_accept
from provision.cli import apply_tasks, main
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import Deployment
from tests.fixtures.standin_claude import write_transcript
from tests.provision.test_apply_tmux import ready  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]

TURNS = [("remember the blue door", "noted: the blue door"), ("and 4711", "4711, got it")]


def provision_host(d: Deployment) -> str:
    """Write one session transcript, run a real apply; return the session id."""
    from runtime.paths import encode_project_dir

    session = str(uuid.uuid4())
    project = d.home / ".claude" / "projects" / encode_project_dir(str(d.workdir))
    write_transcript(project / f"{session}.jsonl", session, str(d.workdir), TURNS)
    profile = load_profile(d.profile_path)
    report = engine.run(apply_tasks(), LocalHost(profile.host), Context(profile))
    assert report.exit_code == 0, [r.message for r in report.results if r.status == "failed"]
    return session


@pytest.fixture
def installed(ready: Deployment) -> Deployment:  # noqa: F811
    provision_host(ready)
    return ready


def accept(d: Deployment, **kwargs) -> Checklist:
    profile = load_profile(d.profile_path)
    return run_accept(profile, LocalHost(profile.host), pause=0.0, **kwargs)


def status(report: Checklist) -> dict[str, str]:
    return {line.name: line.status for line in report.lines}


def evidence(report: Checklist, name: str):
    return next(line.evidence for line in report.lines if line.name == name)


def test_a_fresh_install_passes_every_readonly_and_wiring_line(installed: Deployment) -> None:
    report = accept(installed)
    assert report.exit_code == 0, [(x.name, x.evidence) for x in report.failed]
    seen = status(report)
    for name in ("manifest readable", "runtime config valid", "project dir exists",
                 "transcripts > 0", "door target alive", "claude binary absolute",
                 "workdir matches project dir", "source session id non-empty", "doctor",
                 "nothing blocked", "selected turns = source turns", "nothing dropped",
                 "noise ratio plausible", "hook in settings.json",
                 "hook exits 0 on a synthetic Stop", "hook schedules nothing",
                 "MCP lists 7 tools", "resume argv ≡ launch argv", "live argv ≡ launch argv",
                 "channel flags kept", "server channels registered [companion]",
                 "hook still present after a pause"):
        assert seen.get(name) == PASS, (name, seen.get(name))
    assert evidence(report, "selected turns = source turns") == {"source": 2, "selected": 2}
    assert evidence(report, "MCP lists 7 tools")["tools"] == 7
    hook = evidence(report, "hook exits 0 on a synthetic Stop")
    assert hook["rc"] == 0 and hook["stdout"] == "{}"
    assert report.numbers["hook_ms"] == hook["ms"]
    assert evidence(report, "door target alive")["pid"] == installed.tmux.pane_pid(
        installed.target)


def test_synthetic_stop_leaves_a_pending_operation_pending(installed: Deployment) -> None:
    from runtime.config import load_config
    from runtime.switch.ops import request
    from runtime.switch.ops import status as op_status

    config = load_config(installed.config_path)
    session = config.project_dir and sorted(config.project_dir.glob("*.jsonl"))[0].stem
    op = request(config, "accept test", "REBUILD", session_id=session)
    report = accept(installed)
    assert status(report)["hook schedules nothing"] == PASS
    after = op_status(config, op["operation_id"])
    assert after["state"] == "pending"
    ignored = [e for e in after["events"] if e["phase"] == "stop_ignored"]
    assert ignored and ignored[-1]["session_id"].startswith("tl-accept-")


def test_a_hand_edited_resume_argv_without_the_channel_flag_fails(installed: Deployment) -> None:
    text = installed.config_path.read_text()
    deaf = text.replace(', "--dangerously-load-development-channels", "server:companion"]',
                        "]", 1)
    assert deaf != text
    installed.config_path.write_text(deaf)
    report = accept(installed)
    assert report.exit_code == 1
    assert status(report)["resume argv ≡ launch argv"] == FAIL
    assert status(report)["channel flags kept"] == FAIL
    assert "--dangerously-load-development-channels server:companion" in \
        evidence(report, "channel flags kept")["missing"]
    assert "re-apply" in next(x.hint for x in report.failed if x.name == "channel flags kept")


def test_a_missing_hook_fails_once_and_skips_the_lines_that_need_it(installed: Deployment,
                                                                     ) -> None:
    doc = json.loads(installed.settings.read_text())
    doc["hooks"]["Stop"] = [g for g in doc["hooks"]["Stop"]
                            if not any("tl-rebuild" in h["command"] for h in g["hooks"])]
    installed.settings.write_text(json.dumps(doc))
    report = accept(installed)
    seen = status(report)
    assert seen["hook in settings.json"] == FAIL
    assert seen["hook exits 0 on a synthetic Stop"] == SKIP
    assert seen["hook schedules nothing"] == SKIP
    assert seen["hook still present after a pause"] == SKIP
    assert [x.name for x in report.failed] == ["hook in settings.json"]
    assert {x.because for x in report.lines if x.status == SKIP} == {"hook in settings.json"}
    assert seen["MCP lists 7 tools"] == PASS
    assert report.exit_code == 1


def test_cli_prints_a_json_report_and_refuses_live_without_the_word(
        installed: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["accept", "--json", str(installed.profile_path)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["ok"] is True and data["exit_code"] == 0
    assert data["counts"]["fail"] == 0 and data["counts"]["pass"] >= 20
    assert {"stage", "name", "status", "evidence"} <= set(data["lines"][0])
    rc = main(["accept", "--live", "--confirm", "rebuild", str(installed.profile_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "--confirm REBUILD" in err and "nothing was done" in err
    assert not list((installed.state_dir / "operations").glob("op-*.json"))


def test_without_a_manifest_the_checklist_fails_and_names_apply(ready: Deployment,  # noqa: F811
                                                               ) -> None:
    report = accept(ready)
    assert report.exit_code == 1
    first = report.lines[0]
    assert (first.name, first.status) == ("manifest readable", FAIL)
    assert "tl-provision apply" in first.hint


def test_table_output_names_each_failed_line_with_what_to_do() -> None:
    report = Checklist("box")
    report.add("workdir matches project dir", False, {"workdir": "/root"})
    report.add("transcripts > 0", True, {"count": 3})
    text = report.table()
    assert "FAIL  readonly  workdir matches project dir" in text
    assert "what to do: the wrong-project-dir incident" in text
    assert text.endswith("box : pass=1 fail=1 skip=0")


def test_a_hook_that_outlives_its_timeout_fails_and_is_reported(installed: Deployment) -> None:
    doc = json.loads(installed.settings.read_text())
    ours = next(h for g in doc["hooks"]["Stop"] for h in g["hooks"]
                if "tl-rebuild" in h["command"])
    ours["command"] = "sleep 30; " + ours["command"]
    ours["timeout"] = 1
    installed.settings.write_text(json.dumps(doc))
    report = accept(installed)
    line = next(x for x in report.lines if x.name == "hook exits 0 on a synthetic Stop")
    assert line.status == FAIL
    assert line.evidence["timeout_s"] == 1 and "timed out" in line.evidence["error"]
    assert status(report)["hook schedules nothing"] == PASS
    assert "hook_ms" not in report.numbers


def test_with_the_hook_disabled_accept_wants_it_absent_and_skips_the_firing_lines(
        installed: Deployment) -> None:
    from tests.provision.test_drift_more import _set_hook_enabled

    _set_hook_enabled(installed, False)
    provision_host(installed)
    report = accept(installed)
    seen = status(report)
    assert seen["hook absent (hook.enabled is false)"] == PASS
    assert seen["hook still absent after a pause"] == PASS
    assert seen["hook exits 0 on a synthetic Stop"] == SKIP
    assert seen["hook schedules nothing"] == SKIP
    assert "hook in settings.json" not in seen
    assert report.exit_code == 0, [(x.name, x.evidence) for x in report.failed]


def test_an_invalid_config_is_the_one_fail_and_the_lines_needing_it_are_skipped_naming_it(
        installed: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    installed.config_path.write_text("{ not a config")
    rc = main(["accept", str(installed.profile_path)])
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert rc == 1
    assert [x for x in lines if x.startswith("FAIL")] == [
        next(x for x in lines if x.startswith("FAIL  readonly  runtime config valid — "))]
    because = "skipped (because 'runtime config valid' failed)"
    for name in ("project dir exists", "transcripts > 0", "doctor", "noise ratio plausible"):
        assert f"SKIP  readonly  {name} — {because}" in lines
    for name in ("hook exits 0 on a synthetic Stop", "resume argv ≡ launch argv",
                 "channel flags kept"):
        assert f"SKIP  wiring    {name} — {because}" in lines
    assert text.count("what to do:") == 1
    assert "what to do: re-run apply; never hand-edit the rendered config" in text
    rc = main(["accept", "--json", str(installed.profile_path)])
    data = json.loads(capsys.readouterr().out)
    skipped = [x for x in data["lines"] if x["name"] == "transcripts > 0"]
    assert skipped == [{"stage": "readonly", "name": "transcripts > 0", "status": "skip",
                        "evidence": "no runtime config", "because": "runtime config valid"}]
    assert [x["name"] for x in data["lines"] if x["status"] == "fail"] == ["runtime config valid"]


def test_a_line_is_skipped_naming_the_root_cause_through_a_chain_of_needs() -> None:
    report = Checklist("box")
    report.add("runtime config valid", False, "ValueError: bad")
    report.cannot_judge("project dir exists", "no runtime config")
    report.cannot_judge("transcripts > 0", {"count": 0})
    report.add("MCP lists 7 tools", True, {"tools": 7})
    report.cannot_judge("resume argv ≡ launch argv", "no manifest")  # manifest not failed
    assert report.table().splitlines() == [
        'FAIL  readonly  runtime config valid — ValueError: bad',
        "                what to do: re-run apply; never hand-edit the rendered config "
        "(drift reports edits)",
        "SKIP  readonly  project dir exists — skipped (because 'runtime config valid' failed)",
        "SKIP  readonly  transcripts > 0 — skipped (because 'runtime config valid' failed)",
        "PASS  readonly  MCP lists 7 tools",
        "SKIP  readonly  resume argv ≡ launch argv — skipped (because 'runtime config valid' "
        "failed)",
        "box : pass=1 fail=1 skip=3"]
    assert 'PASS  readonly  MCP lists 7 tools — {"tools": 7}' in report.table(verbose=1)


def test_cli_accept_prints_the_evidence_of_what_passed_only_with_v(
        installed: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accept", str(installed.profile_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "PASS  readonly  transcripts > 0" in lines
    assert "PASS  wiring    MCP lists 7 tools" in lines
    assert not [x for x in lines[:-1] if " — " in x]
    assert main(["accept", "-v", str(installed.profile_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 'PASS  readonly  transcripts > 0 — {"count": 1}' in lines
    assert all(" — " in x for x in lines[:-1])


def test_drill_lines_a_failed_step_kept_from_running_are_skipped_naming_it() -> None:
    report = Checklist("box")
    report.add("runtime config valid", True, "/etc/tl.toml")
    report.stage = "drill"
    report.add("drill scratch ready", True, {"root": "/s"})
    report.add("drill old claude running", False, {"screen": "No conversation found"})
    report.not_reached(["drill activated", "drill timeline complete"])
    assert report.table().splitlines() == [
        "PASS  readonly  runtime config valid",
        "PASS  drill     drill scratch ready",
        "FAIL  drill     drill old claude running — {\"screen\": \"No conversation found\"}",
        "                what to do: the resume argv does not start in the scratch pane: run it "
        "by hand in the workdir and read what it prints",
        "SKIP  drill     drill activated — skipped (because 'drill old claude running' failed)",
        "SKIP  drill     drill timeline complete — skipped (because 'drill old claude running' "
        "failed)",
        "box : pass=2 fail=1 skip=2"]
    lone = Checklist("box", stage="drill")
    lone.not_reached(["drill activated"])  # nothing failed: not running it is the fault
    assert [(x.status, x.evidence) for x in lone.lines] == [
        (FAIL, "not reached, and no earlier line failed")]


def test_after_a_drill_that_did_not_activate_the_new_process_lines_name_it() -> None:
    report = Checklist("box", stage="drill")
    report.add("drill activated", False, {"state": "rolled_back"})
    report.cannot_judge("drill pane pid changed", {"before": 1})
    report.cannot_judge("drill timeline complete", {"missing": ["activated"]})
    report.add("drill old transcript byte-identical", True, {})
    assert [(x.name, x.status, x.because) for x in report.lines[1:]] == [
        ("drill pane pid changed", SKIP, "drill activated"),
        ("drill timeline complete", SKIP, "drill activated"),
        ("drill old transcript byte-identical", PASS, "")]
    painted = report.table(colour=True).splitlines()
    assert painted[0].startswith("\x1b[31mFAIL\x1b[0m  drill     drill activated — ")
    assert painted[2].startswith("\x1b[36mSKIP\x1b[0m  drill     drill pane pid changed — ")
    assert painted[-1] == ("box : \x1b[32mpass=1\x1b[0m \x1b[31mfail=1\x1b[0m "
                           "\x1b[36mskip=2\x1b[0m")
