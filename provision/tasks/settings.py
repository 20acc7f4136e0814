"""Task ``StopHook``: our Stop hook in the claude user's settings.json (SPEC §5.2 step 7).

Facts are the file's bytes and mode, read through the host; the plan parses them strictly and
merges only our handler (provision/parsers/settings.py); the action is an atomic write with a backup
that keeps the file mode. The engine re-reads the facts after the write, so a file that does not
hold our entry afterwards makes the task ``failed``.

The handler written (the marker is ``tl-rebuild hook-stop``)::

    {"type": "command",
     "command": "/abs/bin/tl-rebuild hook-stop --config /etc/threadline/config.toml",
     "timeout": 10}

Several companions may share the claude user's settings.json: this profile's handler is the one
whose ``--config`` is its config path (or the path its manifest recorded, when the file moved);
other companions' handlers are never changed or removed (provision/parsers/settings.py).

``StopHook(present=False)`` removes our handler (and nothing else): the way to disable the
rebuild trigger while keeping the MCP server. Without an explicit ``present`` the profile's
``hook.enabled`` (default true) decides; ``StopHookPersists`` then checks presence or absence.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.actions import CLAUDE_ONLY, Action, RunCommand, Task, WriteFile
from provision.errors import FactError, SettingsError
from provision.parsers.settings import (
    dump_settings,
    find_stop_hook,
    hook_config,
    merge_stop_hook,
    other_stop_hooks,
    parse_settings,
    remove_stop_hook,
    stop_subtree_diff,
)

if TYPE_CHECKING:
    from provision.host import Host
    from provision.profile import Profile
    from provision.result import Context

MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"
NEW_FILE_MODE = 0o600


def find_tl_rebuild(host: Host, profile: Profile) -> str:
    """Absolute path of the ``tl-rebuild`` console script the hook and the MCP server run.

    Looks in ``install.prefix/bin``, then (local connection) beside the running interpreter,
    i.e. the installation tl-provision itself runs from, then on the host's PATH.
    """
    candidates = []
    if profile.install.prefix:
        candidates.append(os.path.join(profile.install.prefix, "bin", "tl-rebuild"))
    if profile.connection == "local":
        candidates.append(os.path.join(os.path.dirname(sys.executable), "tl-rebuild"))
    for candidate in candidates:
        found = host.stat(candidate)
        if found is not None and not found.is_dir and found.executable:
            return candidate
    on_path = host.which("tl-rebuild")
    if on_path:
        return on_path
    raise FactError(f"tl-rebuild not found (looked in {', '.join(map(repr, candidates))} "
                    "and on PATH); install threadline or set install.prefix")


def hook_entry(tl_rebuild: str, profile: Profile) -> dict[str, Any]:
    """The Stop handler this profile wants in settings.json."""
    command = shlex.join([tl_rebuild, "hook-stop", "--config", profile.install.config_path])
    return {"type": "command", "command": command, "timeout": profile.hook_timeout}


@dataclass(frozen=True)
class SettingsFacts:
    """settings.json as found: raw bytes (None = absent), mode, and the wanted handler."""

    path: str
    raw: bytes | None
    mode: int | None
    entry: tuple[tuple[str, Any], ...]
    warnings: tuple[str, ...] = ()
    new_owner: tuple[int, int] | None = None  # claude home's uid:gid, when the writer differs
    new_dir: str | None = None  # the claude dir, when the write will create it
    present: bool = True  # whether our handler is wanted (profile hook.enabled)
    config_path: str = ""  # the companion whose handler this is (profile install.config_path)
    previous: tuple[str, ...] = ()  # config paths its manifest recorded before (a moved file)

    @property
    def wanted(self) -> dict[str, Any]:
        return dict(self.entry)

    def ours(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """This companion's handler in ``doc`` (other companions' handlers never count)."""
        return find_stop_hook(doc, config_path=self.config_path, previous=self.previous)


class StopHook(Task):
    """Our Stop handler present (or, with ``present=False``, absent) in settings.json.

    ``present=None`` follows the profile's ``hook.enabled``.
    """

    name = "StopHook"
    agents = CLAUDE_ONLY

    def __init__(self, present: bool | None = None) -> None:
        self.present = present

    def facts(self, host: Host, ctx: Context) -> SettingsFacts:
        profile = ctx.profile
        path = profile.claude.settings_path
        raw = host.read_bytes(path)
        found = host.stat(path) if raw is not None else None
        entry = hook_entry(find_tl_rebuild(host, profile), profile)
        new_owner, new_dir = None, None
        if raw is None:  # a file we create must belong to the claude user, not to us
            home = host.stat(profile.claude.home)
            writer = host.run(["id", "-u"], timeout=10).stdout.strip()
            if home is not None and str(home.uid) != writer:
                new_owner = (home.uid, home.gid)
            if host.stat(profile.claude.claude_dir) is None:
                new_dir = profile.claude.claude_dir
        return SettingsFacts(path, raw, found.mode if found else None, tuple(entry.items()),
                             _warnings(raw, host.read_bytes(MANAGED_SETTINGS)),
                             new_owner, new_dir,
                             profile.hook_enabled if self.present is None else self.present,
                             profile.install.config_path, previous_config(host, profile))

    def _merge(self, facts: SettingsFacts) -> tuple[dict[str, Any], dict[str, Any], bool, str]:
        doc = parse_settings(facts.raw, facts.path)
        if facts.present:
            new, changed, message = merge_stop_hook(doc, facts.wanted, previous=facts.previous)
        else:
            new, changed, message = remove_stop_hook(doc, config_path=facts.config_path,
                                                     previous=facts.previous)
        return doc, new, changed, message

    def plan(self, facts: SettingsFacts, ctx: Context) -> list[Action]:
        _, new, changed, message = self._merge(facts)
        if not changed:
            return []
        content = dump_settings(new)
        verb = "from" if not facts.present else "to" if message.startswith("add ") else "in"
        actions: list[Action] = [WriteFile(
            facts.path, content, before=facts.raw,
            mode=facts.mode if facts.mode is not None else NEW_FILE_MODE,
            summary=f"{message} {verb} {facts.path}",
            validate=self._validator(facts),
            overwrite_read_only=ctx.profile.install.overwrite_read_only,
        )]
        if facts.new_owner is not None:
            uid, gid = facts.new_owner
            paths = [p for p in (facts.new_dir, facts.path) if p]
            actions.append(RunCommand(("chown", f"{uid}:{gid}", *paths),
                                      summary=f"chown {uid}:{gid} {' '.join(paths)}"))
        return actions

    def _validator(self, facts: SettingsFacts) -> Callable[[bytes], None]:
        path, present = facts.path, facts.present

        def validate(content: bytes) -> None:
            found = facts.ours(parse_settings(content, path))
            if (found is not None) != present:
                raise SettingsError(f"merged settings for '{path}' would "
                                    f"{'lack' if present else 'still hold'} the Stop hook")
        return validate

    def ok_message(self, facts: SettingsFacts, ctx: Context) -> str:
        state = "already present in" if facts.present else \
            "not present (hook.enabled: false) in"
        where = facts.path if facts.raw is not None else f"{facts.path} (no file)"
        return f"Stop hook {state} {where}"

    def details(self, facts: SettingsFacts, ctx: Context) -> list[str]:
        notes = list(facts.warnings)
        try:
            others = other_stop_hooks(parse_settings(facts.raw, facts.path), facts.config_path,
                                      previous=facts.previous)
        except SettingsError:
            others = []  # plan() reports the malformed file
        if others:
            notes.append("Stop hook(s) of other companions left as they are (config "
                         + ", ".join(repr(p) for p in others) + ")")
        if facts.present and self._merge(facts)[2]:
            notes.append("a running claude reads hooks at start: restart it (or review /hooks) "
                         "for a newly written hook to fire")
        return notes

    def diff(self, facts: SettingsFacts, actions: list[Action]) -> str:
        if not actions:
            return ""
        before, after, _, _ = self._merge(facts)
        return stop_subtree_diff(before, after, facts.path)


class StopHookPersists(Task):
    """Verification: our Stop hook is still in settings.json, as wanted, after a pause (with
    ``hook.enabled: false``: still absent).

    Running claude sessions rewrite settings.json from a stale copy and drop hooks
    (anthropics/claude-code#44631, #93742); a re-read right after the write cannot see that.
    """

    name = "StopHookPersists"
    agents = CLAUDE_ONLY

    def __init__(self, pause: float = 2.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.pause = pause
        self.sleep = sleep

    def skip_reason(self, ctx: Context) -> str | None:
        earlier = ctx.facts_of(StopHook.name)
        if earlier is None:
            return None  # run on its own: check the file as it is
        try:
            pending = StopHook()._merge(earlier)[2]
        except SettingsError:
            return "settings.json could not be merged (see StopHook)"
        if pending and earlier.present:
            return "Stop hook not in settings.json in this run; nothing to re-read"
        if pending:
            return "Stop hook still in settings.json in this run; nothing to re-read"
        return None

    def facts(self, host: Host, ctx: Context) -> SettingsFacts:
        self.sleep(self.pause)
        return StopHook().facts(host, ctx)

    def plan(self, facts: SettingsFacts, ctx: Context) -> list[Action]:
        found = facts.ours(parse_settings(facts.raw, facts.path))
        later = f"{self.pause:g}s after apply"
        if not facts.present:
            if found is not None:
                raise SettingsError(f"Stop hook back in '{facts.path}' {later} although "
                                    "hook.enabled is false: a running claude session probably "
                                    "rewrote the file; stop it and re-run apply")
            return []
        if found is None:
            raise SettingsError(f"Stop hook missing from '{facts.path}' {later}: a running claude "
                                "session probably rewrote the file; stop it and re-run apply")
        altered = [key for key, value in facts.entry if found.get(key) != value]
        if altered:
            raise SettingsError(f"Stop hook in '{facts.path}' altered {later} "
                                f"({', '.join(altered)}); re-run apply")
        return []

    def ok_message(self, facts: SettingsFacts, ctx: Context) -> str:
        if not facts.present:
            return (f"Stop hook still absent from {facts.path} after {self.pause:g}s "
                    "(hook.enabled: false)")
        return f"Stop hook still present in {facts.path} after {self.pause:g}s"


def previous_config(host: Host, profile: Profile) -> tuple[str, ...]:
    """The config path of the hook the last apply recorded, when it differs (a moved file)."""
    import json

    raw = host.read_bytes(profile.install.manifest_path)
    try:
        command = (json.loads(raw or b"{}").get("hook") or {}).get("command")
    except (ValueError, AttributeError):
        return ()
    found = hook_config({"command": command}) if isinstance(command, str) else None
    if not found or found == os.path.normpath(profile.install.config_path):
        return ()
    return (found,)


def _warnings(raw: bytes | None, managed: bytes | None) -> tuple[str, ...]:
    """Settings that stop our hook from running even when it is present (never fatal)."""
    warnings = []
    try:
        if raw is not None and parse_settings(raw).get("disableAllHooks") is True:
            warnings.append("warning: disableAllHooks is true in the user settings")
    except SettingsError:
        pass  # plan() reports the malformed file as the task's failure
    try:
        if managed is not None and parse_settings(managed).get("allowManagedHooksOnly") is True:
            warnings.append(f"warning: allowManagedHooksOnly is true in {MANAGED_SETTINGS}")
    except SettingsError:
        warnings.append(f"warning: {MANAGED_SETTINGS} is not strict JSON (not checked)")
    return tuple(warnings)
