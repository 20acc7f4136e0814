"""Scenario 5: the pointer door with a ``claude -p --resume`` runner loop and the real CLI.

The runner (a shell script, like the rendered tl-runner plus the hook call the pointer profile
asks for) resumes the session named in the pointer file, then runs ``tl-rebuild hook-stop``.
The model (the fake API) calls ``thread_rebuild_request`` through the real ``tl-rebuild mcp``
registered with ``claude mcp add``; the hook between calls builds the candidate and points the
pointer at it. The next call must run the new session, and its first request must carry every
utterance said before — and none of the tool output.

The second test installs the pointer door the operator's way (a real ``tl-provision apply`` of
a pointer profile, which also puts the Stop hook into settings.json) and drives the rendered
``tl-runner``: the Stop hook inside ``claude -p`` must only defer, and the runner's payload-less
``hook-stop`` between calls switches.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.e2e.fake_api import Cue, FakeApi
from tests.e2e.harness import NO_CONVERSATION, Machine, prepare_machine, register_mcp

pytestmark = [pytest.mark.real_claude]

TL_REBUILD = Path(sys.executable).with_name("tl-rebuild")
RUNNER = """#!/bin/sh
# One call of the runner loop (pointer door): resume the pointer's session, then the hook.
set -eu
cd {workdir}
session=$(head -n 1 {pointer})
{claude} -p --resume "$session" "$1"
{tl_rebuild} hook-stop --config {config} < /dev/null
"""


def write_config(machine: Machine, root: Path) -> Path:
    config = root / "threadline.toml"
    resume = [str(machine.claude), "-p", "--resume", "{session_id}"]
    config.write_text("\n".join([
        f"project_dir = {json.dumps(str(machine.project_dir))}",
        f"workdir = {json.dumps(str(machine.workdir))}",
        f"state_dir = {json.dumps(str(root / 'state'))}",
        "[switch]",
        'door = "pointer"',
        f"resume_argv = {json.dumps(resume)}",
        "healthcheck_seconds = 1.0",
        "stable_seconds = 0.3",
        "stable_timeout_seconds = 30.0",
        "[switch.pointer]",
        f"path = {json.dumps(str(root / 'pointer'))}",
    ]) + "\n")
    return config


class Runner:
    """The runner loop of a pointer-door deployment, one call at a time."""

    def __init__(self, machine: Machine, root: Path, config: Path) -> None:
        self.machine, self.pointer, self.config = machine, root / "pointer", config
        self.script = root / "runner.sh"
        self.script.write_text(RUNNER.format(
            workdir=shlex.quote(str(machine.workdir)), pointer=shlex.quote(str(self.pointer)),
            claude=shlex.quote(str(machine.claude)), tl_rebuild=shlex.quote(str(TL_REBUILD)),
            config=shlex.quote(str(config))))
        self.script.chmod(0o700)

    def call(self, message: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.script), message], env=self.machine.env,
                              capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
        assert done.returncode == 0, done.stderr
        return done

    def session(self) -> str:
        return self.pointer.read_text().strip()


def tl(config: Path, *args: str) -> dict:
    done = subprocess.run([str(TL_REBUILD), *args, "--config", str(config), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_runner_next_call_resumes_the_rebuilt_session_with_every_utterance(
        tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> None:
    machine = prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, channel=False,
                              recording_hook=False)
    config = write_config(machine, tmp_path)
    register_mcp(machine, "threadline", [str(TL_REBUILD), "mcp", "--config", str(config)])
    tool_marker = f"TOOLOUT-{uuid.uuid4().hex[:8]}"
    fake_api.add_cue(Cue("RUN-BIG", "Bash", {
        "command": f"python3 -c \"print('{tool_marker} ' + 'y' * 30000)\"",
        "description": "a big output"}, after_text="big output seen"))
    fake_api.add_cue(Cue("PLEASE-REBUILD", "mcp__threadline__thread_rebuild_request",
                         {"reason": "tool noise", "confirmation": "REBUILD"},
                         after_text="rebuild registered; it happens after this turn"))
    said = [f"first-{uuid.uuid4().hex[:6]}", f"second RUN-BIG {uuid.uuid4().hex[:6]}",
            f"third PLEASE-REBUILD {uuid.uuid4().hex[:6]}"]
    first = machine.run_claude(["-p", said[0]], timeout=120)
    assert first.returncode == 0, first.stderr
    old_session = fake_api.wait_for_text(said[0]).session_id
    (tmp_path / "pointer").write_text(old_session + "\n")
    runner = Runner(machine, tmp_path, config)

    runner.call(said[1])
    runner.call(said[2])

    status = tl(config, "status")
    assert status["state"] == "activated", status
    assert status["bound_session_id"] == old_session  # bound by tl-rebuild mcp under claude -p
    assert [r["source"] for r in status["reasons"]] == ["mcp"]
    new_session = runner.session()
    assert new_session != old_session
    old_bytes = machine.transcript(old_session).read_bytes()
    last = f"after-{uuid.uuid4().hex[:6]}"
    start = fake_api.last_index
    runner.call(last)
    request = fake_api.wait_for_text(last, after=start, timeout=30)
    assert request.session_id == new_session
    seen = request.joined()
    for text in said + ["big output seen", "rebuild registered; it happens after this turn"]:
        assert text in seen, text
    assert tool_marker not in seen
    assert machine.transcript(old_session).read_bytes() == old_bytes
    assert last in machine.transcript(new_session).read_text()


def install_pointer(machine: Machine, root: Path) -> tuple[Path, Path]:
    """A runner script with one claude line, then a real apply of a pointer-door profile.

    Returns the config path and the rendered ``tl-runner`` the loop calls instead of claude.
    """
    import os
    import pwd

    import yaml

    from provision import engine
    from provision.cli import apply_tasks
    from provision.host import LocalHost
    from provision.profile import load_profile
    from provision.result import Context

    root.mkdir(parents=True)
    runner = root / "run-claude-loop.sh"
    runner.write_text(f"#!/bin/sh\ncd {shlex.quote(str(machine.workdir))}\n"
                      f"{shlex.quote(str(machine.claude))} -p --continue\n")
    runner.chmod(0o700)
    profile = {
        "host": "e2e-runner", "connection": "local",
        "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(machine.home),
                   "binary": str(machine.claude), "workdir": str(machine.workdir)},
        "door": {"kind": "pointer", "pointer": {"path": str(root / "state" / "pointer"),
                                                "runner": str(runner)}},
        "install": {"config_path": str(root / "etc" / "config.toml"),
                    "state_dir": str(root / "state")},
    }
    path = root / "host.yml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    loaded = load_profile(path)
    report = engine.run(apply_tasks(), LocalHost(loaded.host), Context(loaded))
    assert report.exit_code == 0, [(r.task, r.message) for r in report.results
                                   if r.status == "failed"]
    return root / "etc" / "config.toml", root / "state" / "bin" / "tl-runner"


def test_rendered_runner_from_a_real_apply_switches_on_the_stop_hook_of_claude_p(
        tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> None:
    machine = prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, channel=False,
                              recording_hook=False)
    fake_api.add_cue(Cue("PLEASE-REBUILD", "mcp__threadline__thread_rebuild_request",
                         {"reason": "tool noise", "confirmation": "REBUILD"},
                         after_text="rebuild registered; it happens after this turn"))
    first = machine.run_claude(["-p", "the first words"], timeout=120)
    assert first.returncode == 0, first.stderr
    old_session = fake_api.wait_for_text("the first words").session_id
    config, tl_runner = install_pointer(machine, tmp_path / "install")
    assert tl_runner.exists()

    def call(message: str) -> None:
        done = subprocess.run([str(tl_runner), message], env=machine.env, capture_output=True,
                              text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert done.returncode == 0 and NO_CONVERSATION not in done.stderr, done.stderr
        hook = subprocess.run([str(TL_REBUILD), "hook-stop", "--config", str(config)],
                              env=machine.env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)  # what the runner must run after a call
        assert hook.returncode == 0, hook.stderr

    call("second words")
    call("please PLEASE-REBUILD now")
    status = tl(config, "status")

    assert status["state"] == "activated", status
    # The Stop hook apply put in settings.json ran inside claude -p and left the switch to
    # the runner's hook-stop (running the worker there would wait for claude: a deadlock).
    phases = [e["phase"] for e in status["events"]]
    assert "stop_deferred" in phases and phases.index("stop_deferred") < phases.index(
        "scheduled"), phases
    assert status["bound_session_id"] == old_session
    new_session = status["facts"]["new_session_id"]
    start = fake_api.last_index
    call("after the switch")
    request = fake_api.wait_for_text("after the switch", after=start, timeout=30)
    assert request.session_id == new_session
    for text in ("the first words", "second words", "please PLEASE-REBUILD now",
                 "rebuild registered; it happens after this turn"):
        assert text in request.joined(), text


def test_drill_of_a_pointer_deployment_switches_a_scratch_pointer_through_the_runner_hook(
        tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> None:
    """``accept --drill`` drills the pointer door itself: a scratch pointer, the runner's hook."""
    from provision.accept import PASS, run_accept
    from provision.host import LocalHost
    from provision.profile import load_profile

    machine = prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, channel=False,
                              recording_hook=False)
    first = machine.run_claude(["-p", "the first words"], timeout=120)
    assert first.returncode == 0, first.stderr
    _config, _runner = install_pointer(machine, tmp_path / "install")
    real_pointer = tmp_path / "install" / "state" / "pointer"
    before = real_pointer.read_bytes() if real_pointer.exists() else None
    transcripts = {p: p.read_bytes() for p in machine.transcripts()}
    requests = fake_api.last_index
    profile = load_profile(tmp_path / "install" / "host.yml")

    report = run_accept(profile, LocalHost(profile.host), drill=True, pause=0.0)

    drill = {line.name: line for line in report.lines if line.stage == "drill"}
    for name in ("drill scratch ready", "drill activated", "drill pointer names the new session",
                 "drill old transcript byte-identical", "drill backup present",
                 "drill timeline complete", "drill no orphans"):
        assert drill[name].status == PASS, (name, drill[name].evidence)
    assert drill["drill scratch ready"].evidence["door"] == "pointer"
    switched = drill["drill pointer names the new session"].evidence
    assert switched["names"] == switched["new_session"] and switched["session_file_present"]
    # The real pointer, transcripts and model were never touched (no claude -p was run).
    assert (real_pointer.read_bytes() if real_pointer.exists() else None) == before
    assert {p: p.read_bytes() for p in machine.transcripts()} == transcripts
    assert fake_api.last_index == requests
    assert not Path(drill["drill scratch ready"].evidence["root"]).exists()
