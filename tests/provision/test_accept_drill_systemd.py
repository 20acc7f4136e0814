# ruff: noqa: F811 - the systemd_sandbox fixture is imported by name and injected as a parameter
"""``accept --drill`` of a systemd deployment, in a real systemd 252 (private namespaces).

The deployment is tests/provision/test_restart.py's: a ``Type=forking`` unit running the
stand-in claude in tmux through tl-launch (HANDOFF §7), installed by a real apply. The drill
runs as the CLI runs on the host — ``tl-provision accept … --drill --json`` inside the
instance — and must switch a scratch unit ``tl-drill-<id>.service`` through the systemd door
(``systemctl restart``), leave the real unit alone and remove the scratch unit, also when a
drill line fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from provision import engine
from provision.profile import profile_from_mapping
from provision.result import Context
from provision.tasks.files import Directories, LaunchDropIn, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from provision.tasks.manifest import Manifest
from tests.fakes import SandboxHost
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.provision.test_restart import UNIT, claude_in_tmux_unit

pytestmark = pytest.mark.real_systemd
TL_PROVISION = str(Path(sys.executable).with_name("tl-provision"))
DRILL = ("drill scratch ready", "drill old claude running", "drill activated",
         "drill scratch unit restarted", "drill pane pid changed",
         "drill old transcript byte-identical", "drill backup present",
         "drill channel flags on the new process", "drill channel servers recognised",
         "drill timeline complete", "drill no orphans")


def installed(sandbox: SystemdSandbox) -> Path:
    """The unit of test_restart.py, applied; the profile file the CLI reads."""
    data, _ = claude_in_tmux_unit(sandbox)
    host = SandboxHost(sandbox, env={"TMUX_TMPDIR": str(sandbox.share / "tmux")})
    tasks = [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), LaunchDropIn(),
             Manifest()]
    report = engine.run(tasks, host, Context(profile_from_mapping(data)))
    assert report.exit_code == 0, [(r.task, r.message) for r in report.results]
    path = sandbox.share / "profile.yml"
    path.write_text(json.dumps(data))  # JSON is the profile's YAML subset
    return path


def drill(sandbox: SystemdSandbox, profile: Path) -> dict[str, dict[str, Any]]:
    """``tl-provision accept PROFILE --drill --json`` inside the instance: drill lines by name."""
    done = sandbox.exec("env", f"TMUX_TMPDIR={sandbox.share / 'tmux'}", TL_PROVISION, "accept",
                        str(profile), "--drill", "--json", timeout=300)
    assert done.stdout, done.stderr
    lines = json.loads(done.stdout)["lines"]
    return {line["name"]: line for line in lines if line["stage"] == "drill"}


def unit_state(sandbox: SystemdSandbox, unit: str) -> str:
    return sandbox.systemctl("show", "-p", "LoadState", "--value", unit)


def test_a_systemd_deployment_is_drilled_through_a_scratch_unit_restart(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    profile = installed(sandbox)
    real_main = sandbox.main_pid(UNIT)

    lines = drill(sandbox, profile)

    assert all(lines[name]["status"] == "pass" for name in DRILL), \
        {n: (x["status"], x["evidence"]) for n, x in lines.items() if x["status"] != "pass"}
    assert lines["drill worker escape"]["status"] == "skip"
    assert lines["drill worker escape"]["evidence"].startswith(
        "not drilled: the drill's Stop hook runs outside the scratch unit")
    assert "drill systemd door" not in lines  # drilled: no fallback line
    restarted = lines["drill scratch unit restarted"]["evidence"]
    unit = restarted["unit"]
    assert unit.startswith("tl-drill-") and unit.endswith(".service")
    assert restarted["main_pid_before"] not in (None, restarted["main_pid_after"])
    assert (restarted["deployment_unit"], restarted["deployment_main_pid_before"],
            restarted["deployment_main_pid_after"]) == (UNIT, real_main, real_main)
    assert lines["drill activated"]["evidence"]["door"] == "systemd"
    assert lines["drill scratch ready"]["evidence"]["unit"] == unit
    assert lines["drill channel servers recognised"]["evidence"]["status"] == {
        "companion": "running"}
    # the real unit still runs the same claude; the scratch unit is gone
    assert sandbox.main_pid(UNIT) == real_main
    orphans = lines["drill no orphans"]["evidence"]
    assert orphans["scratch_unit"]["load_state_after"] == "not-found"
    assert unit_state(sandbox, unit) == "not-found"
    assert not Path(lines["drill scratch ready"]["evidence"]["root"]).exists()
    # the unit's tmux put its socket in the default folder (no TMUX_TMPDIR in a unit): gone too
    socket = orphans["tmux_socket_removed"]
    assert socket is not None and socket.endswith(f"/tmux-0/{orphans['tmux_socket']}"), orphans
    assert sandbox.exec("test", "-e", socket).returncode == 1


def test_a_failing_systemd_drill_says_why_and_still_removes_the_scratch_unit(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    profile = installed(sandbox)
    # `companion` registered for another directory only: the unit's claude never starts it,
    # so every real switch would roll back. The drill must say so first.
    path = sandbox.share / "cfg" / ".claude.json"
    data = json.loads(path.read_text())
    spec = data["mcpServers"].pop("companion")
    data.setdefault("projects", {})["/somewhere/else"] = {"mcpServers": {"companion": spec}}
    path.write_text(json.dumps(data))
    real_main = sandbox.main_pid(UNIT)

    lines = drill(sandbox, profile)

    assert lines["drill activated"]["status"] == "fail"
    found = lines["drill channel servers recognised"]
    assert found["status"] == "fail"
    assert found["evidence"]["status"]["companion"] == "absent"
    assert "channel server(s) not running: companion" in found["evidence"]["health_reason"]
    for name in ("drill pane pid changed", "drill channel flags on the new process",
                 "drill timeline complete"):  # nothing new to judge: named, not failed
        assert (lines[name]["status"], lines[name]["because"]) == ("skip", "drill activated")
    unit = lines["drill scratch ready"]["evidence"]["unit"]
    assert unit.startswith("tl-drill-")
    assert lines["drill no orphans"]["status"] == "pass"
    assert unit_state(sandbox, unit) == "not-found"
    assert sandbox.main_pid(UNIT) == real_main


def test_a_unit_without_tmux_is_drilled_on_a_private_pane_and_the_report_says_why(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox = systemd_sandbox
    profile = installed(sandbox)
    # The door has no terminal (no switch.tmux.target): claude runs bare in its unit, a shape
    # no scratch unit reproduces. The drill falls back to a private tmux pane and says so.
    config = sandbox.share / "etc" / "config.toml"
    text = config.read_text()
    assert 'target = "claude:0.0"' in text
    config.write_text(text.replace('target = "claude:0.0"', 'target = ""', 1))

    lines = drill(sandbox, profile)

    door = lines["drill systemd door"]
    assert door["status"] == "skip"
    assert door["evidence"] == (
        f"not drilled: unit {UNIT!r} runs claude without tmux (switch.tmux.target is unset), "
        "a shape no scratch unit reproduces; this drill switched a private tmux pane instead")
    assert "drill scratch unit restarted" not in lines
    assert lines["drill scratch ready"]["evidence"]["unit"] is None
    assert lines["drill scratch ready"]["evidence"]["door"] == "tmux"
    assert lines["drill activated"]["status"] == "pass"
    assert lines["drill no orphans"]["status"] == "pass"
