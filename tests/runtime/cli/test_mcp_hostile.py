"""``tl-rebuild mcp`` against a hostile client speaking raw JSON-RPC lines over stdio.

Every line gets an answer or is a notification: a line the SDK's transport cannot read was
dropped without a word, so a client waiting on its id waited forever. Each test sends the
bad line, then a ``ping``: the answers come back in line order, so the first one read is the
bad line's (on the old server it was the ping's), and the ping's proves the stream still
works.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.cli.test_mcp import tl_rebuild_argv

ANSWER_BOUND_SECONDS = 60  # a bound for a failing server, never a timing assertion


class Server:
    """``tl-rebuild mcp`` as a subprocess; ``send`` a line, ``answer`` the next one back."""

    def __init__(self, tmp_path: Path) -> None:
        config = tmp_path / "threadline.toml"
        (tmp_path / "project").mkdir()
        config.write_text(
            f'project_dir = "{tmp_path / "project"}"\nworkdir = "{tmp_path}"\n'
            f'state_dir = "{tmp_path / "state"}"\n[switch]\ndoor = "pointer"\n'
            f'[switch.pointer]\npath = "{tmp_path / "pointer"}"\n')
        (tmp_path / "claude-config" / "sessions").mkdir(parents=True)
        self.stderr = open(tmp_path / "stderr.log", "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [*tl_rebuild_argv(), "mcp", "--config", str(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env={**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")})
        self.pending = b""

    def send(self, line: bytes | str | Any) -> None:
        if not isinstance(line, bytes | str):
            line = json.dumps(line)
        raw = line.encode() if isinstance(line, str) else line
        assert self.process.stdin is not None
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next line the server wrote, as JSON (the test fails on a non-JSON line)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + ANSWER_BOUND_SECONDS
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no answer within {ANSWER_BOUND_SECONDS} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                raise AssertionError("the server closed its stdout")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        answer = json.loads(line)
        assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", line[:300]
        return answer

    def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"}}})
        answer = self.answer()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def ping(self) -> None:
        self.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})

    def close(self) -> int:
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(ANSWER_BOUND_SECONDS)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.stderr.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path)
    try:
        yield running
    finally:
        running.close()
    assert b"Traceback" not in (tmp_path / "stderr.log").read_bytes()


def error_of(answer: dict[str, Any]) -> tuple[Any, int, str]:
    assert "error" in answer, answer
    return answer["id"], answer["error"]["code"], answer["error"]["message"]


def pong(server: Server) -> None:
    assert server.answer() == {"jsonrpc": "2.0", "id": "ping", "result": {}}


@pytest.mark.parametrize("line", [
    b"this is not json", b'{"jsonrpc":"2.0","id":1,"method":"ping"', b"\xff\xfe{}",
    b"[" * 100_000 + b"]" * 100_000,  # past the parser's nesting limit
], ids=["words", "cut", "not-utf8", "nested-100000"])  # a 200 KB id: PYTEST_CURRENT_TEST
# would carry it into every child's environment, past the kernel's 128 KiB per string
def test_a_line_that_is_not_json_is_a_parse_error_and_the_stream_goes_on(
    server: Server, line: bytes
) -> None:
    server.initialize()
    server.send(line)
    server.ping()
    request, code, message = error_of(server.answer())
    assert (request, code) == (None, -32700) and message.startswith("Parse error")
    pong(server)


@pytest.mark.parametrize(("line", "request_id", "said"), [
    ('{"id": 7, "method": "ping"}', 7, "jsonrpc"),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1, 2]}', 7, "params"),
    ('{"jsonrpc": "2.0", "id": 7, "method": 5}', 7, "method"),
    ('{"jsonrpc": "1.0", "id": "x", "method": "ping"}', "x", "jsonrpc"),
    ("42", None, "object"),
    ('"ping"', None, "object"),
    ('{"jsonrpc": "2.0", "id": 7, "result": 5}', None, ""),  # a broken response: id not ours
])
def test_json_that_is_no_json_rpc_message_is_an_invalid_request(
    server: Server, line: str, request_id: Any, said: str
) -> None:
    server.initialize()
    server.send(line)
    server.ping()
    request, code, message = error_of(server.answer())
    assert (request, code) == (request_id, -32600) and said in message, message
    pong(server)


@pytest.mark.parametrize("request_id", ["true", "{}", "[1]", "1.5", "null", None],
                         ids=["true", "object", "array", "fraction", "null", "missing"])
def test_a_request_without_a_usable_id_is_an_invalid_request(
    server: Server, request_id: str | None
) -> None:
    """The SDK took ``{"id": true, "method": "ping"}`` (an id that is no string or integer, or
    none at all) for a notification and answered nothing: a client waiting on it hung. Only
    ``notifications/…`` methods are notifications in MCP; the rest get -32600 with id null."""
    server.initialize()
    for method in ("ping", "tools/list"):
        line = '{"jsonrpc": "2.0", ' + (f'"id": {request_id}, ' if request_id else "") + \
            f'"method": "{method}"}}'
        server.send(line)
        request, code, message = error_of(server.answer())
        assert (request, code) == (None, -32600), message
        assert message == (f"Invalid Request: {method!r} needs an id that is a string or an "
                           f"integer (only notifications/… methods are notifications)")
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": "gone"}})  # a real notification: no answer
    server.ping()
    pong(server)


def test_a_batch_array_gets_one_error_per_request_in_it(server: Server) -> None:
    """MCP took batches only in 2025-03-26; each request in one gets its own refusal, so no
    id is left waiting."""
    server.initialize()
    server.send([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": "two", "method": "ping"}])
    server.send([])
    server.ping()
    answers = [error_of(server.answer()) for _ in range(3)]
    assert [(request, code) for request, code, _ in answers] == [
        (1, -32600), ("two", -32600), (None, -32600)]
    assert all("batch" in message for _, _, message in answers)
    pong(server)


def test_a_bad_line_before_initialize_is_answered_too(server: Server) -> None:
    server.send("{broken")
    request, code, _ = error_of(server.answer())
    assert (request, code) == (None, -32700)
    assert server.initialize()["result"]["serverInfo"]["name"] == "threadline"


@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("thread_rebuild_plan", {"transcript": "a/" * (4 << 20)}, "transcript"),
    ("thread_rebuild_dirty", {"transcript": "x" * (8 << 20)}, "transcript"),
    ("thread_rebuild_status", {"operation_id": "x" * (8 << 20)}, "operation_id"),
    ("thread_rebuild_cancel", {"operation_id": "x" * (8 << 20), "confirmation": "CANCEL"},
     "operation_id"),
])
def test_a_huge_argument_is_refused_without_echoing_it(
    server: Server, tool: str, arguments: dict[str, Any], field: str
) -> None:
    """The refusal quoted the argument whole: an 8 MB "path" came back as an 8 MB error."""
    server.initialize()
    server.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                 "params": {"name": tool, "arguments": arguments}})
    answer = server.answer()
    assert answer["id"] == 9 and answer["result"]["isError"] is True
    text = answer["result"]["content"][0]["text"]
    assert field in text and "at most" in text and len(json.dumps(answer)) < 4096


def test_unknown_methods_wrong_argument_types_and_versions_are_answered(server: Server) -> None:
    """What the SDK already answers, held: -32601, tool errors naming the argument, and the
    server's own protocol version for one it does not know."""
    assert server.initialize("1999-01-01")["result"]["protocolVersion"] != "1999-01-01"
    server.send({"jsonrpc": "2.0", "id": 1, "method": "bogus/method"})
    assert error_of(server.answer())[:2] == (1, -32601)
    for tool, arguments, field in [
        ("thread_rebuild_dirty", {"transcript": 5}, "transcript"),
        ("thread_rebuild_plan", {"transcript": ["a"]}, "transcript"),
        ("thread_rebuild_status", {"detail": [1]}, "detail"),
        ("thread_rebuild_request", {"reason": 5, "confirmation": "REBUILD"}, "reason"),
        ("thread_rebuild_cancel", {"operation_id": ["x"], "confirmation": "CANCEL"},
         "operation_id"),
        ("thread_rebuild_rollback_request", {"operation_id": "x", "confirmation": 1},
         "confirmation"),
        ("thread_rebuild_doctor", {"x": 1}, "x"),
    ]:
        server.send({"jsonrpc": "2.0", "id": tool, "method": "tools/call",
                     "params": {"name": tool, "arguments": arguments}})
        answer = server.answer()
        assert answer["id"] == tool and answer["result"]["isError"] is True
        assert field in answer["result"]["content"][0]["text"]
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "thread_rebuild_status", "arguments": [1]}})
    assert error_of(server.answer())[:2] == (2, -32602)


def test_a_client_that_closes_stdin_mid_line_ends_the_server(server: Server) -> None:
    server.initialize()
    assert server.process.stdin is not None
    server.process.stdin.write(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "par')
    server.process.stdin.flush()
    assert server.close() == 0


def test_an_sdk_without_the_lowlevel_server_is_served_as_the_sdk_serves_it() -> None:
    """``serve_stdio`` reaches into the SDK (``_lowlevel_server``; mcp is pinned ``>=2,<3``):
    a release that moves it must still serve the tools, unscreened, not crash at start."""
    import anyio

    from runtime.cli.mcp import serve_stdio

    served: list[str] = []

    class Moved:
        async def run_stdio_async(self) -> None:
            served.append("stdio")

    anyio.run(serve_stdio, Moved())  # type: ignore[arg-type]
    assert served == ["stdio"]
