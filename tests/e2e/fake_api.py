"""A fake Anthropic Messages API on 127.0.0.1 for driving the real Claude Code CLI offline.

It records every request (path, ``X-Claude-Code-Session-Id`` header, JSON body) — the tests'
oracle is "what did the model see" — and answers like a tiny deterministic model:

- by default with the text ``echo[N]: <last user text>`` (N = request number);
- when the last user message's text contains a scripted cue, with a ``tool_use`` of the cue's
  tool. Claude Code 2.1.328 defers MCP tools behind ``ToolSearch``: when the cue's tool is not in
  the request's ``tools`` list, the fake first calls ``ToolSearch`` with ``select:<tool>`` and calls
  the tool once the search result comes back;
- after a tool result of a cue's tool, with the cue's ``after_text`` (never the tool output itself,
  so a test can tell carried speech from carried tool output);
- ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}``.

Only the stdlib is used; answers stream as SSE when the request asks for ``stream: true``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SESSION_HEADER = "X-Claude-Code-Session-Id"


@dataclass(frozen=True)
class Cue:
    """A scripted tool call: when the last user text contains ``trigger``, call ``tool``.

    An empty ``tool`` scripts no call: the answer is the usual echo (useful with ``hold``).

    ``hold``, when given, makes the answer wait until the event is set (bounded by
    ``hold_timeout``), so a test can type while the assistant is busy without sleeping.
    """

    trigger: str
    tool: str
    input: Mapping[str, Any] | Callable[[str], Mapping[str, Any]] = field(default_factory=dict)
    after_text: str = "tool-done: {tool}"
    hold: threading.Event | None = None
    hold_timeout: float = 60.0

    def tool_input(self, user_text: str) -> dict[str, Any]:
        raw = self.input(user_text) if callable(self.input) else self.input
        return dict(raw)


@dataclass(frozen=True)
class Recorded:
    """One request the fake received: its number, path, session header and JSON body."""

    index: int
    path: str
    session_id: str
    body: dict[str, Any]
    received: float

    @property
    def is_messages(self) -> bool:
        return self.path.split("?", 1)[0] == "/v1/messages"

    @property
    def is_conversation(self) -> bool:
        """True for a main-loop model call (it offers tools); side calls (titles…) offer none."""
        return self.is_messages and bool(self.body.get("tools"))

    def texts(self) -> list[str]:
        """Every text the model saw in this request: system, messages, tool results."""
        body = self.body
        return list(iter_texts(body.get("system"))) + list(iter_texts(body.get("messages")))

    def joined(self) -> str:
        return "\n".join(self.texts())

    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or [] if isinstance(t, dict)]


def iter_texts(node: Any) -> Iterator[str]:
    """Yield every string that is model-visible text inside a request fragment."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from iter_texts(item)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind == "text" and isinstance(node.get("text"), str):
            yield node["text"]
        elif kind == "tool_result":
            yield from iter_texts(node.get("content"))
        elif kind == "thinking" and isinstance(node.get("thinking"), str):
            yield node["thinking"]
        elif kind == "tool_use":
            yield json.dumps(node.get("input"), ensure_ascii=False)
        elif "content" in node:
            yield from iter_texts(node["content"])


def last_user_message(body: Mapping[str, Any]) -> dict[str, Any] | None:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


