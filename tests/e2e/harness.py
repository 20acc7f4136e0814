"""A user's machine in a temp folder, with the real Claude Code CLI running in a private tmux.

``prepare_machine`` builds it the way a user's machine looks after onboarding — and only that;
``install_threadline`` then adds the product the operator's way (host profile + a real
``tl-provision apply``). The fixture state, all of it test-only and never in the product:

- ``$HOME/.claude.json`` (``onboarding_state``): onboarding done, the dummy API key approved,
  the workdir trusted, the ``tengu_harbor`` flag cached so development channels load offline
  (with env ``CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1``), and the fullscreen-renderer
  offer marked as seen (a claude killed while booting makes the next start ask);
- ``$HOME/.claude/settings.json``: allow rules for the tools the fake model calls, default
  permission mode with auto mode disabled (auto mode asks about classifier billing on a
  non-Anthropic API), and a recording Stop hook (one JSON line per Stop in ``hook.jsonl``);
- env: ``claude_env`` (temp HOME, dummy key, loopback fake API, no nonessential traffic) plus
  ``CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1`` (else every start tries a git
  clone) and a private ``TMPDIR``;
- the test channel server (tests/e2e/channel_server.py) registered with the real
  ``claude mcp add --scope user companion -- python channel_server.py --spool … --log …``
  — its argv does not contain its registration name, like most real channel servers (a
  ``--name chan`` in it — and "chan" inside "channel_server.py" — once hid a health check
  that looked for the name in command lines);
- ``custom_config_dir=True``: claude runs with ``CLAUDE_CONFIG_DIR`` set to a folder outside
  HOME (``.claude.json`` then lives inside it), like the VPS of issue 10.

``ClaudePane`` starts interactive claude in a tmux server that the harness itself starts with the
machine's environment (so ``respawn-pane`` by the product inherits the same environment), accepts
the development-channels warning on the starts it makes itself, types prompts (waiting until the
pane shows them), and finds the session id of the running process through
``$HOME/.claude/sessions/<pid>.json``. A start is ready when the input box shows, the session
record is final (has a ``status``; for ``--resume X`` names X) and the channel server under that
claude listens. Everything is
bounded by timeouts; every pid seen is tracked and killed on ``close``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.oracle import CHANNEL_NAME, read_jsonl
from tests.fixtures.claude_cli import DUMMY_API_KEY, claude_env
from tests.fixtures.tmux import TmuxServer, wait_for

CHANNEL_SERVER = Path(__file__).with_name("channel_server.py")
CHANNEL_FLAGS = ("--dangerously-load-development-channels", f"server:{CHANNEL_NAME}")
WARNING_TEXT = "I am using this for local development"
NO_CONVERSATION = "No conversation found"
# Tools the fake model calls in the scenarios; allowed so no permission dialog blocks a turn.
ALLOWED_TOOLS = ("Bash", "ToolSearch", f"mcp__{CHANNEL_NAME}__reply", "mcp__threadline")

RECORDING_HOOK = """#!{python}
import json, os, sys, time
payload = json.load(sys.stdin)
record = {{"t": time.time(), "pid": os.getpid(), "ppid": os.getppid(), "payload": payload}}
line = json.dumps(record)
with open({log!r}, "a", encoding="utf-8") as handle:
    handle.write(line + "\\n")
