"""The runtime config: one TOML file, validated by a JSON Schema, read into frozen records
(``runtime.record``).

``load_config(path)`` is the only way in. Every key has a default (SPEC §3, §4), so ``None``
gives a complete config without ``project_dir``; read-only commands work that way on an
explicit ``--transcript``. Validation reports every problem at once, each naming its key.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from runtime.agents.kind import AgentKind
from runtime.doors.kind import DoorKind
from runtime.errors import ConfigError
from runtime.record import Record, field

ENV_VAR = "THREADLINE_CONFIG"

DEFAULT_INJECTED_TAGS: tuple[str, ...] = (
    "system-reminder",
    "local-command-caveat",
    "local-command-stdout",
    "local-command-stderr",
    "command-name",
    "command-message",
    "command-args",
    "memory-retrieval",
    "heartbeat",
    "scheduled-task",
    "task-notification",
    "ide_selection",
    "ide_opened_file",
    "user-prompt-submit-hook",
)
DEFAULT_POISON_PATTERNS: tuple[str, ...] = (
    r"\b(AUP|Acceptable Use Policy|policy violation|refusal loop)\b",
    r"上下文中毒|拒绝循环",
)
DEFAULT_REPLY_TOOL_PATTERN = r"^mcp__[\w.-]*(companion|telegram)[\w.-]*__reply$"


class SpeechTool(Record):
    """A deployment-specific tool whose argument at ``path`` (dotted) is carried as speech."""

    name: str
    path: str

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))


class RebuildConfig(Record):
    """SPEC §3 knobs: what a rebuild carries and when the session counts as dirty."""

    include_open_tail: bool = True
    stamp_turns: bool = True
    carry_max_tokens: int = 0
    carry_overflow: str = "drop_oldest"
    token_cjk_factor: float = 1.1
    token_other_divisor: float = 1.5
    fixed_overhead_tokens: int = 0
    poison_patterns: tuple[str, ...] = DEFAULT_POISON_PATTERNS
    poison_window_turns: int = 10
    poison_threshold: int = 2
    dirty_budget_bytes: int = 524288
    rebuild_on_image: bool = True
    injected_tags: tuple[str, ...] = DEFAULT_INJECTED_TAGS
    reply_tool_pattern: str = DEFAULT_REPLY_TOOL_PATTERN
    reply_tool_argument: str = "text"
    reply_chat_ids: tuple[str, ...] = ()
    speech_tools: tuple[SpeechTool, ...] = ()
    unrecognised_speech: str = "block"  # the independent audit's finding: "block" | "report"

    @cached_property
    def poison_regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p) for p in self.poison_patterns)

    @cached_property
    def reply_tool_regex(self) -> re.Pattern[str]:
        return re.compile(self.reply_tool_pattern)


class TmuxConfig(Record):
    """The tmux door: the pane claude runs in and its server, by socket name (``-L``) or by
    socket path (``-S``: a server started with ``tmux -S``; also what tl-provision accept
    sets when it runs as root against another user's server, where -L would look in root's
    own folder)."""

    target: str = ""
    socket_name: str = ""
    socket_path: str = ""


class SystemdConfig(Record):
    """The systemd door: the unit claude runs as and its session pointer."""

    unit: str = ""
    pointer_path: str = ""
    # A claude user that is not root: restart and escape through ``sudo -n`` (the exact
    # commands tl-provision's sudoers drop-in allows), the worker running as this user.
    sudo_user: str = ""


class PointerConfig(Record):
    """The pointer door: the file the runner reads the session id from."""

    path: str = ""


class SwitchConfig(Record):
    """SPEC §4 knobs: how the running claude is switched and checked."""

    door: DoorKind = DoorKind.TMUX
    resume_argv: tuple[str, ...] = ()
    launch_argv: tuple[str, ...] = ()
    channel_flags: tuple[str, ...] = ()
    expected_channel_servers: tuple[str, ...] = ()
    # Names (never values) of the launch environment the resume must carry: the worker reads
    # the values from the running claude's /proc/PID/environ (SPEC §4.3, issue 10 §5).
    environment: tuple[str, ...] = ()
    healthcheck_seconds: float = 5.0  # the watch after `activated` (runtime/switch/activation.py)
    activation_stable_seconds: float = 0.5  # the evidence holds this long before `activated`
    activation_timeout_seconds: float = 20.0  # evidence still missing then: not activated
    stable_seconds: float = 0.3
    stable_timeout_seconds: float = 30.0
    worker_log: str = ""
    keep_operations: int = 20
    request_max_age_hours: float = 24.0
    tmux: TmuxConfig = field(default_factory=TmuxConfig)
    systemd: SystemdConfig = field(default_factory=SystemdConfig)
    pointer: PointerConfig = field(default_factory=PointerConfig)


class Config(Record):
    """The whole runtime config; ``source`` is the file it came from (None = defaults)."""

    project_dir: Path | None = None
    workdir: Path | None = None
    state_dir: Path | None = None
    agent: AgentKind = AgentKind.CLAUDE
    codex_home: Path | None = None
    rebuild: RebuildConfig = field(default_factory=RebuildConfig)
    switch: SwitchConfig = field(default_factory=SwitchConfig)
    source: Path | None = None

    @property
    def worker_log_path(self) -> Path | None:
        if self.switch.worker_log:
            return Path(self.switch.worker_log).expanduser()
        return self.state_dir / "worker.log" if self.state_dir else None


def config_path_from(cli_value: str | os.PathLike[str] | None) -> Path | None:
    """The config file to use: ``--config`` first, else ``$THREADLINE_CONFIG``, else none."""
    if cli_value:
        return Path(cli_value)
    env = os.environ.get(ENV_VAR, "")
    return Path(env) if env else None


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read, validate and freeze the config at ``path``; ``None`` gives every default."""
    if path is None:
        return Config()
    import tomllib

    source = Path(path).expanduser()
    try:
        if not source.is_dir() and source.exists() and not source.is_file():
            # a FIFO would hang the reader (the Stop hook too), /dev/zero never ends
            raise ConfigError(f"config {str(source)!r} is not a regular file")
        raw = source.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {str(source)!r}") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config path is a directory: {str(source)!r}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config {str(source)!r}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config {str(source)!r} is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {str(source)!r} is not valid TOML: {exc}") from exc
    return config_from_mapping(data, source)


