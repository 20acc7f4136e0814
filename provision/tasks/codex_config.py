"""``CodexConfig``: Threadline's notify chain and MCP server in ``$CODEX_HOME/config.toml``
(agent codex only; the merge rules are provision/parsers/codex_config.py).

Not a Stop hook: Codex silently skips an untrusted hook in ``codex exec`` and the TUI blocks on
a "Hooks need review" dialog; the notify program runs after every turn without trust.
The file keeps its mode and owner (Codex chmods it to 0600 when it records hook trust), the
old one is backed up, the write is atomic; a malformed file fails the task untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.actions import CODEX_ONLY, Action, Task, WriteFile
from provision.errors import FactError
from provision.parsers import codex_config as cc
from provision.tasks.files import NEW, chown_action, find_console_script, owner_of

if TYPE_CHECKING:
    from provision.host import Host
    from provision.result import Context

NEW_MODE = 0o600  # what Codex itself gives config.toml once it records hook trust


@dataclass(frozen=True)
class CodexConfigFacts:
    path: str
    current: bytes | None
    mode: int | None
    ids: tuple[int, int] | None
    wanted: cc.Wanted


def wanted_of(host: Host, ctx: Context) -> cc.Wanted:
    """Our notify head and MCP server for this profile (tl-rebuild's absolute path)."""
    profile = ctx.profile
    return cc.Wanted(find_console_script(host, profile, "tl-rebuild"),
                     profile.install.config_path, profile.mcp_name)


def merged(facts: CodexConfigFacts) -> bytes:
    """The file's bytes after the merge (a missing file starts empty)."""
    text = (facts.current or b"").decode("utf-8")
    return cc.merge(text, facts.wanted, facts.path).encode("utf-8")


class CodexConfig(Task):
    """``notify`` chains tl-rebuild hook-notify before the user's program; ``[mcp_servers.NAME]``
    starts ``tl-rebuild mcp``."""

    name = "CodexConfig"
    agents = CODEX_ONLY

    def facts(self, host: Host, ctx: Context) -> CodexConfigFacts:
        assert ctx.profile.codex is not None
        path = ctx.profile.codex.config_path
        current = host.read_bytes(path)
        st = host.stat(path) if current is not None else None
        return CodexConfigFacts(path, current, st.mode if st else None,
                                (st.uid, st.gid) if st else None, wanted_of(host, ctx))

    def plan(self, facts: CodexConfigFacts, ctx: Context) -> list[Action]:
        try:
            new = merged(facts)
        except UnicodeDecodeError as exc:
            raise FactError(f"{facts.path!r} is not UTF-8 text; left untouched") from exc
        owner = owner_of(ctx)
        if new == facts.current:
            return []
        what = ", ".join(cc.findings(cc.load((facts.current or b"").decode(), facts.path),
                                     facts.wanted)) or "update"
        verb = "create" if facts.current is None else "update"
        write: list[Action] = [WriteFile(
            facts.path, new, before=facts.current,
            mode=NEW_MODE if facts.mode is None else None,  # None: keep the file's own mode
            summary=f"{verb} {facts.path} ({what}; backup kept)" if facts.current is not None
            else f"{verb} {facts.path} ({what})",
            validate=_validator(facts),
            overwrite_read_only=ctx.profile.install.overwrite_read_only)]
        if facts.current is None and owner is not None:
            write.extend(chown_action(facts.path, NEW, owner))
        return write

    def ok_message(self, facts: CodexConfigFacts, ctx: Context) -> str:
        theirs = cc.user_notify(cc.load((facts.current or b"").decode(), facts.path)
                                .get("notify"))
        chained = f", chained to {theirs!r}" if theirs else ""
        return (f"notify runs tl-rebuild hook-notify{chained} and "
                f"[mcp_servers.{facts.wanted.mcp_name}] is present in {facts.path}")


def _validator(facts: CodexConfigFacts) -> Callable[[bytes], None]:
    """Re-reads the bytes about to be written: strict TOML, and nothing of ours still missing."""
    def validate(content: bytes) -> None:
        problems = cc.findings(cc.load(content.decode("utf-8"), facts.path), facts.wanted)
        if problems:
            raise FactError(f"merged {facts.path!r} is wrong: {'; '.join(problems)}")
    return validate


class CodexConfigRemoved(Task):
    """``tl-provision uninstall``: our notify head and ``[mcp_servers.NAME]`` out of
    config.toml — the user's own notify program restored in its place, every other byte kept,
    the mode kept, the old file backed up; only what names this profile's runtime config
    (parsers/codex_config.ours_to_remove). A second run is ``ok``."""

    name = "CodexConfig"
    agents = CODEX_ONLY

    def facts(self, host: Host, ctx: Context) -> CodexConfigFacts:
        return CodexConfig().facts(host, ctx)

    def plan(self, facts: CodexConfigFacts, ctx: Context) -> list[Action]:
        if facts.current is None:
            return []
        try:
            text = facts.current.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FactError(f"{facts.path!r} is not UTF-8 text; left untouched") from exc
        new = cc.remove(text, facts.wanted, facts.path)
        if new == text:
            return []
        head, table = cc.ours_to_remove(cc.load(text, facts.path), facts.wanted)
        theirs = cc.user_notify(cc.load(text, facts.path).get("notify")) if head else []
        what = [*(["our notify head" + (f" (yours restored: {theirs!r})" if theirs else "")]
                  if head else []), *([f"[mcp_servers.{facts.wanted.mcp_name}]"] if table
                                      else [])]
        return [WriteFile(facts.path, new.encode("utf-8"), before=facts.current, mode=None,
                          summary=f"remove {' and '.join(what)} from {facts.path} "
                                  "(backup kept)",
                          validate=_gone(facts),
                          overwrite_read_only=ctx.profile.install.overwrite_read_only)]

    def ok_message(self, facts: CodexConfigFacts, ctx: Context) -> str:
        where = facts.path if facts.current is not None else f"{facts.path} (absent)"
        return f"no Threadline notify head or [mcp_servers.{facts.wanted.mcp_name}] in {where}"


def _gone(facts: CodexConfigFacts) -> Callable[[bytes], None]:
    """Re-reads the bytes about to be written: strict TOML, nothing of ours left."""
    def validate(content: bytes) -> None:
        if any(cc.ours_to_remove(cc.load(content.decode("utf-8"), facts.path), facts.wanted)):
            raise FactError(f"{facts.path!r} would still hold Threadline's keys")
    return validate
