"""The host profile (host.yml): YAML → JSON Schema (all errors, each with its path) → Profile.

The ``rebuild:`` section is validated by the runtime config schema's own ``rebuild`` definition
(runtime/schema/config.schema.json, referenced through a jsonschema registry, not copied), so a
profile can never carry a knob the runtime would refuse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from provision.errors import ProfileError
from runtime.agents.kind import AgentKind
from runtime.config import unknown_key
from runtime.doors.kind import DoorKind


@dataclass(frozen=True)
class ClaudeSpec:
    user: str
    home: str
    config_dir: str | None = None
    binary: str | None = None
    workdir: str | None = None

    @property
    def claude_dir(self) -> str:
        """Where settings.json and projects/ live: ``config_dir`` or ``<home>/.claude``."""
        return self.config_dir or f"{self.home.rstrip('/')}/.claude"

    @property
    def settings_path(self) -> str:
        return f"{self.claude_dir}/settings.json"

    @property
    def env(self) -> dict[str, str]:
        """HOME (and CLAUDE_CONFIG_DIR) the claude CLI must run with for this profile."""
        env = {"HOME": self.home}
        if self.config_dir:
            env["CLAUDE_CONFIG_DIR"] = self.config_dir
        return env


@dataclass(frozen=True)
class CodexSpec:
    """A Codex host: the user codex runs as and its ``CODEX_HOME`` (config.toml, sessions/,
    thread-writer-locks/); ``binary``/``workdir`` only when introspection cannot tell."""

    user: str
    home: str
    binary: str | None = None
    workdir: str | None = None

    @property
    def config_path(self) -> str:
        """``$CODEX_HOME/config.toml``: the notify program and the MCP server go there."""
        return f"{self.home.rstrip('/')}/config.toml"

    @property
    def sessions_dir(self) -> str:
        return f"{self.home.rstrip('/')}/sessions"

    @property
    def env(self) -> dict[str, str]:
        """The variable the codex CLI must run with for this profile."""
        return {"CODEX_HOME": self.home}


@dataclass(frozen=True)
class DoorSpec:
    kind: DoorKind
    tmux_target: str | None = None
    tmux_socket_name: str | None = None
    tmux_socket_path: str | None = None  # absolute: the server of ``tmux -S PATH``
    tmux_unit: str | None = None
    systemd_unit: str | None = None
    systemd_pointer_path: str | None = None
    pointer_path: str | None = None
    pointer_runner: str | None = None


@dataclass(frozen=True)
class InstallSpec:
    config_path: str
    state_dir: str
    prefix: str | None = None
    overwrite_read_only: bool = False  # a read-only settings.json/config is refused otherwise

    @property
    def manifest_path(self) -> str:
        return f"{self.state_dir.rstrip('/')}/provision.json"

    @property
    def default_pointer_path(self) -> str:
        """The pointer file of the systemd / pointer door when the profile names none."""
        return f"{self.state_dir.rstrip('/')}/pointer"


@dataclass(frozen=True)
class Profile:
    """A validated host profile; ``None`` fields are unmanaged or discovered."""

    host: str
    claude: ClaudeSpec
    door: DoorSpec
    install: InstallSpec
    connection: str = "local"
    prefer: str | None = None
    mcp_name: str = "threadline"
    mcp_scope: str = "user"
    hook_timeout: int = 10
    hook_enabled: bool = True
    request_max_age_hours: float = 24.0
    channels_expected: tuple[str, ...] | None = None
    rebuild: MappingProxyType[str, Any] = field(
        default_factory=lambda: MappingProxyType({}))
    source: str | None = None
    agent: AgentKind = AgentKind.CLAUDE
    codex: CodexSpec | None = None  # set exactly when agent is AgentKind.CODEX


def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    own = resources.files("provision.schema").joinpath("profile.schema.json").read_text("utf-8")
    runtime = resources.files("runtime.schema").joinpath("config.schema.json").read_text("utf-8")
    return json.loads(own), json.loads(runtime)


def profile_errors(data: Any) -> list[str]:
    """Every problem of ``data`` as ``dotted.path: message`` (``door.tmux.target: required``)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    own, runtime = _schemas()
    registry = Registry().with_resource(runtime["$id"], Resource.from_contents(runtime))
    validator = Draft202012Validator(own, registry=registry)
    problems: list[str] = []
    for err in validator.iter_errors(data):
        problems.extend(_describe(err))
    return sorted(set(problems), key=lambda p: (p.split(":")[0], p))


