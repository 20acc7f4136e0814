"""A Codex host profile (issue 17): ``agent: codex`` needs ``codex:`` (user, CODEX_HOME),
a Claude profile is read as before, and a bad key gets the same one-line did-you-mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import ProfileError
from provision.profile import load_profile, profile_errors, profile_from_mapping

CODEX = {
    "host": "h",
    "agent": "codex",
    "codex": {"user": "u", "home": "/home/u/.codex"},
    "door": {"kind": "tmux", "tmux": {"target": "codex:0.0"}},
    "install": {"config_path": "/etc/threadline/codex.toml", "state_dir": "/var/lib/tl"},
}


def _with(**changes) -> dict:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in CODEX.items()}
    data.update(changes)
    return data


def test_a_codex_profile_reads_codex_home_and_its_config_path() -> None:
    profile = profile_from_mapping(CODEX)
    assert profile.agent == "codex" and profile.codex is not None
    assert profile.codex.config_path == "/home/u/.codex/config.toml"
    assert profile.codex.sessions_dir == "/home/u/.codex/sessions"
    assert profile.codex.env == {"CODEX_HOME": "/home/u/.codex"}
    assert profile.claude.user == "u"  # the agent user the owner/chown tasks read


def test_a_claude_profile_stays_claude_without_a_codex_section() -> None:
    data = {k: v for k, v in CODEX.items() if k not in ("agent", "codex")}
    data["claude"] = {"user": "u", "home": "/home/u"}
    profile = profile_from_mapping(data)
    assert (profile.agent, profile.codex) == ("claude", None)


def test_agent_codex_without_a_codex_section_names_it() -> None:
    data = {k: v for k, v in CODEX.items() if k != "codex"}
    assert profile_errors(data) == ["codex: required"]


def test_agent_claude_still_needs_the_claude_section() -> None:
    data = {k: v for k, v in CODEX.items() if k not in ("agent", "codex")}
    assert profile_errors(data) == ["claude: required"]


def test_codex_home_must_be_absolute_and_a_misspelt_key_gets_a_did_you_mean() -> None:
    problems = profile_errors(_with(codex={"user": "u", "home": "rel", "workdr": "/w"}))
    assert "codex.workdr: unknown key (did you mean 'workdir'?)" in problems
    assert any(p.startswith("codex.home: ") and "'^/'" in p for p in problems)


def test_an_unknown_agent_is_refused_in_one_line() -> None:
    with pytest.raises(ProfileError, match=r"agent: 'gemini' is not one of") as err:
        profile_from_mapping(_with(agent="gemini"))
    assert "\n" not in str(err.value)


def test_the_shipped_codex_inventory_validates() -> None:
    path = Path(__file__).resolve().parents[2] / "inventories" / "codex-host.yml"
    profile = load_profile(path)
    assert profile.agent == "codex" and profile.codex is not None
    assert profile.codex.home.endswith("/.codex")


def test_agent_codex_on_another_door_than_tmux_is_refused_in_one_line() -> None:
    door = {"kind": "systemd", "systemd": {"unit": "codex.service"}}
    with pytest.raises(ProfileError) as err:
        profile_from_mapping(_with(door=door))
    assert str(err.value) == (
        "invalid host profile: door.kind: 'systemd' does not run codex yet; agent codex needs "
        "the tmux door (for a codex started by a systemd unit: run it in tmux inside the unit "
        "and use the tmux door on that pane, with tmux.unit naming the unit in the host "
        "profile)")
    pointer = {"kind": "pointer", "pointer": {"path": "/p", "runner": "/r"}}
    with pytest.raises(ProfileError, match=r"door.kind: 'pointer' does not run codex yet; "
                                           r"agent codex needs the tmux door$"):
        profile_from_mapping(_with(door=pointer))


def test_accept_on_a_codex_host_runs_codex_lines_not_the_claude_checklist() -> None:
    """Nothing installed on a fake host: the Codex lines, never a claude one (hook, settings.json,
    channels), and the lines that need the missing config are skipped naming it."""
    from provision.accept import run_accept
    from provision.errors import AcceptError
    from tests.fakes import FakeHost

    report = run_accept(profile_from_mapping(CODEX), FakeHost(), pause=0.0)
    names = [line.name for line in report.lines]
    assert "sessions dir exists" in names and "notify runs tl-rebuild hook-notify" in names
    assert not [n for n in names if "hook" in n and "notify" not in n or "channel" in n], names
    skipped = {line.name: line.because for line in report.lines if line.status == "skip"}
    assert skipped["codex binary absolute"] == "runtime config valid"
    with pytest.raises(AcceptError, match=r"--live is not built for a codex host"):
        run_accept(profile_from_mapping(CODEX), FakeHost(), live=True, confirm="REBUILD")
