"""provision/accept/checklist.py: the scene accept's stages share (pure parts, a fake host)."""

from __future__ import annotations

import pytest

from provision.accept.checklist import users_tmux
from provision.profile import profile_from_mapping
from runtime.config import Config, SwitchConfig, TmuxConfig
from runtime.doors.kind import DoorKind
from runtime.doors.tmux import TmuxDoor, tmux_argv
from tests.fakes import FakeHost

CONFIG = Config(switch=SwitchConfig(tmux=TmuxConfig(target="codex:0.0", socket_name="tl-user")))


def _profile(user: str):
    return profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": user, "home": f"/home/{user}/.codex"},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0", "socket_name": "tl-user"}},
        "install": {"config_path": "/etc/threadline/config.toml", "state_dir": "/var/lib/tl"}})


def test_accept_run_by_root_reaches_the_agent_users_tmux_by_its_socket_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMUX_TMPDIR", "/run/tmuxes")
    # a user name of its own: provision.introspect caches the uid per (host id, user)
    host = FakeHost(users={"acceptroot": (4242, 4242), "root": (0, 0)})

    seen = users_tmux(CONFIG, host, _profile("acceptroot"))

    assert seen.switch.tmux.socket_path == "/run/tmuxes/tmux-4242/tl-user"
    door = TmuxDoor.from_config(seen)
    assert tmux_argv(door.socket_name, door.socket_path) == [
        "tmux", "-S", "/run/tmuxes/tmux-4242/tl-user"]
    assert seen.switch.tmux.target == "codex:0.0" and seen.project_dir == CONFIG.project_dir


def test_accept_run_by_the_agent_user_keeps_the_socket_name_and_another_door_is_untouched(
        ) -> None:
    same = FakeHost(users={"acceptself": (0, 0), "root": (0, 0)})
    assert users_tmux(CONFIG, same, _profile("acceptself")) is CONFIG
    other = FakeHost(users={"acceptsysd": (4242, 4242), "root": (0, 0)})
    systemd = Config(switch=SwitchConfig(door=DoorKind.SYSTEMD))
    assert users_tmux(systemd, other, _profile("acceptsysd")) is systemd


class _UsersState(FakeHost):
    """A FakeHost whose state dir belongs to the agent user (uid/gid 4242)."""

    def stat(self, path: str):  # type: ignore[no-untyped-def]
        found = super().stat(path)
        if path == "/var/lib/tl" and found is not None:
            return found.__class__(True, found.mode, 4242, 4242, 0.0, True)
        return found


def test_a_drill_run_by_root_gives_its_folders_in_the_users_state_dir_to_that_user(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.accept import scratch
    from provision.accept.checklist import Scene
    from provision.errors import AcceptError

    monkeypatch.setattr(scratch.os, "geteuid", lambda: 0)
    host = _UsersState(dirs={"/var/lib/tl": 0o700})
    parent, kept = "/var/lib/tl/accept-drill", "/var/lib/tl/accept-drill/abc"
    for argv in (["chown", "-h", "4242:4242", "--", parent],
                 ["chown", "-h", "-R", "4242:4242", "--", kept]):
        host.add_command(argv)
    scene = Scene(_profile("acceptroot"), host)

    assert scratch.drill_root(scene, "abc") == kept
    assert host.dirs[parent] == 0o700
    assert host.ran[-1] == ("chown", "-h", "4242:4242", "--", parent)  # not -R: only the parent
    scratch.give_to_state_owner(scene, kept, recursive=True)  # a failed drill's kept scratch
    assert host.ran[-1] == ("chown", "-h", "-R", "4242:4242", "--", kept)  # links themselves

    host.add_command(["chown", "-h", "-R", "4242:4242", "--", kept], rc=1,
                     stderr="chown: changing ownership: Operation not permitted\n")
    with pytest.raises(AcceptError, match="to the state dir's owner 4242:4242: chown: changing"):
        scratch.give_to_state_owner(scene, kept, recursive=True)

    monkeypatch.setattr(scratch.os, "geteuid", lambda: 4242)  # the user's own drill: no chown
    count = len(host.ran)
    scratch.drill_root(scene, "def")
    assert len(host.ran) == count
