"""Render the managed files from templates/*.j2 (Jinja2, StrictUndefined) and validate them.

Filters: ``toml`` (a TOML value: string, bool, number, list, inline table), ``systemd_argv``
(an argv quoted for a unit file: ``%`` → ``%%``, ``$`` → ``$$``), ``sh`` (shlex.quote),
``comment`` (a value on a comment line, control characters escaped).
Validators run on the rendered bytes before anything on disk is replaced.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from provision.errors import RenderError

MANAGED_MARK = "Managed by tl-provision"


def toml_value(value: Any) -> str:
    """``value`` as a TOML literal (JSON strings are valid TOML basic strings)."""
    from jinja2 import Undefined

    if isinstance(value, Undefined):
        value._fail_with_undefined_error()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise RenderError(f"cannot render {type(value).__name__} value {value!r} as TOML")


# the control characters a quoted ExecStart word can spell (systemd.syntax(7) C escapes that
# provision.parsers.facts reads back); any other one is refused
_SYSTEMD_CONTROL = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def systemd_word(word: str) -> str:
    """One argv word quoted for ``ExecStart=`` (systemd.syntax(7), no specifier/env expansion).

    A newline, tab or carriage return is written as its C escape inside quotes (a raw newline
    would end the directive and start another); other control characters are refused."""
    escaped = word.replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t\"'\\;") and not _CONTROL.search(escaped):
        return escaped
    odd = [c for c in _CONTROL.findall(escaped) if c not in _SYSTEMD_CONTROL]
    if odd:
        raise RenderError(f"argv word {word!r} cannot be written in a unit file: it holds the "
                          f"control character {odd[0]!r}")
    quoted = escaped.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _CONTROL.sub(lambda m: _SYSTEMD_CONTROL[m.group()], quoted) + '"'


def comment(value: Any) -> str:
    """``value`` for a comment line: control characters as ``\\xHH`` so it stays one line."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def systemd_argv(argv: Sequence[str]) -> str:
    return " ".join(systemd_word(word) for word in argv)


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("provision.templates", "."), undefined=StrictUndefined,
                      keep_trailing_newline=True, autoescape=False)
    env.filters.update(comment=comment, toml=toml_value, systemd_argv=systemd_argv,
                       systemd_argv_word=systemd_word, sh=shlex.quote, shjoin=shlex.join)
    return env


def render(template: str, context: Mapping[str, Any]) -> bytes:
    """Render ``templates/<template>`` with ``context``; a missing variable is a RenderError."""
    from jinja2 import TemplateError

    try:
        text: str = _environment().get_template(template).render(**context)
        return text.encode("utf-8")
    except TemplateError as exc:
        raise RenderError(f"template {template!r} failed to render: {exc}") from exc


def validate_config(content: bytes) -> None:
    """The rendered runtime config loads with the runtime's own validator."""
    from runtime.config import config_from_mapping
    from runtime.errors import ThreadlineError

    try:
        config_from_mapping(tomllib.loads(content.decode("utf-8")))
    except (tomllib.TOMLDecodeError, ThreadlineError) as exc:
        raise RenderError(f"rendered runtime config does not validate: {exc}") from exc


def validate_drop_in(expected_argv: Sequence[str]) -> Any:
    """A validator: the drop-in resets ExecStart and its single command ends in the argv."""
    from provision.parsers.facts import (
        effective_exec_start,
        expand_systemd_env,
        parse_systemctl_cat,
        resolve_specifiers,
    )

    def validate(content: bytes) -> None:
        files = parse_systemctl_cat("# /drop-in.conf\n" + content.decode("utf-8"))
        commands = effective_exec_start(files)
        argv = expand_systemd_env(resolve_specifiers(commands[0].argv), {})[0] if commands else ()
        if len(commands) != 1 or tuple(argv[-len(expected_argv):]) != tuple(expected_argv):
            raise RenderError("rendered tl-launch drop-in does not re-parse to the launch argv")
    return validate


def validate_runner(content: bytes) -> None:
    """The runner wrapper is a POSIX sh script that execs claude (parsed, never run)."""
    text = content.decode("utf-8")
    if not text.startswith("#!/bin/sh\n") or "exec " not in text:
        raise RenderError("rendered runner wrapper is not a '#!/bin/sh' script that execs claude")
    try:
        for line in text.splitlines():
            if line.strip().startswith("exec "):
                shlex.split(line)
    except ValueError as exc:
        raise RenderError(f"rendered runner wrapper has a broken exec line: {exc}") from exc
