"""Channel servers as claude reads them, and how to recognise their processes (pure).

A channel named ``server:NAME`` is an MCP server registration: Claude Code 2.1.328 (measured)
keeps user-scope servers in ``.claude.json`` → ``mcpServers`` (``$CLAUDE_CONFIG_DIR/.claude.json``
when that variable is set, else ``$HOME/.claude.json``), local-scope ones in the same file under
``projects[<cwd>].mcpServers``, project-scope ones in ``<cwd>/.mcp.json``; local wins over project,
project over user. A channel named ``plugin:P@M`` is started from the installed plugin's
``.mcp.json`` with ``${CLAUDE_PLUGIN_ROOT}`` substituted; the root is
``plugins/installed_plugins.json`` → ``installPath``, except for a directory marketplace, whose
plugins run in place (2.1.328, measured: ``CLAUDE_PLUGIN_ROOT`` is the marketplace folder +
the entry's relative ``source`` although ``installPath`` names a cache copy).

Claude Code spawns ``command`` + ``args`` directly as its child. What the kernel then shows can
differ: ``python3`` found through a shim runs as ``/…/bin/python3``; a script runs as
``INTERPRETER SCRIPT ARGS`` (shebang); ``env``/``sh -c 'exec …'`` exec the inner command.
``spawn_forms`` lists the argv a registration may show as, ``argv_matches`` compares exact tokens
(only the program may differ by directory), and ``recognise`` finds the processes of a spec among
the descendants of the new claude. A name merely mentioned in some command line never counts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from runtime.agents import SHELLS

SCOPE_ORDER = ("local", "project", "user")  # first wins
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Launchers that run their operand as a child (or exec it): the operand's argv also counts.
RUNNERS = {"uv": ("run",), "npx": (), "bunx": (), "pnpm": ("exec", "dlx"), "uvx": ()}
# npm options of ``npx`` / ``npm exec`` that take no value / one value (dropped from its title).
NPX_FLAGS = frozenset({"-y", "--yes", "--no", "-q", "--quiet", "--no-install", "--"})
NPX_VALUED = frozenset({"-p", "--package", "-c", "--call", "--prefix", "--registry"})
MAX_SHEBANG_PREFIX = 2  # interpreter + one optional argument (the kernel passes one)


@dataclass(frozen=True)
class ServerSpec:
    """One stdio MCP server as claude starts it (values already expanded)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    scope: str = "user"
    plugin_roots: tuple[str, ...] = ()  # a plugin server: where claude may run it from
    exec_forms: tuple[tuple[str, ...], ...] = ()  # what a wrapper script execs (script_forms)

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.command, *self.args)


@dataclass(frozen=True)
class Proc:
    """A process below the claude being judged."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    environ: Mapping[str, str] | None = field(default=None, compare=False)


def _load(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def expand(value: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from ``env`` (unknown, no default: kept)."""
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        return default if default is not None else match.group(0)
    return _VAR.sub(one, value)


def _spec(name: str, raw: object, scope: str, env: Mapping[str, str],
          plugin_roots: tuple[str, ...] = ()) -> ServerSpec | None:
    if not isinstance(raw, dict) or raw.get("type", "stdio") != "stdio":
        return None
    command, args, extra = raw.get("command"), raw.get("args") or [], raw.get("env") or {}
    if not isinstance(command, str) or not command or not isinstance(args, list):
        return None
    if not isinstance(extra, dict):
        extra = {}
    return ServerSpec(
        name=name, command=expand(command, env),
        args=tuple(expand(str(a), env) for a in args),
        env=tuple(sorted((str(k), expand(str(v), env)) for k, v in extra.items())),
        scope=scope, plugin_roots=plugin_roots)


def _servers(data: Mapping[str, object]) -> dict[str, object]:
    servers = data.get("mcpServers")
    return servers if isinstance(servers, dict) else {}


def scope_tables(user: Mapping[str, object], project: Mapping[str, object],
                 cwd: str) -> dict[str, Mapping[str, object]]:
    """The ``mcpServers`` table of each scope, by scope: ``user`` is the parsed ``.claude.json``,
    ``project`` the parsed ``<cwd>/.mcp.json`` (the one owner of where claude keeps each scope)."""
    projects = user.get("projects")
    local = projects.get(cwd, {}) if isinstance(projects, dict) else {}
    return {"local": _servers(local) if isinstance(local, dict) else {},
            "project": _servers(project), "user": _servers(user)}


