"""Hand-made Codex 0.169.0 rollouts, shaped line for line like the recorded ones.

Each method appends the lines Codex writes for that event, with the fields seen in
``../shared/corpus/codex-0.169/`` (envelope ``timestamp``/``ordinal``/``type``/``payload``, the
``internal_chat_message_metadata_passthrough`` of messages, the ``item_completed`` UI copies,
token records). ``legacy=True`` writes what a legacy thread holds: no ``history_mode``, no
ordinals, ``user_message``/``agent_message`` events as the UI copies.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson

BASE_INSTRUCTIONS = "You are a coding agent running in the Codex CLI. " * 40
ENV_CONTEXT = (
    "<environment_context>\n  <cwd>/srv/probe/work</cwd>\n  <shell>bash</shell>\n"
    "  <current_date>2026-12-03</current_date>\n</environment_context>"
)


class Rollout:
    """A rollout being written in memory; ``write`` puts it on disk."""

    def __init__(
        self,
        thread_id: str | None = None,
        *,
        legacy: bool = False,
        first_ordinal: int = 0,
        history_base: dict[str, Any] | None = None,
    ) -> None:
        self.id = thread_id or str(uuid.uuid4())
        self.legacy = legacy
        self.ordinal = first_ordinal
        self.lines: list[bytes] = []
        self.turn = 0
        self.seconds = 0
        meta: dict[str, Any] = {
            "session_id": self.id, "id": self.id, "timestamp": self._stamp(),
            "cwd": "/srv/probe/work", "originator": "codex_exec", "cli_version": "0.169.0",
            "source": "exec", "thread_source": "user", "model_provider": "fake",
            "base_instructions": {"text": BASE_INSTRUCTIONS},
        }
        if not legacy:
            meta["history_mode"] = "paginated"
        if history_base is not None:
            meta["forked_from_id"] = history_base["thread_id"]
            meta["forked_from_ordinal_exclusive"] = history_base["end_ordinal_exclusive"]
            meta["history_base"] = history_base
        meta["context_window"] = {"window_id": str(uuid.uuid4())}
        self.add("session_meta", meta)

    def _stamp(self) -> str:
        self.seconds += 1
        return f"2026-12-03T10:{self.seconds // 60 % 60:02d}:{self.seconds % 60:02d}.000Z"

    def add(self, kind: str, payload: Any, **extra: Any) -> None:
        line: dict[str, Any] = {"timestamp": self._stamp()}
        if not self.legacy:
            line["ordinal"] = self.ordinal
        line |= {"type": kind, "payload": payload, **extra}
        self.ordinal += 1
        self.lines.append(orjson.dumps(line))

    def event(self, sub: str, **fields: Any) -> None:
        self.add("event_msg", {"type": sub, **fields})

    def message(self, role: str, parts: list[dict[str, Any]], passthrough: Any = None,
                metadata: Any = None) -> None:
        payload: dict[str, Any] = {"type": "message", "id": f"msg_{uuid.uuid4()}", "role": role,
                                   "content": parts}
        if passthrough is not None:
            payload["internal_chat_message_metadata_passthrough"] = passthrough
        extra = {"metadata": metadata} if metadata is not None else {}
        self.add("response_item", payload, **extra)

    def start(self, trigger: str | None = "exec", harness: bool = False) -> str:
        """``task_started`` (and on a new thread the developer + environment messages)."""
        self.turn += 1
        turn = f"turn-{self.turn}"
        self.event("task_started", turn_id=turn, turn_attribution={"turn_trigger": trigger},
                   model_context_window=272000)
        if harness:
            self.developer("<skills_instructions>\n## Skills\nnone</skills_instructions>")
            self.message("user", [{"type": "input_text", "text": ENV_CONTEXT}], {
                "turn_id": turn, "content_item_kinds": ["environments.environment_context"],
                "content_item_metadata": [{"provenance": {"type": "harness", "hook": False}}]})
            self.add("world_state", {"full": True, "skills": [], "environment": {"cwd": "/w"}})
        self.add("turn_context", {"turn_id": turn, "cwd": "/srv/probe/work",
                                  "approval_policy": "never", "model": "fake-model"})
        self.event("thread_settings_applied", model="fake-model", model_provider="fake")
        return turn

    def developer(self, text: str) -> None:
        self.message("developer", [{"type": "input_text", "text": text}])

    def user(self, text: str) -> None:
        """What the human typed: the message item, then its UI copy."""
        self.message("user", [{"type": "input_text", "text": text}], {
            "turn_id": f"turn-{self.turn}", "content_item_kinds": ["user.text"],
            "content_item_metadata": [{"provenance": {"type": "user"}}]},
            {"history_sequence": self.ordinal, "client_authored": False})
        if self.legacy:
            self.event("user_message", message=text, images=[])
        else:
            self.event("item_completed", item={"type": "UserMessage", "id": str(uuid.uuid4()),
                                               "content": [{"type": "text", "text": text}]})

    def assistant(self, text: str) -> None:
        """What the assistant said: the UI copy, then the message item (Codex's order)."""
        if self.legacy:
            self.event("agent_message", message=text)
        else:
            self.event("item_completed", item={"type": "AgentMessage", "id": str(uuid.uuid4()),
                                               "content": [{"type": "Text", "text": text}]})
        self.message("assistant", [{"type": "output_text", "text": text, "annotations": []}],
                     {"turn_id": f"turn-{self.turn}", "content_item_kinds": ["unknown"]},
                     {"history_sequence": self.ordinal, "client_authored": False})

    def end(self, last: str) -> None:
        self.add("token_usage_record", {"thread_id": self.id, "usage": {
            "input_tokens": 1011, "output_tokens": 50, "total_tokens": 1061}})
        self.event("token_count", info={"total_token_usage": {"total_tokens": 1061}},
                   rate_limits=None)
        self.event("task_complete", turn_id=f"turn-{self.turn}", last_agent_message=last,
                   duration_ms=90)

    def exchange(self, said: str, answer: str, trigger: str | None = "exec") -> None:
        self.start(trigger, harness=self.turn == 0)
        self.user(said)
        self.assistant(answer)
        self.end(answer)

    def tool_round(self, output: str = "TOOL OUTPUT " * 20) -> None:
        """Reasoning (with encrypted content), a function call and its output, as 0.169 writes."""
        self.add("response_item", {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": "thinking about it"}],
            "encrypted_content": "gAAAAB" + "x" * 400})
        self.event("item_completed", item={"type": "Reasoning", "id": "rs_1"})
        self.add("response_item", {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                                   "name": "exec_command", "arguments": '{"cmd":"echo hi"}'})
        self.add("response_item", {"type": "function_call_output", "call_id": "call_1",
                                   "output": output})
        self.event("item_completed", item={"type": "CommandExecution", "id": "call_1"})

    def compaction(self, summary: str) -> None:
        """A pre-turn auto-compaction: the summary reply, then the ``compacted`` line."""
        self.start("exec")
        self.message("assistant", [{"type": "output_text", "text": summary}],
                     {"turn_id": f"turn-{self.turn}", "content_item_kinds": ["unknown"]},
                     {"history_sequence": self.ordinal, "compaction_output": True})
        self.add("compacted", {"message": "Another language model started to solve this "
                               "problem and produced a summary:\n" + summary,
                               "replacement_history": [{"type": "message", "role": "user",
                                                        "content": [{"type": "input_text",
                                                                     "text": "kept"}]}]})
        self.event("item_completed", item={"type": "ContextCompaction", "id": "cc"})

    def write(self, folder: Path, name: str | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (name or f"rollout-2026-12-03T10-00-00-{self.id}.jsonl")
        path.write_bytes(b"\n".join(self.lines) + b"\n")
        return path
