"""Claude Code ``settings.json``: a strict parser and a lossless merge of our Stop hook.

Pure functions only (no I/O): provision/tasks/settings.py reads and writes through the host.

A Threadline handler is recognised by its **marker**: the command's shell words contain
``tl-rebuild`` (any directory, compared by basename) immediately followed by ``hook-stop``, e.g.
``/usr/local/bin/tl-rebuild hook-stop --config /etc/threadline/config.toml``. Several companions
can share one claude user (one settings.json): each profile's handler is the marker handler whose
``--config`` is that profile's config path (``config_path``), or a path it had before
(``previous``, from its manifest: a moved config file upgrades the entry in place), or none at
all (an old entry relying on ``THREADLINE_CONFIG``). Marker handlers of other config paths belong
to other companions and are never changed or removed. A moved binary also upgrades in place.
Nothing else in the document is touched: other keys, other events, other Stop groups, their
matchers, foreign handlers and unknown fields keep their values and their key order.

Strict on purpose: a file that Claude Code (or a person) wrote in a form we cannot round-trip —
JSONC comments, a byte-order mark, an empty file, duplicate keys, NaN, a non-object — is a
SettingsError and is never overwritten.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import shlex
from collections.abc import Iterator
from typing import Any

from provision.errors import SettingsError

MARKER = "tl-rebuild hook-stop"
"""The words that identify our Stop handler inside its ``command`` (see the module docstring)."""

_BOM = b"\xef\xbb\xbf"


def parse_settings(raw: bytes | None, path: str = "settings.json") -> dict[str, Any]:
    """Return the settings document in ``raw``; None (no file) is ``{}``.

    Raises SettingsError, naming ``path``, for anything that is not one strict JSON object.
    """
    if raw is None:
        return {}
    if raw.startswith(_BOM):
        raise SettingsError(f"settings file '{path}' starts with a UTF-8 byte-order mark; "
                            "remove it and re-run")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"settings file '{path}' is not UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise SettingsError(f"settings file '{path}' is empty; write '{{}}' into it or delete it")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys,
                         parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        comment = _comment_position(text)
        if comment is not None:
            line, col = comment
            raise SettingsError(f"settings file '{path}' contains a comment (JSONC) at line "
                                f"{line} column {col}; only strict JSON can be merged") from exc
        raise SettingsError(f"settings file '{path}' is not valid JSON: {exc.msg} at line "
                            f"{exc.lineno} column {exc.colno}") from exc
    except ValueError as exc:
        raise SettingsError(f"settings file '{path}' {exc}") from exc
    except RecursionError as exc:
        raise SettingsError(f"settings file '{path}' is nested too deeply to read; "
                            "no Claude Code settings file looks like this") from exc
    if not isinstance(doc, dict):
        raise SettingsError(f"settings file '{path}' holds a JSON {_kind(doc)}, not an object")
    _check_stop_shape(doc, path)
    return doc


def dump_settings(doc: dict[str, Any]) -> bytes:
    """Serialise ``doc`` as Claude Code does: 2-space indent, key order kept, trailing newline."""
    # A lone UTF-16 surrogate (valid JSON, what JavaScript writes for a split emoji) goes
    # back out as the same \\uXXXX escape it came in as: the file stays valid UTF-8.
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return text.encode("utf-8", "backslashreplace")


def hook_config(handler: Any, marker: str = MARKER) -> str | None:
    """The ``--config`` path in a marker handler's command (``""``: none); None: not a marker
    handler."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return None
    words = _words(handler["command"])
    wanted = marker.split()
    for start in range(len(words) - len(wanted) + 1):
        window = words[start:start + len(wanted)]
        if os.path.basename(window[0]) == wanted[0] and window[1:] == wanted[1:]:
            rest = words[start + len(wanted):]
            for index, word in enumerate(rest):
                if word == "--config" and index + 1 < len(rest):
                    return os.path.normpath(rest[index + 1])
                if word.startswith("--config="):
                    return os.path.normpath(word.split("=", 1)[1])
            return ""
    return None


def is_our_handler(handler: Any, marker: str = MARKER, *, config_path: str | None = None,
                   previous: tuple[str, ...] = ()) -> bool:
    """True when ``handler`` is a marker handler of the companion with ``config_path``.

    Without ``config_path`` any marker handler counts (whichever companion it belongs to).
    """
    found = hook_config(handler, marker)
    if found is None:
        return False
    if config_path is None or found == "":
        return True
    return found in {os.path.normpath(p) for p in (config_path, *previous)}


