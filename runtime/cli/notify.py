"""Codex's turn-end trigger: ``tl-rebuild hook-notify --config C [-- PROG ARGS…] PAYLOAD``.

Codex runs its ``notify`` program after every turn, detached, with the JSON as the last argv
element (``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", …}``; notes/
codex-live.md §8). A Stop hook would not do: Codex skips an untrusted hook silently in
``exec`` and the TUI opens a blocking "Hooks need review" dialog at start.

Like ``hook-stop`` it is tiny (``json``/``os``/``tomllib`` on the idle path) and always exits
0. A user's own notify program (``-- PROG ARGS…``) is started first, with the payload
appended, in its own session, and never waited for. With an operation active, the thread
whose turn ended is handed to ``runtime.switch.schedule.on_turn_end``: a thread that is not
the one the operation is bound to — the TUI's title-generation thread has a foreign id — is
ignored with a timeline entry; the bound thread schedules the worker exactly as a Stop does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from runtime.cli.hook import ACTIVE_FILE, _config_path, _report, _state_dir

NAME = "hook-notify"
TURN_COMPLETE = "agent-turn-complete"


def main(argv: Sequence[str]) -> int:
    """Run the trigger; always returns 0."""
    args = list(argv)
    own, chained = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args \
        else (args, [])
    payload = (chained or own)[-1:] or [""]
    try:
        if chained[:-1]:
            _chain(chained[:-1], payload[0])
    except BaseException as exc:  # noqa: BLE001 - the user's program failing is no turn failure
        _report(own, exc, NAME)
    try:
        config_path = _config_path(own)
        if config_path:
            state_dir = _state_dir(config_path)
            if state_dir and os.path.exists(os.path.join(state_dir, ACTIVE_FILE)):
                _handle(config_path, _payload(payload[0]), wait="--wait" in own)
    except BaseException as exc:  # noqa: BLE001 - the trigger must never fail the turn
        _report(own, exc, NAME)
    return 0


def _chain(program: list[str], payload: str) -> None:
    """Start the user's notify program with the payload appended, as Codex 0.169.0 starts it
    (stdin, stdout and stderr on /dev/null, measured); do not wait for it."""
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    os.posix_spawnp(program[0], [*program, payload], os.environ, setsid=True,
                    file_actions=null)


def _payload(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _handle(config_path: str, payload: dict[str, Any], wait: bool) -> None:
    if payload.get("type") != TURN_COMPLETE or not isinstance(payload.get("thread-id"), str):
        return
    from runtime.config import load_config
    from runtime.switch.schedule import on_turn_end

    on_turn_end(load_config(config_path), payload["thread-id"], wait=wait)
