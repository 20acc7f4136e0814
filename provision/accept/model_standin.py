"""A loopback stand-in for the model API during a Codex drill: it records and refuses.

The scratch codex's every model provider points here (``openai_base_url`` for the built-in
``openai`` provider, ``base_url`` of each ``[model_providers.*]``), and its only credential is a
dummy key, so no request of a drill can reach a real model. A drill sends none (nobody types;
``resume`` sends nothing until a prompt; the turn end is a synthetic notify call): every request
this server sees is listed on the line ``drill no model request``. It answers 503 with a JSON
error to anything, GET (codex tries a WebSocket first) or POST. Stdlib only.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class Loopback:
    """``handler`` served on 127.0.0.1 (a free port) from a thread; ``url`` ends in ``/v1``.
    A context manager: started on enter, shut down and joined on exit."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class ModelStandIn(Loopback):
    """A started stand-in (use as a context manager); ``requests``: ``METHOD PATH`` seen."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _refuse(self) -> None:
                seen.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = b'{"error": {"message": "tl-provision accept --drill: no model"}}'
                self.send_response(503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _refuse  # noqa: N815 - http.server's names

        self.serve(Handler)
