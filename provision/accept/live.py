"""``accept --live --confirm REBUILD``: rebuild the real target, then listen for each channel.

1. ``tl-rebuild request`` registers a rebuild on the real config (unbound: the next Stop of
a
   session in project_dir schedules it). Nothing switches until claude finishes a turn, so a
   **human must talk to claude** (any channel, or the terminal) for the Stop to come.
2. The operation is polled until it ends, for at most the wait budget; one still ``pending``
   then is cancelled (``CANCEL``), so no switch happens later when nobody is watching.
3. After ``activated`` the new session's transcript is watched (from the first line after the
   carried items) for a user event that came through a channel — ``origin.kind == "channel"``
   (2.1.328) or text opening with ``<channel source="NAME"`` (2.1.232) — one per channel of
   ``switch.channel_flags`` (``server:NAME`` → NAME, ``plugin:NAME@market`` → NAME). **A human
   must send a message through each channel**; the line says which arrived and when.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provision.accept.checklist import Checklist, Scene
    from runtime.config import Config

Notify = Callable[[str], None]
SOURCE = re.compile(r'^\s*<channel source="([^"]+)"')
POLL = 0.5


def _stderr(message: str) -> None:
    print(f"tl-provision accept --live: {message}", file=sys.stderr, flush=True)


def expected_channels(config: Config) -> list[str]:
    """Channel names from ``switch.channel_flags`` (``server:NAME``, ``plugin:NAME@market``)."""
    from runtime.agents.claude import channel_flags

    names = []
    for flag in channel_flags(config.switch.channel_flags):
        value = flag.split(" ", 1)[1]
        kind, _, rest = value.partition(":")
        names.append(rest.split("@", 1)[0] if kind in ("server", "plugin") and rest else value)
    return list(dict.fromkeys(names))


def channel_source(line: bytes) -> str | None:
    """The channel a transcript line's user event came through, or None."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("type") != "user":
        return None
    origin = event.get("origin")
    if isinstance(origin, dict) and origin.get("kind") == "channel":
        return str(origin.get("server") or origin.get("source") or "channel")
    content = (event.get("message") or {}).get("content")
    if isinstance(content, list):
        content = next((b.get("text") for b in content
                        if isinstance(b, dict) and b.get("type") == "text"), None)
    found = SOURCE.match(content) if isinstance(content, str) else None
    return found.group(1) if found else None


def live_stage(scene: Scene, out: Checklist, wait_seconds: float,
               notify: Notify = _stderr) -> None:
    """Request, wait for the switch, then wait for a message through each channel."""
    config = scene.config
    if config is None:
        out.cannot_judge("live requested", "no runtime config")
        return
    with out.guard("live requested"):
        op = _operator(scene, "request", "--reason", "tl-provision accept --live",
                       "--confirm", "REBUILD")
        out.add("live requested", True, {"operation_id": op["operation_id"],
                                         "state": op["state"]})
    if not out.lines or out.lines[-1].status != "pass":
        return
    op_id = op["operation_id"]
    notify(f"operation {op_id} is pending: send claude a message now so its turn ends "
           f"(waiting up to {wait_seconds / 60:g} min for the switch)")
    record = _wait_switch(config, op_id, wait_seconds)
    state = record["state"]
    if state == "pending":
        _operator(scene, "cancel", "--operation", op_id, "--confirm", "CANCEL")
        out.add("live switched", False, {"operation_id": op_id, "state": "cancelled",
                                         "why": f"no Stop within {wait_seconds / 60:g} min"})
        return
    facts = record.get("facts") or {}
    out.add("live switched", state == "activated",
            {"operation_id": op_id, "state": state, "failure": record.get("failure"),
             "new_session_id": facts.get("new_session_id"),
             "switched_at": facts.get("switched_at")})
    if state != "activated":
        return
    _listen(scene, out, facts, wait_seconds, notify)


def _operator(scene: Scene, command: str, *args: str) -> dict[str, Any]:
    """``tl-rebuild COMMAND … --json`` on the deployment's runtime config; its JSON.

    Through the CLI, not in this process: run by root on a non-root deployment, tl-rebuild
    acts as the state dir's owner, so the record the user's hook must update is the user's
    (written in-process by root it was not, and the switch could not be recorded).
    """
    from provision.accept.drill import tl_rebuild_of
    from provision.errors import AcceptError

    done = scene.host.run([tl_rebuild_of(scene), command, "--config",
                           scene.profile.install.config_path, *args, "--json"], timeout=60)
    if not done.ok:
        raise AcceptError(f"tl-rebuild {command} failed: {done.stderr.strip()[-300:]}")
    return dict(json.loads(done.stdout))


def _wait_switch(config: Config, op_id: str, wait_seconds: float) -> dict[str, Any]:
    from runtime.switch.ops import status

    deadline = time.monotonic() + wait_seconds
    record = status(config, op_id)
    while record["state"] not in ("activated", "failed", "cancelled", "rolled_back"):
        if record["state"] == "pending" and time.monotonic() > deadline:
            return record
        if time.monotonic() > deadline + 120:  # a started switch always ends: give it time
            return record
        time.sleep(POLL)
        record = status(config, op_id)
    return record


def _listen(scene: Scene, out: Checklist, facts: dict[str, Any], wait_seconds: float,
            notify: Notify) -> None:
    config = scene.config
    assert config is not None and config.project_dir is not None
    names = expected_channels(config)
    if not names:
        out.add("live channel heard", None, "no channel flags configured")
        return
    path = str(config.project_dir / f"{facts['new_session_id']}.jsonl")
    skip = int(facts.get("candidate_lines") or 0)
    notify(f"switched; send one message through each channel now: {', '.join(names)} "
           f"(waiting up to {wait_seconds / 60:g} min)")
    heard: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + wait_seconds
    while True:
        lines = (scene.host.read_bytes(path) or b"").splitlines()
        for number, line in enumerate(lines[skip:], start=skip + 1):
            source = channel_source(line)
            for name in names:
                if source and name not in heard and name in source:
                    heard[name] = {"line": number, "source": source}
        if len(heard) == len(names) or time.monotonic() > deadline:
            break
        time.sleep(POLL)
    for name in names:
        out.add(f"live channel heard [{name}]", name in heard,
                heard.get(name) or f"nothing arrived through {name!r} within "
                                   f"{wait_seconds / 60:g} min in {path}")
