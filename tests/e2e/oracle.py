"""The tests' own reading of transcripts: what was said, independent of the engine.

``independent_utterances`` is a deliberately simple reading of SPEC §3.2 (typed prompts, channel
messages, queued prompts, assistant text); the scenarios compare what the model sees after a
rebuild against it, so an engine bug cannot hide behind the engine's own reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Like the incident's "companion": a word that is in no token of the server's argv (the
# earlier name "chan" was a substring of "channel_server.py" and hid a substring health check).
CHANNEL_NAME = "companion"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse a JSONL file, skipping a partial last line and blank lines; missing file = []."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def speech_events(path: Path) -> Iterator[dict[str, Any]]:
    """The transcript's user/assistant events, in file order."""
    for event in read_jsonl(path):
        if event.get("type") in ("user", "assistant"):
            yield event


def channel_user_events(path: Path, server: str = CHANNEL_NAME) -> list[dict[str, Any]]:
    """User events whose origin is the channel ``server`` (what a pushed message becomes)."""
    return [e for e in speech_events(path)
            if (e.get("origin") or {}).get("kind") == "channel"
            and (e.get("origin") or {}).get("server") == server]


INJECTED = ("system-reminder", "local-command-caveat", "local-command-stdout",
            "local-command-stderr", "command-name", "command-message", "command-args",
            "memory-retrieval", "heartbeat", "scheduled-task", "task-notification",
            "ide_selection", "ide_opened_file", "user-prompt-submit-hook")
_TAGS = "|".join(INJECTED)
_PAIRED = re.compile(rf"<({_TAGS})\b[^>]*>.*?</\1>", re.S)
_LONE = re.compile(rf"</?({_TAGS})\b[^>]*>")
# Not speech even when not wrapped in a complete injected block (some corpus lines are cut).
NOT_SPEECH = ("[Request interrupted", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
              "<local-command-", "<command-name>", "<task-notification>")


def normalized(text: str) -> str:
    return " ".join(text.split())


def texts_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content or [] if isinstance(b, dict)
            and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def leaf_chain(events: list[dict[str, Any]]) -> set[str]:
    """The uuids Claude Code's resume sends: the ``parentUuid`` chain walked back from the last
    user/assistant line, across compactions by ``logicalParentUuid`` (a rebuild carries the
    conversation before a compaction too). A deliberately plain walk, not the engine's rule."""
    parents: dict[str, Any] = {}
    leaf = None
    for event in events:
        uuid = event.get("uuid")
        if not isinstance(uuid, str) or event.get("isSidechain"):
            continue
        parent = event.get("parentUuid")
        parents[uuid] = parent if parent is not None else event.get("logicalParentUuid")
        if event.get("type") in ("user", "assistant"):
            leaf = uuid
    chain: set[str] = set()
    while isinstance(leaf, str) and leaf in parents and leaf not in chain:
        chain.add(leaf)
        leaf = parents[leaf]
    return chain


def independent_utterances(source: Path, *, whole: bool = False) -> list[str]:
    """Speech of ``source`` by a deliberately simple reading of SPEC §3.2 (not the engine's):
    of the lines on the chain Claude Code resumes (``leaf_chain``) and those without a uuid
    (``whole``: of every line, the chain ignored)."""
    found: list[str] = []
    events = list(read_jsonl(source))
    chain = leaf_chain(events) if not whole else None
    for event in events:
        if event.get("isSidechain"):
            continue
        if chain is not None and isinstance(event.get("uuid"), str) and event["uuid"] not in chain:
            continue  # a branch the human rewound past: Claude Code never sends it
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        kind = event.get("type")
        if kind == "attachment":
            attachment = event.get("attachment") or {}
            if (attachment.get("type") == "queued_command"
                    and attachment.get("commandMode", "prompt") == "prompt"
                    and isinstance(attachment.get("prompt"), str)):
                found.append(attachment["prompt"])
        elif kind == "user" and not event.get("isCompactSummary"):
            content = message.get("content")
            if _has_tool_result(content):
                continue
            text = "\n".join(texts_of(content))
            channel = (event.get("origin") or {}).get("kind") == "channel" or \
                text.lstrip().startswith("<channel source=")
            if event.get("isMeta") and not channel:
                continue
            if any(marker in text for marker in NOT_SPEECH):
                continue
            human = _LONE.sub("", _PAIRED.sub("", text)).strip()
            if human:
                found.append(human)
        elif kind == "assistant" and not event.get("isApiErrorMessage") \
                and message.get("model") != "<synthetic>":
            found.extend(t for t in texts_of(message.get("content")) if t.strip())
    return found


