"""The health check (SPEC §4.4) on real processes, and the /proc parsers behind it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.agents.claude import channel_flags
from runtime.procfs import cmdline, descendants
from runtime.switch import health
from tests.fixtures.process_door import CHANNEL, Launcher, ProcessDoor, start, want
from tests.fixtures.standin_claude import (
    register_server,
    sleeper_argv,
)
from tests.fixtures.tmux import wait_for


def test_a_live_process_with_session_flags_cwd_and_servers_is_healthy(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("a")})
    wait_for(lambda: descendants(proc.pid), what="channel server child")
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",)))
    assert report.ok, report.reason
    assert report.evidence["pid"] == proc.pid and report.evidence["cwd"] == str(workdir)
    assert report.evidence["channel_servers"]["companion"]["pids"] == descendants(proc.pid)


def test_a_missing_channel_flag_is_the_deaf_process_and_unhealthy(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid])
    report = health.check(ProcessDoor(proc), want(sid, workdir))
    assert not report.ok and "missing channel flag" in report.reason
    assert report.evidence["missing_channel_flags"] == list(channel_flags(CHANNEL))


Mismatch = Callable[[str, Path, "subprocess.Popen[bytes]"], health.Expectation]


@pytest.mark.parametrize(("expect", "screen", "reasons"), [
    pytest.param(lambda sid, workdir, proc: want("other-session", workdir.parent), "",
                 ("does not hold session 'other-session'", "cwd is"),
                 id="a_wrong_cwd_or_session_is_unhealthy"),
    pytest.param(lambda sid, workdir, proc: want(sid, workdir),
                 "No conversation found with session ID: x", ("No conversation found",),
                 id="no_conversation_found_on_screen_is_unhealthy_even_while_alive"),
    pytest.param(lambda sid, workdir, proc: want(sid, workdir, previous_identity=str(proc.pid)),
                 "", ("not replaced",), id="an_unreplaced_process_is_not_healthy"),
    pytest.param(lambda sid, workdir, proc: want(sid, workdir, channel_servers=("telegram",)),
                 "", ("not running: telegram ('telegram' is not a stdio server registered in",),
                 id="an_expected_channel_server_that_is_not_running_is_unhealthy"),
])
def test_a_live_claude_with_its_channel_flags_is_unhealthy_where_the_expectation_differs(
    session: tuple[Path, str], claude: Launcher, expect: Mismatch, screen: str,
    reasons: tuple[str, ...],
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    report = health.check(ProcessDoor(proc, output=screen), expect(sid, workdir, proc))
    assert not report.ok
    for reason in reasons:
        assert reason in report.reason


def test_a_process_that_exits_with_no_conversation_found_is_unhealthy(
    session: tuple[Path, str], tmp_path: Path
) -> None:
    workdir, _ = session
    proc = start(workdir, ["--resume", "no-such-session", *CHANNEL])
    proc.wait(timeout=20)
    report = health.check(ProcessDoor(proc), want("no-such-session", workdir))
    assert not report.ok and "gone" in report.reason


def test_a_server_whose_argv_lacks_its_name_is_recognised_by_its_registration(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    server = sleeper_argv("x1")
    assert not any("companion" in token for token in server)  # the incident's shape
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": server})
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",)))
    assert report.ok, report.reason
    found = report.evidence["channel_servers"]["companion"]
    assert found["status"] == "running" and found["servers"][0]["argv"] == server
    assert report.evidence["channel_config"]["claude_json"].endswith("/.claude.json")


def test_a_process_that_only_mentions_the_name_or_runs_outside_claude_does_not_count(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]], claude: Launcher,
    tmp_path: Path,
) -> None:
    workdir, sid = session
    registered = [sys.executable, "-c", "import time; time.sleep(60)", "--role", "channel"]
    outside = subprocess.Popen(registered)  # the registered argv, but not under the new claude
    children.append(outside)  # type: ignore[arg-type]
    proc = start(workdir, ["--resume", sid, *CHANNEL], servers={
        "companion": [str(tmp_path / "missing" / "server"), "--role", "channel"],
        "helper": sleeper_argv("companion")})  # mentions the name in its argv
    children.append(proc)
    wait_for(lambda: descendants(proc.pid), what="the helper server")
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",)))
    assert not report.ok and "channel server(s) not running: companion" in report.reason
    assert report.evidence["channel_servers"]["companion"]["pids"] == []


def test_a_server_that_exits_after_starting_is_caught(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    crashing = [sys.executable, "-c", "import time; time.sleep(0.4)", "--role", "channel"]
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": crashing})
    wait_for(lambda: descendants(proc.pid), what="the server to start")
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",),
                                                  window=1.5))
    assert not report.ok and "then exited" in report.reason


def test_channels_ready_waits_for_a_server_that_starts_late(
    session: tuple[Path, str], claude: Launcher
) -> None:
    _, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("l")},
                  STANDIN_SERVER_DELAY="1.0")
    assert not descendants(proc.pid)  # not there at the first look
    report = health.channels_ready(proc.pid, ("server:companion",), window=20)
    assert report.ok, report.reason
    assert report.evidence["channel_servers"]["server:companion"]["pids"] == descendants(proc.pid)


def test_channels_ready_names_what_is_missing_when_the_window_ends(
    session: tuple[Path, str], claude: Launcher
) -> None:
    _, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    report = health.channels_ready(proc.pid, ("companion", "plugin:tg@mkt"), window=0.5)
    assert not report.ok
    assert "not running: companion" in report.reason
    assert "plugin:tg@mkt not verifiable: plugin 'tg@mkt' has no installPath" in report.reason


def test_a_plugin_channel_that_cannot_be_checked_is_named_not_verifiable_and_does_not_fail(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("v")})
    report = health.check(ProcessDoor(proc), want(sid, workdir, window=1.0, channel_servers=(
        "companion", "plugin:tg@mkt")))
    assert report.ok, report.reason
    assert report.reason == ("healthy; plugin:tg@mkt not verifiable: plugin 'tg@mkt' has no "
                             "installPath in " + repr(str(workdir.parent / "claude config" /
                                                          "plugins" / "installed_plugins.json")))
    assert report.evidence["channel_servers"]["plugin:tg@mkt"]["status"] == "not_verifiable"


def test_the_local_scope_registration_of_the_workdir_is_the_one_recognised(
    session: tuple[Path, str], claude: Launcher
) -> None:
    import json

    workdir, sid = session
    claude_json = workdir.parent / "claude config" / ".claude.json"
    register_server(claude_json, "companion", sleeper_argv("user-scope"))
    data = json.loads(claude_json.read_text())
    local = {"type": "stdio", "command": sys.executable,
             "args": ["-c", "import time; time.sleep(60)", "--instance", "local-scope"],
             "env": {"ROLE": "companion-local"}}
    data["projects"] = {str(workdir): {"mcpServers": {"companion": local}}}
    claude_json.write_text(json.dumps(data))
    proc = claude(["--resume", sid, *CHANNEL])
    wait_for(lambda: descendants(proc.pid), what="the server")
    report = health.check(ProcessDoor(proc), want(sid, workdir, channel_servers=("companion",)))
    assert report.ok, report.reason
    found = report.evidence["channel_servers"]["companion"]
    assert found["servers"][0]["scope"] == "local"
    assert found["servers"][0]["env_names"] == ["ROLE"]  # names only, never values
    assert "companion-local" not in json.dumps(report.evidence)
    [pid] = found["pids"]
    assert "local-scope" in (cmdline(pid) or ())


def test_a_process_read_right_after_its_start_is_judged_by_its_own_environment(
        tmp_path: Path) -> None:
    """/proc/PID/environ can read empty between fork and exec: never fall back to HOME then."""
    from runtime.channels import running as servers

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "config dir")}
    for _ in range(40):  # an empty read happened about once in three starts (measured)
        started = subprocess.Popen(["sleep", "30"], env=env)
        try:
            found, source = servers.claude_environment(started.pid)
        finally:
            started.kill()
            started.wait(timeout=10)
        assert source == "process" and found.get("CLAUDE_CONFIG_DIR") == env["CLAUDE_CONFIG_DIR"]
