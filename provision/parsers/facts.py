"""Pure parsers for facts: command output or file text in, frozen dataclasses out. No I/O here.

Each parser is tested from real captured outputs (tests/provision/parsers/test_facts.py):
tmux 3.3a ``list-panes -F`` / ``pane_start_command``, systemd 252 ``systemctl cat`` / ``show``, and
``/proc/PID/cmdline`` (decoded by ``runtime.agents.decode_cmdline``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from provision.errors import FactError, IntrospectError
from runtime.doors.tmux_text import TMUX_ESCAPES, split_words

SEP = "\x1f"  # list-panes field separator: cannot occur in tmux formats' values
PANE_FORMAT = SEP.join(["#{session_name}:#{window_index}.#{pane_index}", "#{pane_id}",
                        "#{pane_pid}", "#{pane_dead}", "#{pane_start_path}",
                        "#{pane_start_command}"])
INTERPRETERS = {"sh", "bash", "dash", "zsh", "python", "python3", "node", "env"}


# ---------------------------------------------------------------- tmux

@dataclass(frozen=True)
class Pane:
    """One row of ``tmux list-panes -a -F PANE_FORMAT``."""

    target: str
    pane_id: str
    pid: int
    dead: bool
    start_path: str
    start_command: str


def parse_tmux_panes(text: str) -> tuple[Pane, ...]:
    """Rows of ``list-panes -a -F PANE_FORMAT`` output."""
    panes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != 6 or not parts[2].isdigit():
            raise FactError(f"unexpected tmux list-panes line: {line!r}")
        target, pane_id, pid, dead, path, command = parts
        panes.append(Pane(target, pane_id, int(pid), dead == "1", path, command))
    return tuple(panes)




def parse_tmux_words(text: str) -> list[str]:
    """Split tmux command-language text (``args_escape`` output) into words.

    Single quotes are literal; double quotes and bare words take backslash escapes
    (``\\$``, ``\\"``, ``\\\\``, ``\\~``, C escapes such as ``\\n``).
    """
    def unterminated(quote: str) -> FactError:
        which = "single" if quote == "'" else "double"
        return FactError(f"unterminated {which} quote in tmux command: {text!r}")

    return [word for word, _ in split_words(text, TMUX_ESCAPES, literal_single=True,
                                            unterminated=unterminated)]


@dataclass(frozen=True)
class ShellCommand:
    """A simple shell command line: ``[cd DIR &&] [VAR=v ...] [exec] ARGV``."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None


_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def parse_shell_command(text: str) -> ShellCommand:
    """Parse one simple shell command (the form a tmux door or a runner script uses).

    Accepts an optional leading ``cd DIR &&``, ``VAR=value`` assignments and ``exec``; refuses
    anything else a shell would interpret (pipes, lists, substitutions, redirections).
    """
    cwd = None
    match = re.match(r"^\s*cd\s+(\S+|'[^']*'|\"[^\"]*\")\s*&&\s*(.*)$", text, re.S)
    if match:
        cwd = shlex.split(match.group(1))[0]
        text = match.group(2)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise IntrospectError(f"cannot parse shell command {text!r}: {exc}") from exc
    if any(t and set(t) <= set(";&|<>()") for t in tokens) or "$(" in text or "`" in text:
        raise IntrospectError(f"shell command is not a simple command: {text!r}")
    env = []
    while tokens and _ASSIGN.match(tokens[0]):
        key, _, value = tokens.pop(0).partition("=")
        env.append((key, value))
    if tokens[:1] == ["exec"]:
        tokens.pop(0)
    argv, wrapped = split_env_wrapper(tuple(tokens))
    if not argv:
        raise IntrospectError(f"shell command has no program: {text!r}")
    return ShellCommand(argv, tuple(env) + wrapped, cwd)


def split_env_wrapper(argv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``env [--] K=V ... PROG ARGS`` → ``(PROG ARGS, ((K, V), ...))``; other argv unchanged.

    Options of ``env`` that change the environment in other ways (``-i``, ``-u``, ``-C`` …)
    are refused: the launch environment could not be reproduced from the assignments alone.
    """
    if not argv or argv[0].rsplit("/", 1)[-1] != "env":
        return argv, ()
    rest, env = list(argv[1:]), []
    if rest[:1] == ["--"]:
        rest.pop(0)
    if rest and rest[0].startswith("-"):
        raise IntrospectError(f"launch command uses 'env {rest[0]}'; only 'env NAME=VALUE … "
                              f"PROGRAM' can be carried to the resume: {list(argv)!r}")
    while rest and _ASSIGN.match(rest[0]):
        key, _, value = rest.pop(0).partition("=")
        env.append((key, value))
    return tuple(rest), tuple(env)


def parse_tmux_variable(value: str) -> str | None:
    """The socket path of the server a process runs under, from its ``TMUX`` variable
    (``/tmp/tmux-1000/default,2411,0``: socket path, server pid, session index); None when
    the value is not of that shape."""
    path, _, rest = value.rpartition(",")
    path, _, server = path.rpartition(",")
    if not path.startswith("/") or not server.isdigit() or not rest.isdigit():
        return None
    return path


def parse_pane_start_command(text: str) -> ShellCommand:
    """The argv a pane was started with, from ``#{pane_start_command}``.

    One word means tmux ran ``$SHELL -c WORD``: the word is parsed as a shell command.
    Several words mean tmux exec'd them directly.
    """
    words = parse_tmux_words(text)
    if not words:
        raise IntrospectError("pane has no start command (a login shell; nothing to introspect)")
    if len(words) == 1:
        return parse_shell_command(words[0])
    argv, env = split_env_wrapper(tuple(words))
    return ShellCommand(argv, env)


_NEW_SESSION_VALUED = set("cefFnstxy")


def tmux_command_in_argv(argv: tuple[str, ...]) -> ShellCommand | None:
    """The pane command inside a ``tmux [...] new-session [opts] CMD...`` argv, or None."""
    if not argv or not argv[0].endswith("tmux"):
        return None
    try:
        start = next(i for i, a in enumerate(argv) if a in ("new-session", "new"))
    except StopIteration:
        return None
    i, session_env = start + 1, list[tuple[str, str]]()
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        flags = argv[i][1:]
        i += 1
        for pos, flag in enumerate(flags):
            if flag in _NEW_SESSION_VALUED:
                value = flags[pos + 1:] if pos < len(flags) - 1 else (
                    argv[i] if i < len(argv) else "")
                if pos == len(flags) - 1:
                    i += 1
                if flag == "e" and "=" in value:  # new-session -e NAME=VALUE
                    key, _, val = value.partition("=")
                    session_env.append((key, val))
                break
    if i < len(argv) and argv[i] == "--":
        i += 1
    rest = argv[i:]
    if not rest:
        return None
    if len(rest) == 1:
        command = parse_shell_command(rest[0])
    else:
        words, wrapped = split_env_wrapper(tuple(rest))
        command = ShellCommand(words, wrapped)
    return ShellCommand(command.argv, (*session_env, *command.env), command.cwd)


# ---------------------------------------------------------------- /proc

def strip_interpreter(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``sh /x/claude --a`` / ``node /x/cli.js --a`` → ``/x/claude --a`` (what was exec'd)."""
    rest = argv
    while len(rest) >= 2 and rest[0].rsplit("/", 1)[-1] in INTERPRETERS:
        rest = rest[1:]
        while rest and rest[0].startswith("-") and rest[0] not in ("-c",):
            rest = rest[1:]
    return rest if rest != argv and rest else argv


# ---------------------------------------------------------------- systemd

@dataclass(frozen=True)
class UnitFile:
    """One backing file of ``systemctl cat``: its path and (section, key, value) directives."""

    path: str
    directives: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class ExecCommand:
    """One parsed ``ExecStart=`` command: prefixes, the program to exec, and argv."""

    prefixes: str
    path: str
    argv: tuple[str, ...]


def parse_systemctl_cat(text: str) -> tuple[UnitFile, ...]:
    """The files of ``systemctl cat UNIT`` in order (fragment first, then drop-ins)."""
    files: list[UnitFile] = []
    path: str | None = None
    directives: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in text.splitlines():
        if raw.startswith("# /") and not pending:
            if path is not None:
                files.append(UnitFile(path, tuple(directives)))
            path, directives, section = raw[2:].strip(), [], ""
            continue
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, eq, value = line.partition("=")
        if eq and path is not None:
            directives.append((section, key.strip(), value.strip()))
    if path is not None:
        files.append(UnitFile(path, tuple(directives)))
    if not files:
        raise FactError("systemctl cat printed no unit file")
    return tuple(files)


def effective_values(files: tuple[UnitFile, ...], key: str, section: str = "Service") -> list[str]:
    """All assignments of ``key`` in load order, honouring empty-assignment resets."""
    values: list[str] = []
    for unit in files:
        for sect, name, value in unit.directives:
            if sect == section and name == key:
                if value == "":
                    values = []
                else:
                    values.append(value)
    return values


_SYSTEMD_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "s": " "}


def split_systemd_words(text: str) -> list[list[str]]:
    """Unquote a systemd command line (systemd.syntax(7)) into commands split at a lone ``;``."""
    commands: list[list[str]] = [[]]
    for word, written in split_words(
            text, _SYSTEMD_ESCAPES, literal_single=False,
            unterminated=lambda _: IntrospectError(f"unterminated quote in ExecStart: {text!r}")):
        if word == ";" and written.endswith(";") and not written.endswith("\\;"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def parse_exec_start(value: str) -> list[ExecCommand]:
    """One ``ExecStart=`` value → its commands, with prefixes ``@-:+!`` stripped and kept."""
    result = []
    for words in split_systemd_words(value):
        first = words[0]
        prefix_match = re.match(r"^[@\-:+!]*", first)
        prefixes = prefix_match.group(0) if prefix_match else ""
        program = first[len(prefixes):]
        rest = words[1:]
        if "@" in prefixes:
            if not rest:
                raise IntrospectError(f"ExecStart with '@' has no argv[0]: {value!r}")
            argv = (rest[0], *rest[1:])
        else:
            argv = (program, *rest)
        result.append(ExecCommand(prefixes, program, tuple(argv)))
    return result


def effective_exec_start(files: tuple[UnitFile, ...]) -> list[ExecCommand]:
    """Every effective ExecStart command after resets (``ExecStart=``) across drop-ins."""
    commands: list[ExecCommand] = []
    for value in effective_values(files, "ExecStart"):
        commands.extend(parse_exec_start(value))
    return commands


def resolve_specifiers(argv: tuple[str, ...]) -> tuple[str, ...]:
    """Resolve ``%%`` to ``%``; any other ``%x`` specifier is refused (its value depends on the
    manager instance, not on ``User=``: pin the literal value in the unit instead)."""
    out = []
    for word in argv:
        others = re.findall(r"%[^%]", word.replace("%%", ""))
        if others:
            raise IntrospectError(f"ExecStart word {word!r} uses systemd specifier "
                                  f"{others[0]!r}; pin its value in the unit")
        out.append(word.replace("%%", "%"))
    return tuple(out)


def parse_environment(values: list[str]) -> dict[str, str]:
    """``Environment=`` assignments (each may hold several quoted ``K=V`` words); a word that
    is no valid assignment is ignored, as systemd ignores it."""
    env: dict[str, str] = {}
    for value in values:
        for words in split_systemd_words(value):
            for word in words:
                key, eq, val = word.partition("=")
                if eq and _ASSIGN.match(word):
                    env[key] = val
    return env


def parse_environment_file(text: str) -> dict[str, str]:
    """An ``EnvironmentFile=``: ``K=V`` lines, ``#``/``;`` comments, optional quotes. A line
    whose name is not a valid variable name — ``export K=V`` from a shell's ``.env`` — is
    ignored, as systemd ignores it ("Ignoring invalid environment assignment")."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, eq, val = line.partition("=")
        if eq and _ASSIGN.match(f"{key.strip()}="):
            words = shlex.split(val) if val.strip() else [""]
            env[key.strip()] = " ".join(words)
    return env


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\$\$")


def expand_systemd_env(argv: tuple[str, ...], env: dict[str, str]) -> tuple[tuple[str, ...],
                                                                          tuple[str, ...]]:
    """Apply systemd's spawn-time ``$VAR``/``${VAR}`` rules; return (argv, unresolved names).

    ``${VAR}`` is replaced in place (one word); a whole-word ``$VAR`` splits at whitespace;
    ``$$`` is a literal ``$``; an unknown variable is reported (systemd would make it empty).
    """
    out: list[str] = []
    missing: list[str] = []
    for index, word in enumerate(argv):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole and index > 0:
            name = whole.group(1)
            if name not in env:
                missing.append(name)
            out.extend(shlex.split(env.get(name, "")))
            continue

        def replace(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            name = match.group(1)
            if name is None:  # braceless $VAR inside a word: systemd leaves it as is
                return match.group(0)
            if name not in env:
                missing.append(name)
            return env.get(name, "")

        out.append(_VAR.sub(replace, word))
    return tuple(out), tuple(missing)


@dataclass(frozen=True)
class UnitShow:
    """The runtime properties of ``systemctl show -p ...`` that introspection uses."""

    main_pid: int = 0
    need_daemon_reload: bool = False
    fragment_path: str = ""
    drop_in_paths: tuple[str, ...] = ()
    active_state: str = ""
    exec_start: tuple[str, ...] = field(default=())


def parse_systemctl_show(text: str) -> UnitShow:
    """``KEY=VALUE`` lines of ``systemctl show`` (any order) into a UnitShow."""
    props: dict[str, str] = {}
    exec_start: list[str] = []
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if not eq:
            continue
        if key == "ExecStart":
            exec_start.extend(re.findall(r"argv\[\]=(.*?) ; ", value))
        props[key] = value
    pid = props.get("MainPID", "0")
    return UnitShow(
        main_pid=int(pid) if pid.isdigit() else 0,
        need_daemon_reload=props.get("NeedDaemonReload", "no") == "yes",
        fragment_path=props.get("FragmentPath", ""),
        drop_in_paths=tuple(props.get("DropInPaths", "").split()),
        active_state=props.get("ActiveState", ""),
        exec_start=tuple(exec_start),
    )