def registrations(claude_json: str | None, mcp_json: str | None, cwd: str,
                  env: Mapping[str, str]) -> dict[str, ServerSpec]:
    """Every stdio server claude sees from ``cwd``, by name, the winning scope only."""
    tiers = scope_tables(_load(claude_json), _load(mcp_json), cwd)
    found: dict[str, ServerSpec] = {}
    for scope in reversed(SCOPE_ORDER):
        for name, raw in tiers[scope].items():
            spec = _spec(str(name), raw, scope, env)
            if spec is not None:
                found[str(name)] = spec
            else:
                found.pop(str(name), None)
    return found


def plugin_root(installed_json: str | None, plugin: str) -> str | None:
    """The ``installPath`` of ``plugin`` (``NAME@MARKETPLACE``) in installed_plugins.json."""
    plugins = _load(installed_json).get("plugins")
    entries = plugins.get(plugin) if isinstance(plugins, dict) else None
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("installPath"), str):
                return str(entry["installPath"])
    return None


def marketplace_dir(known_json: str | None, plugin: str) -> str | None:
    """The folder of ``plugin``'s marketplace when it is a directory marketplace, else None."""
    entry = _load(known_json).get(plugin.rpartition("@")[2])
    if not isinstance(entry, dict):
        return None
    source = entry.get("source")
    if isinstance(source, dict) and source.get("source") == "directory":
        location = entry.get("installLocation") or source.get("path")
        return str(location) if isinstance(location, str) else None
    return None


def in_place_root(marketplace_json: str | None, market_dir: str, plugin: str) -> str | None:
    """Where a directory marketplace runs ``plugin`` from: its folder + the relative source."""
    entries = _load(marketplace_json).get("plugins")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == plugin.partition("@")[0]:
            source = entry.get("source")
            if isinstance(source, str) and not os.path.isabs(source):
                return os.path.normpath(os.path.join(market_dir, source))
    return None


def plugin_servers(manifest: str | None, plugin: str, roots: Sequence[str],
                   env: Mapping[str, str]) -> list[ServerSpec]:
    """The stdio servers of a plugin's ``.mcp.json`` (read from ``roots[0]``), named
    ``plugin:P:KEY`` like claude does; recognised by any of ``roots``."""
    short = plugin.split("@", 1)[0]
    with_root = {**env, "CLAUDE_PLUGIN_ROOT": roots[0]}
    specs = (_spec(f"plugin:{short}:{key}", raw, "plugin", with_root, tuple(roots))
             for key, raw in _servers(_load(manifest)).items())
    return [s for s in specs if s is not None]


def _base(token: str) -> str:
    return os.path.basename(token)


def _skip_env(argv: Sequence[str]) -> tuple[str, ...]:
    i = 1
    while i < len(argv):
        token = argv[i]
        if token in ("-u", "--unset", "-C", "--chdir"):
            i += 2
        elif token.startswith("-") or ("=" in token and not token.startswith("=")):
            i += 1
        else:
            break
    return tuple(argv[i:])


def _shell_inner(script: str, rest: Sequence[str]) -> tuple[str, ...]:
    """The last simple command of ``sh -c SCRIPT`` (``exec`` and ``cd X &&`` stripped)."""
    try:
        tokens = shlex.split(script)
    except ValueError:
        return ()
    for sep in ("&&", ";", "||"):
        if sep in tokens:
            tokens = tokens[len(tokens) - tokens[::-1].index(sep):]
    if tokens and tokens[0] == "exec":
        tokens = tokens[1:]
    out: list[str] = []
    for token in tokens:
        if token == "$@":
            out.extend(rest[1:])
        else:
            out.append(token)
    return tuple(out)


_SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def script_forms(text: str, args: Sequence[str], env: Mapping[str, str]) -> list[tuple[str, ...]]:
    """What a wrapper shell script ``exec``s: each ``exec CMD ARGS`` line as an argv.

    ``"$@"`` becomes the script's own arguments, ``$VAR``/``${VAR}`` the environment's value; a
    line with anything else that only the shell could compute is left out (no guessing).
    """
    if not text.startswith("#!") or _base(text[2:].split()[0] if text[2:].split() else "") \
            not in SHELLS | {"env"}:
        return []
    found = []
    for raw in text.splitlines()[1:]:
        line = raw.strip()
        if not line.startswith("exec "):
            continue
        try:
            tokens = shlex.split(line[5:], comments=True)
        except ValueError:
            continue
        argv: list[str] = []
        for token in tokens:
            if token == "$@":
                argv.extend(args)
                continue
            value = _SHELL_VAR.sub(lambda m: env.get(m.group(1) or m.group(2), "\0"), token)
            if "\0" in value or "$" in value or "`" in value:
                break
            argv.append(value)
        else:
            if argv and not argv[0].startswith("-"):
                found.append(tuple(argv))
    return found


