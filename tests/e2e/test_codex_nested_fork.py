"""Forks of forks made by the real Codex CLI: the rebuild carries exactly what Codex itself sends.

Codex 0.169.0 against a loopback fake Responses API, in a temp CODEX_HOME:

- thread A: two typed turns (``codex exec``, then ``codex exec resume``);
- B = ``codex exec fork A``, one more turn; C = ``codex exec fork B``, one more turn: C's
  ``history_base`` names B, whose own ``history_base`` names A;
- D = the app server's ``thread/fork`` of B at A's *first* turn (a cut inside the history B
  inherited), one more turn. Measured: Codex writes D's ``history_base`` straight to A (end
  ordinal inside A), not to B.

For C and D, ``tl-rebuild fork`` writes a rebuilt rollout; then ``codex exec resume <id> ping``
runs once on the original and once on the rebuilt thread. The conversation of the two first
requests (user and assistant messages, harness ``<…>`` messages aside) must be the same list,
in order, verbatim; the rebuilt request holds no reasoning, function call or output.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import REPO
from tests.e2e.codex_cli import RUN_TIMEOUT_SECONDS, CodexHome, codex_bin  # noqa: F401
from tests.e2e.codex_fake_api import CodexFakeApi

NOT_CONVERSATION = ("reasoning", "function_call", "function_call_output", "custom_tool_call",
                    "custom_tool_call_output", "local_shell_call", "web_search_call")
APP_SERVER_SECONDS = 60


def _exec(home: CodexHome, *args: str) -> None:
    done = subprocess.run(
        [str(home.binary), "exec", "--skip-git-repo-check", *args], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, env=home.env(), cwd=home.work,
        timeout=RUN_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, f"codex exec {' '.join(args)} failed: {done.stderr[-2000:]}"


def _rollouts(home: CodexHome) -> dict[str, Path]:
    """Thread id (line 0's ``payload.id``) → its rollout file."""
    found = {}
    for path in (home.root / "sessions").rglob("rollout-*.jsonl"):
        with open(path, "rb") as handle:
            found[orjson.loads(handle.readline())["payload"]["id"]] = path
    return found


def _new_thread(home: CodexHome, before: dict[str, Path]) -> str:
    added = set(_rollouts(home)) - set(before)
    assert len(added) == 1, f"expected one new rollout, found {sorted(added)}"
    return added.pop()


def _meta(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        return dict(orjson.loads(handle.readline())["payload"])


class _AppServer:
    """``codex app-server`` on stdio, one JSON-RPC message per line, every read bounded."""

    def __init__(self, home: CodexHome) -> None:
        self.process = subprocess.Popen(
            [str(home.binary), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=home.env(), cwd=home.work,
        )
        self.next_id = 0
        self.buffer = b""

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + APP_SERVER_SECONDS
        while True:
            message = self._read(deadline)
            if message.get("id") == self.next_id:
                assert "error" not in message, f"{method} failed: {message['error']}"
                return dict(message["result"])

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=APP_SERVER_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=APP_SERVER_SECONDS)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _read(self, deadline: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        handle = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, "codex app-server did not answer in time"
            ready, _, _ = select.select([handle], [], [], left)
            if ready:
                chunk = os.read(handle, 65536)
                assert chunk, "codex app-server closed its output"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return dict(json.loads(line))


def _conversation(request_input: list[Any]) -> list[tuple[str, list[str]]]:
    """(role, texts) of each user/assistant message, the harness's ``<…>`` ones aside."""
    said = []
    for item in request_input:
        if item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
            continue
        texts = [str(part.get("text", "")) for part in item.get("content") or []]
        if texts and texts[0].lstrip().startswith("<"):
            continue
        said.append((str(item["role"]), texts))
    return said


def _fork(source: Path, into: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "fork", "--transcript", str(source), "--into",
         str(into), "--json"], capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["new_session_id"])


def test_forks_of_forks_rebuild_to_exactly_what_codex_sends(
    tmp_path: Path, codex_bin: Path  # noqa: F811
) -> None:
    with CodexFakeApi() as api:
        home = CodexHome.create(tmp_path / "codex-home", codex_bin, api.url)
        _exec(home, "alpha one")
        a = _new_thread(home, {})
        _exec(home, "resume", a, "alpha two")
        known = _rollouts(home)
        _exec(home, "fork", a, "bravo one")
        b = _new_thread(home, known)
        known = _rollouts(home)
        _exec(home, "fork", b, "charlie one")
        c = _new_thread(home, known)

        server = _AppServer(home)
        try:
            server.call("initialize", {"clientInfo": {"name": "threadline-test", "version": "1"},
                                       "capabilities": {"experimentalApi": True}})
            server.notify("initialized")
            turns = server.call("thread/read", {"threadId": b, "includeTurns": True})
            first = turns["thread"]["turns"][0]["id"]  # A's first turn, inherited by B
            d = server.call("thread/fork", {"threadId": b, "lastTurnId": first})["thread"]["id"]
        finally:
            server.close()
        _exec(home, "resume", d, "delta one")

        rollouts = _rollouts(home)
        assert _meta(rollouts[c])["history_base"]["thread_id"] == b
        assert _meta(rollouts[b])["history_base"]["thread_id"] == a
        cut = _meta(rollouts[d])["history_base"]
        assert cut["thread_id"] == a  # Codex itself points a cut fork at the grandparent
        assert cut["end_ordinal_exclusive"] < _meta(rollouts[b])["history_base"][
            "end_ordinal_exclusive"]

        into = home.root / "sessions" / "2026" / "12" / "07"
        rebuilt = {thread: _fork(rollouts[thread], into) for thread in (c, d)}
        users = {}
        for thread, copy in rebuilt.items():
            assert "history_base" not in _meta(_rollouts(home)[copy])
            before = len(api.turns())
            for resumed in (thread, copy):
                done = home.resume(resumed, "ping")
                assert done.returncode == 0, done.stderr[-2000:]
            original, ours = (r.body["input"] for r in api.turns()[before:])
            assert _conversation(ours) == _conversation(original)
            assert not [item for item in ours if item.get("type") in NOT_CONVERSATION]
            users[thread] = [texts for role, texts in _conversation(ours) if role == "user"]
        assert api.errors == []

    assert users[c] == [["alpha one"], ["alpha two"], ["bravo one"], ["charlie one"], ["ping"]]
    assert users[d] == [["alpha one"], ["delta one"], ["ping"]]
