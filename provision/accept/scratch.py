"""The drill's scratch world: its folders, files, private tmux server and leftover processes.

Everything is written through ``provision.host`` under ``<state_dir>/accept-drill/<id>/``:

    home/                 the scratch claude's HOME (.claude.json whose only MCP servers are
                          harmless stand-ins of the expected channel servers, same names and
                          argv shape — provision/accept/standins.py —, .claude/settings.json
                          without hooks/status line, whose only plugins are stand-ins of the
                          expected plugin channels, installed under .claude/plugins/)
    market/               directory marketplaces of stand-in plugins (when the real one is one)
    config/               CLAUDE_CONFIG_DIR, only when the profile sets claude.config_dir
    work/                 the scratch workdir (empty: no .mcp.json, no CLAUDE.md)
    state/                the scratch operations store
    pointer               pointer and systemd doors: the scratch pointer, naming the copied
                          session
    threadline.toml       the real runtime config pointed at the above and the scratch pane
                          (tmux door), the scratch pointer (pointer door) or the scratch unit
                          ``tl-drill-<id>.service`` and pointer (systemd door; unit.py)
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.errors import AcceptError
from runtime.doors.kind import DoorKind
from runtime.doors.tmux import tmux_argv

if TYPE_CHECKING:
    from provision.accept.checklist import Scene
    from provision.host import Host
    from runtime.config import Config
    from runtime.proc import Result

TARGET = "drill:0.0"
# Keys of .claude.json / settings.json the scratch claude may see: what it needs to start
# without dialogs, nothing that starts a process (mcpServers, hooks, plugins, statusLine).
CLAUDE_JSON_KEYS = ("hasCompletedOnboarding", "lastOnboardingVersion", "customApiKeyResponses",
                    "cachedGrowthBookFeatures", "theme", "userID")
SETTINGS_KEYS = ("model", "env", "permissions", "theme")


@dataclass(frozen=True)
class Scratch:
    """Paths, names and env of one drill's scratch world."""

    root: str
    home: str
    config_dir: str | None
    work: str
    state: str
    config_path: str
    transcript: str
    session: str
    socket: str
    env_prefix: tuple[str, ...]
    dropped_servers: tuple[str, ...]
    standins: tuple[str, ...] = ()
    no_standin: tuple[tuple[str, str], ...] = ()
    door: DoorKind = DoorKind.TMUX
    unit: str = ""

    @property
    def pointer(self) -> str:
        return f"{self.root}/pointer"

    @property
    def runs_as_user(self) -> bool:
        """Root drills a non-root deployment: the scratch and its claude are that user's."""
        return self.env_prefix[:1] == ("runuser",)

    def evidence(self) -> dict[str, Any]:
        return {"root": self.root, "tmux_socket": self.socket, "target": TARGET,
                "unit": self.unit or None,
                "session": self.session, "transcript_copy": self.transcript,
                "mcp_servers_not_started": list(self.dropped_servers),
                "channel_server_standins": list(self.standins),
                "channels_without_standin": dict(self.no_standin)}

    def config(self) -> Config:
        from runtime.config import load_config

        return load_config(self.config_path)

    def tmux(self, host: Host, *args: str) -> Result:
        return host.run([*self.env_prefix, *tmux_argv(self.socket), "-f", "/dev/null", *args],
                        timeout=15)

    def start_old(self, host: Host, timeout: float = 30.0) -> int | None:
        """Run the resume argv of the copied session in the scratch pane; its pid or None."""
        from runtime.agents.claude import format_argv
        from runtime.doors.tmux import pane_command

        argv = format_argv(self.config().switch.resume_argv, self.session)
        started = self.tmux(host, "new-session", "-d", "-s", TARGET.split(":")[0], "-x", "200",
                            "-y", "50", *pane_command(argv, self.work))
        if not started.ok:
            raise AcceptError(f"scratch tmux did not start: {started.stderr.strip()}")
        self.tmux(host, "set-option", "-p", "-t", TARGET, "remain-on-exit", "on")
        return self.wait_old(host, timeout)

    def start_unit(self, host: Host, launch_argv: tuple[str, ...], tl_launch: str,
                   timeout: float = 30.0) -> int | None:
        """Start the scratch unit (unit.py), which resumes the copied session through
        tl-launch and the scratch pointer in its tmux; the claude pid or None."""
        from provision.accept.unit import ScratchUnit

        # a unit gets the manager's environment: give it the scratch HOME/config dir, and the
        # PATH the tmux drill's claude would inherit from accept
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for arg in self.env_prefix:
            if "=" in arg and not arg.startswith("-"):
                key, _, value = arg.partition("=")
                env[key] = value
        started = ScratchUnit(self.unit).start(
            host, socket=self.socket, session=TARGET.split(":")[0], work=self.work,
            pointer=self.pointer, env=env, launch_argv=launch_argv, tl_launch=tl_launch)
        if not started.ok:
            raise AcceptError(f"scratch unit {self.unit!r} did not start: "
                              f"{started.stderr.strip()}")
        return self.wait_old(host, timeout)

    def wait_old(self, host: Host, timeout: float) -> int | None:
        """Poll the scratch pane until it runs the copied session; its pid or None."""
        from runtime.procfs import alive, cmdline

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pane_pid(host)
            if pid and alive(pid) and self.session in (cmdline(pid) or ()):
                return pid
            time.sleep(0.1)
        return None

    def pane_pid(self, host: Host) -> int | None:
        shown = self.tmux(host, "display-message", "-p", "-t", TARGET,
                          "#{pane_dead} #{pane_pid}")
        dead, _, pid = shown.stdout.strip().partition(" ")
        return int(pid) if shown.ok and dead == "0" and pid.isdigit() else None

    def screen(self, host: Host) -> str:
        return self.tmux(host, "capture-pane", "-p", "-J", "-t", TARGET).stdout

    def run_hook(self, host: Host, tl_rebuild: str) -> Result:
        """``tl-rebuild hook-stop`` on the scratch config with the copied session's Stop."""
        payload = json.dumps({"session_id": self.session, "transcript_path": self.transcript,
                              "cwd": self.work, "hook_event_name": "Stop",
                              "stop_hook_active": False})
        return host.run([*self.env_prefix, tl_rebuild, "hook-stop", "--config",
                         self.config_path], cwd=self.work, timeout=60, input_text=payload)

    def run_runner_hook(self, host: Host, tl_rebuild: str) -> Result:
        """The runner's own call between two ``claude -p`` calls: no payload (pointer door)."""
        return host.run([*self.env_prefix, tl_rebuild, "hook-stop", "--config",
                         self.config_path], cwd=self.work, timeout=300, input_text="")

    def wait_terminal(self, operation_id: str, terminal: tuple[str, ...]) -> Any:
        """Poll the scratch operation until it ends — for ``activated``, until the worker's
        watch after activation has ended too (bounded by the switch timeouts)."""
        from runtime.switch.store import Store

        sw = self.config().switch
        deadline = (time.monotonic() + sw.stable_timeout_seconds + sw.activation_timeout_seconds
                    + 2 * sw.healthcheck_seconds + 60)
        store = Store(self.state)

        def ended(record: Any) -> bool:
            return record.state.value in terminal and not (
                record.state.value == "activated" and not record.fact("watch_ended_at"))

        record = store.read(operation_id)
        while not ended(record) and time.monotonic() < deadline:
            time.sleep(0.1)
            record = store.read(operation_id)
        return record

    def events(self, operation_id: str) -> list[dict[str, Any]]:
        from runtime.switch.store import Store

        return Store(self.state).events(operation_id)

    def kill_server(self, host: Host) -> None:
        self.tmux(host, "kill-server")

    def remove(self, host: Host) -> None:
        if "/accept-drill/" not in self.root:  # never anything but our own scratch
            raise AcceptError(f"refusing to remove {self.root!r}: not a drill scratch")
        host.run(["rm", "-rf", "--", self.root], timeout=60)