def user_text(message: Mapping[str, Any] | None) -> str:
    """The plain text blocks of a user message (tool results excluded), joined."""
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b["text"] for b in content or []
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def tool_result_ids(message: Mapping[str, Any] | None) -> list[str]:
    content = (message or {}).get("content")
    if not isinstance(content, list):
        return []
    return [str(b.get("tool_use_id")) for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result"]


class FakeApi:
    """The fake model server; use as a context manager or call ``start``/``stop``."""

    def __init__(self, cues: tuple[Cue, ...] | list[Cue] = (), host: str = "127.0.0.1") -> None:
        self.cues = list(cues)
        self.requests: list[Recorded] = []
        self.count_token_calls = 0
        self._lock = threading.Condition()
        self._counter = itertools.count(1)
        # tool_use id -> (cue, stage, user text that cued it); stage is "search" (ToolSearch
        # issued, the cue's tool comes next) or "call".
        self._pending: dict[str, tuple[Cue, str, str]] = {}
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeApi:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-api",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for cue in self.cues:
            if cue.hold is not None:
                cue.hold.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_cue(self, cue: Cue) -> None:
        with self._lock:
            self.cues.append(cue)

    # -- oracle ----------------------------------------------------------------------------
    def conversation(self, session_id: str | None = None) -> list[Recorded]:
        """Main-loop requests so far (optionally of one session), oldest first."""
        with self._lock:
            return [r for r in self.requests if r.is_conversation
                    and (session_id is None or r.session_id == session_id)]

    def wait_for_request(self, predicate: Callable[[Recorded], bool] = lambda r: r.is_conversation,
                         after: int = 0, timeout: float = 60.0,
                         what: str = "a request") -> Recorded:
        """Block until a recorded request with index > ``after`` satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for recorded in self.requests:
                    if recorded.index > after and predicate(recorded):
                        return recorded
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(r.index, r.path, r.session_id[:8]) for r in self.requests]
                    raise AssertionError(f"fake API: timed out after {timeout}s waiting for "
                                         f"{what}; seen {seen}")
                self._lock.wait(min(left, 0.5))

    def wait_for_text(self, needle: str, after: int = 0, timeout: float = 60.0,
                      session_id: str | None = None) -> Recorded:
        """Block until a conversation request (after index ``after``) contains ``needle``."""
        return self.wait_for_request(
            lambda r: r.is_conversation and needle in r.joined()
            and (session_id is None or r.session_id == session_id),
            after=after, timeout=timeout, what=f"a request containing {needle!r}")

    def wait_for_nth(self, n: int, timeout: float = 60.0) -> Recorded:
        """Block until the n-th (1-based) conversation request has arrived, and return it."""
        def enough() -> bool:
            return len(self.conversation()) >= n
        deadline = time.monotonic() + timeout
        with self._lock:
            while not enough():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake API: timed out after {timeout}s waiting for "
                                         f"conversation request #{n}")
                self._lock.wait(min(left, 0.5))
        return self.conversation()[n - 1]

    @property
    def last_index(self) -> int:
        with self._lock:
            return self.requests[-1].index if self.requests else 0

    # -- the model -------------------------------------------------------------------------
    def _record(self, path: str, session_id: str, body: dict[str, Any]) -> Recorded:
        with self._lock:
            recorded = Recorded(next(self._counter), path, session_id, body, time.time())
            self.requests.append(recorded)
            self._lock.notify_all()
            return recorded

    def answer(self, recorded: Recorded) -> tuple[list[dict[str, Any]], str]:
        """Decide the content blocks and stop reason for one messages request."""
        last = last_user_message(recorded.body)
        with self._lock:
            for result_id in tool_result_ids(last):
                pending = self._pending.pop(result_id, None)
                if pending is None:
                    continue
                cue, stage, cued_by = pending
                if stage == "search":
                    return self._call(cue, cued_by, recorded), "tool_use"
                text = cue.after_text.format(tool=cue.tool)
                return [{"type": "text", "text": text}], "end_turn"
            text = user_text(last)
            cue = next((c for c in self.cues if c.trigger in text), None)
            if cue is None or not recorded.is_conversation:
                return _echo(recorded.index, text), "end_turn"
        if cue.hold is not None:
            cue.hold.wait(cue.hold_timeout)
        if not cue.tool:
            return _echo(recorded.index, text), "end_turn"
        with self._lock:
            return self._call(cue, text, recorded), "tool_use"

    def _call(self, cue: Cue, text: str, recorded: Recorded) -> list[dict[str, Any]]:
        tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
        if cue.tool not in recorded.tool_names() and "ToolSearch" in recorded.tool_names():
            self._pending[tool_id] = (cue, "search", text)
            block = {"type": "tool_use", "id": tool_id, "name": "ToolSearch",
                     "input": {"query": f"select:{cue.tool}", "max_results": 5}}
        else:
            self._pending[tool_id] = (cue, "call", text)
            block = {"type": "tool_use", "id": tool_id, "name": cue.tool,
                     "input": cue.tool_input(text)}
        return [{"type": "text", "text": f"calling {cue.tool}"}, block]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
                return

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._json(200, {"data": [], "has_more": False})

            def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                path = self.path
                recorded = api._record(path, self.headers.get(SESSION_HEADER, ""), body)
                if path.split("?", 1)[0].endswith("/count_tokens"):
                    with api._lock:
                        api.count_token_calls += 1
                    self._json(200, {"input_tokens": max(1, len(raw) // 4)})
                    return
                if not recorded.is_messages:
                    self._json(200, {})
                    return
                try:
                    blocks, stop = api.answer(recorded)
                except Exception as exc:  # noqa: BLE001 - a broken cue must not hang claude
                    with api._lock:
                        api.errors.append(f"request {recorded.index}: {exc!r}")
                    blocks, stop = [{"type": "text", "text": f"fake-api error: {exc!r}"}], \
                        "end_turn"
                message = _message(body.get("model", "claude-fake"), recorded.index)
                if body.get("stream"):
                    self._sse(message, blocks, stop)
                else:
                    message.update(content=blocks, stop_reason=stop)
                    self._json(200, message)

            def _json(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, message: dict[str, Any], blocks: list[dict[str, Any]],
                     stop: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                for event in _sse_events(message, blocks, stop):
                    line = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                    self.wfile.write(line.encode())
                self.wfile.flush()

        return Handler


def _echo(index: int, text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": f"echo[{index}]: " + " ".join(text.split())[-400:]}]


def _message(model: str, index: int) -> dict[str, Any]:
    return {"id": f"msg_fake_{index:05d}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}


def _sse_events(message: dict[str, Any], blocks: list[dict[str, Any]],
                stop: str) -> Iterator[dict[str, Any]]:
    yield {"type": "message_start", "message": message}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            yield {"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                     "input": {}}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta",
                             "partial_json": json.dumps(block["input"])}}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
           "usage": {"output_tokens": 5}}
    yield {"type": "message_stop"}
