"""A fake OpenAI Responses API on 127.0.0.1 for driving the real Codex CLI offline.

Codex 0.169.0 calls only ``POST /v1/responses`` with ``stream: true`` (notes/codex-live.md §1).
The fake records every request (headers and JSON body; the tests' oracle is the ``input`` the
model was sent) and answers like a tiny deterministic model, streamed as the SSE sequence Codex
accepts (``response.created``, per item ``output_item.added`` … ``output_item.done``,
``response.completed`` with usage):

- by default with one assistant message, ``codex-echo[N]`` (N = request number);
- when the last user message of a request that offers tools contains a ``Cue``'s trigger, with
  the cue's first function call (after an optional reasoning item). Measured with 0.169.0: the
  tools of an MCP server ``<name>`` arrive as one ``{"type": "namespace", "name":
  "mcp__<name>", "tools": [...]}`` entry of ``tools``, and the model calls one with a
  ``function_call`` item ``{"name": "<tool>", "namespace": "mcp__<name>", "arguments": …}``
  (a flat ``mcp__<name>__<tool>`` name is answered "unsupported call"); built-in tools
  (``exec_command``) have no namespace. Codex runs the call and sends a new request ending in
  its ``function_call_output`` (for an MCP tool: ``Wall time: …\\nOutput:\\n<the tool's text>``);
- after the output of a cue's call, with the cue's next call (its arguments may be computed
  from that output, e.g. an operation id a status call returned) or, after the last one, with
  the cue's ``after_text`` — never the tool output itself, so a test can tell carried speech
  from carried tool output.

Loopback only; only the stdlib (and the loopback server of
provision/accept/model_standin.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from provision.accept.model_standin import Loopback

Arguments = Mapping[str, Any] | Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True)
class Request:
    """One request the fake received: its number, path, headers and JSON body."""

    index: int
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def metadata(self) -> dict[str, Any]:
        """The ``x-codex-turn-metadata`` header (request_kind, turn_trigger, thread_id …)."""
        try:
            found = json.loads(self.headers.get("x-codex-turn-metadata", "{}"))
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    @property
    def kind(self) -> str | None:
        """``request_kind`` of the ``x-codex-turn-metadata`` header (turn | compaction)."""
        return self.metadata.get("request_kind")

    @property
    def session_id(self) -> str | None:
        return self.headers.get("session-id")


@dataclass(frozen=True)
class Call:
    """One function call of the fake model: ``name`` in ``namespace`` (``mcp__<server>`` for
    an MCP server's tool, None for a built-in one) with ``arguments`` — or with what they
    compute from the output text of the cue's previous call."""

    name: str
    arguments: Arguments = field(default_factory=dict)
    namespace: str | None = None

    def offered(self, body: Mapping[str, Any]) -> bool:
        """True when the request's ``tools`` offer this call."""
        for tool in body.get("tools") or []:
            if self.namespace is None and tool.get("name") == self.name:
                return True
            if tool.get("type") == "namespace" and tool.get("name") == self.namespace:
                return any(inner.get("name") == self.name for inner in tool.get("tools") or [])
        return False


@dataclass(frozen=True)
class Cue:
    """A scripted tool-using turn: when the last user text contains ``trigger``, make
    ``calls`` one after the other (each after the previous one's output came back), then say
    ``after_text``. ``reasoning``, when given, is a reasoning item before the first call."""

    trigger: str
    calls: tuple[Call, ...]
    after_text: str
    reasoning: str | None = None


def mcp_output(output: str) -> Any:
    """The JSON an MCP tool returned, from the ``function_call_output`` text Codex sends
    (``Wall time: …\\nOutput:\\n<text>``)."""
    return json.loads(output.split("Output:\n", 1)[-1])


class CodexFakeApi(Loopback):
    """A started fake Responses API (use as a context manager); ``requests`` in arrival order."""

    def __init__(self, cues: Sequence[Cue] = ()) -> None:
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.cues = tuple(cues)
        self._calls: dict[str, tuple[Cue, int]] = {}  # call_id → (cue, step)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    fake.errors.append(f"{self.path}: body is not JSON: {exc}")
                    body = {}
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    index = len(fake.requests)
                    fake.requests.append(Request(index, self.path, headers, body))
                    items = fake._answer(index, body)
                if not self.path.endswith("/responses"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                payload = b"".join(_events(index, items))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.serve(Handler)

    def turns(self) -> list[Request]:
        """The requests that were model turns (not compaction), in order."""
        return [r for r in self.requests
                if r.path.endswith("/responses") and r.kind != "compaction"]

    def thread_asked(self, text: str) -> str:
        """The thread (``session-id``) of the first turn request whose body holds ``text``: the
        thread a prompt was typed in. Not the pane's lock: at start the TUI can briefly lock a
        rollout-less helper thread, and after a prompt its title-generation thread."""
        return next(str(r.session_id) for r in self.requests
                    if r.kind == "turn" and text in json.dumps(r.body))

    def _answer(self, index: int, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The output items of the answer to request ``index`` (called under the lock)."""
        last = _last_turn_item(body.get("input") or [])
        if last.get("type") == "function_call_output" and last.get("call_id") in self._calls:
            cue, step = self._calls[str(last["call_id"])]
            if step + 1 < len(cue.calls):
                return [self._call(index, cue, step + 1, _output_text(last.get("output")))]
            return [_message(index, cue.after_text)]
        text = _text(last) if last.get("type") == "message" else ""
        for cue in self.cues:
            if not text or cue.trigger not in text or not body.get("tools"):
                continue  # a request without tools (the TUI's title request) is no turn
            if not cue.calls[0].offered(body):
                self.errors.append(f"request {index}: cue {cue.trigger!r} but "
                                   f"{cue.calls[0].namespace}/{cue.calls[0].name} not offered")
                break
            reasoning = [] if cue.reasoning is None else [{
                "type": "reasoning", "id": f"rs_fake_{index}",
                "summary": [{"type": "summary_text", "text": cue.reasoning}],
                "encrypted_content": f"fake-encrypted-{index}"}]
            return [*reasoning, self._call(index, cue, 0, "")]
        return [_message(index, reply_text(index))]

    def _call(self, index: int, cue: Cue, step: int, previous: str) -> dict[str, Any]:
        call = cue.calls[step]
        arguments = call.arguments(previous) if callable(call.arguments) else call.arguments
        call_id = f"call_fake_{index}"
        self._calls[call_id] = (cue, step)
        item = {"type": "function_call", "id": f"fc_fake_{index}", "call_id": call_id,
                "name": call.name, "arguments": json.dumps(dict(arguments)),
                "status": "completed"}
        if call.namespace is not None:
            item["namespace"] = call.namespace
        return item


def reply_text(index: int) -> str:
    return f"codex-echo[{index}]"


def _last_turn_item(items: Sequence[Any]) -> Mapping[str, Any]:
    """The last user message or function-call output of ``input`` (developer messages that
    Codex puts after them, e.g. ``<collaboration_mode>``, are skipped)."""
    for item in reversed(items):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "function_call_output" or (
                item.get("type") == "message" and item.get("role") == "user"):
            return item
    return {}


def _text(message: Mapping[str, Any]) -> str:
    return "\n".join(str(part.get("text", "")) for part in message.get("content") or []
                     if isinstance(part, Mapping))


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(part.get("text", "")) for part in output
                         if isinstance(part, Mapping))
    return json.dumps(output)


def _message(index: int, text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_fake_{index}", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _events(index: int, items: Sequence[Mapping[str, Any]]) -> list[bytes]:
    response_id = f"resp_fake_{index}"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    sequence: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {"id": response_id}})]
    for position, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            sequence += [
                ("response.output_item.added",
                 {"output_index": position, "item": {**item, "content": []}}),
                ("response.output_text.delta", {"item_id": item["id"], "output_index": position,
                                                "content_index": 0, "delta": text})]
        elif item["type"] == "function_call":
            sequence += [
                ("response.output_item.added",
                 {"output_index": position, "item": {**item, "arguments": ""}}),
                ("response.function_call_arguments.delta",
                 {"item_id": item["id"], "output_index": position, "delta": item["arguments"]}),
                ("response.function_call_arguments.done",
                 {"item_id": item["id"], "output_index": position,
                  "arguments": item["arguments"]})]
        else:
            sequence.append(("response.output_item.added",
                             {"output_index": position, "item": item}))
        sequence.append(("response.output_item.done", {"output_index": position, "item": item}))
    sequence.append(("response.completed", {"response": {"id": response_id, "usage": usage}}))
    return [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in sequence
    ]