"""


def encode_cwd(cwd: str | os.PathLike[str]) -> str:
    """The projects folder name of a cwd: every non-alphanumeric character becomes ``-``.

    Kept here on purpose (not imported from runtime.paths): the harness is an independent oracle.
    """
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def onboarding_state(workdir: Path, api_key: str = DUMMY_API_KEY) -> dict[str, Any]:
    """The ``.claude.json`` keys that let 2.1.328 start in tmux with no dialog (test-only state)."""
    return {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {str(workdir): {"hasTrustDialogAccepted": True}},
        "cachedGrowthBookFeatures": {"tengu_harbor": True},
        # A claude killed while booting (respawn-pane -k) makes the next start fall back to the
        # classic renderer and offer "Try the new fullscreen renderer?"; seen 3 times = never.
        "fullscreenUpsellSeenCount": 3,
    }


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = Path(f"/proc/{pid}/stat")
    try:
        return state.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def pid_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@dataclass
class Machine:
    """A temp HOME + workdir where claude runs against the fake API, with channel and hook logs."""

    root: Path
    claude: Path
    api_url: str
    custom_config_dir: bool = False
    home: Path = field(init=False)
    workdir: Path = field(init=False)
    spool: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.home = self.root / "home"
        self.workdir = self.root / "work dir.x"  # a space and a dot: the encoding rule matters
        self.spool = self.root / "spool"
        for directory in (self.home, self.workdir, self.spool, self.root / "tmp"):
            directory.mkdir(parents=True, exist_ok=True)
        self.env = claude_env(self.home, self.api_url)
        self.env["CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF"] = "1"
        # Otherwise each start tries to git-clone the official plugin marketplace (offline: fails).
        self.env["CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL"] = "1"
        self.env["TMPDIR"] = str(self.root / "tmp")
        if self.custom_config_dir:
            self.env["CLAUDE_CONFIG_DIR"] = str(self.root / "claude config")

    # -- paths -------------------------------------------------------------------------------
    @property
    def claude_dir(self) -> Path:
        custom = self.env.get("CLAUDE_CONFIG_DIR")
        return Path(custom) if custom else self.home / ".claude"

    @property
    def user_config(self) -> Path:
        custom = self.env.get("CLAUDE_CONFIG_DIR")
        return Path(custom) / ".claude.json" if custom else self.home / ".claude.json"

    @property
    def settings_path(self) -> Path:
        return self.claude_dir / "settings.json"

    @property
    def project_dir(self) -> Path:
        return self.claude_dir / "projects" / encode_cwd(self.workdir)

    @property
    def replies_path(self) -> Path:
        return self.root / "replies.jsonl"

    @property
    def channel_log(self) -> Path:
        return self.root / "channel.jsonl"

    @property
    def hook_log(self) -> Path:
        return self.root / "hook.jsonl"

    def transcript(self, session_id: str) -> Path:
        return self.project_dir / f"{session_id}.jsonl"

    def transcripts(self) -> list[Path]:
        return sorted(self.project_dir.glob("*.jsonl")) if self.project_dir.is_dir() else []

    # -- running claude outside tmux -----------------------------------------------------------
    def run_claude(self, args: Sequence[str], timeout: float = 90.0,
                   cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``claude ARGS`` (print mode, ``mcp add`` …) to completion; killed on timeout."""
        return subprocess.run([str(self.claude), *args], cwd=cwd or self.workdir, env=self.env,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def fork_run(self, source: Path) -> subprocess.CompletedProcess[str]:
        """``tl-rebuild fork --json`` of ``source`` into the project folder (no runtime
        config), however it ends."""
        env = {k: v for k, v in self.env.items() if k != "THREADLINE_CONFIG"}
        tl_rebuild = Path(sys.executable).with_name("tl-rebuild")
        return subprocess.run([str(tl_rebuild), "fork", "--transcript", str(source), "--into",
                               str(self.project_dir), "--json"], env=env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)

    def fork(self, source: Path) -> dict[str, Any]:
        """The JSON result of :meth:`fork_run`, after asserting it succeeded."""
        done = self.fork_run(source)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def resume_sees(self, fake_api: Any, session: str) -> str:
        """``claude -p --resume SESSION NONCE`` in the work dir (asserted to load the session);
        the text of the first request that carried the nonce to the fake Messages API."""
        nonce = f"next-{uuid.uuid4().hex[:8]}"
        done = self.run_claude(["-p", "--resume", session, nonce], timeout=120)
        assert NO_CONVERSATION not in done.stdout + done.stderr, done.stdout + done.stderr
        assert done.returncode == 0, done.stderr
        text: str = fake_api.wait_for_text(nonce, timeout=30, session_id=session).joined()
        return text

    def resume_both(self, fake_api: Any, source: Path,
                    session: str) -> tuple[str, dict[str, Any], str]:
        """The source resumed (the oracle) and its fork resumed: what the model got each time
        (:meth:`resume_sees`), with the fork's JSON result between."""
        before = self.resume_sees(fake_api, session)
        result = self.fork(source)
        return before, result, self.resume_sees(fake_api, result["new_session_id"])

    # -- channel and hook evidence ------------------------------------------------------------
    def push_channel(self, text: str) -> str:
        """Spool ``text`` atomically for the channel server to push; return the file name."""
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:6]}.txt"
        temp = self.spool / f".{name}.tmp"
        temp.write_text(text, encoding="utf-8")
        os.rename(temp, self.spool / name)
        return name

    def channel_events(self, event: str | None = None) -> list[dict[str, Any]]:
        return [e for e in read_jsonl(self.channel_log) if event is None or e.get("event") == event]

    def replies(self) -> list[dict[str, Any]]:
        return read_jsonl(self.replies_path)

    def stop_hook_calls(self) -> list[dict[str, Any]]:
        return read_jsonl(self.hook_log)


