"""The StopHook task: settings.json read through the host, the plan, the atomic write, the re-read,
and the persistence check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.errors import SettingsError
from provision.parsers.settings import dump_settings, parse_settings
from tests.provision.parsers.test_settings import RICH

# ---- the StopHook task: facts through the host, plan, atomic write, re-read ----

def _profile(home: str, prefix: str, timeout: int = 10):
    from provision.profile import profile_from_mapping

    return profile_from_mapping({
        "host": "test", "claude": {"user": "claude", "home": home},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
        "install": {"config_path": "/etc/threadline/config.toml", "state_dir": "/var/lib/tl",
                    "prefix": prefix},
        "hook": {"timeout": timeout},
    })


def _prefix(tmp_path: Path) -> Path:
    """An install prefix whose ``bin/tl-rebuild`` exists and is executable."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "tl-rebuild").write_text("#!/bin/sh\n")
    (prefix / "bin" / "tl-rebuild").chmod(0o755)
    return prefix


def _apply(task, host, ctx):
    """What the engine does for one task: facts → plan → execute → re-read → plan again."""
    facts = task.facts(host, ctx)
    actions = task.plan(facts, ctx)
    notes = [action.execute(host) for action in actions]
    after = task.plan(task.facts(host, ctx), ctx)
    assert after == [], "the task still differs after its actions ran"
    return facts, actions, notes


@pytest.fixture
def fake():
    from tests.fakes import FakeHost

    host = FakeHost(files={"/opt/tl/bin/tl-rebuild": b"#!/bin/sh\n"},
                    executables={"/opt/tl/bin/tl-rebuild"}, dirs={"/home/claude": 0o750})
    host.add_command(["id", "-u"], "0\n")  # FakeHost's stat says uid 0 for everything
    from provision.result import Context

    return host, Context(profile=_profile("/home/claude", "/opt/tl"))


SETTINGS = "/home/claude/.claude/settings.json"
WANTED = {"type": "command",
          "command": "/opt/tl/bin/tl-rebuild hook-stop --config /etc/threadline/config.toml",
          "timeout": 10}


def test_task_adds_the_hook_to_a_rich_file_and_a_second_run_plans_nothing(fake):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = dump_settings(RICH)
    host.modes[SETTINGS] = 0o640
    facts, actions, notes = _apply(StopHook(), host, ctx)
    assert [a.summary for a in actions] == [f"add the Stop hook to {SETTINGS}"]
    assert notes == [f"backup {SETTINGS}.bak~"]
    assert host.files[f"{SETTINGS}.bak~"] == dump_settings(RICH)
    assert host.modes[SETTINGS] == 0o640
    expected = json.loads(json.dumps(RICH))
    expected["hooks"]["Stop"].append({"hooks": [WANTED]})
    assert parse_settings(host.files[SETTINGS]) == expected
    diff = StopHook().diff(facts, actions)
    assert "hooks.Stop" in diff and "statusLine" not in diff
    again = StopHook().facts(host, ctx)
    assert StopHook().plan(again, ctx) == []
    assert StopHook().ok_message(again, ctx) == f"Stop hook already present in {SETTINGS}"


def test_task_creates_a_missing_settings_file_with_mode_0600(fake):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    _, actions, notes = _apply(StopHook(), host, ctx)
    assert notes == [None]
    assert host.modes[SETTINGS] == 0o600
    assert parse_settings(host.files[SETTINGS]) == {"hooks": {"Stop": [{"hooks": [WANTED]}]}}


@pytest.mark.parametrize("raw", [b"", b"\xef\xbb\xbf{}", b'{// x\n}', b"[]", b"{"])
def test_task_fails_on_a_malformed_file_and_leaves_it_untouched(fake, raw):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = raw
    task = StopHook()
    facts = task.facts(host, ctx)
    with pytest.raises(SettingsError, match=SETTINGS):
        task.plan(facts, ctx)
    assert host.files[SETTINGS] == raw and host.written == []


