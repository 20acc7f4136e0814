"""A real Claude Code transcript carried over into a Codex 0.169 rollout, for the benchmark.

The recorded 0.169 samples were made against a fake Responses API: 500-byte tool outputs,
400-byte reasoning, a message every six lines. Real Codex sessions are, like real Claude ones,
95-99 % tool output and reasoning bytes. ``translate`` keeps a real transcript's conversation
and noise one for one and writes it in Codex's record shapes; every line is a copy of a line of
the recorded rollout ``SAMPLE`` (sample 02) with the fields of its kind filled in:

- a typed prompt (what the Claude reader itself says was typed: ``runtime.engine.classify``
  judges each line) opens a turn: ``thread_settings_applied`` (after the first turn),
  ``task_started``, on a new thread the developer, environment-context and ``world_state``
  lines, ``turn_context``, the ``user`` message with its passthrough as recorded for a typed
  prompt, its ``UserMessage`` UI copy. Pasted images go before the text as field rollouts
  write them (``<image name=[Image #n]>``, ``input_image``, ``</image>``; those parts' kinds
  are not recorded in 0.169, they say ``unknown``);
- thinking: the ``Reasoning`` UI copy and a ``reasoning`` item whose ``encrypted_content`` has
  the thinking block's byte size (base64 of its thinking and signature, cut to that size),
  its summary the thinking's first line;
- tool_use: ``function_call`` (its name, the JSON of its input, a ``call_...`` id); the end of
  each model response a ``token_usage_record`` with the response's usage;
- tool_result: for the shell (``Bash``) the ``CommandExecution`` copy, then the
  ``function_call_output`` with the result's text (an image as its base64), a ``token_count``
  before the next response;
- assistant text: the ``AgentMessage`` copy, then the ``assistant`` message;
- each turn ends in ``task_complete``.

Lines with no Codex counterpart (progress, file-history-snapshot, attachments, system, meta
injections, slash commands, sidechains, API errors) are left out. Ids are uuids made from the
source's (so a benchmark copy can refresh them), timestamps the source's.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from runtime.config import RebuildConfig
from runtime.engine.classify import Classifier
from runtime.engine.dirty import Ledger
from runtime.engine.located import Said
from runtime.engine.speech import SpeechRules
from runtime.engine.transcript import ReadStats

SAMPLE = "02-exec-reasoning-toolcall-4-turns.jsonl"
SHELL_TOOL = "Bash"  # Claude's shell: Codex's exec_command, the one tool with a UI copy
SUMMARY_MAX = 80


def _key(event: dict[str, Any]) -> str:
    """The name of a recorded line's kind: its type, payload type and role or item type."""
    payload = event["payload"]
    parts = [event["type"], str(payload.get("type", ""))]
    if "role" in payload:
        kinds = payload.get("internal_chat_message_metadata_passthrough", {})
        parts += [payload["role"], *kinds.get("content_item_kinds", [])[:1]]
    if type(payload.get("item")) is dict:
        parts.append(payload["item"]["type"])
    return ":".join(parts)


class Templates:
    """The first recorded line of each kind in ``sample``, and the ids it was recorded with."""

    def __init__(self, sample: Path) -> None:
        self.lines: dict[str, bytes] = {}
        for line in sample.read_bytes().splitlines():
            self.lines.setdefault(_key(orjson.loads(line)), line)
        meta = orjson.loads(self.lines["session_meta:"])
        started = orjson.loads(self.lines["event_msg:task_started"])
        self.thread = meta["payload"]["id"]
        self.turn = started["payload"]["turn_id"]

    def new(self, key: str, thread: str, turn: str) -> dict[str, Any]:
        """A fresh copy of the ``key`` line, its thread and turn ids replaced."""
        line = self.lines[key]
        line = line.replace(self.thread.encode(), thread.encode())
        event: dict[str, Any] = orjson.loads(line.replace(self.turn.encode(), turn.encode()))
        return event


def _id(*seed: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "threadline-bench:" + ":".join(map(str, seed))))


def _epoch(stamp: str) -> float:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def _output(block: dict[str, Any]) -> str:
    """A tool_result's text as a function_call_output carries it (images as their base64)."""
    content = block.get("content")
    if type(content) is str:
        return content
    texts = []
    for part in content if type(content) is list else []:
        if type(part) is not dict:
            continue
        if part.get("type") == "image":
            source = part.get("source")
            texts.append(str(source.get("data", "")) if type(source) is dict else "")
        elif type(part.get("text")) is str:
            texts.append(part["text"])
    return "\n".join(texts)


