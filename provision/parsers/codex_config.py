"""``$CODEX_HOME/config.toml`` merged without losing a byte the user wrote (pure, ``tomlkit``).

Threadline owns exactly two things in that file:

- the top-level ``notify`` program (Codex's turn-end trigger, runs after every turn with the
  JSON payload appended): ``[tl-rebuild, "hook-notify", "--config", CFG]``, and when the user
  already had ``notify = [A, B, …]`` their program is chained after ``--``:
  ``[tl-rebuild, "hook-notify", "--config", CFG, "--", A, B, …]`` (never dropped);
- the table ``[mcp_servers.<name>]``: ``command`` and ``args`` (other keys of that table, such
  as a user's ``startup_timeout_sec``, are kept).

Everything else — comments, key order, ``[projects."…"] trust_level``, ``[hooks.state."…"]
trusted_hash``, other ``[mcp_servers.*]``, ``[model_providers.*]`` — comes out byte for byte.
A key already holding the wanted value is not rewritten (a second merge is the identity).
``remove`` is the inverse (``tl-provision uninstall``): the user's own notify program restored,
our table gone — only what names this runtime config.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from provision.errors import FactError

HOOK_NOTIFY = "hook-notify"
CHAIN = "--"


@dataclass(frozen=True)
class Wanted:
    """What Threadline needs in config.toml: its notify head and its MCP server."""

    tl_rebuild: str
    config_path: str  # the runtime config (install.config_path)
    mcp_name: str = "threadline"

    @property
    def notify_head(self) -> list[str]:
        return [self.tl_rebuild, HOOK_NOTIFY, "--config", self.config_path]

    @property
    def mcp_args(self) -> list[str]:
        return ["mcp", "--config", self.config_path]


def load(text: str, path: str) -> dict[str, Any]:
    """``text`` parsed strictly (tomllib, as strict as Codex's own reader); a malformed file is
    a FactError naming it and the line, and nothing is written."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactError(f"{path!r} is not valid TOML ({exc}); left untouched — fix it first") \
            from exc


def is_ours(notify: Any, tl_rebuild: str | None = None) -> bool:
    """``notify`` is a Threadline head (``<…tl-rebuild> hook-notify …``)."""
    return (isinstance(notify, list) and len(notify) >= 2 and notify[1] == HOOK_NOTIFY
            and isinstance(notify[0], str)
            and (notify[0] == tl_rebuild or notify[0].rsplit("/", 1)[-1] == "tl-rebuild"))


def user_notify(notify: Any) -> list[str]:
    """The user's own notify program inside ``notify`` (ours: what follows ``--``)."""
    if notify is None:
        return []
    if not isinstance(notify, list) or not all(isinstance(word, str) for word in notify):
        raise FactError(f"notify is {notify!r}, not a list of strings; left untouched")
    if is_ours(notify):
        return notify[notify.index(CHAIN) + 1:] if CHAIN in notify else []
    return list(notify)


def wanted_notify(notify: Any, wanted: Wanted) -> list[str]:
    """Our head, chained to whatever program the user had (theirs is never dropped)."""
    theirs = user_notify(notify)
    return [*wanted.notify_head, *([CHAIN, *theirs] if theirs else [])]


def merge(text: str, wanted: Wanted, path: str) -> str:
    """``text`` with our notify chain and ``[mcp_servers.<name>]`` upserted; ``text`` itself
    when both are already as wanted."""
    import tomlkit

    data = load(text, path)
    notify = wanted_notify(data.get("notify"), wanted)
    server = data.get("mcp_servers", {}).get(wanted.mcp_name)
    servers = data.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise FactError(f"{path!r}: mcp_servers is not a table; left untouched")
    mcp_ok = isinstance(server, dict) and server.get("command") == wanted.tl_rebuild \
        and server.get("args") == wanted.mcp_args
    if data.get("notify") == notify and mcp_ok:
        return text
    doc = tomlkit.parse(text)
    if data.get("notify") != notify:
        doc["notify"] = notify
    if not mcp_ok:
        _upsert_server(doc, wanted)
    return tomlkit.dumps(doc)


def _upsert_server(doc: Any, wanted: Wanted) -> None:
    import tomlkit

    if "mcp_servers" not in doc:
        doc.add("mcp_servers", tomlkit.table(is_super_table=True))
    servers = doc["mcp_servers"]
    if wanted.mcp_name in servers:
        table = servers[wanted.mcp_name]
        table["command"] = wanted.tl_rebuild
        table["args"] = wanted.mcp_args
        return
    table = tomlkit.table()
    table["command"] = wanted.tl_rebuild
    table["args"] = wanted.mcp_args
    table.add(tomlkit.nl())  # a blank line before whatever table follows
    servers[wanted.mcp_name] = table


def _config_of(argv: Any) -> str | None:
    """The ``--config`` value of our notify head or our server's args, or None."""
    if not isinstance(argv, list) or CHAIN in argv:
        argv = argv[:argv.index(CHAIN)] if isinstance(argv, list) else []
    for at, word in enumerate(argv[:-1]):
        if word == "--config":
            return str(argv[at + 1])
    return None


def ours_to_remove(data: dict[str, Any], wanted: Wanted) -> tuple[bool, bool]:
    """(our notify head is there, our ``[mcp_servers.<name>]`` is there) — ours = a
    tl-rebuild head / ``tl-rebuild mcp`` for THIS runtime config: another companion's head, or
    a table the user replaced with another program under our name, is never removed."""
    notify = data.get("notify")
    head = is_ours(notify, wanted.tl_rebuild) and _config_of(notify) == wanted.config_path
    server = (data.get("mcp_servers") or {}).get(wanted.mcp_name)
    table = isinstance(server, dict) and isinstance(server.get("command"), str) \
        and server["command"].rsplit("/", 1)[-1] == "tl-rebuild" \
        and (server.get("args") or [])[:1] == ["mcp"] \
        and _config_of(server.get("args")) == wanted.config_path
    return head, table


def remove(text: str, wanted: Wanted, path: str) -> str:
    """``text`` without Threadline: the user's own notify program restored (or no notify),
    ``[mcp_servers.<name>]`` gone; ``text`` itself when neither of ours is there
    (``ours_to_remove``)."""
    import tomlkit

    data = load(text, path)
    head, table = ours_to_remove(data, wanted)
    if not head and not table:
        return text
    doc = tomlkit.parse(text)
    if head:
        theirs = user_notify(data["notify"])
        if theirs:
            doc["notify"] = theirs
        else:
            del doc["notify"]
    if table:
        del doc["mcp_servers"][wanted.mcp_name]
        if not data["mcp_servers"].keys() - {wanted.mcp_name}:
            del doc["mcp_servers"]
    return tomlkit.dumps(doc)


def findings(data: dict[str, Any], wanted: Wanted) -> list[str]:
    """What is not as Threadline installed it (for verify and drift), one phrase each."""
    problems: list[str] = []
    notify: Any = data.get("notify")
    if not is_ours(notify, wanted.tl_rebuild):
        problems.append("the notify program is not Threadline's "
                        f"(notify = {notify!r})" if notify else "notify is not set")
    elif notify[:len(wanted.notify_head)] != wanted.notify_head:
        problems.append(f"the notify program runs {notify[:4]!r}, not "
                        f"{wanted.notify_head!r}")
    server = (data.get("mcp_servers") or {}).get(wanted.mcp_name)
    if not isinstance(server, dict):
        problems.append(f"[mcp_servers.{wanted.mcp_name}] is gone")
    elif (server.get("command"), server.get("args")) != (wanted.tl_rebuild, wanted.mcp_args):
        problems.append(f"[mcp_servers.{wanted.mcp_name}] runs "
                        f"{[server.get('command'), *(server.get('args') or [])]!r}, not "
                        f"{[wanted.tl_rebuild, *wanted.mcp_args]!r}")
    return problems

