# ruff: noqa: F811 - the tmux_server fixture is imported by name and injected as a parameter
"""The tmux door acts on exactly the configured pane of exactly the configured server, in the
surroundings a real user has: a tmux.conf with its own base indexes, renumbering, a global
``remain-on-exit``, fish or zsh as ``default-shell``, busy panes around the agent's, other
tmux servers (and a ``TMUX`` variable naming one), sessions whose names start alike.
Real tmux on private sockets."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.doors.tmux import TmuxDoor
from runtime.errors import DoorError, IdentityConflictError
from tests.fixtures.guard import claim_socket_name
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux

USER_CONF = """\
set -g base-index 1
setw -g pane-base-index 1
set -g renumber-windows on
set -g remain-on-exit on
setw -g automatic-rename on
set -g allow-rename on
set -g status on
"""

# An argv as a resume can carry it: inline JSON with an escaped backslash, a quote, words a
# shell would expand. Every word must reach the new process byte for byte.
RECORDER = ("import json, os, sys, time; open(sys.argv[1], 'w').write(json.dumps("
            "[os.getcwd(), sys.argv[2:]])); time.sleep(600)")
HOSTILE_WORDS = ['{"path": "C:\\\\tmp", "quote": "it\'s"}', "a\\'b", "$HOME", "*", "~", "a b"]


SHELLS = ["/usr/bin/fish", "/usr/bin/zsh", "/bin/dash", "/bin/bash"]  # a user's default-shell


def _user_tmux(tmux: TmuxServer, conf: Path, shell: str) -> None:
    """A user's server: their tmux.conf and shell; window 1 busy, the agent in window 2
    pane 1 beside a busy pane 2.2, window 3 busy."""
    conf.write_text(USER_CONF + f"set -g default-shell {shell}\n")
    tmux.cmd("-f", str(conf), "new-session", "-d", "-s", "work", "-x", "160", "-y", "40",
             "sleep 900")
    tmux.cmd("new-window", "-t", "=work:", "sleep 901")
    tmux.cmd("split-window", "-t", "=work:2", "sleep 902")
    tmux.cmd("new-window", "-t", "=work:", "sleep 903")


def _panes(tmux: TmuxServer) -> dict[str, str]:
    listed = tmux.cmd("list-panes", "-a", "-F", "#{pane_id} #{pane_pid}").stdout.split("\n")
    return dict(line.split(" ", 1) for line in listed if line)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_new_process_gets_its_argv_and_workdir_verbatim_whatever_the_users_shell(
    tmp_path: Path, tmux_server: TmuxServer, shell: str
) -> None:
    if not os.access(shell, os.X_OK):
        pytest.skip(f"{shell} is not installed")
    _user_tmux(tmux_server, tmp_path / "tmux.conf", shell)
    workdir = tmp_path / "my project (it's $HOME)"
    workdir.mkdir()
    out = tmp_path / "argv.json"
    before = _panes(tmux_server)
    agent = tmux_server.display("work:2.1", "#{pane_id}")

    TmuxDoor("work:2.1", tmux_server.socket_name).switch(
        "sid", [sys.executable, "-c", RECORDER, str(out), *HOSTILE_WORDS], workdir)

    wait_for(lambda: out.exists() and out.stat().st_size, what=f"the new process under {shell}",
             timeout=15)
    assert json.loads(out.read_text()) == [str(workdir), HOSTILE_WORDS]
    after = _panes(tmux_server)
    assert after[agent] != before[agent]
    assert {k: v for k, v in after.items() if k != agent} == \
        {k: v for k, v in before.items() if k != agent}


def test_a_missing_workdir_leaves_the_pane_running(tmux_server: TmuxServer,
                                                   tmp_path: Path) -> None:
    target = tmux_server.new_session("claude", "sleep 600", cwd="/")
    pid = tmux_server.pane_pid(target)
    with pytest.raises(DoorError, match="is not a directory"):
        TmuxDoor(target, tmux_server.socket_name).switch(
            "sid", ["sleep", "601"], tmp_path / "gone")
    assert tmux_server.pane_pid(target) == pid
    assert tmux_server.display(target, "#{pane_dead}") == "0"


def test_a_gone_session_is_never_found_in_another_whose_name_starts_with_it(
    tmux_server: TmuxServer
) -> None:
    tmux_server.new_session("claude", "sleep 600", cwd="/")
    notes = tmux_server.new_session("claude-notes", "sleep 601", cwd="/")
    notes_pid = tmux_server.pane_pid(notes)
    door = TmuxDoor("claude:0.0", tmux_server.socket_name)
    tmux_server.cmd("kill-session", "-t", "=claude")

    with pytest.raises(IdentityConflictError):
        door.identity()
    with pytest.raises(DoorError):
        door.switch("sid", ["sleep", "602"], Path("/"))
    assert tmux_server.pane_pid(notes) == notes_pid
    assert tmux_server.cmd("show-options", "-p", "-t", notes).stdout == ""


@pytest.fixture
def two_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[TmuxServer, TmuxServer]]:
    """The user's ``default`` server and another one, in a TMUX_TMPDIR of this test only."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    folder = Path("/tmp") / f"tl-test-{uuid.uuid4().hex[:10]}"  # short: a socket path limit
    folder.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["TMUX_TMPDIR"] = str(folder)
    monkeypatch.setenv("TMUX_TMPDIR", str(folder))
    default = TmuxServer("default", env=env)
    other = TmuxServer(claim_socket_name(f"tl-test-{uuid.uuid4().hex[:10]}"), env=env)
    try:
        yield default, other
    finally:
        default.kill()
        other.kill()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_tmux_variable_naming_another_server_never_redirects_the_default_server_door(
    two_servers: tuple[TmuxServer, TmuxServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    default, other = two_servers
    agent = default.new_session("claude", "sleep 600", cwd="/")
    bystander = other.new_session("claude", "sleep 601", cwd="/")
    other_socket = other.display(bystander, "#{socket_path}")
    bystander_pid = other.pane_pid(bystander)
    # the operator runs tl-rebuild (or the hook runs) inside a pane of the other server
    monkeypatch.setenv("TMUX", f"{other_socket},{bystander_pid},0")
    door = TmuxDoor("claude:0.0")

    assert door.identity() == str(default.pane_pid(agent))
    door.switch("sid", ["sleep", "602"], Path("/"))

    wait_for(lambda: default.display(agent, "#{pane_start_command}") == "sleep 602",
             what="the default server's pane to be respawned")
    assert other.pane_pid(bystander) == bystander_pid
    assert other.cmd("show-options", "-p", "-t", bystander).stdout == ""


def test_enter_reaches_the_warning_even_when_the_user_scrolled_the_pane_into_copy_mode(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """With ``mouse on`` a wheel turn puts the pane in copy-mode, which then takes every key
    sent to it: the Enter for claude's development-channels warning never reached claude."""
    answered = tmp_path / "answered"
    target = tmux_server.new_session(
        "claude", f"printf 'Press Enter to continue'; read x; touch {answered}; sleep 600",
        cwd="/")
    wait_for(lambda: "Press Enter" in tmux_server.capture(target), what="the prompt")
    tmux_server.cmd("copy-mode", "-t", target)
    assert tmux_server.display(target, "#{pane_in_mode}") == "1"

    assert TmuxDoor(target, tmux_server.socket_name).confirm()

    wait_for(answered.exists, what="the program to read the Enter", timeout=10)
    assert tmux_server.display(target, "#{pane_in_mode}") == "1"  # the user's scroll stays


def test_enter_goes_to_the_agents_pane_only_when_the_window_synchronizes_its_panes(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """With ``synchronize-panes on``, a key sent to one pane goes to every pane of the
    window: the Enter for claude's warning was also pressed in the user's shell beside it
    (once a second while the warning showed)."""
    target = tmux_server.new_session(
        "claude", f"read x; touch {tmp_path / 'agent'}; sleep 600", cwd="/")
    tmux_server.cmd("split-window", "-t", "=claude:0",
                    f"read x; touch {tmp_path / 'users-shell'}; sleep 600")
    tmux_server.cmd("set-option", "-w", "-t", "=claude:0", "synchronize-panes", "on")
    tmux_server.cmd("set-buffer", "-b", "mine", "the user's clipboard")
    buffers = tmux_server.cmd("list-buffers").stdout

    assert TmuxDoor(target, tmux_server.socket_name).confirm()

    wait_for((tmp_path / "agent").exists, what="the agent to read the Enter", timeout=10)
    tmux_server.cmd("send-keys", "-t", "=claude:0.1", "-l", "x")  # goes to both panes
    wait_for(lambda: "x" in tmux_server.capture("=claude:0.1"), what="the marker key")
    assert not (tmp_path / "users-shell").exists()
    assert tmux_server.cmd("list-buffers").stdout == buffers


def test_a_config_with_a_socket_path_reaches_the_server_on_that_socket_file_only(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    from runtime.config import load_config

    own = TmuxServer("", socket_path=str(tmp_path / "claude.sock"))  # tmux -S, not -L
    try:
        agent = own.new_session("claude", "sleep 600", cwd="/")
        bystander = tmux_server.new_session("claude", "sleep 601", cwd="/")  # same target
        config = tmp_path / "config.toml"
        config.write_text(f'[switch.tmux]\ntarget = "claude:0.0"\n'
                          f'socket_path = "{own.socket_path}"\n')
        door = TmuxDoor.from_config(load_config(config))
        assert door.identity() == str(own.pane_pid(agent))
        assert door.identity() != str(tmux_server.pane_pid(bystander))
    finally:
        own.kill()


def test_a_config_naming_the_tmux_server_by_name_and_by_path_is_refused(tmp_path: Path) -> None:
    from runtime.config import load_config
    from runtime.errors import ConfigError

    config = tmp_path / "config.toml"
    config.write_text('[switch.tmux]\ntarget = "claude:0.0"\nsocket_name = "work"\n'
                      'socket_path = "/run/claude.sock"\n')
    with pytest.raises(ConfigError, match=r"switch\.tmux\.socket_path: '/run/claude\.sock' "
                                          r"given together with switch\.tmux\.socket_name "):
        load_config(config)
    config.write_text('[switch.tmux]\ntarget = "claude:0.0"\nsocket_path = "claude.sock"\n')
    with pytest.raises(ConfigError, match=r"switch\.tmux\.socket_path: "):
        load_config(config)
