"""What counts as speech in a Codex rollout, and where every other line's bytes go, as data.

Human speech: ``response_item`` user messages whose text parts a human typed. A part is
harness text when its ``content_item_kinds`` entry names an environment/instructions kind,
its provenance type is not ``user``, or its text opens with a harness tag (field rollouts
carry AGENTS.md, environment context and IDE wrappers as parts of one message: judge per
part). Assistant speech: ``output_text`` parts of assistant messages, except the compaction
summary (``metadata.compaction_output``). ``event_msg`` copies are never speech.
"""

from __future__ import annotations

HUMAN_KINDS: tuple[str, ...] = ("typed", "queued", "untagged")  # untagged: no provenance said
ASSISTANT_KINDS: tuple[str, ...] = ("assistant_text",)
SPEECH_KINDS: tuple[str, ...] = HUMAN_KINDS + ASSISTANT_KINDS

# content_item_kinds entries that say a human typed the part
HUMAN_ITEM_KINDS: frozenset[str] = frozenset({"user.text"})
# provenance types that say a human typed the part
HUMAN_PROVENANCE: frozenset[str] = frozenset({"user"})
# kinds with no say either way (thread/inject_items, hand-written and older rollouts)
UNKNOWN_ITEM_KINDS: frozenset[str] = frozenset({"unknown", ""})
# openings of harness-written user text (0.169 and field rollouts 0.39-0.153)
HARNESS_OPENINGS: tuple[str, ...] = (
    "<environment_context>",
    "<user_instructions>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<user_shell_command>",
    "<skill>",
    "<user_action>",
    "<collaboration_mode>",
    "<skills_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions for ",
)
USER_TEXT_PARTS: frozenset[str] = frozenset({"input_text", "text"})
ASSISTANT_TEXT_PARTS: frozenset[str] = frozenset({"output_text", "text"})

NOISE_CATEGORIES: tuple[str, ...] = (
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
    "world_state",
    "turn_context",
    "token_records",
    "harness_message",
    "compaction",
    "ui_copy",
    "image",
    "other",
)
# response_item payload types -> category (every other payload type goes to ``other``)
ITEM_CATEGORY: dict[str, str] = {
    "reasoning": "reasoning",
    "function_call": "function_call",
    "function_call_output": "function_call_output",
    "custom_tool_call": "custom_tool_call",
    "custom_tool_call_output": "custom_tool_call_output",
    "local_shell_call": "local_shell_call",
    "web_search_call": "web_search_call",
    "compaction": "compaction",
}
# line types -> category
LINE_CATEGORY: dict[str, str] = {
    "world_state": "world_state",
    "turn_context": "turn_context",
    "token_usage_record": "token_records",
    "compacted": "compaction",
}
# event_msg payload types -> category (UI copies of items; never speech, never counted twice)
EVENT_CATEGORY: dict[str, str] = {
    "token_count": "token_records",
    "item_completed": "ui_copy",
    "user_message": "ui_copy",
    "agent_message": "ui_copy",
    "agent_reasoning": "reasoning",
    "context_compacted": "compaction",
}
TRIGGER_KIND: dict[str, str] = {"queue": "queued"}
# image wrapper parts around an ``input_image`` (field rollouts): not typed text
IMAGE_OPENINGS: tuple[str, ...] = ("<image name=", "</image>")
# IDE clients wrap the typed request: only the text after IDE_REQUEST is the human's
IDE_WRAPPER: tuple[str, ...] = ("# Context from my IDE setup:", "# Files mentioned by the user:")
IDE_REQUEST = "## My request for Codex:"

# line 0 (``session_meta``) fields a rebuild copies verbatim, and the JSON types Codex 0.169.0's
# deserializer takes for each when present (measured with ``codex exec resume``: any other type
# makes it refuse the whole rollout, "does not start with session metadata"). Nulls it was not
# asked about are let through; a field not listed here is not checked (``id`` and
# ``session_id`` are replaced by the rebuild's own).
META_FIELD_TYPES: dict[str, frozenset[str]] = {
    "timestamp": frozenset({"string"}),
    "cwd": frozenset({"string"}),
    "originator": frozenset({"string"}),
    "cli_version": frozenset({"string"}),
    "source": frozenset({"string", "object"}),  # "exec", "cli", {"subagent": …}
    "thread_source": frozenset({"string", "null"}),
    "model_provider": frozenset({"string", "null"}),
    "history_mode": frozenset({"string"}),
    "git": frozenset({"object", "null"}),
    "base_instructions": frozenset({"object", "null"}),
    "runtime_workspace_roots": frozenset({"array", "null"}),
    "context_window": frozenset({"object", "null"}),
    "multi_agent_version": frozenset({"string", "null"}),
    "account_scoped": frozenset({"boolean", "null"}),
    "agent_nickname": frozenset({"string", "null"}),
    "agent_role": frozenset({"string", "null"}),
}
# string fields that take only these values (``history_mode: "bogus"`` is refused)
META_FIELD_VALUES: dict[str, frozenset[str]] = {"history_mode": frozenset({"legacy", "paginated"})}
# fields inside those objects ("missing": the field may be left out; base_instructions: {} is
# refused, git: {} is not)
META_SUBFIELD_TYPES: dict[tuple[str, str], frozenset[str]] = {
    ("base_instructions", "text"): frozenset({"string"}),
    ("git", "branch"): frozenset({"string", "null", "missing"}),
    ("git", "commit_hash"): frozenset({"string", "null", "missing"}),
    ("git", "repository_url"): frozenset({"string", "null", "missing"}),
}
