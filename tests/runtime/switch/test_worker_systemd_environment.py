# ruff: noqa: F811 - the systemd_sandbox fixture is imported by name and injected as a parameter
"""A unit's ``Environment=`` and ``EnvironmentFile=`` are the launch environment (issue 10 §5),
in a real systemd 252 (PID 1 in private namespaces): introspect records them by name (the file's
secret never printed), and a switch through the systemd door ends with a MainPID that has the
same values — confirmed by the health check from ``/proc/PID/environ``, as digests."""

from __future__ import annotations

import os
import pwd

import pytest

from provision.introspect import environment_names, introspect
from provision.profile import profile_from_mapping
from runtime.config import load_config
from runtime.procfs import parse_environ, value_digest
from runtime.switch.ops import request
from runtime.switch.store import Store
from tests.fakes import SandboxHost
from tests.fixtures.standin_claude import register_server, sleeper_argv
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import wait_for
from tests.runtime.switch.test_worker_systemd import END, UNIT, fire_stop, setup_unit, starts

pytestmark = pytest.mark.real_systemd
SECRET = "sk-from-the-environment-file-2718"


def test_unit_environment_and_environment_file_are_recorded_and_carried_by_a_switch(
        systemd_sandbox: SystemdSandbox) -> None:
    sandbox, share = systemd_sandbox, systemd_sandbox.share
    config_path, project, old = setup_unit(sandbox)
    (share / "claude.env").write_text(f"# the operator's secrets\nTL_TOKEN='{SECRET}'\n")
    drop_in = sandbox.state / "etc-units" / f"{UNIT}.d"
    drop_in.mkdir(exist_ok=True)
    (drop_in / "secrets.conf").write_text(f"[Service]\nEnvironmentFile={share}/claude.env\n")
    # the channel the unit hears, registered where claude reads it (the unit's config dir);
    # its argv does not name the registration
    register_server(share / "cfg" / ".claude.json", "companion", sleeper_argv("unit"))
    sandbox.daemon_reload()
    sandbox.systemctl("restart", UNIT)
    wait_for(lambda: len(starts(sandbox)) >= 2, what="the unit restarted with its secrets")

    profile = profile_from_mapping({
        "host": "sysd", "claude": {"user": pwd.getpwuid(os.getuid()).pw_name,
                                   "home": f"{share}/home", "config_dir": f"{share}/cfg"},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT,
                                                "pointer_path": f"{share}/session.pointer"}},
        "install": {"config_path": str(config_path), "state_dir": f"{share}/state"}})
    launch = introspect(SandboxHost(sandbox), profile)
    names = environment_names(launch, profile.claude.config_dir)
    assert {"CLAUDE_CONFIG_DIR", "TL_TOKEN"} <= set(names)
    assert dict(launch.to_dict()["environment"])["TL_TOKEN"] == value_digest(SECRET)  # type: ignore[call-overload]
    assert SECRET not in repr(launch.to_dict()) and SECRET not in "".join(launch.evidence)

    text = config_path.read_text().replace(
        "[switch]\n", '[switch]\nenvironment = ["CLAUDE_CONFIG_DIR", "TL_TOKEN"]\n'
        'expected_channel_servers = ["companion"]\n', 1)
    config_path.write_text(text)
    old_pid = sandbox.main_pid(UNIT)
    op_id = request(load_config(config_path), "env", "REBUILD", session_id=old)["operation_id"]
    fire_stop(sandbox)
    store = Store(share / "state")
    wait_for(lambda: store.read(op_id).state.value in END, timeout=60, what="the operation end")

    op = store.read(op_id)
    assert op.state.value == "activated", op.failure
    new_pid = sandbox.main_pid(UNIT)
    assert new_pid != old_pid
    env = parse_environ(sandbox.exec("cat", f"/proc/{new_pid}/environ").stdout.encode())
    assert env["TL_TOKEN"] == SECRET and env["CLAUDE_CONFIG_DIR"] == f"{share}/cfg"
    health = next(e for e in store.events(op_id) if e["phase"] == "health")
    assert health["channel_servers"]["companion"]["status"] == "running"
    assert health["environment"] == {"CLAUDE_CONFIG_DIR": value_digest(f"{share}/cfg"),
                                     "TL_TOKEN": value_digest(SECRET)}
    stored = [p for p in (share / "state").rglob("*") if p.is_file()
              and p.name != "source.jsonl" and SECRET.encode() in p.read_bytes()]
    assert stored == []