def drill_root(scene: Scene, tag: str) -> str:
    """``<state_dir>/accept-drill/<tag>``, its parent made first with the state dir's owner.

    The scratch itself belongs to whoever its agent runs as (``prepare_scratch``: the claude
    user when root drills a non-root claude deployment, else the caller); the parent stays in
    the agent user's state dir after the drill, and a root-owned one there would keep that
    user's own later drills from making their scratch (found by running ``accept --drill``
    as root against a non-root codex user).
    """
    state_dir = scene.profile.install.state_dir.rstrip("/")
    parent = f"{state_dir}/accept-drill"
    scene.host.ensure_dir(parent, 0o700)
    give_to_state_owner(scene, parent, recursive=False)
    return f"{parent}/{tag}"


def give_to_state_owner(scene: Scene, path: str, *, recursive: bool) -> None:
    """``chown`` ``path`` (``-R`` with ``recursive``) to the owner of the state dir, when a
    root-run drill made it for another user; symlinks are changed themselves (``-h``), never
    what they point to."""
    if os.geteuid() != 0:
        return
    host = scene.host
    owner = host.stat(scene.profile.install.state_dir)
    if owner is None or (owner.uid, owner.gid) == (0, 0):
        return
    argv = ["chown", "-h", *(["-R"] if recursive else []), f"{owner.uid}:{owner.gid}", "--", path]
    done = host.run(argv, timeout=60)
    if not done.ok:
        why = done.stderr.strip() or f"exit {done.rc}"
        raise AcceptError(f"cannot give {path!r} to the state dir's owner "
                          f"{owner.uid}:{owner.gid}: {why}")


