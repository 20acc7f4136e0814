"""The collection's ``provision`` module: its report parsers from real tl-provision output, and
its documentation as ``ansible-doc`` renders it from the built collection."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from provision.actions import EnsureDir, RunCommand, WriteFile
from provision.parsers.settings import stop_subtree_diff
from provision.result import Report, Status, TaskResult
from tests.ansible.conftest import COLLECTION_SRC, _ansible_bin

MODULE_PATH = COLLECTION_SRC / "plugins" / "modules" / "provision.py"


@pytest.fixture(scope="module")
def module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("threadline_companion_provision", MODULE_PATH)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_a_new_file_diff_becomes_an_entry_with_the_whole_file_after(module: ModuleType) -> None:
    text = WriteFile("/etc/tl/config.toml", b"a = 1\nb = [\n  2,\n]\n").diff()
    assert module.diff_entries("RuntimeConfig", text) == [{
        "before_header": "/etc/tl/config.toml", "after_header": "/etc/tl/config.toml",
        "before": "", "after": "a = 1\nb = [\n  2,\n]\n"}]


def test_a_changed_file_diff_keeps_context_on_both_sides(module: ModuleType) -> None:
    before = "".join(f"line {n}\n" for n in range(12))
    after = before.replace("line 5\n", "line five\n")
    text = WriteFile("/f", after.encode(), before=before.encode()).diff()
    (entry,) = module.diff_entries("RuntimeConfig", text)
    assert entry["before"] == "line 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\n"
    assert entry["after"] == "line 2\nline 3\nline 4\nline five\nline 6\nline 7\nline 8\n"


def test_the_settings_diff_shows_the_stop_subtree_before_and_after(module: ModuleType) -> None:
    hook = {"matcher": "", "hooks": [{"type": "command", "command": "/p/bin/tl-rebuild "
                                      "hook-stop"}]}
    text = stop_subtree_diff({"model": "opus"}, {"model": "opus", "hooks": {"Stop": [hook]}},
                             "/h/.claude/settings.json")
    (entry,) = module.diff_entries("StopHook", text)
    assert entry["before_header"] == "/h/.claude/settings.json hooks.Stop"
    assert entry["before"] == ""
    assert json.loads(entry["after"]) == [hook]


def test_one_line_diffs_become_entries_of_their_own(module: ModuleType) -> None:
    text = EnsureDir("/s", 0o700).diff() + RunCommand(("claude", "mcp", "add", "x")).diff()
    assert module.diff_entries("Directories", text) == [
        {"before_header": "Directories: /s: absent", "after_header": "Directories",
         "before": "/s: absent\n", "after": "directory 0o700\n"},
        {"before_header": "Directories", "after_header": "Directories", "before": "",
         "after": "run: claude mcp add x\n"}]


def test_apply_outcome_is_changed_from_the_recap_and_failed_with_the_task_message(
        module: ModuleType) -> None:
    ok = Report("box", (TaskResult("HostFacts", Status.OK, "tmux 3.3a"),
                        TaskResult("RuntimeConfig", Status.CHANGED, "would write /c",
                                   WriteFile("/c", b"x\n").diff())), check=True)
    outcome = module.apply_outcome(json.loads(json.dumps(ok.to_dict())))
    assert outcome["changed"] is True and outcome["failed"] is False
    assert outcome["msg"] == ("tl-provision apply (check mode) on box: ok=2 changed=1 "
                              "failed=0 skipped=0")
    assert [t["task"] for t in outcome["tasks"]] == ["HostFacts", "RuntimeConfig"]
    assert outcome["diff"][0]["after"] == "x\n"
    quiet = Report("box", (TaskResult("HostFacts", Status.OK, "tmux 3.3a"),))
    assert module.apply_outcome(quiet.to_dict())["changed"] is False
    bad = Report("box", (TaskResult("LaunchCommand", Status.FAILED, "no claude in 'main:0.0'"),
                         TaskResult("ResumeCommand", Status.SKIPPED, "LaunchCommand failed")))
    outcome = module.apply_outcome(bad.to_dict())
    assert outcome["failed"] is True
    assert outcome["msg"] == "LaunchCommand failed: no claude in 'main:0.0'"


def test_drift_outcome_fails_with_each_finding_and_passes_when_clean(module: ModuleType) -> None:
    from provision.drift import Finding, findings_json

    found = findings_json([Finding("resume argv stale", "claude --resume x", "claude -c")])
    outcome = module.drift_outcome(found)
    assert outcome["failed"] is True and outcome["changed"] is False
    assert outcome["msg"] == ("drift since the last apply: resume argv stale: "
                              "claude --resume x -> claude -c")
    assert outcome["findings"] == [{"check": "resume argv stale", "before": "claude --resume x",
                                    "after": "claude -c"}]
    assert outcome["diff"][0]["before"] == "claude --resume x\n"
    clean = module.drift_outcome(findings_json([]))
    assert clean["failed"] is False and clean["msg"] == "no drift since the last apply"


def test_accept_outcome_names_the_failed_lines_with_their_evidence(module: ModuleType) -> None:
    from provision.accept import Checklist

    report = Checklist("box")
    report.add("transcripts > 0", True, {"count": 2})
    report.add("MCP lists 7 tools", False, {"tools": 0})
    outcome = module.accept_outcome(json.loads(json.dumps(report.to_dict(), default=str)))
    assert outcome["failed"] is True
    assert outcome["msg"] == 'accept failed on box: MCP lists 7 tools: {"tools": 0}'


def test_restart_is_passed_only_when_asked_and_only_to_apply(module: ModuleType) -> None:
    assert module.tl_argv("/p/tl-provision", "apply", "/h.yml") == \
        ["/p/tl-provision", "apply", "/h.yml", "--json"]
    assert module.tl_argv("tl", "apply", "/h.yml", restart_claude=True)[-1] == "--restart-claude"
    assert module.tl_argv("tl", "apply", "/h.yml", check=True, restart_claude=True) == \
        ["tl", "apply", "/h.yml", "--json", "--check", "--restart-claude"]
    assert module.tl_argv("tl", "drift", "/h.yml", check=True, restart_claude=True) == \
        ["tl", "drift", "/h.yml", "--json"]
    assert module.tl_argv("tl", "accept", "/h.yml", drill=True)[-1] == "--drill"


def test_check_mode_on_a_staged_profile_names_the_real_one_to_apply_only(
        module: ModuleType) -> None:
    assert module.tl_argv("tl", "apply", "/tmp/host-x.yml", check=True, source="/h.yml") == \
        ["tl", "apply", "/tmp/host-x.yml", "--json", "--check", "--profile-source", "/h.yml"]
    assert "--profile-source" not in module.tl_argv("tl", "apply", "/h.yml", source="/h.yml")
    assert "--profile-source" not in module.tl_argv("tl", "drift", "/t.yml", source="/h.yml")


def test_profile_text_is_the_same_for_equal_mappings(module: ModuleType) -> None:
    assert module.profile_text({"b": 1, "a": {"d": 2, "c": 3}}) == \
        module.profile_text({"a": {"c": 3, "d": 2}, "b": 1})


def test_ansible_doc_renders_the_module_documentation_from_the_built_collection(
        installed_collection: tuple[Path, dict[str, str]]) -> None:
    _, env = installed_collection
    done = subprocess.run([_ansible_bin("ansible-doc"), "threadline.companion.provision"],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    for text in ("> MODULE threadline.companion.provision", "OPTIONS", "= profile_path",
                 "restart_claude", "check_mode", "EXAMPLES:", "RETURN VALUES:", "findings"):
        assert text in done.stdout, text
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    listed = subprocess.run([_ansible_bin("ansible-doc"), "-t", "role", "-l",
                             "threadline.companion"], capture_output=True, text=True, env=env,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert listed.returncode == 0 and "companion" in listed.stdout, listed.stderr