def write_user_config(machine: Machine) -> None:
    """Seed ``.claude.json`` with the onboarding state (before claude first runs)."""
    machine.user_config.parent.mkdir(parents=True, exist_ok=True)
    machine.user_config.write_text(json.dumps(onboarding_state(machine.workdir), indent=2))


def write_settings(machine: Machine, *, recording_hook: bool = True,
                   allow: Sequence[str] = ALLOWED_TOOLS) -> None:
    """Write ``settings.json``: permission rules and (optionally) the recording Stop hook."""
    # Auto mode off: 2.1.328's default "auto" mode shows a classifier-billing dialog on the
    # first tool call when the API is not Anthropic's, and with "default" mode it offers
    # "Make auto mode your default?" now and then. The allow rules cover our tools.
    settings: dict[str, Any] = {"permissions": {
        "allow": list(allow), "defaultMode": "default", "disableAutoMode": "disable"}}
    if recording_hook:
        script = machine.root / "record_stop_hook.py"
        script.write_text(RECORDING_HOOK.format(python=sys.executable, log=str(machine.hook_log)))
        script.chmod(0o700)
        settings["hooks"] = {"Stop": [{"hooks": [
            {"type": "command", "command": shlex.quote(str(script)), "timeout": 10}]}]}
    machine.claude_dir.mkdir(parents=True, exist_ok=True)
    machine.settings_path.write_text(json.dumps(settings, indent=2))


def channel_argv(machine: Machine, *extra: str, tag: str = "") -> list[str]:
    """The test channel server's argv (``tag``: its own spool/log/replies files)."""
    spool = machine.spool if not tag else machine.root / f"spool-{tag}"
    suffix = f"-{tag}" if tag else ""
    return [sys.executable, str(CHANNEL_SERVER), "--spool", str(spool),
            "--replies", str(machine.root / f"replies{suffix}.jsonl"),
            "--log", str(machine.root / f"channel{suffix}.jsonl"), *extra]


def register_channel(machine: Machine, name: str = CHANNEL_NAME) -> None:
    """Register the test channel server with the real ``claude mcp add`` (no name in argv)."""
    register_mcp(machine, name, channel_argv(machine))


def register_wrapped_channel(machine: Machine, name: str, tag: str) -> Path:
    """Register a channel started through a wrapper shell script that ``exec``s the server.

    The registration is ``SCRIPT --spool …``: after the exec, no process shows the script or
    the registration name in its argv. Returns the script path.
    """
    argv = channel_argv(machine, tag=tag)
    script = machine.root / "bin" / "start-bridge"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\n# a typical wrapper: set up, then hand over\n"
                      f"cd {shlex.quote(str(machine.root))} || exit 1\n"
                      f"exec {shlex.quote(argv[0])} {shlex.quote(argv[1])} \"$@\"\n")
    script.chmod(0o755)
    register_mcp(machine, name, [str(script), *argv[2:]])
    return script