def config_from_mapping(data: dict[str, Any], source: Path | None = None) -> Config:
    """Validate a parsed mapping (all errors at once, each naming its key) and freeze it."""
    problems = schema_errors(data) + regex_errors(data) + value_errors(data)
    agent = AgentKind.parse(data.get("agent", "claude")) if not problems else AgentKind.CLAUDE
    if not problems and agent.needs_home and not data.get("codex_home"):
        problems.append(f"agent: {agent.value!r} needs codex_home (the CODEX_HOME of the "
                        f"running {agent.value})")
    tmux = data.get("switch", {}).get("tmux", {}) if not problems else {}
    if socket := tmux_socket_problem(tmux, "switch.tmux."):
        problems.append(socket)
    door = DoorKind(data.get("switch", {}).get("door", "tmux")) if not problems else None
    if door is not None and (door_problem := agent.door_problem(door, "switch.door")):
        problems.append(door_problem)
    if problems:
        where = f"config {str(source)!r}" if source else "config"
        raise ConfigError(f"invalid {where}: " + "; ".join(problems))
    rebuild = dict(data.get("rebuild", {}))
    for key in ("poison_patterns", "injected_tags", "reply_chat_ids"):
        if key in rebuild:
            rebuild[key] = tuple(rebuild[key])
    if "speech_tools" in rebuild:
        rebuild["speech_tools"] = tuple(SpeechTool(**t) for t in rebuild["speech_tools"])
    switch = dict(data.get("switch", {}))
    for key in ("resume_argv", "launch_argv", "channel_flags", "expected_channel_servers",
                "environment"):
        if key in switch:
            switch[key] = tuple(switch[key])
    if "door" in switch:
        switch["door"] = DoorKind(switch["door"])  # the schema has refused any other value
    switch["tmux"] = TmuxConfig(**switch.get("tmux", {}))
    switch["systemd"] = SystemdConfig(**switch.get("systemd", {}))
    switch["pointer"] = PointerConfig(**switch.get("pointer", {}))
    return Config(
        project_dir=_path(data.get("project_dir")),
        workdir=_path(data.get("workdir")),
        state_dir=_path(data.get("state_dir")),
        agent=agent,
        codex_home=_path(data.get("codex_home")),
        rebuild=RebuildConfig(**rebuild),
        switch=SwitchConfig(**switch),
        source=source,
    )


