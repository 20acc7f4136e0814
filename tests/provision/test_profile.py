"""The host profile: shipped inventories validate; every kind of error is reported with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import ProfileError
from provision.profile import load_profile, profile_errors, profile_from_mapping

INVENTORIES = sorted((Path(__file__).resolve().parents[2] / "inventories").glob("*.yml"))
VALID = {
    "host": "h",
    "claude": {"user": "u", "home": "/home/u"},
    "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
    "install": {"config_path": "/etc/threadline/config.toml", "state_dir": "/var/lib/tl"},
}


def _with(**changes) -> dict:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in VALID.items()}
    data.update(changes)
    return data


def test_three_inventories_ship_one_per_door() -> None:
    assert [p.name for p in INVENTORIES] == ["codex-host.yml", "pointer-runner.yml",
                                             "systemd-vps.yml", "tmux-vps.yml"]


@pytest.mark.parametrize("path", INVENTORIES, ids=lambda p: p.name)
def test_every_shipped_inventory_validates(path: Path) -> None:
    profile = load_profile(path)
    assert profile.door.kind in path.name or path.name.startswith(("pointer", "codex"))


def test_defaults_fill_mcp_hook_and_connection() -> None:
    profile = profile_from_mapping(VALID)
    assert (profile.mcp_name, profile.mcp_scope, profile.hook_timeout) == ("threadline", "user", 10)
    assert profile.connection == "local" and profile.prefer is None
    assert profile.claude.settings_path == "/home/u/.claude/settings.json"
    assert profile.channels_expected is None


def test_door_target_missing_is_reported_with_its_path() -> None:
    assert profile_errors(_with(door={"kind": "tmux", "tmux": {}})) == \
        ["door.tmux.target: required"]


def test_door_section_required_for_its_kind() -> None:
    assert profile_errors(_with(door={"kind": "systemd"})) == ["door.systemd: required"]


def test_all_errors_at_once_each_with_its_path() -> None:
    data = _with(claude={"user": "u", "home": "relative", "bogus": 1}, extra=True,
                 install={"config_path": "/x"}, mcp={"scope": "global"},
                 hook={"timeout": 0}, prefer="newest")
    problems = profile_errors(data)
    assert "claude.bogus: unknown key" in problems
    assert "extra: unknown key" in problems
    assert "install.state_dir: required" in problems
    assert any(p.startswith("claude.home: 'relative' does not match") for p in problems)
    assert any(p.startswith("mcp.scope: 'global' is not one of") for p in problems)
    assert any(p.startswith("hook.timeout: 0 is less than") for p in problems)
    assert any(p.startswith("prefer: 'newest' is not one of") for p in problems)
    with pytest.raises(ProfileError) as caught:
        profile_from_mapping(data, "host.yml")
    assert str(caught.value).count(";") == len(problems) - 1


def test_a_misspelt_profile_key_gets_a_did_you_mean_and_a_far_one_does_not() -> None:
    problems = profile_errors(_with(claude={"usr": "u", "home": "/home/u"}, hots="h",
                                    extra=True, rebuild={"stamp_turn": True}))
    assert "claude.usr: unknown key (did you mean 'user'?)" in problems
    assert "hots: unknown key (did you mean 'host'?)" in problems
    assert "rebuild.stamp_turn: unknown key (did you mean 'stamp_turns'?)" in problems
    assert "extra: unknown key" in problems
    with pytest.raises(ProfileError, match=r"claude\.usr: unknown key \(did you mean 'user'\?\)"):
        profile_from_mapping(_with(claude={"usr": "u", "home": "/home/u"}), "host.yml")


def test_rebuild_knobs_are_validated_by_the_runtime_schema() -> None:
    problems = profile_errors(_with(rebuild={"carry_overflow": "sometimes", "nope": 1}))
    assert "rebuild.nope: unknown key" in problems
    assert any(p.startswith("rebuild.carry_overflow: 'sometimes' is not one of") for p in problems)


def test_rebuild_regex_that_does_not_compile_is_an_error() -> None:
    with pytest.raises(ProfileError, match="rebuild.poison_patterns.0"):
        profile_from_mapping(_with(rebuild={"poison_patterns": ["(unclosed"]}))


def test_missing_file_and_bad_yaml_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="host profile not found"):
        load_profile(tmp_path / "nope.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("host: [unclosed\n")
    with pytest.raises(ProfileError, match="is not valid YAML"):
        load_profile(bad)


@pytest.mark.parametrize("text", ["", "\n\n", "# host: vps-1\n# door: tmux\n", "---\n"])
def test_an_empty_profile_says_so_and_points_at_the_examples(tmp_path: Path, text: str) -> None:
    empty = tmp_path / "host.yml"
    empty.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(empty)
    assert str(info.value) == (
        f"host profile {str(empty)!r} is empty (or only comments); start from an example in "
        "inventories/ (tmux-vps.yml, systemd-vps.yml, pointer-runner.yml, codex-host.yml)")
    named = str(info.value).split("(", 2)[2].rstrip(")").split(", ")
    assert all((INVENTORIES[0].parent / name).is_file() for name in named)


def test_non_mapping_document_is_an_error() -> None:
    assert profile_errors(["a"]) == ["(top level): ['a'] is not of type 'object'"]


def test_hook_enabled_defaults_to_true_and_reads_false() -> None:
    assert profile_from_mapping(VALID).hook_enabled is True
    off = profile_from_mapping(_with(hook={"enabled": False, "timeout": 5}))
    assert (off.hook_enabled, off.hook_timeout) == (False, 5)


def test_hook_enabled_must_be_a_boolean_and_the_error_names_it() -> None:
    with pytest.raises(ProfileError, match=r"hook\.enabled: 'no' is not of type 'boolean'"):
        profile_from_mapping(_with(hook={"enabled": "no"}))


def test_bad_yaml_error_is_one_line_with_its_position(tmp_path: Path) -> None:
    """An operator sees one line naming the file, the problem and where, not PyYAML's
    multi-line snippet with a caret under the offending character."""
    bad = tmp_path / "bad.yml"
    bad.write_text("host: x\ndoor: [unclosed\n")
    with pytest.raises(ProfileError) as info:
        load_profile(bad)
    message = str(info.value)
    assert "\n" not in message
    assert str(bad) in message and "is not valid YAML" in message
    assert "at line 3, column 1" in message  # the unclosed sequence meets the end


def test_a_key_given_twice_is_an_error_naming_it_and_both_lines(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys without a word: a second ``rebuild:`` section
    pasted at the bottom silently threw away the first one's knobs."""
    doubled = tmp_path / "doubled.yml"
    doubled.write_text("host: a\nrebuild:\n  carry_max_tokens: 0\nhost: b\n")
    with pytest.raises(ProfileError, match=r"duplicate key 'host' \(lines 1 and 4\)") as info:
        load_profile(doubled)
    assert str(doubled) in str(info.value)