def prepare_scratch(scene: Scene, tag: str, door: DoorKind = DoorKind.TMUX) -> Scratch:
    """Create the scratch folders and files for the newest session of the real project.

    ``door``: ``tmux`` (a private tmux server), ``pointer`` (a scratch pointer file naming
    the copied session, for the runner's call) or ``systemd`` (the scratch pointer and unit
    ``tl-drill-<tag>.service``, whose tmux uses the default socket folder: ``TMUX_TMPDIR`` is
    unset for it and for every scratch command, as a unit's environment has none).
    """
    from runtime.paths import encode_project_dir, latest_transcript

    host, profile, config = scene.host, scene.profile, scene.config
    assert config is not None and config.project_dir is not None
    source = latest_transcript(config.project_dir)
    if source is None:
        raise AcceptError(f"no session transcript in {str(config.project_dir)!r} to drill on")
    root = drill_root(scene, tag)
    home, work, state = f"{root}/home", f"{root}/work", f"{root}/state"
    config_dir = f"{root}/config" if profile.claude.config_dir else None
    claude_dir = config_dir or f"{home}/.claude"
    for path in (root, home, work, state, claude_dir):
        host.ensure_dir(path, 0o700)
    project = f"{claude_dir}/projects/{encode_project_dir(work)}"
    host.ensure_dir(project, 0o700)
    transcript = f"{project}/{source.name}"
    host.write_file(transcript, host.read_bytes(str(source)) or b"", mode=0o600, backup=False)
    dropped, standins, missing = _write_claude_state(scene, config_dir or home, claude_dir, work,
                                                     f"{root}/market")
    config_path = f"{root}/threadline.toml"
    host.write_file(config_path, _scratch_config(scene, project, work, state, tag, door,
                                                 f"{root}/pointer"), mode=0o600, backup=False)
    if door.has_pointer_file:
        host.write_file(f"{root}/pointer", f"{source.stem}\n".encode(), mode=0o600,
                        backup=False)
    # root drilling a non-root deployment: the scratch and its claude are the user's (a
    # scratch unit stays root's: restarting it needs root, the user's sudoers rule names
    # only the deployment's own unit)
    prefix = scene.claude_env_prefix(home, config_dir, as_user=door is not DoorKind.SYSTEMD)
    if prefix[:1] == ["runuser"]:
        give_to_state_owner(scene, root, recursive=True)
    if door is DoorKind.SYSTEMD:
        at = prefix.index("env") + 1
        prefix[at:at] = ["-u", "TMUX_TMPDIR"]
    return Scratch(root, home, config_dir, work, state, config_path, transcript, source.stem,
                   f"tl-drill-{tag}", tuple(prefix), dropped, standins,
                   tuple(sorted(missing.items())), door,
                   f"tl-drill-{tag}.service" if door is DoorKind.SYSTEMD else "")


