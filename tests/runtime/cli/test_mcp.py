"""``tl-rebuild mcp`` through the SDK's real client over stdio (the server is a subprocess)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from runtime.cli.mcp import claude_session_id
from runtime.procfs import start_time
from runtime.switch.state import State
from runtime.switch.store import Store

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
    """A runtime config over the corpus (or another project folder), a private state dir and a
    private claude config dir."""

    def __init__(self, tmp_path: Path, corpus: Path, project_dir: Path | None = None) -> None:
        self.corpus = corpus
        self.state = tmp_path / "state"
        self.claude_dir = tmp_path / "claude-config"
        self.config = tmp_path / "threadline.toml"
        # The pointer door on a temp file: nothing this server could switch exists outside tmp.
        self.config.write_text(
            f'project_dir = "{project_dir or corpus}"\nworkdir = "{tmp_path}"\n'
            f'state_dir = "{self.state}"\n'
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
    """Call a tool that must succeed; return its structured result, checked against the
    tool's published outputSchema."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    tool = next(t for t in (await client.list_tools()).tools if t.name == name)
    assert tool.output_schema is not None
    jsonschema.validate(result.structured_content, tool.output_schema)
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
            assert "\n    " not in tool.description  # dedented: the model reads no indentation
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.annotations is not None
            assert tool.annotations.idempotent_hint is (tool.name != "thread_rebuild_request")
        request = next(tool for tool in listed if tool.name == "thread_rebuild_request")
        assert request.input_schema["required"] == ["reason", "confirmation"]

    setup.run(scenario)


def test_read_only_tools_answer_on_a_real_corpus_transcript(setup: Setup) -> None:
    transcript = str(setup.corpus / TRANSCRIPT)
    resolved = str((setup.corpus / TRANSCRIPT).resolve())  # reports name the resolved file

    async def scenario(client: Client) -> None:
        plan = await call(client, "thread_rebuild_plan", transcript=transcript)
        assert plan["transcript"] == resolved
        # 7 turns in the file, 3 of them on a branch the human rewound past (not carried)
        assert plan["turns"]["source"] == plan["turns"]["selected"] == 4
        assert plan["rewound"]["speech"]["typed"] == 3
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


OUTPUT_PROPERTIES = {
    "thread_rebuild_doctor": {"ok", "checks", "active"},
    "thread_rebuild_dirty": {"transcript", "transcript_source", "categories", "noise_bytes",
                             "conversation_bytes", "noise_ratio", "should_rebuild", "reasons"},
    "thread_rebuild_plan": {"transcript", "transcript_source", "items", "turns", "speech",
                            "blocked_reason", "dirty"},
    "thread_rebuild_status": {"operation_id", "state", "message", "age_s", "failure",
                              "timeline", "detail"},
    "thread_rebuild_request": {"operation_id", "state", "reasons", "bound_session_id",
                               "message"},
    "thread_rebuild_cancel": {"operation_id", "state", "message"},
    "thread_rebuild_rollback_request": {"operation_id", "state", "turns_since_switch",
                                        "message"},
}