def test_task_upgrades_a_changed_timeout_in_place(fake):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    old = dict(WANTED, timeout=3, command="/old/bin/tl-rebuild hook-stop")
    host.files[SETTINGS] = dump_settings({"hooks": {"Stop": [{"hooks": [old]}]}})
    _, actions, _ = _apply(StopHook(), host, ctx)
    assert actions[0].summary == (f"update the Stop hook in place (command, timeout) in {SETTINGS}")
    assert parse_settings(host.files[SETTINGS]) == {"hooks": {"Stop": [{"hooks": [WANTED]}]}}


def test_disabling_removes_only_our_hook(fake):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = dump_settings(RICH)
    _apply(StopHook(), host, ctx)
    _, actions, _ = _apply(StopHook(present=False), host, ctx)
    assert actions[0].summary == f"remove 1 Stop hook(s) from {SETTINGS}"
    assert parse_settings(host.files[SETTINGS]) == RICH


def test_disable_all_hooks_is_reported_as_a_warning(fake):
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = dump_settings({"disableAllHooks": True})
    task = StopHook()
    notes = task.details(task.facts(host, ctx), ctx)
    assert notes[0] == "warning: disableAllHooks is true in the user settings"
    assert notes[1].startswith("a running claude reads hooks at start: restart it")
    _apply(task, host, ctx)
    assert task.details(task.facts(host, ctx), ctx) == [notes[0]]


def test_real_file_is_replaced_atomically_keeping_its_mode_with_a_backup(tmp_path):
    from provision.host import LocalHost
    from provision.result import Context
    from provision.tasks.settings import StopHook

    prefix = _prefix(tmp_path)
    script = prefix / "bin" / "tl-rebuild"
    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = (b'{\n    "model": "opus",\n    "hooks": {"Stop": [{"matcher": "", "hooks": '
                b'[{"type": "command", "command": "notify-send done"}]}]}\n}')
    settings.write_bytes(original)
    settings.chmod(0o604)
    ctx = Context(profile=_profile(str(home), str(prefix), timeout=15))
    host = LocalHost()
    _, actions, notes = _apply(StopHook(), host, ctx)
    assert len(actions) == 1
    assert settings.stat().st_mode & 0o777 == 0o604
    backup = notes[0].removeprefix("backup ")
    assert open(backup, "rb").read() == original
    doc = parse_settings(settings.read_bytes())
    assert doc["model"] == "opus"
    assert doc["hooks"]["Stop"][0] == {"matcher": "", "hooks": [
        {"type": "command", "command": "notify-send done"}]}
    assert doc["hooks"]["Stop"][1]["hooks"][0]["command"] == (
        f"{script} hook-stop --config /etc/threadline/config.toml")
    assert doc["hooks"]["Stop"][1]["hooks"][0]["timeout"] == 15
    assert settings.read_text().endswith("}\n")
    leftovers = [p.name for p in settings.parent.iterdir() if p.name.startswith(".settings")]
    assert leftovers == []


# ---- through the engine, and the persistence check ----

def test_engine_reports_changed_then_ok_and_check_mode_writes_nothing(fake):
    from provision.engine import run_task
    from provision.result import Status
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = dump_settings(RICH)
    ctx.check = True
    checked = run_task(StopHook(), host, ctx)
    assert checked.status is Status.CHANGED
    assert checked.message == f"would add the Stop hook to {SETTINGS}"
    assert host.written == []
    ctx.check = False
    first = run_task(StopHook(), host, ctx)
    assert (first.status, first.message) == (Status.CHANGED, f"add the Stop hook to {SETTINGS}")
    assert "+++ after: " + SETTINGS + " hooks.Stop" in first.diff
    second = run_task(StopHook(), host, ctx)
    assert (second.status, second.message) == (
        Status.OK, f"Stop hook already present in {SETTINGS}")