def npm_title(argv: Sequence[str]) -> str | None:
    """The one-token cmdline npm gives itself for ``npx …`` / ``npm exec …`` (measured with
    npm on node 20: ``npx -y PKG --port 5`` shows ``npm exec PKG --port 5``), or None."""
    prog = _base(argv[0]) if argv else ""
    if prog == "npx":
        rest = list(argv[1:])
    elif prog == "npm" and len(argv) > 1 and argv[1] in ("exec", "x"):
        rest = list(argv[2:])
    else:
        return None
    kept: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        name = token.split("=", 1)[0]
        if not kept and name in NPX_VALUED:
            i += 1 if "=" in token else 2
            continue
        if not kept and (token in NPX_FLAGS or token.startswith("--yes=")):
            i += 1
            continue
        kept.append(token)
        i += 1
    return "npm exec " + " ".join(kept) if kept else None


def spawn_forms(argv: Sequence[str], depth: int = 0) -> list[tuple[str, ...]]:
    """``argv`` and the argv of what it runs through known wrappers (env, sh -c, uv run …)."""
    forms = [tuple(argv)]
    if not argv or depth > 3:
        return forms
    title = npm_title(argv)
    if title:
        forms.append((title,))
    prog = _base(argv[0])
    inner: tuple[str, ...] = ()
    if prog == "env":
        inner = _skip_env(argv)
    elif prog in SHELLS and "-c" in argv[1:3]:
        at = list(argv).index("-c")
        if at + 1 < len(argv):
            inner = _shell_inner(argv[at + 1], argv[at + 2:])
    elif prog in RUNNERS:
        rest = list(argv[1:])
        if RUNNERS[prog] and rest and rest[0] in RUNNERS[prog]:
            rest = rest[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
        inner = tuple(rest)
    if inner:
        forms.extend(spawn_forms(inner, depth + 1))
    return forms


def argv_matches(form: Sequence[str], argv: Sequence[str]) -> bool:
    """True when ``argv`` is ``form`` as the kernel shows it, token for token.

    Equal; or the program differs only by directory (``python3`` → ``/usr/bin/python3``); or a
    script run through its shebang (``/bin/sh /opt/x/run.sh ARGS`` for ``/opt/x/run.sh ARGS``).
    """
    if not form or not argv:
        return False
    n = len(form) - 1
    if len(argv) < len(form) or tuple(argv[len(argv) - n:]) != tuple(form[1:]):
        return False
    head = argv[: len(argv) - n]
    program = form[0]
    if len(head) == 1:
        return head[0] == program or _base(head[0]) == _base(program)
    if len(head) - 1 > MAX_SHEBANG_PREFIX:
        return False
    script = head[-1]
    return (script == program or (os.path.isabs(script) and _base(script) == _base(program)
                                  and "/" not in program))


def _env_agrees(spec: ServerSpec, environ: Mapping[str, str] | None) -> bool:
    if environ is None:
        return True  # unreadable: argv alone decides
    return all(environ.get(k) == v for k, v in spec.env)


def recognise(spec: ServerSpec, procs: Sequence[Proc], session_id: str | None = None) -> list[int]:
    """Pids among ``procs`` (the new claude's descendants) that run ``spec``.

    A plugin server is the descendant whose environment names its plugin root (and, when
    given and present, the session); a registered server is matched by argv (``spawn_forms``)
    with the registration's own env values present.
    """
    if spec.plugin_roots:
        return [p.pid for p in procs if p.environ is not None
                and any(_same_path(p.environ.get("CLAUDE_PLUGIN_ROOT"), root)
                        for root in spec.plugin_roots)
                and _session_agrees(p.environ, session_id)]
    forms = [f for start in (spec.argv, *spec.exec_forms) for f in spawn_forms(start)]
    return [p.pid for p in procs
            if any(argv_matches(f, p.argv) for f in forms) and _env_agrees(spec, p.environ)]


def _session_agrees(environ: Mapping[str, str], session_id: str | None) -> bool:
    said = environ.get("CLAUDE_CODE_SESSION_ID")
    return session_id is None or said is None or said == session_id


def _same_path(a: str | None, b: str) -> bool:
    return a is not None and os.path.normpath(a) == os.path.normpath(b)


def outermost(pids: Sequence[int], procs: Sequence[Proc]) -> list[int]:
    """``pids`` without those whose parent is also in ``pids`` (a wrapper and its child)."""
    chosen = set(pids)
    parent = {p.pid: p.ppid for p in procs}
    return [pid for pid in pids if parent.get(pid) not in chosen]