def register_mcp(machine: Machine, name: str, argv: Sequence[str]) -> None:
    """``claude mcp add --transport stdio --scope user NAME -- ARGV`` through the real CLI."""
    done = machine.run_claude(["mcp", "add", "--transport", "stdio", "--scope", "user", name,
                               "--", *argv], timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"claude mcp add {name} failed rc={done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()}")


def install_threadline(machine: Machine, pane: ClaudePane, root: Path,
                       rebuild: dict[str, Any] | None = None,
                       mcp_name: str | None = None) -> Path:
    """Install the product the operator's way: a host profile and a real ``tl-provision apply``.

    apply introspects the live pane (run claude with its launch argv first), merges the Stop
    hook into settings.json, registers ``tl-rebuild mcp`` through the real CLI and renders the
    config. Returns the config path. Restart claude afterwards: hooks are read at start.
    """
    import pwd

    import yaml

    from provision import engine
    from provision.cli import apply_tasks
    from provision.host import LocalHost
    from provision.profile import load_profile
    from provision.result import Context

    profile: dict[str, Any] = {
        "host": "e2e-box", "connection": "local",
        "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(machine.home),
                   "binary": str(machine.claude),
                   **({"config_dir": machine.env["CLAUDE_CONFIG_DIR"]}
                      if "CLAUDE_CONFIG_DIR" in machine.env else {})},
        "door": {"kind": "tmux", "tmux": {"target": pane.target,
                                          "socket_name": pane.tmux.socket_name}},
        "install": {"config_path": str(root / "etc" / "config.toml"),
                    "state_dir": str(root / "state")},
    }
    if rebuild:
        profile["rebuild"] = rebuild
    if mcp_name:  # one per companion when several share this claude user
        profile["mcp"] = {"name": mcp_name}
    root.mkdir(parents=True, exist_ok=True)
    path = root / "host.yml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    loaded = load_profile(path)
    report = engine.run(apply_tasks(), LocalHost(loaded.host), Context(loaded))
    failed = [(r.task, r.message) for r in report.results if r.status == "failed"]
    if report.exit_code != 0:
        raise RuntimeError(f"tl-provision apply failed: {failed}")
    return root / "etc" / "config.toml"


def prepare_machine(root: Path, claude: Path, api_url: str, *, channel: bool = True,
                    recording_hook: bool = True, custom_config_dir: bool = False) -> Machine:
    """Build the temp user machine: onboarding state, settings, channel server registered."""
    machine = Machine(root, claude, api_url, custom_config_dir)
    write_user_config(machine)
    write_settings(machine, recording_hook=recording_hook)
    if channel:
        register_channel(machine)
    return machine


