"""tmux's text, read: pure parsers of what tmux 3.3a prints (no I/O here).

tmux quotes a pane's start command in its own command language (``args_escape``): single
quotes literal, double quotes and bare words with backslash escapes. ``split_words`` reads it
(and, with other escapes, a systemd unit line — provision's parsers use it for both);
``parse_start_command`` reads a pane's ``#{pane_start_command}`` as the program's argv and the
assignments in front of it; ``parse_tmux_environment`` / ``removed_names`` read
``show-environment``. Tested from captured outputs (tests/runtime/doors/
test_tmux_start_command.py, tests/provision/parsers/).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
TMUX_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "e": "\033"}  # tmux's C escapes


def split_words(text: str, escapes: dict[str, str], *, literal_single: bool,
                unterminated: Callable[[str], Exception]) -> list[tuple[str, str]]:
    """Split a command language's ``text`` into ``(word, as written)`` pairs.

    Words are separated by spaces and tabs; a backslash takes the next character through
    ``escapes`` (else the character itself), also inside double quotes — and inside single
    quotes unless ``literal_single``. An unclosed quote raises ``unterminated(quote)``.
    """
    words: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        start, word = i, []
        while i < n and text[i] not in " \t":
            ch = text[i]
            if ch == "'" and literal_single:
                end = text.find("'", i + 1)
                if end < 0:
                    raise unterminated(ch)
                word.append(text[i + 1:end])
                i = end + 1
            elif ch in "'\"":
                i += 1
                while i < n and text[i] != ch:
                    step = 2 if text[i] == "\\" and i + 1 < n else 1
                    word.append(escapes.get(text[i + 1], text[i + 1]) if step == 2 else text[i])
                    i += step
                if i >= n:
                    raise unterminated(ch)
                i += 1
            elif ch == "\\" and i + 1 < n:
                word.append(escapes.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                word.append(ch)
                i += 1
        words.append(("".join(word), text[start:i]))
    return words


def parse_start_command(text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(argv, assignments)`` of a pane's ``#{pane_start_command}`` (tmux 3.3a quotes it in
    its command language): several words were exec'd by tmux, one word was run by the shell
    (``new-session 'CMD'``) and is read as one simple command — a leading ``cd DIR &&``,
    ``NAME=VALUE`` assignments and ``exec``. An ``env NAME=VALUE …`` wrapper (the shape a
    switch respawns) is taken off the argv too. ``((), ())`` when it is no simple command."""
    try:
        words = [word for word, _ in split_words(text, TMUX_ESCAPES, literal_single=True,
                                                 unterminated=ValueError)]
        if len(words) == 1:
            words = shlex.split(words[0])
    except ValueError:
        return (), ()
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        words = words[3:]
    env: list[tuple[str, str]] = []
    while words and _ASSIGNMENT.match(words[0]):
        env.append(_assignment(words.pop(0)))
    if words[:1] == ["exec"]:
        words.pop(0)
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and _ASSIGNMENT.match(words[0]):
            env.append(_assignment(words.pop(0)))
    operators = {"&&", "||", ";", "|", "&", "<", ">"}
    if not words or words[0].startswith("-") or any(word in operators for word in words):
        return (), ()
    return tuple(words), tuple(env)


def parse_tmux_environment(text: str) -> dict[str, str]:
    """``tmux show-environment [-g | -t SESSION]`` → the variables it sets.

    ``NAME=value`` sets; ``-NAME`` marks a variable removed from the session (not set, so not
    listed; ``removed_names`` lists them).
    """
    env: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("-"):
            continue
        key, eq, value = line.partition("=")
        if eq and _ASSIGNMENT.match(line):
            env[key] = value
    return env


def removed_names(text: str) -> frozenset[str]:
    """The ``-NAME`` lines of ``tmux show-environment -t SESSION``: variables the session
    removes from what it would inherit from the global environment."""
    return frozenset(line[1:] for line in text.splitlines() if line.startswith("-") and
                     _ASSIGNMENT.match(line[1:] + "="))


def _assignment(word: str) -> tuple[str, str]:
    name, _, value = word.partition("=")
    return name, value