def _json_of(host: Host, path: str) -> dict[str, Any]:
    try:
        data = json.loads(host.read_bytes(path) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _write_claude_state(scene: Scene, base: str, claude_dir: str, work: str,
                        market: str) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    from provision.accept.standins import standins

    host, spec = scene.host, scene.profile.claude
    real_path = f"{(spec.config_dir or spec.home).rstrip('/')}/.claude.json"
    real = _json_of(host, real_path)
    dropped = set(real.get("mcpServers") or {})
    for project in (real.get("projects") or {}).values():
        if isinstance(project, dict):
            dropped |= set(project.get("mcpServers") or {})
    state = {k: real[k] for k in CLAUDE_JSON_KEYS if k in real}
    state["projects"] = {work: {"hasTrustDialogAccepted": True,
                                "hasCompletedProjectOnboarding": True}}
    config = scene.config
    workdir = str(config.workdir) if config is not None and config.workdir else ""
    raw = host.read_bytes(real_path)
    mcp = host.read_bytes(f"{workdir}/.mcp.json") if workdir else None
    servers, missing = standins(
        config.switch.expected_channel_servers if config is not None else (),
        raw.decode("utf-8", "replace") if raw else None,
        mcp.decode("utf-8", "replace") if mcp else None, workdir, {"HOME": spec.home})
    if servers:
        state["mcpServers"] = servers
    host.write_file(f"{base}/.claude.json", json.dumps(state, indent=2).encode(), mode=0o600,
                    backup=False)
    settings = _json_of(host, spec.settings_path)
    kept = {k: settings[k] for k in SETTINGS_KEYS if k in settings}
    plugins = [c for c in (config.switch.expected_channel_servers if config else ())
               if c.startswith("plugin:")]
    files, extra, problems = _plugin_standins(scene, plugins, claude_dir, market)
    for path, data in files.items():
        host.ensure_dir(path.rsplit("/", 1)[0], 0o700)
        host.write_file(path, json.dumps(data, indent=2).encode(), mode=0o600, backup=False)
    kept.update({k: v for k, v in extra.items() if v})
    missing.update(problems)
    host.write_file(f"{claude_dir}/settings.json", json.dumps(kept, indent=2).encode(),
                    mode=0o600, backup=False)
    drilled = (*servers, *(c for c in plugins if c not in problems))
    return tuple(sorted(dropped)), drilled, missing


def _plugin_standins(scene: Scene, plugins: list[str], claude_dir: str, market: str
                     ) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Stand-in plugins for the deployment's plugin channels (provision/accept/standins.py),
    resolved from its real install exactly as the health check resolves them; a plugin the
    health check could not recognise gets none and is reported with the check's reason."""
    from pathlib import Path

    from provision.accept.standins import plugin_standins
    from provision.errors import HostError
    from runtime.channels.running import plugin_expected

    host, spec = scene.host, scene.profile.claude
    real_dir = (spec.config_dir or f"{spec.home.rstrip('/')}/.claude").rstrip("/")

    def read(path: Path) -> str | None:
        try:
            raw = host.read_bytes(str(path))
        except HostError:
            return None
        return raw.decode("utf-8", "replace") if raw is not None else None

    env = {"HOME": spec.home, **({"CLAUDE_CONFIG_DIR": spec.config_dir}
                                if spec.config_dir else {})}
    known = _json_of(host, f"{real_dir}/plugins/known_marketplaces.json")
    installed = (_json_of(host, f"{real_dir}/plugins/installed_plugins.json").get("plugins")
                 or {})
    settings_known = _json_of(host, spec.settings_path).get("extraKnownMarketplaces") or {}
    wanted, problems = [], {}
    for channel in plugins:
        plugin = channel.removeprefix("plugin:")
        expected = plugin_expected(channel, Path(real_dir), env, read=read)
        if expected.problem:
            problems[channel] = expected.problem
            continue
        entries = installed.get(plugin) if isinstance(installed, dict) else None
        version = next((str(e["version"]) for e in entries or [] if isinstance(e, dict)
                        and isinstance(e.get("version"), str)), "0.0.0")
        market_name = plugin.rpartition("@")[2]
        # claude also learns a marketplace from settings.json (seen with 2.1.328: a start
        # re-added a marketplace missing from known_marketplaces.json)
        entry = known.get(market_name) or (settings_known.get(market_name)
                                           if isinstance(settings_known, dict) else None)
        wanted.append((plugin, expected.specs, entry, version))
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    files, extra = plugin_standins(wanted, claude_dir, market, now)
    return files, extra, problems


def _scratch_config(scene: Scene, project: str, work: str, state: str, tag: str,
                    door: DoorKind = DoorKind.TMUX, pointer: str = "") -> bytes:
    raw = scene.host.read_bytes(scene.profile.install.config_path) or b""
    data = tomllib.loads(raw.decode("utf-8"))
    data.update(project_dir=project, workdir=work, state_dir=state)
    switch = data.setdefault("switch", {})
    # The deployment's expected channel servers stay: the scratch has stand-ins of them.
    switch.update(door=door.value, worker_log=f"{state}/worker.log",
                  tmux={"target": TARGET, "socket_name": f"tl-drill-{tag}"})
    switch.pop("systemd", None)
    switch.pop("pointer", None)
    if door is DoorKind.POINTER:
        switch["pointer"] = {"path": pointer}
    if door is DoorKind.SYSTEMD:  # no sudo_user: the drill runs as root (unit.shape_problem)
        switch["systemd"] = {"unit": f"tl-drill-{tag}.service", "pointer_path": pointer}
    return dump_toml(data).encode()


def dump_toml(data: dict[str, Any], prefix: str = "") -> str:
    """A TOML document of nested tables of scalars, lists and inline tables."""
    from provision.render import toml_value

    lines = [f"{key} = {toml_value(value)}" for key, value in data.items()
             if not isinstance(value, dict)]
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{prefix}{key}]", dump_toml(value, f"{prefix}{key}.")]
    return "\n".join(lines) + "\n"


def processes_of(host: Host, scratch: Scratch) -> list[tuple[int, list[str]]]:
    """Live processes whose cwd is inside the scratch or whose HOME is the scratch HOME."""
    from provision.errors import HostError

    marker = b"\0HOME=" + scratch.home.encode() + b"\0"
    found = []
    for name in host.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        cwd = host.readlink(f"/proc/{name}/cwd") or ""
        try:
            environ = b"\0" + (host.read_bytes(f"/proc/{name}/environ") or b"")
        except HostError:
            environ = b""
        if cwd == scratch.root or cwd.startswith(scratch.root + "/") or marker in environ:
            found.append((int(name), list(host.proc_cmdline(int(name)))))
    return found
