# ruff: noqa: F811 - fixtures are imported by name and injected as parameters
"""What a Stop does: several companions on one host each switch only their own claude.

Two companions share one claude user (one settings.json, one projects folder): two panes on a
private tmux server, each running a stand-in claude that, like claude, runs every Stop hook of
settings.json as read at its start. Both are installed with a real ``tl-provision apply``.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from provision import engine
from provision.cli import apply_tasks
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context, Report, Status
from runtime.config import Config, load_config
from runtime.paths import encode_project_dir
from runtime.switch import ops
from runtime.switch.store import Store
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import install_stand_in
from tests.fixtures.switch_world import STANDIN
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]


@dataclass
class Companion:
    name: str
    root: Path
    workdir: Path
    profile: Path
    tmux: TmuxServer

    @property
    def target(self) -> str:
        return f"{self.name}:0.0"

    @property
    def config(self) -> Config:
        return load_config(self.root / "etc" / "config.toml")

    @property
    def store(self) -> Store:
        return Store(self.root / "state")

    def pid(self) -> int:
        return self.tmux.pane_pid(self.target)

    def type(self, line: str) -> None:
        self.tmux.cmd("send-keys", "-t", self.target, "-l", line)
        self.tmux.cmd("send-keys", "-t", self.target, "Enter")

    def apply(self, restart: bool = False, expect_ok: bool = True) -> Report:
        from provision.tasks.settings import StopHookPersists

        tasks = [StopHookPersists(pause=0.1) if t.name == "StopHookPersists" else t
                 for t in apply_tasks(restart)]
        profile = load_profile(self.profile)
        report = engine.run(tasks, LocalHost(profile.host), Context(profile))
        if expect_ok:
            assert report.exit_code == 0, [(r.task, r.message) for r in report.results
                                           if r.status is Status.FAILED]
        return report


@dataclass
class Host:
    home: Path
    a: Companion
    b: Companion

    @property
    def claude_dir(self) -> Path:
        return self.home / ".claude"

    def session_of(self, companion: Companion) -> str:
        """The session the companion's claude runs, from its sessions/<pid>.json."""
        def said() -> str | None:
            try:
                record = json.loads((self.claude_dir / "sessions" / f"{companion.pid()}.json")
                                    .read_text())
            except (OSError, ValueError):
                return None
            return record.get("sessionId")
        return str(wait_for(said, what=f"the session record of companion {companion.name}"))


@pytest.fixture
def host(tmp_path: Path, tmux_server: TmuxServer, claude_bin: Path) -> Host:
    """One claude user with two companions (a, b) in their own workdirs, panes running."""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    bin_dir.mkdir()
    # the stand-in, laid out as npm installs claude: identified by its install, not its name
    install_stand_in(bin_dir, f"#!{sys.executable}\n" + STANDIN.read_text().split("\n", 1)[1])
    companions = []
    for name in ("a", "b"):
        root, workdir = tmp_path / name, tmp_path / f"srv {name}"
        workdir.mkdir()
        (home / ".claude" / "projects" / encode_project_dir(str(workdir))).mkdir(parents=True)
        root.mkdir()
        profile = root / "host.yml"
        profile.write_text(yaml.safe_dump({
            "host": f"box-{name}", "connection": "local",
            "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(home),
                       "binary": str(claude_bin), "config_dir": str(home / ".claude")},
            "door": {"kind": "tmux", "tmux": {"target": f"{name}:0.0",
                                              "socket_name": tmux_server.socket_name}},
            "install": {"config_path": str(root / "etc" / "config.toml"),
                        "state_dir": str(root / "state")},
            "mcp": {"name": f"threadline-{name}"},
        }))
        # a first start: claude --continue in a workdir without a conversation would exit
        # ("No conversation found to continue", measured on 2.1.328)
        tmux_server.new_session(name, f"PATH={bin_dir}:$PATH claude",
                                cwd=str(workdir), env={
                                    "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                                    "STANDIN_SETTINGS_HOOKS": "1",
                                    "STANDIN_RECORD": str(root / "standin.jsonl")})
        companion = Companion(name, root, workdir, profile, tmux_server)
        wait_for(lambda c=companion: "ready" in tmux_server.capture(c.target),
                 what=f"companion {name} ready")
        companions.append(companion)
    return Host(home, *companions)


def _stop_hooks(host: Host) -> list[str]:
    settings = json.loads((host.claude_dir / "settings.json").read_text())
    return [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]


def test_applying_a_second_companion_keeps_the_first_ones_stop_hook(host: Host) -> None:
    host.a.apply()
    host.b.apply()

    hooks = _stop_hooks(host)
    assert len(hooks) == 2
    assert any(str(host.a.root / "etc" / "config.toml") in h for h in hooks)
    assert any(str(host.b.root / "etc" / "config.toml") in h for h in hooks)
    again = host.a.apply()
    assert {r.task: r.status for r in again.results}["StopHook"] is Status.OK
    assert _stop_hooks(host) == hooks