def find_stop_hook(doc: dict[str, Any], marker: str = MARKER, *, config_path: str | None = None,
                   previous: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """Return our Stop handler in ``doc`` (the first one of this companion), or None."""
    for _, _, handler in _our_handlers(doc, marker, config_path, previous):
        return handler
    return None


def other_stop_hooks(doc: dict[str, Any], config_path: str, marker: str = MARKER, *,
                     previous: tuple[str, ...] = ()) -> list[str]:
    """Config paths of the marker handlers of *other* companions in ``doc``, in file order."""
    found = []
    for group in doc.get("hooks", {}).get("Stop", []):
        for handler in group.get("hooks", []):
            owner = hook_config(handler, marker)
            if owner and not is_our_handler(handler, marker, config_path=config_path,
                                            previous=previous):
                found.append(owner)
    return found


def merge_stop_hook(doc: dict[str, Any], entry: dict[str, Any], marker: str = MARKER, *,
                    previous: tuple[str, ...] = ()) -> tuple[dict[str, Any], bool, str]:
    """Add or update our Stop handler; return ``(new_doc, changed, message)``.

    A change's ``message`` is what to do, in the imperative ("add the Stop hook"): it becomes
    an action's summary, which the engine words as done or as "would …" (provision/engine.py).

    ``entry`` is the desired handler (``type``, ``command``, ``timeout``); its ``--config``
    names the companion. An existing handler of that companion is updated in place: the keys of
    ``entry`` are set (new ones appended), its other fields and its position stay. Further
    handlers of it are duplicates and are removed (a group left empty by that goes too). Without
    one, a new group ``{"hooks": [entry]}`` (no matcher: Stop ignores matchers) is appended to
    ``hooks.Stop``. Other companions' handlers are left alone. ``doc`` itself is not modified.
    """
    config_path = hook_config(entry, marker)
    if config_path is None:
        raise SettingsError(f"Stop hook command {entry.get('command')!r} does not carry the "
                            f"marker {marker!r}")
    owner = config_path or None
    new = copy.deepcopy(doc)
    found = list(_our_handlers(new, marker, owner, previous))
    if not found:
        hooks = new.setdefault("hooks", {})
        hooks.setdefault("Stop", []).append({"hooks": [dict(entry)]})
        return new, True, "add the Stop hook"
    _, _, handler = found[0]
    stale = [key for key, value in entry.items() if handler.get(key, _MISSING) != value]
    for key in stale:
        handler[key] = entry[key]
    dropped = _remove_handlers(new, found[1:])
    notes = []
    if stale:
        notes.append(f"update the Stop hook in place ({', '.join(stale)})")
    if dropped:
        notes.append(f"remove {dropped} duplicate Stop hook(s)")
    if not notes:
        return doc, False, "Stop hook already present"
    return new, True, " and ".join(notes)


def remove_stop_hook(doc: dict[str, Any], marker: str = MARKER, *,
                     config_path: str | None = None,
                     previous: tuple[str, ...] = ()) -> tuple[dict[str, Any], bool, str]:
    """Remove every handler of this companion; return ``(new_doc, changed, message)``.

    Groups, ``hooks.Stop`` and ``hooks`` are removed only when our removal left them empty.
    """
    new = copy.deepcopy(doc)
    found = list(_our_handlers(new, marker, config_path, previous))
    if not found:
        return doc, False, "Stop hook not present"
    count = _remove_handlers(new, found)
    hooks = new["hooks"]
    if not hooks["Stop"]:
        del hooks["Stop"]
    if not hooks:
        del new["hooks"]
    return new, True, f"remove {count} Stop hook(s)"


def stop_subtree_diff(before: dict[str, Any], after: dict[str, Any], path: str) -> str:
    """Unified diff of ``hooks.Stop`` only (the rest of the file is not ours to show)."""
    def render(doc: dict[str, Any]) -> list[str]:
        subtree = doc.get("hooks", {}).get("Stop")
        if subtree is None:
            return []
        return (json.dumps(subtree, indent=2, ensure_ascii=False) + "\n").splitlines(True)

    lines = difflib.unified_diff(render(before), render(after),
                                 fromfile=f"before: {path} hooks.Stop",
                                 tofile=f"after: {path} hooks.Stop")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


_MISSING = object()


_Found = tuple[dict[str, Any], int, dict[str, Any]]  # (group, index, handler)


def _our_handlers(doc: dict[str, Any], marker: str, config_path: str | None,
                  previous: tuple[str, ...]) -> Iterator[_Found]:
    """Yield ``(group, index, handler)`` for each handler of this companion, in file order."""
    for group in doc.get("hooks", {}).get("Stop", []):
        for index, handler in enumerate(group.get("hooks", [])):
            if is_our_handler(handler, marker, config_path=config_path, previous=previous):
                yield group, index, handler


def _remove_handlers(doc: dict[str, Any], found: list[_Found]) -> int:
    """Delete the given handlers (by identity); drop groups they leave with no handlers."""
    doomed = {id(handler) for _, _, handler in found}
    emptied = []
    for group, _, _ in found:
        kept = [h for h in group["hooks"] if id(h) not in doomed]
        if len(kept) != len(group["hooks"]):
            group["hooks"][:] = kept
            if not kept:
                emptied.append(id(group))
    stop = doc["hooks"]["Stop"]
    stop[:] = [group for group in stop if id(group) not in emptied]
    return len(doomed)


def _check_stop_shape(doc: dict[str, Any], path: str) -> None:
    """Refuse shapes a merge cannot keep intact (names the JSON path)."""
    hooks = doc.get("hooks", _MISSING)
    if hooks is _MISSING:
        return
    _expect(hooks, dict, path, "hooks")
    stop = hooks.get("Stop", _MISSING)
    if stop is _MISSING:
        return
    _expect(stop, list, path, "hooks.Stop")
    for number, group in enumerate(stop):
        _expect(group, dict, path, f"hooks.Stop[{number}]")
        _expect(group.get("hooks", []), list, path, f"hooks.Stop[{number}].hooks")


def _expect(value: Any, want: type[dict[str, Any]] | type[list[Any]], path: str,
            where: str) -> None:
    """Refuse ``value`` at the JSON path ``where`` unless it is a ``want`` (object or array)."""
    if not isinstance(value, want):
        raise SettingsError(f"settings file '{path}': '{where}' is a {_kind(value)}, "
                            f"not an {_kind(want())}")


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # unbalanced quotes in a foreign command: fall back to plain words
        return command.split()


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"has the key {key!r} twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"contains {name}, which is not JSON")


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _comment_position(text: str) -> tuple[int, int] | None:
    """Line and column (1-based) of the first ``//`` or ``/*`` outside a string, or None."""
    in_string = escaped = False
    line, col = 1, 0
    for index, char in enumerate(text):
        col += 1
        if char == "\n":
            line, col = line + 1, 0
            continue
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "/" and text[index + 1:index + 2] in ("/", "*"):
            return line, col
    return None
