# ruff: noqa: F811 - fixtures are imported by name and injected as parameters
"""A claude in a tmux server on its own socket file (``tmux -S PATH``), named in the profile
by ``door.tmux.socket_path``: apply, drift, accept's checklist and the runtime door all reach
that one server. Real tmux on a socket under tmp_path (never the default server), a stand-in
claude, the real claude CLI for MCP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provision.drift import check_drift
from provision.errors import IntrospectError
from provision.host import LocalHost
from provision.introspect import introspect
from provision.profile import load_profile
from provision.result import Status
from runtime.config import load_config
from runtime.doors.tmux import TmuxDoor
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import Deployment, write_profile
from tests.fixtures.tmux import TmuxServer
from tests.provision.test_apply_tmux import _apply, ready  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux


@pytest.fixture
def tmux_server(tmp_path: Path) -> Iterator[TmuxServer]:
    """The server the deployment's claude runs in: ``tmux -S`` a socket file of this test
    (replaces the ``-L`` server of tests/provision/conftest.py)."""
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    server = TmuxServer("", socket_path=str(folder / "claude.sock"))
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.real_claude
def test_apply_renders_the_socket_path_and_the_door_reads_the_same_pane(
        ready: Deployment) -> None:
    report = _apply(ready)
    assert report.exit_code == 0, [r.message for r in report.results if r.message]
    config = load_config(ready.config_path)
    assert config.switch.tmux.socket_path == ready.tmux.socket_path
    assert config.switch.tmux.socket_name == ""
    pane_pid = ready.tmux.pane_pid(ready.target)
    assert TmuxDoor.from_config(config).identity() == str(pane_pid)

    profile = load_profile(ready.profile_path)
    host = LocalHost(profile.host)
    assert check_drift(host, profile) == []
    from provision.accept.checklist import users_tmux

    assert users_tmux(config, host, profile).switch.tmux == config.switch.tmux
    assert _apply(ready).count(Status.CHANGED) == 0


def test_without_a_socket_the_claudes_tmux_variable_names_the_server_to_set(
        deployment: Deployment) -> None:
    pid = deployment.start()
    data = yaml.safe_load(deployment.profile_path.read_text())
    del data["door"]["tmux"]["socket_path"]
    write_profile(deployment.profile_path, data)
    with pytest.raises(IntrospectError) as caught:
        introspect(LocalHost(), load_profile(deployment.profile_path))
    message = str(caught.value)
    assert "\n" not in message
    assert f"claude (pid {pid}) runs under the tmux server at " \
        f"{deployment.tmux.socket_path!r}" in message
    assert f"set door.tmux.socket_path: {deployment.tmux.socket_path}" in message


def test_introspect_reaches_the_pane_through_the_socket_path(deployment: Deployment) -> None:
    pid = deployment.start()
    launch = introspect(LocalHost(), load_profile(deployment.profile_path))
    assert launch.live is not None and launch.live.pid == pid
    assert launch.tmux == ("tmux", "-S", deployment.tmux.socket_path)
