"""runtime.switch.activation on real processes: activated on positive evidence, then the watch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from runtime.procfs import descendants
from runtime.switch import activation
from tests.fixtures.process_door import CHANNEL, Launcher, ProcessDoor, start, want
from tests.fixtures.standin_claude import sleeper_argv
from tests.fixtures.tmux import wait_for

NEVER = 600.0  # a timeout no verdict below may wait for (pytest's own timeout is 300 s)


def config_dir(workdir: Path) -> Path:
    return workdir.parent / "claude config"  # where start() puts the stand-in's CLAUDE_CONFIG_DIR


def test_a_claude_with_every_piece_of_evidence_is_activated_with_it_recorded(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("a")})
    report = activation.activate(ProcessDoor(proc), want(sid, workdir, channel_servers=(
        "companion",)), config_dir(workdir), stable=0.3, timeout=NEVER)
    assert report.ok, report.reason
    assert report.reason == "healthy"
    evidence = report.evidence
    assert evidence["pid"] == proc.pid and evidence["cwd"] == str(workdir)
    assert evidence["session_record"] == sid  # claude's own sessions/<pid>.json
    assert evidence["missing_channel_flags"] == []
    assert evidence["channel_servers"]["companion"]["pids"] == descendants(proc.pid)
    marks = evidence["seen_after_s"]  # when each piece of evidence was first seen
    assert {"exec", "session_record", "channel_servers", "ready"} <= set(marks)
    assert marks["ready"] == max(marks.values()) <= evidence["judged_after_s"]


def test_a_server_that_starts_late_is_waited_for(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("l")},
                  STANDIN_SERVER_DELAY="1.0")
    assert not descendants(proc.pid)  # not there at the first look
    report = activation.activate(ProcessDoor(proc), want(sid, workdir, channel_servers=(
        "companion",)), config_dir(workdir), stable=0.2, timeout=NEVER)
    assert report.ok, report.reason
    assert report.evidence["channel_servers"]["companion"]["pids"] == descendants(proc.pid)


def test_a_deaf_process_is_refused_without_waiting_for_the_timeout(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid])
    report = activation.activate(ProcessDoor(proc), want(sid, workdir), config_dir(workdir),
                                 stable=0.2, timeout=NEVER)
    assert not report.ok
    assert report.reason.startswith("missing channel flag(s) "), report.reason
    assert f"after {NEVER:g}s" not in report.reason  # a verdict, not a timeout
    assert report.evidence["missing_channel_flags"] == [
        "--dangerously-load-development-channels server:companion"]


def test_a_server_that_is_not_registered_is_a_verdict(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    report = activation.activate(ProcessDoor(proc), want(sid, workdir, channel_servers=(
        "telegram",)), config_dir(workdir), stable=0.2, timeout=NEVER)
    assert not report.ok
    assert "channel server(s) not running: telegram ('telegram' is not a stdio server " \
           "registered in" in report.reason


def test_a_server_that_exits_after_starting_is_a_verdict(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    crashing = [sys.executable, "-c", "import time; time.sleep(0.4)", "--role", "channel"]
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": crashing})
    wait_for(lambda: descendants(proc.pid), what="the server to start")
    # it dies within the stability window (a later death is the watch's: see below)
    report = activation.activate(ProcessDoor(proc), want(sid, workdir, channel_servers=(
        "companion",)), config_dir(workdir), stable=2.0, timeout=NEVER)
    assert not report.ok and "then exited" in report.reason, report.reason
    assert f"after {NEVER:g}s" not in report.reason


def test_evidence_still_missing_at_the_timeout_says_what_is_missing(
    session: tuple[Path, str], claude: Launcher, tmp_path: Path
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    elsewhere = tmp_path / "another config dir"  # no record of this claude there
    report = activation.activate(ProcessDoor(proc), want(sid, workdir), elsewhere, stable=0.1,
                                 timeout=1.0)
    assert not report.ok
    assert f"claude pid {proc.pid} wrote no session record" in report.reason
    assert report.reason.endswith("(after 1s)")


def test_a_process_that_exits_with_no_conversation_found_is_not_activated(
    session: tuple[Path, str]
) -> None:
    workdir, _ = session
    proc = start(workdir, ["--resume", "no-such-session", *CHANNEL])
    proc.wait(timeout=20)
    report = activation.activate(ProcessDoor(proc), want("no-such-session", workdir),
                                 config_dir(workdir), stable=0.2, timeout=NEVER)
    assert not report.ok and "gone" in report.reason


def test_the_watch_holds_for_a_claude_that_stays_alive_with_its_servers(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("w")})
    wait_for(lambda: descendants(proc.pid), what="the server")
    seen = activation.watch(ProcessDoor(proc), str(proc.pid), proc.pid, want(
        sid, workdir, channel_servers=("companion",)), seconds=0.6, stable=0.2,
        ours=lambda: True)
    assert seen.outcome == activation.HELD, seen
    assert seen.evidence["channel_servers"]["companion"]["status"] == "running"


def test_the_watch_fails_when_the_activated_claude_dies(
    session: tuple[Path, str]
) -> None:
    workdir, sid = session
    proc = start(workdir, ["--resume", sid, *CHANNEL])
    door = ProcessDoor(proc)
    identity = door.identity()
    proc.send_signal(signal.SIGTERM)  # the stand-in exits like a crashed claude
    proc.wait(timeout=20)
    seen = activation.watch(door, identity, proc.pid, want(sid, workdir), seconds=NEVER,
                            stable=0.2, ours=lambda: True)
    assert seen.outcome == activation.FAILED and "gone" in seen.reason, seen


def test_the_watch_fails_when_a_channel_server_is_lost(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL], servers={"companion": sleeper_argv("k")})
    [server] = wait_for(lambda: descendants(proc.pid), what="the server")  # type: ignore[misc]
    looks = {"n": 0}

    def ours() -> bool:  # the server dies after the watch has seen it run
        looks["n"] += 1
        if looks["n"] == 3:
            os.kill(server, signal.SIGKILL)
        return True

    seen = activation.watch(ProcessDoor(proc), str(proc.pid), proc.pid, want(
        sid, workdir, channel_servers=("companion",)), seconds=NEVER, stable=0.2, ours=ours)
    assert seen.outcome == activation.FAILED, seen
    assert seen.reason == (f"channel server(s) not running: companion (started as pid "
                           f"{server}, then exited)")


def test_the_watch_leaves_a_third_partys_process_alone_and_says_so(
    session: tuple[Path, str], children: list[subprocess.Popen[bytes]], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    door = ProcessDoor(proc)
    identity = door.identity()
    other = subprocess.Popen(["sleep", "600"])
    children.append(other)  # type: ignore[arg-type]
    door.process = other  # someone else's process now runs in the target
    seen = activation.watch(door, identity, proc.pid, want(sid, workdir), seconds=NEVER,
                            stable=0.2, ours=lambda: True)
    assert seen.outcome == activation.REPLACED and seen.evidence["identity"] == str(other.pid)
    assert proc.poll() is None and other.poll() is None  # nothing was killed


def test_the_watch_ends_when_the_operation_left_activated(
    session: tuple[Path, str], claude: Launcher
) -> None:
    workdir, sid = session
    proc = claude(["--resume", sid, *CHANNEL])
    seen = activation.watch(ProcessDoor(proc), str(proc.pid), proc.pid, want(sid, workdir),
                            seconds=NEVER, stable=0.2, ours=lambda: False)
    assert seen.outcome == activation.SUPERSEDED