def _describe(err: Any) -> list[str]:
    prefix = "".join(f"{part}." for part in err.absolute_path)
    if err.validator == "required":
        missing = [k for k in err.validator_value if not isinstance(err.instance, dict)
                   or k not in err.instance]
        return [f"{prefix}{key}: required" for key in missing]
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = err.schema.get("properties", {})
        return [unknown_key(prefix, key, known) for key in err.instance if key not in known]
    if err.validator in ("allOf", "if"):
        return []
    if err.validator == "pattern" and "rule" in err.schema:  # a pattern said in words
        return [f"{prefix.rstrip('.')}: {err.instance!r} must be {err.schema['rule']}"]
    return [f"{prefix.rstrip('.') or '(top level)'}: {err.message}"]


def load_profile(path: str | Path) -> Profile:
    """Read and validate ``path``; a ProfileError lists every problem at once."""
    source = Path(path)
    try:
        text = source.read_text("utf-8")
    except FileNotFoundError as exc:
        raise ProfileError(f"host profile not found: {str(source)!r}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ProfileError(f"cannot read host profile {str(source)!r}: {why}") from exc
    try:
        data = bounded_yaml(text)
    except yaml.YAMLError as exc:
        raise ProfileError(
            f"host profile {str(source)!r} is not valid YAML: {_yaml_problem(exc)}"
        ) from exc
    except ValueError as exc:
        raise ProfileError(f"host profile {str(source)!r} is refused: {exc}") from exc
    if data is None:  # an empty file, or only comments: jsonschema would say "None is not …"
        raise ProfileError(
            f"host profile {str(source)!r} is empty (or only comments); start from an example "
            "in inventories/ (tmux-vps.yml, systemd-vps.yml, pointer-runner.yml, codex-host.yml)"
        )
    return profile_from_mapping(data, str(source))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line: the problem and where (its own text spans several
    lines with a source snippet and a caret)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        context = getattr(exc, "context", None)
        lead = f"{context}: " if context else ""
        return f"{lead}{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())


MAX_YAML_BYTES = 1 << 20
MAX_YAML_NODES = 100_000  # after alias expansion: a "billion laughs" file stops here
MAX_YAML_DEPTH = 64


def bounded_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text`` with its size, nesting depth and alias-expanded node
    count bounded (ValueError naming the bound): the node graph is measured before anything
    is constructed, so an alias bomb never grows in memory."""
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"larger than {MAX_YAML_BYTES} bytes")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    if root is None:
        return None
    _measure(root)
    return yaml.SafeLoader(text).get_single_data()


def _measure(root: yaml.Node) -> None:
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:  # iterative post-order walk; shared (aliased) nodes are counted per use
        node, depth, done = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise ValueError(f"nested deeper than {MAX_YAML_DEPTH} levels")
        children = _children(node)
        if done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise ValueError(f"expands to more than {MAX_YAML_NODES} values (aliases)")
            continue
        if id(node) in sizes:
            continue
        _refuse_duplicate_keys(node)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)


def _refuse_duplicate_keys(node: yaml.Node) -> None:
    """YAML keeps the last of two equal keys silently; a profile with two ``rebuild:`` (or two
    ``door:``) sections would lose the first without a word."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise ValueError(f"duplicate key {key.value!r} (lines {seen[key.value]} and {line})")
        seen[key.value] = line


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def profile_from_mapping(data: Any, source: str | None = None) -> Profile:
    """Validate a parsed mapping and freeze it into a Profile."""
    from runtime.config import regex_errors, tmux_socket_problem, value_errors

    problems = profile_errors(data)
    if isinstance(data, dict):
        problems += regex_errors({"rebuild": data.get("rebuild", {})}) + value_errors(data)
        problems += control_errors({k: v for k, v in data.items() if k != "rebuild"})
    if not problems and (socket := tmux_socket_problem(data["door"].get("tmux", {}),
                                                       "door.tmux.")):
        problems.append(socket)
    agent = AgentKind.parse(data.get("agent", "claude")) if not problems else AgentKind.CLAUDE
    if not problems and (door_problem := agent.door_problem(DoorKind(data["door"]["kind"]),
                                                            "door.kind")):
        problems.append(door_problem)
    if problems:
        where = f"host profile {source!r}" if source else "host profile"
        raise ProfileError(f"invalid {where}: " + "; ".join(problems))
    door = data["door"]
    tmux, systemd, pointer = door.get("tmux", {}), door.get("systemd", {}), door.get("pointer", {})
    expected = data.get("channels", {}).get("expected")
    return Profile(
        host=data["host"],
        connection=data.get("connection", "local"),
        prefer=data.get("prefer"),
        claude=_agent_user(data),
        door=DoorSpec(
            kind=DoorKind(door["kind"]), tmux_target=tmux.get("target"),
            tmux_socket_name=tmux.get("socket_name") or None,
            tmux_socket_path=tmux.get("socket_path") or None, tmux_unit=tmux.get("unit"),
            systemd_unit=systemd.get("unit"), systemd_pointer_path=systemd.get("pointer_path"),
            pointer_path=pointer.get("path"), pointer_runner=pointer.get("runner"),
        ),
        install=InstallSpec(**data["install"]),
        mcp_name=data.get("mcp", {}).get("name", "threadline"),
        mcp_scope=data.get("mcp", {}).get("scope", "user"),
        hook_timeout=data.get("hook", {}).get("timeout", 10),
        hook_enabled=data.get("hook", {}).get("enabled", True),
        request_max_age_hours=data.get("hook", {}).get("request_max_age_hours", 24.0),
        channels_expected=tuple(expected) if expected is not None else None,
        rebuild=MappingProxyType(dict(data.get("rebuild", {}))),
        source=source,
        agent=agent,
        codex=CodexSpec(**data["codex"]) if agent is AgentKind.CODEX else None,
    )


_CONTROL = re.compile(r"[\x01-\x1f\x7f]")


def control_errors(data: Any, prefix: str = "") -> list[str]:
    """Strings of the profile (paths, names, targets) holding a control character: a YAML
    ``|`` block leaves a trailing newline (``state_dir: |``), and a path or a name with one
    would be created or used as it is. (NUL is ``value_errors``'; ``rebuild:`` patterns are
    the runtime's to judge.)"""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in control_errors(v, f"{prefix}{k}.")]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in control_errors(v, f"{prefix}{i}.")]
    if isinstance(data, str) and (found := _CONTROL.search(data)):
        return [f"{prefix.rstrip('.')}: {data!r} contains the control character "
                f"{found.group()!r}; write it on one line (a YAML '|' block keeps a newline)"]
    return []


def _agent_user(data: dict[str, Any]) -> ClaudeSpec:
    """The ``claude:`` section; on a Codex host (no ``claude:``) the codex user, so the tasks
    that only need the agent's user and owner (directories, chown, sudo) read one field."""
    agent = AgentKind.parse(data.get("agent", "claude"))
    if agent is AgentKind.CODEX and AgentKind.CLAUDE.value not in data:
        codex = data["codex"]
        return ClaudeSpec(user=codex["user"], home=codex["home"], binary=codex.get("binary"),
                          workdir=codex.get("workdir"))
    return ClaudeSpec(**data["claude"])
