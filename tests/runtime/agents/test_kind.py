"""Which agent CLI has one owner: ``runtime/agents/``. Everywhere else it is an AgentKind member.

A guard over the source: any comparison (``==``, ``!=``, ``in``, ``not in``, ``match``/``case``)
with the string constant ``"claude"`` or ``"codex"`` on one side, in a module of ``runtime/`` or
``provision/`` outside ``runtime/agents/``, is an agent decision made with a bare string —
agent-specific knowledge belongs to the agent (``AgentKind`` or its ``AgentCli``).
"""

from __future__ import annotations

import json

import pytest

from runtime.agents import claude, codex
from runtime.agents.kind import AgentKind
from runtime.config import config_from_mapping
from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError
from tests.fixtures.string_guard import ROOT, scan, string_comparisons

AGENTS = {"claude", "codex"}


def test_no_agent_string_comparison_outside_the_agents() -> None:
    owner = ROOT / "runtime" / "agents"
    assert (owner / "kind.py").is_file()  # the guard reads the real tree ...
    read, found = scan(AGENTS, owner)
    assert found == []
    assert read >= 100  # ... and all of it (~110 modules): an empty scan proves nothing


@pytest.mark.parametrize("source", [
    'agent == "codex"', '"claude" != config.agent', 'agent in ("claude", "codex")',
    'agent not in {"codex"}', 'a < b == "claude"', 'data.get("agent") == "codex"',
    'match agent:\n    case "codex":\n        pass',
    'match agent:\n    case "x" | "claude":\n        pass',
])
def test_the_guard_sees_every_form_of_comparison(source: str) -> None:
    assert string_comparisons(source, AGENTS) != []


@pytest.mark.parametrize("source", [
    'agent is AgentKind.CODEX', 'x = {"codex": 1}["codex"]', 'agent == "codexx"',
    'f("claude")', 'name = "claude"',
])
def test_the_guard_leaves_other_code_alone(source: str) -> None:
    assert string_comparisons(source, AGENTS) == []


def test_an_agent_kind_serialises_as_its_name() -> None:
    assert json.dumps({"agent": AgentKind.CODEX}) == '{"agent": "codex"}'
    assert f"{AgentKind.CLAUDE}" == "claude" and str(AgentKind.CODEX) == "codex"
    assert [kind.value for kind in AgentKind] == ["claude", "codex"]


def test_parse_names_the_key_and_the_allowed_values() -> None:
    assert AgentKind.parse("codex") is AgentKind.CODEX
    with pytest.raises(ConfigError) as caught:
        AgentKind.parse("gemini", "agent")
    message = str(caught.value)
    assert message == "agent: 'gemini' is not one of claude, codex"


def test_each_kind_reaches_its_own_command_line_rules() -> None:
    assert AgentKind.CLAUDE.cli is claude and AgentKind.CODEX.cli is codex
    assert AgentKind.CODEX.programs == codex.PROGRAMS
    assert AgentKind.CLAUDE.programs == {"claude"}


def test_only_codex_is_refused_a_door_that_does_not_run_it() -> None:
    assert AgentKind.CLAUDE.door_problem(DoorKind.POINTER, "switch.door") is None
    assert AgentKind.CODEX.door_problem(DoorKind.TMUX, "switch.door") is None
    problem = AgentKind.CODEX.door_problem(DoorKind.POINTER, "switch.door")
    assert problem is not None and problem.startswith("switch.door: 'pointer'")


def test_the_config_agent_is_an_agent_kind() -> None:
    assert config_from_mapping({}).agent is AgentKind.CLAUDE
    config = config_from_mapping({"agent": "codex", "codex_home": "/c"})
    assert type(config.agent) is AgentKind and config.agent is AgentKind.CODEX


def test_a_codex_config_without_codex_home_says_so() -> None:
    with pytest.raises(ConfigError, match="agent: 'codex' needs codex_home"):
        config_from_mapping({"agent": "codex"})


def test_the_profile_agent_is_an_agent_kind() -> None:
    from provision.profile import profile_from_mapping

    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "u", "home": "/home/u"},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0"}},
        "install": {"config_path": "/c.toml", "state_dir": "/s"},
    })
    assert type(profile.agent) is AgentKind and profile.agent is AgentKind.CLAUDE