def test_disabling_one_companions_hook_leaves_the_others_alone(host: Host) -> None:
    host.a.apply()
    host.b.apply()
    data = yaml.safe_load(host.a.profile.read_text())
    data["hook"] = {"enabled": False}
    host.a.profile.write_text(yaml.safe_dump(data))

    host.a.apply()

    hooks = _stop_hooks(host)
    assert len(hooks) == 1 and str(host.b.root / "etc" / "config.toml") in hooks[0]
    from provision.drift import check_drift

    for companion in (host.a, host.b):
        profile = load_profile(companion.profile)
        assert check_drift(LocalHost(profile.host), profile) == [], companion.name


def _talk(host: Host) -> str:
    """Say something in both companions (claude writes a transcript only then); a's session."""
    for companion in (host.a, host.b):
        companion.type("say hello from " + companion.name)
    for companion in (host.a, host.b):
        session = host.session_of(companion)
        wait_for(lambda c=companion, s=session: (c.config.project_dir / f"{s}.jsonl").exists(),
                 what=f"companion {companion.name}'s transcript")
    return host.session_of(host.a)


def _installed(host: Host) -> str:
    """Apply both, talk, restart both on their sessions (claude reads hooks at start); a's
    session."""
    host.a.apply()
    host.b.apply()
    session_a = _talk(host)
    pids = (host.a.pid(), host.b.pid())
    host.a.apply(restart=True)
    host.b.apply(restart=True)
    assert host.a.pid() != pids[0] and host.b.pid() != pids[1]
    wait_for(lambda: all("ready" in c.tmux.capture(c.target) for c in (host.a, host.b)),
             what="both companions restarted")
    assert host.session_of(host.a) == session_a
    return session_a


def test_restarting_a_companion_that_has_said_nothing_refuses_and_leaves_it_running(
        host: Host) -> None:
    host.a.apply()
    pid, session = host.a.pid(), host.session_of(host.a)

    report = host.a.apply(restart=True, expect_ok=False)

    failed = {r.task: r.message for r in report.results if r.status is Status.FAILED}
    assert list(failed) == ["RestartClaude"]
    assert f"session {session} has no transcript" in failed["RestartClaude"]
    assert "nothing was restarted" in failed["RestartClaude"]
    assert host.a.pid() == pid and "ready" in host.a.tmux.capture(host.a.target)


def test_a_stop_in_one_companion_switches_only_that_one(host: Host) -> None:
    session_a = _installed(host)
    op_a = ops.request(host.a.config, "a", "REBUILD", session_id=session_a)["operation_id"]
    op_b = ops.request(host.b.config, "b", "REBUILD")["operation_id"]  # unbound: any Stop
    pid_a, pid_b = host.a.pid(), host.b.pid()

    host.a.type("stop")

    wait_for(lambda: host.a.store.read(op_a).state.value == "activated", timeout=60,
             what="companion a's switch")
    assert host.a.pid() != pid_a and host.b.pid() == pid_b
    assert host.b.store.read(op_b).state.value == "pending"
    ignored = [e for e in host.b.store.events(op_b) if e["phase"] == "stop_ignored"]
    assert ignored and "another companion" in ignored[0]["reason"]

    host.b.type("stop")

    wait_for(lambda: host.b.store.read(op_b).state.value == "activated", timeout=60,
             what="companion b's switch")
    assert host.b.pid() != pid_b
    assert host.a.store.read(op_a).state.value == "activated"


def test_another_companions_request_bound_to_this_session_is_neither_run_nor_failed_here(
        host: Host) -> None:
    session_a = _installed(host)
    # a's model sees every companion's MCP tools (user scope) and asked b's by mistake
    op_b = ops.request(host.b.config, "b", "REBUILD", session_id=session_a)["operation_id"]
    pid_a, pid_b = host.a.pid(), host.b.pid()

    host.a.type("stop")

    ignored = wait_for(lambda: [e for e in host.b.store.events(op_b)
                                if e["phase"] == "stop_ignored"], what="b's hook to run")
    assert "another companion" in ignored[0]["reason"]  # type: ignore[index]
    assert host.b.store.read(op_b).state.value == "pending"
    assert (host.a.pid(), host.b.pid()) == (pid_a, pid_b)


def test_accept_of_each_companion_judges_its_own_stop_hook_entry(host: Host) -> None:
    from provision.accept import PASS, run_accept

    host.a.apply()
    host.b.apply()

    for companion in (host.a, host.b):
        profile = load_profile(companion.profile)
        report = run_accept(profile, LocalHost(profile.host), pause=0.0)
        lines = {line.name: line for line in report.lines}
        for name in ("hook in settings.json", "hook still present after a pause"):
            assert lines[name].status == PASS, (companion.name, name, lines[name].evidence)
        command = lines["hook in settings.json"].evidence["command"]
        assert str(companion.root / "etc" / "config.toml") in command
