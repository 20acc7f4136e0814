"""A development channel server of the tests: MCP over stdio, JSON-RPC written by hand.

It declares ``capabilities.experimental["claude/channel"] = {}`` and, once the client has sent
``notifications/initialized``, watches a spool directory: every new ``*.txt`` file is claimed
(renamed into ``sent/``, so exactly one server instance pushes it even while an old and a new
claude overlap; a server whose claude is gone claims nothing) and pushed as
``notifications/claude/channel`` with ``{"content": <text>, "meta": {"source_file": <name>,
"sender": "tl-e2e"}}``. Its ``reply`` tool appends ``{"text": ..., "pid": ...}`` lines to a
replies file. Every lifecycle step is logged as one JSON line (``started``, ``received``,
``initialized``, ``listening``, ``pushed``, ``reply``, ``exit``) with this process's pid and
parent pid, so a test can tell which claude process a push went through.

Pushes start ``REGISTRATION_GRACE_SECONDS`` after the ``tools/list`` answer: Claude Code 2.1.328
registers its channel handler ~10 ms after that answer and drops a notification sent earlier;
the ``listening`` log line marks the moment pushes are safe.

Run: ``python channel_server.py --spool DIR --replies FILE --log FILE [--exit-after S]``.
Nothing in that argv names the registration (claude knows the server by the name it was
registered under). ``--exit-after S``: exit S seconds after starting, every time — a server that
crashes after start (claude retries once, then gives up).
The stdlib only: it starts in tens of milliseconds and cannot drift with the SDK.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

CHANNEL_METHOD = "notifications/claude/channel"
LISTING_WAIT_SECONDS = 5.0
REGISTRATION_GRACE_SECONDS = 0.3
EMPTY_LISTS = {"resources/list": "resources", "resources/templates/list": "resourceTemplates",
               "prompts/list": "prompts"}
REPLY_TOOL = {
    "name": "reply",
    "description": "Send a reply to the channel the last message came from.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The reply text."}},
        "required": ["text"],
    },
}


class ChannelServer:
    """One stdio session: answers requests, pushes spooled messages after initialization."""

    def __init__(self, name: str, spool: Path, replies: Path, log: Path) -> None:
        self.name, self.spool, self.replies, self.log_path = name, spool, replies, log
        self.sent = spool / "sent"
        self.sent.mkdir(parents=True, exist_ok=True)
        self._out = threading.Lock()
        self._initialized = threading.Event()
        self._listed = threading.Event()
        self._done = threading.Event()

    def log(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "pid": os.getpid(), "ppid": os.getppid(),
                           "t": time.time(), **fields})
        with self._out, self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False) + "\n"
        with self._out:
            sys.stdout.write(data)
            sys.stdout.flush()

    def serve(self) -> None:
        self.log("started")
        threading.Thread(target=self._watch_spool, daemon=True).start()
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self._dispatch(message)
        self._done.set()
        self.log("exit")

    def _dispatch(self, message: dict[str, Any]) -> None:
        method, ident = message.get("method"), message.get("id")
        self.log("received", method=method)
        if method == "notifications/initialized":
            self._initialized.set()
            self.log("initialized")
            return
        if ident is None:
            return
        if method == "initialize":
            params = message.get("params") or {}
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"experimental": {"claude/channel": {}}, "tools": {}},
                "serverInfo": {"name": self.name, "version": "0.1.0"},
                "instructions": "Messages from the test channel arrive as <channel> events; "
                                "answer them with the reply tool.",
            }
            self.send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [REPLY_TOOL]}})
            self._listed.set()
        elif method == "tools/call":
            self._reply(ident, message.get("params") or {})
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif method in EMPTY_LISTS:
            self.send({"jsonrpc": "2.0", "id": ident, "result": {EMPTY_LISTS[method]: []}})
        else:
            self.send({"jsonrpc": "2.0", "id": ident,
                       "error": {"code": -32601, "message": f"method not found: {method}"}})

    def _reply(self, ident: Any, params: dict[str, Any]) -> None:
        if params.get("name") != "reply":
            self.send({"jsonrpc": "2.0", "id": ident,
                       "error": {"code": -32602, "message": f"unknown tool: {params.get('name')}"}})
            return
        text = str((params.get("arguments") or {}).get("text", ""))
        with self._out, self.replies.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"text": text, "pid": os.getpid()}) + "\n")
        self.log("reply", chars=len(text))
        self.send({"jsonrpc": "2.0", "id": ident,
                   "result": {"content": [{"type": "text", "text": "sent"}], "isError": False}})

    def _watch_spool(self) -> None:
        self._initialized.wait()
        # Claude registers its channel handler a few ms after our tools/list answer; a push
        # before that is dropped. Wait for the listing (bounded), then a short grace.
        self._listed.wait(LISTING_WAIT_SECONDS)
        self._done.wait(REGISTRATION_GRACE_SECONDS)
        self.log("listening")
        parent = os.getppid()
        while not self._done.is_set() and os.getppid() == parent:
            for path in sorted(self.spool.glob("*.txt")):
                claimed = self.sent / path.name
                try:
                    os.rename(path, claimed)
                except OSError:
                    continue  # another instance claimed it
                text = claimed.read_text(encoding="utf-8")
                self.send({"jsonrpc": "2.0", "method": CHANNEL_METHOD,
                           "params": {"content": text,
                                      "meta": {"source_file": path.name, "sender": "tl-e2e"}}})
                self.log("pushed", source_file=path.name)
            self._done.wait(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spool", type=Path, required=True)
    parser.add_argument("--replies", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--exit-after", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = ChannelServer("tl-e2e-channel", args.spool, args.replies, args.log)
    if args.exit_after:
        def crash() -> None:
            time.sleep(args.exit_after)
            server.log("crash")
            os._exit(3)
        threading.Thread(target=crash, daemon=True).start()
    server.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
