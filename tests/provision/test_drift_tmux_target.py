# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""drift and the manifest's tmux wiring read the configured pane only: once the session
``claude`` is gone, tmux would otherwise answer for ``claude-notes`` (a prefix match) and drift
would report that session's dead pane and remain-on-exit as ours. Real tmux."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from provision.drift import _pane_dead
from provision.host import LocalHost
from provision.profile import Profile, profile_from_mapping
from provision.tasks.manifest import tmux_wiring
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux


def _profile(tmp_path: Path, target: str, tmux: TmuxServer) -> Profile:
    """A tmux-door profile of the running user for ``target`` on ``tmux``'s private socket."""
    return profile_from_mapping({
        "host": "h", "claude": {"user": getpass.getuser(), "home": str(tmp_path)},
        "door": {"kind": "tmux", "tmux": {"target": target, "socket_name": tmux.socket_name}},
        "install": {"config_path": str(tmp_path / "c.toml"),
                    "state_dir": str(tmp_path / "state")},
    })


def test_a_gone_session_is_not_answered_for_by_one_whose_name_starts_alike(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    profile = _profile(tmp_path, "claude:0.0", tmux_server)
    notes = tmux_server.new_session("claude-notes", "sleep 600", cwd="/")
    tmux_server.cmd("set-option", "-p", "-t", notes, "remain-on-exit", "on")
    tmux_server.cmd("respawn-pane", "-k", "-t", notes, "exit 3")
    wait_for(lambda: tmux_server.display(notes, "#{pane_dead}") == "1", what="a dead pane")
    host = LocalHost(profile.host)

    assert _pane_dead(host, profile) is None
    assert tmux_wiring(host, profile) is None


def test_a_gone_pane_has_no_wiring_although_tmux_answers_display_message_for_it(
    tmp_path: Path, tmux_server: TmuxServer
) -> None:
    """tmux 3.3a answers ``display-message -t <missing pane>`` with rc 0 and the global value:
    a gone pane read as ``remain-on-exit off`` and drift reported it as a changed option."""
    profile = _profile(tmp_path, "%99", tmux_server)
    tmux_server.new_session("other", "sleep 600", cwd="/")
    assert tmux_server.cmd("display-message", "-p", "-t", "%99", "#{remain-on-exit}"
                           ).stdout.strip() == "off"  # the quirk itself

    assert tmux_wiring(LocalHost(profile.host), profile) is None