class ClaudePane:
    """Interactive claude in pane ``S:0.0`` of a private tmux server started with machine.env."""

    def __init__(self, machine: Machine, tmux: TmuxServer, session: str = "main") -> None:
        self.machine, self.tmux, self.session = machine, tmux, session
        self.target = f"{session}:0.0"
        self.pids: set[int] = set()
        self.accepted_warnings = 0

    # -- argv ------------------------------------------------------------------------------
    def launch_argv(self, *extra: str, channel: bool = True, resume: str | None = None,
                    continue_: bool = False) -> list[str]:
        argv = [str(self.machine.claude)]
        if continue_:
            argv.append("--continue")
        if resume:
            argv += ["--resume", resume]
        if channel:
            argv += list(CHANNEL_FLAGS)
        return argv + list(extra)

    def shell_command(self, argv: Sequence[str]) -> str:
        """The pane command: ``cd WORKDIR && exec ARGV`` (exec: the pane pid is claude's pid)."""
        return f"cd {shlex.quote(str(self.machine.workdir))} && exec {shlex.join(argv)}"

    # -- lifecycle -------------------------------------------------------------------------
    @staticmethod
    def expected_session(argv: Sequence[str]) -> str | None:
        """The session a ``--resume X`` argv names (None: a new one, or ``--continue``).

        ``--continue`` is not guessed here (which session it picks is what tests check);
        readiness waits for the record's final state instead (``wait_ready``).
        """
        args = list(argv)
        if "--resume" in args:
            return args[args.index("--resume") + 1]
        return None

    def start(self, argv: Sequence[str], timeout: float = 60.0) -> str:
        """Start claude in the pane, accept the channel warning, wait until it is ready.

        Returns the session id the running process reports. The tmux server is started here with
        the machine's environment when it is not running yet.
        """
        expected = self.expected_session(argv)
        subprocess.run(
            ["tmux", "-L", self.tmux.socket_name, "new-session", "-d", "-s", self.session,
             "-x", "200", "-y", "50", "-c", str(self.machine.workdir), self.shell_command(argv),
             ";", "set-option", "-t", self.session, "remain-on-exit", "on"],
            env=self.machine.env, check=True, capture_output=True, timeout=15,
            stdin=subprocess.DEVNULL)
        return self.wait_ready(channel=CHANNEL_FLAGS[0] in argv, expected=expected,
                               timeout=timeout)

    def respawn(self, argv: Sequence[str], timeout: float = 60.0) -> str:
        """Replace the pane's process (``respawn-pane -k``) and wait until the new one is ready."""
        expected = self.expected_session(argv)
        self.tmux.cmd("respawn-pane", "-k", "-t", self.target, self.shell_command(argv))
        return self.wait_ready(channel=CHANNEL_FLAGS[0] in argv, expected=expected,
                               timeout=timeout)

    def wait_ready(self, channel: bool = True, expected: str | None = None,
                   timeout: float = 60.0) -> str:
        """Accept the channel warning if shown; wait for the input box and the session record.

        ``expected``: the session id the record must name (``--resume X``), when known.
        """
        pid = self.pane_pid()
        self.pids.add(pid)
        if channel:
            self.accept_warning(timeout=timeout)

        def settled() -> dict[str, Any] | None:
            # 2.1.328 writes sessions/<pid>.json first without ``status`` (with --continue
            # naming a fresh id), then names the loaded session, then adds ``status: idle``:
            # only a record with a status is final.
            record = self.session_record(pid)
            if not record or not record.get("status"):
                return None
            if expected and record["sessionId"] != expected:
                return None
            return record
        record = wait_for(settled, timeout=timeout,
                          what=f"session record of claude pid {pid} (expected {expected})")
        try:
            wait_for(self._input_box_shown, timeout=timeout, what="claude's input box")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; screen:\n{self.capture()[-3000:]}") from None
        if channel:
            wait_for(lambda: self.channel_listening(pid), timeout=timeout,
                     what=f"the channel server under claude pid {pid} to listen")
        return str(record["sessionId"])  # type: ignore[index]

    def accept_warning(self, timeout: float = 30.0) -> None:
        def shown() -> bool:
            self._check_alive()
            return WARNING_TEXT in self.capture()
        wait_for(shown, timeout=timeout, what="the development-channels warning")
        self.tmux.cmd("send-keys", "-t", self.target, "Enter")
        self.accepted_warnings += 1
        wait_for(lambda: WARNING_TEXT not in self.capture(), timeout=timeout,
                 what="the warning to close")

    def close(self) -> None:
        """Kill the tmux server, then every claude and channel-server pid we saw."""
        try:
            self.pids.add(self.pane_pid())
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            pass
        self.tmux.kill()
        logs = sorted(self.machine.root.glob("channel*.jsonl"))  # tagged channels too
        channel_pids = {int(e["pid"]) for log in logs for e in read_jsonl(log)
                        if e.get("event") == "started"}
        for pid in self.pids | channel_pids:
            _terminate(pid, expect=("claude", "channel_server.py"))

    # -- facts -----------------------------------------------------------------------------
    def pane_pid(self) -> int:
        return self.tmux.pane_pid(self.target)

    def pane_dead(self) -> bool:
        return self.tmux.display(self.target, "#{pane_dead}") == "1"

    def capture(self) -> str:
        return self.tmux.capture(self.target)

    def channel_listening(self, pid: int | None = None) -> bool:
        """True when a channel server whose parent is claude ``pid`` is ready to push."""
        parent = pid or self.pane_pid()
        return any(e.get("ppid") == parent for e in self.machine.channel_events("listening"))

    def session_record(self, pid: int | None = None) -> dict[str, Any] | None:
        """``$HOME/.claude/sessions/<pid>.json`` of the pane's claude, or None when absent."""
        path = self.machine.claude_dir / "sessions" / f"{pid or self.pane_pid()}.json"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("sessionId") else None

    def session_id(self) -> str:
        """The session the pane's claude runs, once its record is final (has a ``status``)."""
        def final() -> dict[str, Any] | None:
            record = self.session_record()
            return record if record and record.get("status") else None
        record = wait_for(final, timeout=30, what="the final session record")
        return str(record["sessionId"])  # type: ignore[index]

    def transcript(self) -> Path:
        return self.machine.transcript(self.session_id())

    def wait_said(self, text: str, timeout: float = 60.0) -> None:
        """Wait until the running session's transcript holds ``text`` (e.g. a model answer)."""
        def said() -> bool:
            try:
                return text in self.transcript().read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return False
        wait_for(said, timeout=timeout, what=f"{text!r} in the transcript")

    def idle(self) -> bool:
        record = self.session_record()
        return bool(record) and record.get("status") == "idle"  # type: ignore[union-attr]

    def finish(self, said: str, timeout: float = 60.0) -> tuple[Path, str]:
        """Wait until the transcript holds ``said`` and claude is idle, close the pane; the
        transcript and the session id, for resuming it from outside."""
        self.wait_said(said, timeout=timeout)
        wait_for(self.idle, timeout=timeout, what=f"claude idle after {said!r}")
        source, session = self.transcript(), self.session_id()
        self.close()
        return source, session

    # -- typing ----------------------------------------------------------------------------
    def type_prompt(self, text: str, timeout: float = 30.0) -> None:
        """Type ``text`` into the input box, wait until the pane shows it, then press Enter."""
        self.tmux.cmd("send-keys", "-t", self.target, "-l", text)
        probe = text[-40:]
        wait_for(lambda: probe in self.capture().replace("\n", ""), timeout=timeout,
                 what=f"typed text {probe!r} to show in the pane")
        self.tmux.cmd("send-keys", "-t", self.target, "Enter")

    def type_into_field(self, text: str, tries: int = 5) -> None:
        """Type ``text`` into a dialog's text field and press Enter until the dialog takes it.

        Keys sent while the field is still being drawn are lost: a text that does not show
        within 2 s is cleared (C-u) and typed again, and an Enter after which the dialog is
        still open (its "Esc to cancel" hint shown) is pressed again (an extra Enter lands in
        the empty prompt box: nothing)."""
        def shown() -> bool:
            return text in self.capture().replace("\n", "")

        for _ in range(tries):
            self.tmux.cmd("send-keys", "-t", self.target, "-l", text)
            try:
                wait_for(shown, timeout=2, what=f"typed text {text!r} to show in the pane")
                break
            except AssertionError:
                self.tmux.cmd("send-keys", "-t", self.target, "C-u")
        else:
            raise AssertionError(f"{text!r} never showed in the pane:\n{self.capture()[-1500:]}")
        for _ in range(tries):
            self.tmux.cmd("send-keys", "-t", self.target, "Enter")
            try:
                wait_for(lambda: "Esc to cancel" not in self.capture(), timeout=2,
                         what="the dialog to take the text")
                return
            except AssertionError:
                continue
        raise AssertionError(f"the dialog never took {text!r}:\n{self.capture()[-1500:]}")

    def _input_box_shown(self) -> bool:
        self._check_alive()
        return bool(re.search(r"─\n❯", self.capture()))

    def _check_alive(self) -> None:
        if self.pane_dead():
            raise AssertionError(f"claude in the pane exited; screen:\n{self.capture()[-2000:]}")


def _terminate(pid: int, expect: tuple[str, ...], timeout: float = 5.0) -> None:
    """SIGTERM then SIGKILL ``pid`` if it is still alive and still one of ours (by cmdline)."""
    if not pid_alive(pid):
        return
    if not any(marker in part for part in pid_cmdline(pid) for marker in expect):
        return  # the pid was reused by something that is not ours
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)
