"""A Codex launch (issue 17): the resume argv from runtime.agents.codex with the {session_id}
placeholder, the runtime config a Codex host renders, and how a codex program is recognised."""

from __future__ import annotations

import tomllib

import pytest

from provision.errors import ResumeError
from provision.introspect import _is_agent, codex_identity
from provision.render import render, validate_config
from provision.resume import resume_argv
from runtime.agents.kind import AgentKind
from tests.provision.test_render import _config_context

BIN = "/home/u/.cache/threadline/codex-0.169.0/node_modules/.bin/codex"


def test_a_tui_started_without_an_id_gets_resume_and_the_placeholder_before_its_options() -> None:
    launch = (BIN, "-m", "fake-model", "-c", "model_auto_compact_token_limit=900000",
              "--cd", "/srv/app", "-a", "never", "-s", "workspace-write")
    assert resume_argv(launch, agent="codex") == (
        BIN, "resume", "{session_id}", "-m", "fake-model", "-c",
        "model_auto_compact_token_limit=900000", "--cd", "/srv/app", "-a", "never",
        "-s", "workspace-write")


def test_a_resumed_launch_drops_its_old_id_and_a_tui_prompt_is_not_resent() -> None:
    assert resume_argv((BIN, "resume", "0198-old", "-m", "x"), agent="codex") == \
        (BIN, "resume", "{session_id}", "-m", "x")
    assert resume_argv((BIN, "-m", "x", "fix the bug"), agent="codex") == \
        (BIN, "resume", "{session_id}", "-m", "x")


def test_codex_exec_is_no_interactive_launch() -> None:
    with pytest.raises(ResumeError, match="runs 'codex exec'"):
        resume_argv((BIN, "exec", "hi"), agent="codex")


def test_the_claude_rule_is_unchanged_by_default() -> None:
    assert resume_argv(("/usr/bin/claude", "--continue")) == \
        ("/usr/bin/claude", "--resume", "{session_id}")


def test_the_codex_config_carries_agent_and_codex_home_and_validates() -> None:
    content = render("config.toml.j2", _config_context(
        agent="codex", codex_home="/home/u/.codex", project_dir="/home/u/.codex/sessions",
        resume_argv=[BIN, "resume", "{session_id}", "-m", "x"], launch_argv=[BIN, "-m", "x"],
        expected_channel_servers=[], environment=["CODEX_HOME"]))
    validate_config(content)
    data = tomllib.loads(content.decode())
    assert (data["agent"], data["codex_home"]) == ("codex", "/home/u/.codex")
    assert data["project_dir"] == "/home/u/.codex/sessions"
    assert data["switch"]["environment"] == ["CODEX_HOME"]


def test_the_claude_config_is_byte_identical_with_or_without_agent_claude() -> None:
    assert render("config.toml.j2", _config_context(agent="claude")) == \
        render("config.toml.j2", _config_context())


def test_the_wrapper_and_the_native_binary_of_the_npm_package_are_codex() -> None:
    root = "/home/u/.cache/threadline/codex-0.169.0/node_modules/@openai"
    assert codex_identity(f"{root}/codex/bin/codex.js", None, None) == \
        "the @openai/codex package layout"
    native = f"{root}/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    assert codex_identity(native, None, None) == "the @openai/codex package layout"
    assert codex_identity("/usr/bin/python3", None, None) is None
    assert _is_agent(BIN, None, AgentKind.CODEX) and not _is_agent(BIN, None, AgentKind.CLAUDE)
