"""A fake OpenAI Responses API on 127.0.0.1 for driving the real Codex CLI offline.

Codex 0.169.0 calls only ``POST /v1/responses`` with ``stream: true`` (notes/codex-live.md §1).
The fake records every request (headers and JSON body; the tests' oracle is the ``input`` the
model was sent) and answers each with one assistant message, ``codex-echo[N]``, streamed as the
SSE sequence Codex accepts: ``response.created``, ``output_item.added``, one
``output_text.delta``, ``output_item.done``, ``response.completed`` with usage. Loopback only;
only the stdlib (and the loopback server of provision/accept/model_standin.py).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from provision.accept.model_standin import Loopback


@dataclass(frozen=True)
class Request:
    """One request the fake received: its number, path, headers and JSON body."""

    index: int
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def kind(self) -> str | None:
        """``request_kind`` of the ``x-codex-turn-metadata`` header (turn | compaction)."""
        try:
            return json.loads(self.headers.get("x-codex-turn-metadata", "{}")).get("request_kind")
        except ValueError:
            return None


class CodexFakeApi(Loopback):
    """A started fake Responses API (use as a context manager); ``requests`` in arrival order."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.errors: list[str] = []
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
                if not self.path.endswith("/responses"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                payload = b"".join(_events(index))
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


def reply_text(index: int) -> str:
    return f"codex-echo[{index}]"


def _events(index: int) -> list[bytes]:
    response_id = f"resp_fake_{index}"
    item_id = f"msg_fake_{index}"
    text = reply_text(index)
    item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    sequence: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {"id": response_id}}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.output_text.delta",
         {"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {"id": response_id, "usage": usage}}),
    ]
    return [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in sequence
    ]
