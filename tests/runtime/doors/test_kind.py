"""The door kind has one owner: ``runtime/doors/``. Everywhere else it is a DoorKind member.

A guard over the source: any comparison (``==``, ``!=``, ``in``, ``not in``, ``match``/``case``)
with the string constant ``"tmux"``, ``"systemd"`` or ``"pointer"`` on one side, in a module of
``runtime/`` or ``provision/`` outside ``runtime/doors/``, is a door-kind decision made with a
bare string — kind-specific behaviour belongs to the door, a choice of door to DoorKind.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.config import config_from_mapping
from runtime.doors.base import open_door
from runtime.doors.kind import DoorKind
from runtime.doors.systemd import SystemdDoor
from runtime.doors.tmux import TmuxDoor, tmux_argv
from runtime.errors import ConfigError, IdentityConflictError
from tests.fixtures.string_guard import ROOT, scan, string_comparisons

KINDS = {"tmux", "systemd", "pointer"}
MIN_MODULES = 100  # runtime/ + provision/ hold ~120 modules: a guard that scanned few saw nothing


def kind_string_comparisons(source: str) -> list[int]:
    return string_comparisons(source, KINDS)


def test_no_door_kind_string_comparison_outside_the_doors() -> None:
    assert (ROOT / "runtime" / "doors" / "kind.py").is_file()  # the guard reads the real tree
    read, found = scan(KINDS, ROOT / "runtime" / "doors")
    assert read >= MIN_MODULES
    assert found == []


@pytest.mark.parametrize("source", [
    'door == "tmux"', '"pointer" != kind', 'kind in ("tmux", "systemd")',
    'kind not in {"pointer"}', 'a < b == "systemd"',
    'match kind:\n    case "pointer":\n        pass',
    'match kind:\n    case "x" | "tmux":\n        pass',
])
def test_the_guard_sees_every_form_of_comparison(source: str) -> None:
    assert kind_string_comparisons(source) != []


@pytest.mark.parametrize("source", [
    'door == DoorKind.TMUX', 'x = {"tmux": 1}["tmux"]', 'kind == "tmuxx"', 'f("pointer")',
])
def test_the_guard_leaves_other_code_alone(source: str) -> None:
    assert kind_string_comparisons(source) == []


def test_the_config_door_is_a_door_kind() -> None:
    config = config_from_mapping({"switch": {"door": "pointer", "pointer": {"path": "/p"}}})
    assert type(config.switch.door) is DoorKind
    assert config.switch.door is DoorKind.POINTER


def test_a_bad_config_door_names_the_key_and_the_allowed_values() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"switch": {"door": "screen"}})
    message = str(caught.value)
    assert "switch.door" in message and "screen" in message
    assert all(kind in message for kind in KINDS)
    assert "\n" not in message


def test_the_profile_door_is_a_door_kind() -> None:
    from provision.profile import profile_from_mapping

    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "u", "home": "/home/u"},
        "door": {"kind": "pointer", "pointer": {"path": "/p", "runner": "/r"}},
        "install": {"config_path": "/c.toml", "state_dir": "/s"},
    })
    assert type(profile.door.kind) is DoorKind
    assert profile.door.kind is DoorKind.POINTER


SECTIONS = {
    DoorKind.TMUX: {"tmux": {"target": "main:0.0", "socket_name": "s"}},
    DoorKind.SYSTEMD: {"systemd": {"unit": "claude.service", "pointer_path": "/p"}},
    DoorKind.POINTER: {"pointer": {"path": "/p"}},
}


@pytest.mark.parametrize("kind", list(DoorKind))
def test_open_door_builds_the_door_its_kind_names(kind: DoorKind) -> None:
    door = open_door(config_from_mapping({"switch": {"door": kind.value, **SECTIONS[kind]}}))
    assert door.name is kind


def test_a_systemd_door_without_a_terminal_judges_by_main_pid_and_cannot_answer() -> None:
    door = open_door(config_from_mapping({"switch": {"door": "systemd",
                                                     **SECTIONS[DoorKind.SYSTEMD]}}))
    assert isinstance(door, SystemdDoor) and door.terminal is None
    assert door.process_pid("4242") == 4242
    assert door.process_pid("") is None
    assert door.screen() == ""
    assert door.confirm() is False


def test_a_systemd_door_with_switch_tmux_target_has_that_pane_as_its_terminal() -> None:
    door = open_door(config_from_mapping({"switch": {
        "door": "systemd", **SECTIONS[DoorKind.SYSTEMD], **SECTIONS[DoorKind.TMUX]}}))
    assert isinstance(door, SystemdDoor)
    assert door.terminal == TmuxDoor(target="main:0.0", socket_name="s")


class Pane:
    """A terminal with a fixed pid and screen that counts the keys pressed."""

    name = DoorKind.TMUX

    def __init__(self, pid: str | None) -> None:
        self.pid, self.pressed = pid, 0

    def identity(self) -> str:
        if self.pid is None:
            raise IdentityConflictError("pane is dead")
        return self.pid

    def process_pid(self, identity: str) -> int | None:
        return int(identity)

    def screen(self) -> str:
        return "Press Enter to continue"

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        raise AssertionError("the unit restarts claude, never its terminal")

    def confirm(self) -> bool:
        self.pressed += 1
        return True

    def settle(self) -> None:
        pass


def test_a_systemd_door_reads_and_answers_claude_through_its_terminal() -> None:
    pane = Pane("777")
    door = SystemdDoor("claude.service", Path("/p"), terminal=pane)
    assert door.process_pid("1") == 777  # the pane's pid, not the unit's MainPID
    assert door.screen() == "Press Enter to continue"
    assert door.confirm() is True and pane.pressed == 1
    assert SystemdDoor("claude.service", Path("/p"), terminal=Pane(None)).process_pid("1") is None


def test_tmux_argv_addresses_a_socket_path_before_a_socket_name() -> None:
    assert tmux_argv() == ["tmux", "-L", "default"]  # never the server $TMUX names
    assert tmux_argv("tl") == ["tmux", "-L", "tl"]
    assert tmux_argv("tl", "/tmp/tmux-1000/tl") == ["tmux", "-S", "/tmp/tmux-1000/tl"]
