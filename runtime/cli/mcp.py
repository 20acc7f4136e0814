"""``tl-rebuild mcp``: the stdio MCP server (official SDK v2) with the seven thread_rebuild tools.

Each tool is one typed function whose (dedented) docstring is what the model reads and whose
return type (runtime.cli.mcp_results) is its published ``outputSchema``. Read-only tools
(doctor, dirty, plan, status) carry ``readOnlyHint`` and ``idempotentHint`` so they can be
allow-listed; the writing tools keep the permission prompt and need their confirmation word
(REBUILD, CANCEL, ROLLBACK).
A wrong word, like every other error the model can act on, is *raised* as a ToolError: the
call fails with the one-line message, and nothing is written.

A request is bound to the session of the claude that runs this server: walking up the parent
processes, the first pid with ``$CLAUDE_CONFIG_DIR/sessions/<pid>.json`` names it (sessionId).
Under a codex, the thread that codex holds the writer lock for. ``dirty`` and ``plan`` measure
that session's transcript (a codex thread's rollout) by default, not the newest file of the
project folder (after a rolled-back rebuild that is the abandoned candidate).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from runtime import package_version
from runtime.agents import RunningFacts, codex
from runtime.agents.kind import AgentKind
from runtime.cli.mcp_results import (
    CancelResult,
    DirtyResult,
    DoctorResult,
    PlanResult,
    RequestResult,
    RollbackResult,
    StatusResult,
    brief_status,
)
from runtime.config import Config, config_path_from, load_config
from runtime.errors import ThreadlineError
from runtime.paths import claude_config_dir, codex_rollout
from runtime.procfs import claude_session_record, cmdline, codex_writer_locks, environ, parse_stat
from runtime.switch.ops import MAX_REASON_CHARS

SERVER_NAME = "threadline"
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False,
                            open_world_hint=False)
# A request adds its reason to the pending operation each time: not idempotent.
WRITES = ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False,
                         open_world_hint=False)
# Cancel and rollback move one operation out of one state; the same call again changes nothing.
SETTLES = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False,
                          open_world_hint=False)
SWITCHES = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=True,
                           open_world_hint=False)
T = TypeVar("T")

# Caps on the free-text arguments: a refusal quotes what it refused, so an unbounded value (a
# 10 MB "path") came back whole in the error and in the log line of each call.
PATH_MAX_CHARS = 4096  # Linux PATH_MAX
OPERATION_ID_MAX_CHARS = 64  # op-YYYYMMDDTHHMMSS.ffffffZ-xxxxxx is 32
Transcript = Annotated[
    str | None,
    Field(description="Path of a session transcript (.jsonl) inside project_dir; "
                      "default: the session of the claude or codex that runs this server.",
          max_length=PATH_MAX_CHARS),
]
OperationId = Annotated[str, Field(description="Operation id, as returned by a request.",
                                   max_length=OPERATION_ID_MAX_CHARS)]


@dataclass(frozen=True)
class Served:
    """Who runs this server: its session (None: unknown) and, under a codex, that codex's pid,
    ``CODEX_HOME`` and the threads it holds writer locks for (what an unknown session means)."""

    session_id: str | None
    codex_pid: int | None = None
    codex_home: Path | None = None
    codex_threads: tuple[str, ...] = ()


def served_session(start_pid: int | None = None, config_dir: Path | None = None) -> Served:
    """The session of the nearest ancestor process that is a running claude — or, when that
    ancestor is a codex, the one thread it holds the writer lock for (none or two: unknown).

    A record left by an earlier process with a recycled pid names another session: it is
    skipped like junk (``claude_session_record`` checks the start time)."""
    folder = config_dir if config_dir is not None else claude_config_dir()
    pid = start_pid if start_pid is not None else os.getppid()
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        argv = cmdline(pid) or ()
        if any(os.path.basename(arg) in codex.PROGRAMS for arg in argv[:2]):
            # a codex: the thread it holds the writer lock for in its own CODEX_HOME
            env = environ(pid) or {}
            home = Path(env.get(codex.HOME_VAR) or os.path.join(env.get("HOME", "/"), ".codex"))
            threads = codex_writer_locks(home, pid)
            return Served(codex.running_session(pid, RunningFacts(writer_locks=threads)),
                          pid, home, tuple(threads))
        record = claude_session_record(folder, pid)
        if record is not None and isinstance(record.get("sessionId"), str):
            return Served(str(record["sessionId"]) or None)
        try:
            stat = parse_stat(Path(f"/proc/{pid}/stat").read_text())
        except OSError:
            return Served(None)
        if stat is None:
            return Served(None)
        pid = stat[1]
    return Served(None)


def claude_session_id(start_pid: int | None = None, config_dir: Path | None = None) -> str | None:
    """``served_session(…).session_id``: the session a request is bound to."""
    return served_session(start_pid, config_dir).session_id


def _confirm(word: str, confirmation: str) -> None:
    """Refuse before anything is read or written (ops checks again)."""
    if confirmation != word:
        raise ToolError(
            f"the confirmation word must be exactly {word!r} (got {confirmation!r}); "
            "ask the human to confirm, nothing was written"
        )


def _call(fn: Callable[[], T]) -> T:
    """Run an operations/report call; its errors become tool errors the model can read."""
    try:
        return fn()
    except ThreadlineError as exc:
        raise ToolError(str(exc)) from exc


def served_transcript(transcript: str | None, config: Config,
                      served: Served) -> tuple[str | None, str]:
    """The transcript ``dirty`` and ``plan`` read, and why that one.

    Default: the transcript of the session this server serves in ``project_dir`` — under a
    codex, the current rollout of the thread it holds the writer lock for, in any folder of
    ``$CODEX_HOME/sessions``. A claude session with none there falls back to the newest
    session of ``project_dir``; under a codex there is no such fallback (the newest rollout
    can be an abandoned rebuild): no thread, two threads or no rollout is a one-line
    ToolError naming why and the ``transcript`` argument to pass instead."""
    if transcript is not None:
        return transcript, "argument"
    from runtime.agents.claude import SESSION_ID

    if config.project_dir is None:
        return None, "no project_dir configured"  # the report says so, as a tool error
    session_id = served.session_id
    if config.agent is AgentKind.CODEX:
        sessions = config.project_dir
        rollout = _call(lambda: codex_rollout(sessions, session_id))  # two copies: one line
        if rollout is not None:
            return str(rollout), "served session"
        raise ToolError(f"{_no_codex_rollout(served, config.project_dir)}; pass transcript="
                        f"<path of the thread's rollout-….jsonl under {str(config.project_dir)!r}>")
    if session_id and SESSION_ID.fullmatch(session_id):
        own = config.project_dir / f"{session_id}.jsonl"
        if own.is_file():
            return str(own), "served session"
    if session_id:
        return None, f"newest in project_dir (served session {session_id} has no transcript there)"
    return None, "newest in project_dir (no served session found)"


def _no_codex_rollout(served: Served, sessions: Path) -> str:
    """Why the served codex thread has no rollout to read (``served_transcript``)."""
    if served.codex_pid is None:
        return "this server runs under no codex process, so no codex thread is served"
    locks = f"{served.codex_home}/thread-writer-locks"
    if not served.codex_threads:
        return (f"codex pid {served.codex_pid} holds no thread-writer lock in {locks!r} (a codex "
                "without --no-daemon runs its thread in the shared app-server daemon)")
    if served.session_id is None:
        return (f"codex pid {served.codex_pid} holds writer locks for "
                f"{len(served.codex_threads)} threads ({', '.join(served.codex_threads)}; after "
                "/fork both stay locked), so which one is served is ambiguous")
    return (f"thread {served.session_id} of codex pid {served.codex_pid} has no rollout under "
            f"{str(sessions)!r}")


def build_server(load: Callable[[], Config]) -> MCPServer:
    """The server with its seven tools; ``load`` returns the runtime config for each call."""
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=package_version(),  # serverInfo.version: the one --version prints
        instructions=(
            "Threadline rebuilds this long-running Claude Code or Codex session onto a clean "
            "session file that keeps every human and assistant word and drops tool noise. "
            "Read-only: "
            "thread_rebuild_doctor, _dirty, _plan, _status. Writing tools need the human's "
            "confirmation word: request (REBUILD), cancel (CANCEL), rollback_request (ROLLBACK). "
            "A request only registers the rebuild; the switch happens after your turn ends."
        ),
    )

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def register(fn: Callable[..., T]) -> Callable[..., T]:
            server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""),
                            annotations=annotations)
            return fn
        return register

    @tool(READ_ONLY)
    def thread_rebuild_doctor() -> DoctorResult:
        """Check that threadline is set up to rebuild this session: config, store, door, hook.

        Returns a list of checks, each with ok and a detail; nothing is changed.
        """
        from runtime.switch import ops

        return cast(DoctorResult, _call(lambda: ops.doctor(load())))

    @tool(READ_ONLY)
    def thread_rebuild_dirty(transcript: Transcript = None) -> DirtyResult:
        """Measure the tool noise in this session's transcript and whether a rebuild is advised.

        Bytes per noise category (tool results, tool calls, thinking, images, injected blocks …),
        conversation bytes, noise ratio and should_rebuild; transcript_source says which file was
        measured and why. Advisory only; nothing is changed.
        """
        from runtime.engine import report

        config = load()
        path, source = served_transcript(transcript, config, served_session())
        result = _call(lambda: report.dirty_report(path, config))
        return cast(DirtyResult, {**result, "transcript_source": source})

    @tool(READ_ONLY)
    def thread_rebuild_plan(transcript: Transcript = None) -> PlanResult:
        """Show what a rebuild of this session would carry (every turn, verbatim) and drop.

        Turns, speech counts per kind, ignored event types, token estimate, poison score, blocked
        reason and the dirty ledger; transcript_source says which file was read and why.
        Nothing is written.
        """
        from runtime.engine import report

        config = load()
        path, source = served_transcript(transcript, config, served_session())
        result = _call(lambda: report.plan_report(path, config))
        return cast(PlanResult, {**result, "transcript_source": source})

    @tool(WRITES)
    def thread_rebuild_request(
        reason: Annotated[str, Field(
            description=f"Why to rebuild the session, in one sentence (at most "
                        f"{MAX_REASON_CHARS} characters; stored in the audit record, so "
                        "never quote the conversation).",
            max_length=MAX_REASON_CHARS)],
        confirmation: Annotated[str, Field(description="The human's word: exactly REBUILD.")],
    ) -> RequestResult:
        """Register a rebuild of this session once the human said REBUILD; switches after this turn.

        Only records a pending operation bound to this session, then reply normally: when your
        turn ends, the end-of-turn trigger (Claude Code's Stop hook, Codex's notify) builds the
        clean session and switches to it.
        """
        from runtime.switch import ops

        _confirm("REBUILD", confirmation)
        session_id = claude_session_id()
        return cast(RequestResult, _call(lambda: ops.request(
            load(), reason, confirmation, session_id=session_id, source="mcp")))

    @tool(READ_ONLY)
    def thread_rebuild_status(
        operation_id: Annotated[
            str | None, Field(description="Operation id; default: the active, else the latest.",
                              max_length=OPERATION_ID_MAX_CHARS)
        ] = None,
        detail: Annotated[bool, Field(
            description="Also return the whole record, facts and timeline evidence (~10 KB); "
                        "default: a brief of at most 1 KB.")] = False,
    ) -> Annotated[CallToolResult, StatusResult]:
        """Report the state of a rebuild operation (default: active, else latest) in brief.

        State (pending, scheduled, running, …, activated, failed, rolled_back), its age, worker
        status, the failure code and message, and one line per recorded phase with the time since
        the request; a pending request says when it expires (an expired request is cancelled,
        not carried out). detail=true adds the full record. Nothing is changed.
        """
        from runtime.switch import ops

        full = _call(lambda: ops.status(load(), operation_id))
        brief = brief_status(full, datetime.now(UTC), detail=detail)
        # The text block is what most clients show the model: compact JSON, not indented.
        text = json.dumps(brief, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(text=text)],
                              structured_content=cast(dict[str, Any], brief))

    @tool(SETTLES)
    def thread_rebuild_cancel(
        operation_id: OperationId,
        confirmation: Annotated[str, Field(description="The human's word: exactly CANCEL.")],
    ) -> CancelResult:
        """Cancel a rebuild that has not started switching yet, after the human said CANCEL."""
        from runtime.switch import ops

        _confirm("CANCEL", confirmation)
        return cast(CancelResult, _call(lambda: ops.cancel(load(), operation_id, confirmation)))

    @tool(SWITCHES)
    def thread_rebuild_rollback_request(
        operation_id: OperationId,
        confirmation: Annotated[str, Field(description="The human's word: exactly ROLLBACK.")],
    ) -> RollbackResult:
        """Ask to go back to the session before an activated rebuild, after the human said ROLLBACK.

        Reports how many turns were said in the new session since the switch (the old session will
        not have them); the switch back happens after this turn ends.
        """
        from runtime.switch import ops

        _confirm("ROLLBACK", confirmation)
        return cast(RollbackResult, _call(
            lambda: ops.rollback_request(load(), operation_id, confirmation)))

    _forbid_unknown_arguments(server)
    return server


def _forbid_unknown_arguments(server: MCPServer) -> None:
    """Make every tool refuse arguments it does not declare (the SDK drops them silently, so
    a misspelt ``operation_id`` would act on the default operation instead)."""
    manager = server._tool_manager  # noqa: SLF001 - the SDK offers no public hook for this
    for tool in manager.list_tools():
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters = model.model_json_schema(by_alias=True)


def refusals(item: SessionMessage | Exception) -> list[JSONRPCError] | None:
    """The JSON-RPC errors that answer a line the SDK's stdio transport could not read
    (``item`` an Exception) or read as a notification although its method is a request's,
    or None for a message the server answers.

    The SDK drops such a line without a word, so a client waiting on its id waits forever:
    not JSON (or nested past the parser's limit) is -32700 with id null; JSON that is no
    JSON-RPC 2.0 message is -32600, with the id of a request when it has a usable one; a batch
    (an array, which MCP since 2025-06-18 does not take) gets one -32600 per request in it."""
    if not isinstance(item, Exception):
        message = item.message
        if isinstance(message, JSONRPCNotification) and not message.method.startswith(
                NOTIFICATION_PREFIX):
            # the SDK reads a request whose id is no string or integer (``true``, ``{}``,
            # ``1.5``, ``null``) or is missing as a notification and answers nothing
            return [_refusal(None, INVALID_REQUEST, (
                f"Invalid Request: {message.method[:80]!r} needs an id that is a string or an "
                f"integer (only {NOTIFICATION_PREFIX}… methods are notifications)"))]
        return None
    errors = item.errors(include_url=False) if isinstance(item, ValidationError) else []
    if not errors or any(error["type"] == "json_invalid" for error in errors):
        said = errors[0]["msg"] if errors else str(item)
        return [_refusal(None, PARSE_ERROR, f"Parse error: the line is not JSON ({said[:200]})")]
    sent = next((error["input"] for error in errors
                 if error["type"] == "model_type" and len(error["loc"]) == 1
                 or error["type"] == "missing" and len(error["loc"]) == 2), None)
    if type(sent) is list:
        ids = [_request_id(element) for element in sent]
        return [_refusal(request, INVALID_REQUEST, BATCH_REFUSED)
                for request in ids if request is not None] or [
                    _refusal(None, INVALID_REQUEST, BATCH_REFUSED)]
    kind = ("JSONRPCRequest" if type(sent) is dict and "id" in sent else "JSONRPCNotification")
    error = next((e for e in errors if e["loc"][:1] == (kind,)), errors[0])
    where = ".".join(str(part) for part in error["loc"][1:]) or "message"
    return [_refusal(_request_id(sent), INVALID_REQUEST,
                     f"Invalid Request: not a JSON-RPC 2.0 message ({where}: {error['msg']})")]


NOTIFICATION_PREFIX = "notifications/"  # every MCP notification method; any other is a request
BATCH_REFUSED = ("Invalid Request: a batch (JSON array) is not taken; send one JSON-RPC "
                 "message per line")


def _request_id(sent: Any) -> str | int | None:
    """The id of ``sent`` when it is a request with a usable one (a response's id is the
    client's own: answering it would resolve one of the client's requests)."""
    if type(sent) is not dict or "method" not in sent:
        return None
    request = sent.get("id")
    return request if type(request) in (str, int) else None


def _refusal(request: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request, error=ErrorData(code=code, message=message))


async def serve_stdio(server: MCPServer) -> None:
    """``server`` over stdin/stdout, the SDK's transport, with ``refusals`` answering the lines
    it drops (they reach the writer in line order with the server's own answers)."""
    import anyio
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)  # the SDK offers no hook for bad lines
    if lowlevel is None:  # an SDK release that moved it: serve as the SDK does, unscreened
        await server.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def screen() -> None:
            async with send:
                async for item in read_stream:
                    answers = refusals(item)
                    if answers is None:
                        await send.send(item)
                    for answer in answers or ():
                        await write_stream.send(SessionMessage(answer))

        async with anyio.create_task_group() as group:
            group.start_soon(screen)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


def main(args: argparse.Namespace) -> int:
    """Serve the tools over stdio until the client closes the connection."""
    import anyio

    path = config_path_from(getattr(args, "config", None))
    load_config(path)  # a broken config fails the start, with the key, not the first call

    def load() -> Config:
        return load_config(path)  # re-read per call: an edited config takes effect at once

    anyio.run(serve_stdio, build_server(load))
    return 0