def test_every_tool_publishes_an_output_schema_naming_its_properties(setup: Setup) -> None:
    async def scenario(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == set(OUTPUT_PROPERTIES)
        for name, expected in OUTPUT_PROPERTIES.items():
            schema = listed[name].output_schema
            assert schema is not None
            assert expected <= set(schema["properties"]), name
            assert schema.get("additionalProperties") is not True or name == "thread_rebuild_plan"
            jsonschema.Draft202012Validator.check_schema(schema)
        status = listed["thread_rebuild_status"].output_schema
        assert status is not None and status["properties"]["timeline"]["type"] == "array"
        detail = listed["thread_rebuild_status"].input_schema["properties"]["detail"]
        assert detail["default"] is False
        server = client.server_info
        assert server is not None and server.name == "threadline"
        assert server.version == version("threadline")

    setup.run(scenario)


def test_results_of_every_callable_tool_validate_against_their_schemas(setup: Setup) -> None:
    async def scenario(client: Client) -> None:
        await call(client, "thread_rebuild_doctor")  # call() validates each result
        await call(client, "thread_rebuild_dirty", transcript=str(setup.corpus / TRANSCRIPT))
        await call(client, "thread_rebuild_plan", transcript=str(setup.corpus / TRANSCRIPT))
        made = await call(client, "thread_rebuild_request", reason="full", confirmation="REBUILD")
        brief = await call(client, "thread_rebuild_status")
        assert brief["operation_id"] == made["operation_id"] and brief["state"] == "pending"
        assert brief["timeline"] == [brief["timeline"][0]]
        assert brief["timeline"][0].endswith(" created → pending")
        assert 0 < brief["request_expires_in_s"] <= 24 * 3600
        full = await call(client, "thread_rebuild_status", detail=True)
        assert full["detail"]["reasons"][0]["reason"] == "full"
        await call(client, "thread_rebuild_cancel", operation_id=made["operation_id"],
                   confirmation="CANCEL")

    setup.run(scenario)


def test_status_of_a_failed_operation_with_a_long_timeline_is_at_most_1_kb(setup: Setup) -> None:
    store = Store(setup.state)
    op = store.create(reason={"reason": "context full of tool output", "source": "mcp"},
                      bound_session_id=SESSION, door="tmux")
    long_path = str(setup.state / "artifacts" / op.operation_id / ("x" * 80 + ".jsonl"))
    store.transition(op.operation_id, State.SCHEDULED, phase="scheduled",
                     evidence={"session_id": SESSION, "transcript": long_path})
    store.transition(op.operation_id, State.RUNNING, phase="worker_started",
                     evidence={"pid": 4242})
    for n in range(40):  # stable, frozen, built, … with evidence the size of real ones
        store.update(op.operation_id, phase=f"step_{n}", facts={f"fact_{n}": long_path},
                     evidence={"path": long_path, "sha256": "ab" * 32,
                               "argv": ["/usr/bin/claude", "--resume", SESSION] * 4})
    store.transition(op.operation_id, State.FAILED, phase="failed",
                     evidence={"code": "candidate_unverified", "message": "m" * 300},
                     failure={"code": "candidate_unverified",
                              "message": "the candidate lost 2 human turns: " + "t" * 400})

    async def scenario(client: Client) -> None:
        result = await client.call_tool("thread_rebuild_status", {})
        brief = result.structured_content
        assert isinstance(brief, dict)
        assert len(json.dumps(brief)) <= 1024
        text = " ".join(getattr(block, "text", "") for block in result.content)
        assert len(text.encode()) <= 1024 and json.loads(text) == brief
        assert brief["state"] == "failed" and brief["failure"]["code"] == "candidate_unverified"
        assert brief["failure"]["message"].startswith("the candidate lost 2 human turns: ttt")
        assert brief["timeline"][0].endswith(" created → pending")
        assert brief["timeline"][-1].endswith(" failed candidate_unverified")
        assert any(line.endswith(" more phases") for line in brief["timeline"])
        full = await call(client, "thread_rebuild_status", operation_id=op.operation_id,
                          detail=True)
        assert len(full["detail"]["events"]) == 44 and full["detail"]["facts"]["fact_39"]
        assert len(json.dumps(full)) > 10 * 1024

    setup.run(scenario)


def test_dirty_and_plan_default_to_the_served_session_not_the_newest_file(
    tmp_path: Path, corpus: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    served = project / f"{SESSION}.jsonl"
    served.write_bytes((corpus / TRANSCRIPT).read_bytes())
    # After a rolled-back rebuild the abandoned candidate is the newest file of the folder.
    abandoned = project / "0e0e0e0e-1111-4222-8333-444455556666.jsonl"
    abandoned.write_text(served.read_text().splitlines()[0] + "\n")
    os.utime(served, (1_700_000_000, 1_700_000_000))
    setup = Setup(tmp_path, corpus, project_dir=project)

    async def scenario(client: Client) -> None:
        dirty = await call(client, "thread_rebuild_dirty")
        assert dirty["transcript"] == str(served.resolve())
        assert dirty["transcript_source"] == "served session"
        assert dirty["noise_bytes"] > 0 and dirty["categories"]["tool_use"] > 0
        plan = await call(client, "thread_rebuild_plan")
        assert plan["transcript"] == str(served.resolve())
        assert plan["turns"]["source"] == 4  # (3 more turns on a rewound branch)
        chosen = await call(client, "thread_rebuild_dirty", transcript=str(abandoned))
        assert chosen["transcript_source"] == "argument"

    setup.run(scenario)
    # A claude whose session has no transcript here yet: the newest file, and it says so.
    (setup.claude_dir / "sessions" / f"{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "sessionId": "5a5a5a5a-0000-4000-8000-000000000000"}))

    async def fallback(client: Client) -> None:
        dirty = await call(client, "thread_rebuild_dirty")
        assert dirty["transcript"] == str(abandoned.resolve())
        assert dirty["transcript_source"].startswith("newest in project_dir (served session 5a5a")

    setup.run(fallback)


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
