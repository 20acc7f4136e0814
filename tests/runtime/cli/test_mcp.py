"""``tl-rebuild mcp`` through the SDK's real client over stdio (the server is a subprocess)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from runtime.cli.mcp import claude_session_id
from runtime.procfs import start_time

TRANSCRIPT = "iansherr__claude-code-log__03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
SESSION = "9d3b4a10-5c2e-4f7a-8b6d-0e1f2a3b4c5d"
TOOLS = {
    "thread_rebuild_doctor": True,
    "thread_rebuild_dirty": True,
    "thread_rebuild_plan": True,
    "thread_rebuild_status": True,
    "thread_rebuild_request": False,
    "thread_rebuild_cancel": False,
    "thread_rebuild_rollback_request": False,
}


def tl_rebuild_argv() -> list[str]:
    script = Path(sys.executable).parent / "tl-rebuild"
    return [str(script)] if script.exists() else [sys.executable, "-m", "runtime.cli"]


class Setup:
    """A runtime config over the corpus, a private state dir and a private claude config dir."""

    def __init__(self, tmp_path: Path, corpus: Path) -> None:
        self.corpus = corpus
        self.state = tmp_path / "state"
        self.claude_dir = tmp_path / "claude-config"
        self.config = tmp_path / "threadline.toml"
        # The pointer door on a temp file: nothing this server could switch exists outside tmp.
        self.config.write_text(
            f'project_dir = "{corpus}"\nworkdir = "{tmp_path}"\nstate_dir = "{self.state}"\n'
            f'[switch]\ndoor = "pointer"\n[switch.pointer]\npath = "{tmp_path / "pointer"}"\n'
        )
        (self.claude_dir / "sessions").mkdir(parents=True)
        # This process is the server's parent: it plays the claude that runs the server.
        (self.claude_dir / "sessions" / f"{os.getpid()}.json").write_text(
            json.dumps({"pid": os.getpid(), "sessionId": SESSION, "cwd": str(tmp_path)})
        )

    def operations(self) -> list[str]:
        folder = self.state / "operations"
        return sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []

    def run(self, scenario: Callable[[Client], Awaitable[None]]) -> None:
        argv = tl_rebuild_argv()
        params = StdioServerParameters(
            command=argv[0], args=[*argv[1:], "mcp", "--config", str(self.config)],
            # The whole sandboxed environment (TMUX_TMPDIR, HOME …), not the SDK's short default.
            env={**os.environ, "CLAUDE_CONFIG_DIR": str(self.claude_dir)},
        )

        async def main() -> None:
            with anyio.fail_after(120):
                async with Client(params) as client:
                    await scenario(client)

        anyio.run(main)


@pytest.fixture
def setup(tmp_path: Path, corpus: Path) -> Setup:
    return Setup(tmp_path, corpus)


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured result."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def error_of(client: Client, name: str, **arguments: Any) -> str:
    """Call a tool that must fail; return the error text the model reads."""
    result = await client.call_tool(name, arguments)
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_lists_the_seven_tools_with_read_only_hints_only_on_the_read_only_ones(
    setup: Setup,
) -> None:
    async def scenario(client: Client) -> None:
        listed = (await client.list_tools()).tools
        assert {tool.name: bool(tool.annotations and tool.annotations.read_only_hint)
                for tool in listed} == TOOLS
        for tool in listed:
            assert tool.description and len(tool.description.splitlines()[0]) <= 100
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        request = next(tool for tool in listed if tool.name == "thread_rebuild_request")
        assert request.input_schema["required"] == ["reason", "confirmation"]

    setup.run(scenario)


def test_read_only_tools_answer_on_a_real_corpus_transcript(setup: Setup) -> None:
    transcript = str(setup.corpus / TRANSCRIPT)
    resolved = str((setup.corpus / TRANSCRIPT).resolve())  # reports name the resolved file

    async def scenario(client: Client) -> None:
        plan = await call(client, "thread_rebuild_plan", transcript=transcript)
        assert plan["transcript"] == resolved
        assert plan["turns"]["source"] == plan["turns"]["selected"] == 7
        assert plan["blocked_reason"] is None
        dirty = await call(client, "thread_rebuild_dirty", transcript=transcript)
        assert dirty["transcript"] == resolved and dirty["categories"]["tool_use"] > 0
        doctor = await call(client, "thread_rebuild_doctor")
        assert doctor["checks"]["config"] == {"ok": True, "detail": str(setup.config)}
        assert doctor["checks"]["project_dir"]["ok"] is True
        assert doctor["active"] is None
        status = await call(client, "thread_rebuild_status")
        assert status["state"] is None and status["message"] == "no operations yet"

    setup.run(scenario)
    assert setup.operations() == []


def test_a_transcript_outside_project_dir_is_a_tool_error(setup: Setup, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("{}\n")

    async def scenario(client: Client) -> None:
        text = await error_of(client, "thread_rebuild_plan", transcript=str(outside))
        assert str(outside) in text or "outside" in text

    setup.run(scenario)


def test_request_with_a_wrong_word_is_a_tool_error_and_writes_nothing(setup: Setup) -> None:
    async def scenario(client: Client) -> None:
        for word in ("rebuild", "YES", ""):
            text = await error_of(client, "thread_rebuild_request", reason="too noisy",
                                  confirmation=word)
            assert "'REBUILD'" in text and "nothing was written" in text

    setup.run(scenario)
    assert not setup.state.exists() or setup.operations() == []


def test_request_with_rebuild_creates_a_pending_operation_bound_to_the_parent_claude_session(
    setup: Setup,
) -> None:
    async def scenario(client: Client) -> None:
        made = await call(client, "thread_rebuild_request", reason="context is full of tool output",
                          confirmation="REBUILD")
        assert made["state"] == "pending"
        assert made["bound_session_id"] == SESSION
        again = await call(client, "thread_rebuild_request", reason="and slow",
                           confirmation="REBUILD")
        assert again["operation_id"] == made["operation_id"]  # coalesced, one operation
        status = await call(client, "thread_rebuild_status", operation_id=made["operation_id"])
        assert status["state"] == "pending"

    setup.run(scenario)
    assert len(setup.operations()) == 1


def test_cancel_and_rollback_refuse_wrong_words_and_work_with_the_right_one(setup: Setup) -> None:
    async def scenario(client: Client) -> None:
        made = await call(client, "thread_rebuild_request", reason="r", confirmation="REBUILD")
        op = made["operation_id"]
        text = await error_of(client, "thread_rebuild_cancel", operation_id=op,
                              confirmation="REBUILD")
        assert "'CANCEL'" in text
        assert (await call(client, "thread_rebuild_status", operation_id=op))["state"] == "pending"
        text = await error_of(client, "thread_rebuild_rollback_request", operation_id=op,
                              confirmation="yes")
        assert "'ROLLBACK'" in text
        text = await error_of(client, "thread_rebuild_rollback_request", operation_id=op,
                              confirmation="ROLLBACK")
        assert op in text  # a pending operation cannot be rolled back; the message names it
        cancelled = await call(client, "thread_rebuild_cancel", operation_id=op,
                               confirmation="CANCEL")
        assert cancelled["state"] == "cancelled"

    setup.run(scenario)


def test_the_session_is_found_by_walking_up_to_the_nearest_claude(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    assert claude_session_id(os.getpid(), tmp_path) is None
    (sessions / f"{os.getppid()}.json").write_text(json.dumps({"sessionId": SESSION}))
    assert claude_session_id(os.getpid(), tmp_path) == SESSION  # found one level up
    (sessions / f"{os.getpid()}.json").write_text("{not json")
    assert claude_session_id(os.getpid(), tmp_path) == SESSION  # junk is skipped, not trusted


def test_a_record_left_under_a_recycled_pid_names_no_session(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    parent = os.getppid()
    started = start_time(parent)
    assert started is not None
    record = {"pid": parent, "sessionId": SESSION, "procStart": str(started + 1)}
    (sessions / f"{parent}.json").write_text(json.dumps(record))
    assert claude_session_id(os.getpid(), tmp_path) is None  # an earlier process's record
    record["procStart"] = str(started)
    (sessions / f"{parent}.json").write_text(json.dumps(record))
    assert claude_session_id(os.getpid(), tmp_path) == SESSION


# -- issue 11 §13: unknown arguments refused, reason length capped ----------------------------
def test_an_unknown_argument_is_refused_and_nothing_is_written(setup: Setup) -> None:
    async def scenario(client: Client) -> None:
        listed = (await client.list_tools()).tools
        assert all(t.input_schema.get("additionalProperties") is False for t in listed)
        error = await error_of(client, "thread_rebuild_request", reason="context full",
                               confirmation="REBUILD", operation="op-x")
        assert "operation" in error and "xtra" in error
        error = await error_of(client, "thread_rebuild_status", operation="op-x")
        assert "operation" in error

    setup.run(scenario)
    assert setup.operations() == []


def test_a_reason_longer_than_the_cap_is_refused_and_the_description_says_so(
    setup: Setup,
) -> None:
    from runtime.switch.ops import MAX_REASON_CHARS

    async def scenario(client: Client) -> None:
        listed = (await client.list_tools()).tools
        request = next(tool for tool in listed if tool.name == "thread_rebuild_request")
        reason_schema = request.input_schema["properties"]["reason"]
        assert reason_schema["maxLength"] == MAX_REASON_CHARS
        assert f"at most {MAX_REASON_CHARS} characters" in reason_schema["description"]
        await error_of(client, "thread_rebuild_request", reason="x" * (MAX_REASON_CHARS + 1),
                       confirmation="REBUILD")

    setup.run(scenario)
    assert setup.operations() == []


def test_the_cli_refuses_a_reason_longer_than_the_cap(tmp_path: Path) -> None:
    from runtime.config import config_from_mapping
    from runtime.errors import ConfirmationError
    from runtime.switch import ops

    config = config_from_mapping({"state_dir": str(tmp_path / "state")})
    with pytest.raises(ConfirmationError, match=r"reason is 301 characters, at most 300"):
        ops.request(config, "y" * 301, "REBUILD")
    assert not (tmp_path / "state").exists()