def _encrypted(block: dict[str, Any]) -> str:
    """Base64 of a thinking block's thinking and signature, cut to their byte size."""
    raw = (str(block.get("thinking", "")) + str(block.get("signature", ""))).encode()
    if block.get("type") == "redacted_thinking":
        raw = str(block.get("data", "")).encode()
    return base64.b64encode(raw).decode()[: max(len(raw), 4)]


class Translator:
    """Writes one Claude transcript's events as the lines of a Codex rollout."""

    def __init__(self, templates: Templates, thread: str, ordinal: int = 0) -> None:
        self.templates = templates
        self.thread = thread
        self.ordinal = ordinal
        self.sequence = 0  # metadata.history_sequence / user_input_order
        self.turn = ""
        self.turns = 0
        self.stamp = "1970-01-01T00:00:00.000Z"
        self.started = 0.0
        self.response: Any = None  # the message id of the open model response
        self.usage: dict[str, Any] = {}
        self.count_due = False
        self.last_reply = ""
        self.calls: dict[str, tuple[str, str, Any]] = {}  # tool_use id -> call id, name, input
        self.totals = dict.fromkeys(("input", "cached", "output"), 0)
        self.turn_totals = dict(self.totals)
        rules = SpeechRules.from_config(RebuildConfig())
        self.said = Said()
        self.classifier = Classifier(rules, ReadStats(), Ledger(), self.said)  # type: ignore[arg-type]

    def meta(self, stamp: str) -> dict[str, Any]:
        """Line 0: the recorded ``session_meta`` with this thread's id."""
        event = self._line("session_meta:", stamp)
        event["payload"]["timestamp"] = stamp
        event["payload"]["context_window"]["window_id"] = _id(self.thread, "window")
        return event

    def lines(self, events: list[dict[str, Any]], opening: bool) -> Iterator[dict[str, Any]]:
        """The rollout lines of ``events`` after line 0; ``opening``: this thread's first turn
        writes the developer/environment/world_state lines (a resumed copy does not)."""
        self.turns = 0 if opening else 1
        for event in events:
            if type(event.get("timestamp")) is str:
                self.stamp = event["timestamp"]
            self.said.said = []
            self.classifier.event(event, 0)
            if event.get("isSidechain") is True:
                continue
            kind = event.get("type")
            message = event.get("message")
            if kind == "user" and type(message) is dict:
                yield from self._user(event, message)
            elif kind == "assistant" and type(message) is dict and not (
                event.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>"
            ):
                yield from self._assistant(message)
        if self.turn:
            yield from self._close()

    # -- turns -------------------------------------------------------------------------------
    def _line(self, key: str, stamp: str | None = None) -> dict[str, Any]:
        event = self.templates.new(key, self.thread, self.turn or _id(self.thread, "turn"))
        event["timestamp"] = stamp or self.stamp
        event["ordinal"] = self.ordinal
        self.ordinal += 1
        return event

    def _open(self, seed: str) -> Iterator[dict[str, Any]]:
        if self.turn:
            yield from self._close()
        first = self.turns == 0
        self.turns += 1
        if not first:
            yield self._line("event_msg:thread_settings_applied")
        self.turn = _id(self.thread, seed, "turn")
        self.started = _epoch(self.stamp)
        self.turn_totals = dict.fromkeys(self.totals, 0)
        started = self._line("event_msg:task_started")
        started["payload"]["started_at"] = int(self.started)
        yield started
        if first:
            yield self._line("response_item:message:developer:host_skills.instructions")
            yield self._line("response_item:message:user:environments.environment_context")
            yield self._line("world_state:")
        yield self._line("turn_context:")
        if first:
            yield self._line("event_msg:thread_settings_applied")

    def _close(self) -> Iterator[dict[str, Any]]:
        yield from self._end_response()
        if self.count_due:
            yield self._token_count()
        done = self._line("event_msg:task_complete")
        payload = done["payload"]
        payload["last_agent_message"] = self.last_reply
        payload["started_at"] = int(self.started)
        payload["completed_at"] = int(_epoch(self.stamp))
        payload["duration_ms"] = max(int((_epoch(self.stamp) - self.started) * 1000), 0)
        yield done
        self.turn = ""
        self.last_reply = ""

    def _metadata(self, event: dict[str, Any], message_id: str | None = None) -> None:
        metadata = event["metadata"]
        metadata["history_sequence"] = self.sequence
        if "user_input_order" in metadata:
            metadata["user_input_order"] = self.sequence
        self.sequence += 1
        if message_id is not None and "retained_source" in metadata:
            metadata["retained_source"]["id"]["message_id"] = message_id
            metadata["retained_source"]["revision"] = "retained_" + _id(message_id, "retained")

    # -- user lines --------------------------------------------------------------------------
    def _user(self, event: dict[str, Any], message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        content = message.get("content")
        blocks = [b for b in content if type(b) is dict] if type(content) is list else []
        typed = [u.text for u in self.said.said if u.role == "user" and u.kind != "slash"]
        if typed:
            yield from self._open(str(event.get("uuid")))
            yield from self._prompt(event, blocks, typed)
            return
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results and not self.turn:
            yield from self._open(str(event.get("uuid")))
        if results:
            yield from self._end_response()
        for block in results:
            yield from self._result(block)

    def _prompt(self, event: dict[str, Any], blocks: list[dict[str, Any]], typed: list[str]
                ) -> Iterator[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        kinds: list[str] = []
        provenance: list[dict[str, Any]] = []
        images = [b for b in blocks if b.get("type") == "image"]
        for number, image in enumerate(images, 1):
            source = image.get("source") if type(image.get("source")) is dict else {}
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
            parts += [{"type": "input_text", "text": f"<image name=[Image #{number}]>"},
                      {"type": "input_image", "image_url": url},
                      {"type": "input_text", "text": "</image>"}]
            kinds += ["unknown"] * 3
            provenance += [{}] * 3
        for text in typed:
            parts.append({"type": "input_text", "text": text})
            kinds.append("user.text")
            provenance.append({"provenance": {"type": "user"}})
        line = self._line("response_item:message:user:user.text")
        payload = line["payload"]
        message_id = "msg_" + _id(self.thread, event.get("uuid"), "user")
        payload["id"] = message_id
        payload["content"] = parts
        passthrough = payload["internal_chat_message_metadata_passthrough"]
        passthrough["create_time"] = _epoch(self.stamp)
        passthrough["content_item_kinds"] = kinds
        passthrough["content_item_metadata"] = provenance
        self._metadata(line, message_id)
        yield line
        copy = self._line("event_msg:item_completed:UserMessage")
        copy["payload"]["item"]["id"] = _id(message_id, "copy")
        copy["payload"]["item"]["content"] = [
            {"type": "text", "text": text, "text_elements": []} for text in typed]
        yield copy

    def _result(self, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
        tool = str(block.get("tool_use_id"))
        call, name, arguments = self.calls.get(tool, ("call_" + _id(tool), "", None))
        output = _output(block)
        if name == SHELL_TOOL:
            copy = self._line("event_msg:item_completed:CommandExecution")
            item = copy["payload"]["item"]
            command = arguments.get("command", "") if type(arguments) is dict else ""
            item["id"] = call
            item["command"] = ["/bin/bash", "-lc", command]
            item["parsed_cmd"] = [{"type": "unknown", "cmd": command}]
            item["aggregated_output"] = output
            item["exit_code"] = 1 if block.get("is_error") is True else 0
            yield copy
        line = self._line("response_item:function_call_output")
        payload = line["payload"]
        payload["id"] = "fco_" + _id(call, "output")
        payload["call_id"] = call
        payload["output"] = output
        payload["internal_chat_message_metadata_passthrough"]["create_time"] = _epoch(self.stamp)
        self._metadata(line)
        yield line

    # -- assistant lines ---------------------------------------------------------------------
    def _assistant(self, message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if not self.turn:
            yield from self._open(str(message.get("id")))
        response = message.get("id")
        if response != self.response:
            yield from self._end_response()
            if self.count_due:
                yield self._token_count()
            self.response = response
        if type(message.get("usage")) is dict:
            self.usage = message["usage"]
        spoken = [u.text for u in self.said.said if u.kind == "assistant_text"]
        content = message.get("content")
        if type(content) is str:
            content = [{"type": "text", "text": content}]
        for index, block in enumerate(content if type(content) is list else []):
            if type(block) is not dict:
                continue
            seed = f"{response}:{index}:{self.ordinal}"
            btype = block.get("type")
            if btype in ("thinking", "redacted_thinking"):
                yield from self._reasoning(block, seed)
            elif btype == "tool_use":
                yield self._call(block, seed)
            elif btype == "text" and spoken and block.get("text") == spoken[0]:
                spoken.pop(0)
                yield from self._reply(block["text"], seed)

    def _reasoning(self, block: dict[str, Any], seed: str) -> Iterator[dict[str, Any]]:
        thinking = str(block.get("thinking", ""))
        summary = thinking.strip().split("\n", 1)[0][:SUMMARY_MAX]
        reasoning_id = "rs_" + _id(self.thread, seed)
        copy = self._line("event_msg:item_completed:Reasoning")
        copy["payload"]["item"]["id"] = reasoning_id
        copy["payload"]["item"]["summary_text"] = [summary] if summary else []
        yield copy
        line = self._line("response_item:reasoning")
        payload = line["payload"]
        payload["id"] = reasoning_id
        payload["summary"] = [{"type": "summary_text", "text": summary}] if summary else []
        payload["encrypted_content"] = _encrypted(block)
        self._metadata(line)
        yield line

    def _call(self, block: dict[str, Any], seed: str) -> dict[str, Any]:
        tool = str(block.get("id"))
        call = "call_" + _id(self.thread, tool)
        name = str(block.get("name", ""))
        self.calls[tool] = (call, name, block.get("input"))
        line = self._line("response_item:function_call")
        payload = line["payload"]
        payload["id"] = "fc_" + _id(self.thread, seed)
        payload["name"] = name
        payload["arguments"] = orjson.dumps(block.get("input")).decode()
        payload["call_id"] = call
        self._metadata(line)
        return line

    def _reply(self, text: str, seed: str) -> Iterator[dict[str, Any]]:
        message_id = "msg_" + _id(self.thread, seed)
        copy = self._line("event_msg:item_completed:AgentMessage")
        copy["payload"]["item"]["id"] = message_id
        copy["payload"]["item"]["content"] = [{"type": "Text", "text": text}]
        yield copy
        line = self._line("response_item:message:assistant:unknown")
        line["payload"]["id"] = message_id
        line["payload"]["content"] = [{"type": "output_text", "text": text, "annotations": []}]
        self._metadata(line, message_id)
        self.last_reply = text
        yield line

    # -- token records -----------------------------------------------------------------------
    def _end_response(self) -> Iterator[dict[str, Any]]:
        """The ``token_usage_record`` of the model response that just ended (if one was open)."""
        if self.response is None:
            return
        usage = self.usage
        cached = int(usage.get("cache_read_input_tokens") or 0)
        fresh = int(usage.get("input_tokens") or 0) + int(
            usage.get("cache_creation_input_tokens") or 0)
        output = int(usage.get("output_tokens") or 0)
        for totals in (self.totals, self.turn_totals):
            totals["input"] += fresh + cached
            totals["cached"] += cached
            totals["output"] += output
        line = self._line("token_usage_record:")
        payload = line["payload"]
        payload["response_id"] = "resp_" + _id(self.thread, self.response)
        payload["usage"] = _usage({"input": fresh + cached, "cached": cached, "output": output})
        payload["turn_token_usage"] = _usage(self.turn_totals)
        payload["thread_token_usage"] = _usage(self.totals)
        self.response = None
        self.count_due = True
        yield line

    def _token_count(self) -> dict[str, Any]:
        line = self._line("event_msg:token_count")
        info = line["payload"]["info"]
        info["total_token_usage"] = _usage(self.totals)
        info["last_token_usage"] = _usage(self.turn_totals)
        self.count_due = False
        return line


def _usage(totals: dict[str, int]) -> dict[str, int]:
    return {
        "input_tokens": totals["input"], "cached_input_tokens": totals["cached"],
        "cache_write_input_tokens": 0, "output_tokens": totals["output"],
        "reasoning_output_tokens": 0, "total_tokens": totals["input"] + totals["output"],
    }


def read_events(source: Path) -> list[dict[str, Any]]:
    """The JSON objects of a Claude transcript, in order (other lines skipped)."""
    events = []
    for line in source.read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if type(event) is dict:
            events.append(event)
    return events


def translate(source: Path, sample: Path, thread: str) -> tuple[list[bytes], list[bytes]]:
    """``source`` (a Claude transcript) as a Codex rollout of thread ``thread``: its first
    lines (line 0 and the whole translation, opening the thread) and a resumed copy's lines
    (the same conversation without the thread's opening lines), for a benchmark to repeat."""
    templates = Templates(sample)
    events = read_events(source)
    stamp = next((e["timestamp"] for e in events if type(e.get("timestamp")) is str),
                 "2026-12-03T10:00:00.000Z")
    first = Translator(templates, thread)
    head = [orjson.dumps(first.meta(stamp))]
    head += [orjson.dumps(line) for line in first.lines(events, opening=True)]
    again = Translator(templates, thread, first.ordinal)
    again.totals = first.totals
    body = [orjson.dumps(line) for line in again.lines(events, opening=False)]
    return head, body