def test_engine_fails_a_malformed_file_with_the_one_line_reason(fake):
    from provision.engine import run_task
    from provision.result import Status
    from provision.tasks.settings import StopHook

    host, ctx = fake
    host.files[SETTINGS] = b'{"a": 1, // note\n}'
    result = run_task(StopHook(), host, ctx)
    assert result.status is Status.FAILED
    assert result.message == (f"settings file '{SETTINGS}' contains a comment (JSONC) at line 1 "
                              "column 10; only strict JSON can be merged")
    assert host.written == []


def test_persistence_check_fails_when_a_session_rewrote_the_file_without_our_hook(fake):
    from provision.tasks.settings import StopHook, StopHookPersists

    host, ctx = fake
    _apply(StopHook(), host, ctx)
    pauses = []
    check = StopHookPersists(pause=2.0, sleep=pauses.append)
    facts = check.facts(host, ctx)
    assert check.plan(facts, ctx) == [] and pauses == [2.0]
    assert check.ok_message(facts, ctx) == f"Stop hook still present in {SETTINGS} after 2s"
    host.files[SETTINGS] = dump_settings({"env": {}, "statusLine": {"type": "command"}})
    with pytest.raises(SettingsError, match="Stop hook missing from .* 2s after apply"):
        check.plan(check.facts(host, ctx), ctx)
    host.files[SETTINGS] = dump_settings({"hooks": {"Stop": [{"hooks": [dict(WANTED,
                                                                              timeout=1)]}]}})
    with pytest.raises(SettingsError, match=r"altered 2s after apply \(timeout\)"):
        check.plan(check.facts(host, ctx), ctx)


def test_persistence_check_is_skipped_when_check_mode_did_not_write_the_hook(fake):
    from provision.engine import run
    from provision.result import Status
    from provision.tasks.settings import StopHook, StopHookPersists

    host, ctx = fake
    ctx.check = True
    report = run([StopHook(), StopHookPersists(sleep=lambda _: None)], host, ctx)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.SKIPPED]
    assert report.results[1].message == (
        "Stop hook not in settings.json in this run; nothing to re-read")
    ctx.check, ctx.facts = False, {}
    report = run([StopHook(), StopHookPersists(sleep=lambda _: None)], host, ctx)
    assert [r.status for r in report.results] == [Status.CHANGED, Status.OK]


def test_root_replacing_the_claude_users_file_keeps_its_owner(tmp_path):
    import os

    from provision.host import LocalHost
    from provision.result import Context
    from provision.tasks.settings import StopHook

    if os.geteuid() != 0:
        pytest.skip("needs root to hand the file to another user (the root → claude-user case)")
    prefix = _prefix(tmp_path)
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"model": "opus"}\n')
    settings.chmod(0o600)
    os.chown(settings, 65534, 65534)
    ctx = Context(profile=_profile(str(tmp_path / "home"), str(prefix)))
    _, _, notes = _apply(StopHook(), LocalHost(), ctx)
    st = settings.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65534, 65534, 0o600)
    backup = os.stat(notes[0].removeprefix("backup "))
    assert (backup.st_uid, backup.st_mode & 0o777) == (65534, 0o600)


def test_a_new_file_and_claude_dir_are_given_to_the_owner_of_the_claude_home(tmp_path):
    import os

    from provision.host import LocalHost
    from provision.result import Context
    from provision.tasks.settings import StopHook

    if os.geteuid() != 0:
        pytest.skip("needs root to create files for another user (the root → claude-user case)")
    prefix = _prefix(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    ctx = Context(profile=_profile(str(home), str(prefix)))
    _, actions, _ = _apply(StopHook(), LocalHost(), ctx)
    claude_dir, settings = home / ".claude", home / ".claude" / "settings.json"
    assert actions[1].summary == f"chown 65534:65534 {claude_dir} {settings}"
    for path in (claude_dir, settings):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)
    assert settings.stat().st_mode & 0o777 == 0o600