@pytest.mark.parametrize("host", ["vps\nrm -rf /", "tab\there", "bell\x07", "del\x7f"])
def test_a_host_name_must_be_one_line_without_control_characters(host: str) -> None:
    assert profile_errors(_with(host=host)) == [
        f"host: {host!r} must be one line without control characters (a name for reports)"]
    assert profile_errors(_with(host="vps-1 (Frankfurt) ✓")) == []


def test_a_tmux_socket_path_is_read_as_the_server_of_the_door() -> None:
    profile = profile_from_mapping(_with(door={"kind": "tmux", "tmux": {
        "target": "main:0.0", "socket_path": "/run/user/1000/claude.sock"}}))
    assert profile.door.tmux_socket_path == "/run/user/1000/claude.sock"
    assert profile.door.tmux_socket_name is None


@pytest.mark.parametrize("path", ["claude.sock", "./tmux/claude.sock", "~/claude.sock", ""])
def test_a_tmux_socket_path_that_is_not_absolute_is_refused_naming_the_key(path: str) -> None:
    data = _with(door={"kind": "tmux", "tmux": {"target": "main:0.0", "socket_path": path}})
    with pytest.raises(ProfileError) as caught:
        profile_from_mapping(data)
    message = str(caught.value)
    assert "\n" not in message
    assert f"door.tmux.socket_path: {path!r} must be an absolute path (the socket of tmux -S)" \
        in message


def test_a_tmux_socket_path_given_with_a_socket_name_is_refused_naming_both() -> None:
    data = _with(door={"kind": "tmux", "tmux": {"target": "main:0.0", "socket_name": "work",
                                                 "socket_path": "/tmp/claude.sock"}})
    with pytest.raises(ProfileError) as caught:
        profile_from_mapping(data)
    message = str(caught.value)
    assert "\n" not in message
    assert "door.tmux.socket_path: '/tmp/claude.sock' given together with " \
        "door.tmux.socket_name 'work'" in message