def tmux_socket_problem(tmux: dict[str, Any], prefix: str) -> str | None:
    """A tmux door naming its server twice, by ``socket_name`` (``-L``) and ``socket_path``
    (``-S``): one of them would be silently ignored (``runtime.doors.tmux.tmux_argv``)."""
    if tmux.get("socket_name") and tmux.get("socket_path"):
        return (f"{prefix}socket_path: {tmux['socket_path']!r} given together with "
                f"{prefix}socket_name {tmux['socket_name']!r}; name the tmux server once "
                f"(socket_path for tmux -S, socket_name for tmux -L)")
    return None


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _schema() -> dict[str, Any]:
    import json

    import runtime.schema  # the file next to the package's module: importlib.resources would
    # bring zipfile and its readers (≈ 2.5 ms of every config load) for a plain install

    folder = Path(runtime.schema.__file__).parent
    text = (folder / "config.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(data: Any) -> list[str]:
    """Every schema violation of ``data`` as ``dotted.key: message``, in document order."""
    schema = _schema()
    if _surely_valid(data, schema):
        return []  # what jsonschema would say, without its 29 ms of imports (issue 13)
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    found = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    problems: list[str] = []
    for err in found:
        prefix = "".join(f"{p}." for p in err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = err.schema.get("properties", {})
            problems.extend(unknown_key(prefix, k, known) for k in err.instance if k not in known)
            continue
        problems.append(f"{prefix.rstrip('.') or '(top level)'}: {err.message}")
    return problems


def unknown_key(prefix: str, key: Any, known: Any) -> str:
    """``prefix.key: unknown key``, with ``(did you mean 'x'?)`` when one known key is close."""
    from difflib import get_close_matches  # only on this error path, never at start-up

    close = get_close_matches(key, [k for k in known if type(k) is str], n=1) if (
        type(key) is str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{prefix}{key}: unknown key{hint}"


# Keywords that only annotate; any keyword outside these and the checked ones is inconclusive.
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})
_CHECKED = frozenset({"type", "enum", "pattern", "minLength", "minimum", "maximum",
                      "exclusiveMinimum", "items", "uniqueItems", "properties", "required",
                      "additionalProperties"})


def _surely_valid(value: Any, schema: Any) -> bool:
    """True only when ``value`` certainly satisfies ``schema`` (the keywords the config schema
    uses); False means "not sure", and the caller asks jsonschema. Every doubt answers False:
    an unknown keyword, a float where an integer is asked, a non-finite number, an enum or
    uniqueItems over anything but strings — so it never passes what jsonschema would not."""
    if type(schema) is not dict or not schema.keys() <= _CHECKED | _ANNOTATIONS:
        return False
    kind = schema.get("type")
    if kind is not None and not _surely_type(value, kind):
        return False
    if "enum" in schema:
        choices = schema["enum"]
        if type(value) is not str or not all(type(c) is str for c in choices):
            return False
        if value not in choices:
            return False
    if type(value) is str:
        if len(value) < schema.get("minLength", 0):
            return False
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            return False
    elif type(value) in (int, float):
        if type(value) is float and not math.isfinite(value):
            return False
        bounds: tuple[tuple[str, Callable[[Any], bool]], ...] = (
            ("minimum", lambda b: value >= b), ("maximum", lambda b: value <= b),
            ("exclusiveMinimum", lambda b: value > b))
        for key, ok in bounds:
            if key in schema and not (type(schema[key]) in (int, float) and ok(schema[key])):
                return False
    elif type(value) is list:
        if schema.get("uniqueItems") is True and not (
                all(type(v) is str for v in value) and len(set(value)) == len(value)):
            return False
        if "items" in schema and not all(_surely_valid(v, schema["items"]) for v in value):
            return False
    elif type(value) is dict:
        return _surely_valid_object(value, schema)
    return True


def _surely_valid_object(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    if type(properties) is not dict or extra not in (True, False):
        return False
    if not all(key in value for key in schema.get("required", ())):
        return False
    for key, item in value.items():
        if key in properties:
            if not _surely_valid(item, properties[key]):
                return False
        elif extra is False:
            return False
    return True


def _surely_type(value: Any, kind: Any) -> bool:
    """``value`` is of JSON Schema type ``kind`` (bool is no number; 1.0 is left to jsonschema)."""
    if type(kind) is list:
        return any(_surely_type(value, k) for k in kind)
    wanted = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
              "array": (list,), "object": (dict,), "null": (type(None),)}.get(kind)
    return wanted is not None and type(value) in wanted


def regex_errors(data: Any) -> list[str]:
    """Regex knobs that do not compile, named by key and index (wrong types are the
    schema's to report, so they are skipped here and both lists can be shown together)."""
    rebuild = data.get("rebuild", {}) if isinstance(data, dict) else {}
    if not isinstance(rebuild, dict):
        return []
    problems = []
    patterns = rebuild.get("poison_patterns", ())
    for i, pattern in enumerate(patterns if isinstance(patterns, list | tuple) else ()):
        problems.extend(_compile_problem(f"rebuild.poison_patterns.{i}", pattern))
    if "reply_tool_pattern" in rebuild:
        pattern = rebuild["reply_tool_pattern"]
        problems.extend(_compile_problem("rebuild.reply_tool_pattern", pattern))
    return problems


def value_errors(data: Any, prefix: str = "") -> list[str]:
    """Values no schema type excludes but no knob can mean: NUL bytes in strings (they end a
    path or an argv token early), lone surrogates (no file can hold them) and NaN/Infinity
    (every comparison with them is false)."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in value_errors(v, f"{prefix}{k}.")]
    if isinstance(data, list | tuple):
        return [p for i, v in enumerate(data) for p in value_errors(v, f"{prefix}{i}.")]
    key = prefix.rstrip(".") or "(top level)"
    if isinstance(data, str) and "\x00" in data:
        return [f"{key}: contains a NUL byte"]
    if isinstance(data, str) and not _utf8(data):
        return [f"{key}: contains a lone UTF-16 surrogate (not writable as UTF-8)"]
    if isinstance(data, float) and not math.isfinite(data):
        return [f"{key}: {data!r} is not a finite number"]
    return []


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _compile_problem(key: str, pattern: Any) -> list[str]:
    if not isinstance(pattern, str):
        return []
    try:
        re.compile(pattern)
    except re.error as exc:
        return [f"{key}: {pattern!r} is not a valid regular expression ({exc})"]
    return []
