# ruff: noqa: F811 - fixtures are imported by name and injected as parameters
"""``tl-rebuild restart``: a restart ends ready, or fails with one line naming what is missing.

systemd: a real systemd 252 (PID 1 in private namespaces) runs the unit the way claude has to
run under systemd — inside tmux (``Type=forking``), through tl-launch — with a stand-in claude
that shows the development-channels warning on every start and waits for Enter. tmux: the
stand-in world on a private tmux server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.agents.claude import channel_flags
from runtime.doors.kind import DoorKind
from runtime.doors.pointer import write_pointer
from runtime.doors.tmux import TmuxDoor
from runtime.switch.health import Expectation
from runtime.switch.restart import restart
from tests.fixtures.standin_claude import (
    claude_json_path,
    project_dir_for,
    register_server,
    sleeper_argv,
    write_transcript,
)
from tests.fixtures.switch_world import CHANNEL, STANDIN, TL_REBUILD, TURNS, tmux_world, toml_value
from tests.fixtures.systemd_sandbox import SystemdSandbox, systemd_sandbox  # noqa: F401
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401

UNIT = "claude-companion.service"
SOCKET = "threadline"


def tl_launch() -> str:
    return str(Path(sys.executable).with_name("tl-launch"))


def tmux_unit(sandbox: SystemdSandbox, terminal: bool = True) -> tuple[Path, str]:
    """The unit of HANDOFF §7 (claude in tmux, started through tl-launch); returns the config
    path and the session the pointer names."""
    share = sandbox.share
    work, cfg, tmux_dir = share / "srv" / "app", share / "cfg", share / "tmux"
    for folder in (work, tmux_dir):
        folder.mkdir(parents=True)
    tmux_dir.chmod(0o700)
    project = project_dir_for(str(work), str(cfg))
    # registered where the unit's claude reads it (CLAUDE_CONFIG_DIR): it starts the server
    register_server(cfg / ".claude.json", "companion", sleeper_argv("unit"))
    old = str(uuid.uuid4())
    write_transcript(project / f"{old}.jsonl", old, str(work), TURNS)
    pointer = share / "session.pointer"
    write_pointer(pointer, old)
    claude = share / "claude"
    claude.write_text(f"#!/bin/sh\nexec {sys.executable} {STANDIN} \"$@\"\n")
    claude.chmod(0o755)
    config = share / "threadline.toml"
    config.write_text("\n".join([
        f"project_dir = {toml_value(str(project))}",
        f"workdir = {toml_value(str(work))}",
        f"state_dir = {toml_value(str(share / 'state'))}",
        "[switch]", 'door = "systemd"',
        f"channel_flags = {toml_value(list(CHANNEL))}",
        'expected_channel_servers = ["companion"]',
        "healthcheck_seconds = 2.0",
        "[switch.systemd]", f"unit = {toml_value(UNIT)}",
        f"pointer_path = {toml_value(str(pointer))}",
        *(["[switch.tmux]", 'target = "claude:0.0"', f"socket_name = {toml_value(SOCKET)}"]
          if terminal else []),
    ]) + "\n")
    inner = f"{tl_launch()} --pointer {pointer} -- {claude} --continue {' '.join(CHANNEL)}"
    sandbox.write_unit(UNIT, (
        "[Unit]\nDescription=claude in tmux, started through tl-launch\n[Service]\n"
        "Type=forking\n"
        f"WorkingDirectory={work}\n"
        f'Environment="CLAUDE_CONFIG_DIR={cfg}" "HOME={share}/home" "TMUX_TMPDIR={tmux_dir}"\n'
        f'Environment="STANDIN_RECORD={share}/standin.jsonl" STANDIN_DEV_WARNING=1\n'
        f'ExecStart=/usr/bin/tmux -L {SOCKET} new-session -d -s claude -x 200 -y 50 "{inner}"\n'
        f"ExecStop=/usr/bin/tmux -L {SOCKET} kill-server\n"
    ))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    return config, old


def restart_in(sandbox: SystemdSandbox, config: Path, session: str) -> subprocess.CompletedProcess:
    tmux_dir = sandbox.share / "tmux"
    return sandbox.exec("env", f"TMUX_TMPDIR={tmux_dir}", TL_REBUILD, "restart",
                        "--session", session, "--config", str(config), timeout=120)


def starts(sandbox: SystemdSandbox) -> list[dict[str, object]]:
    path = sandbox.share / "standin.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [r for r in rows if r["event"] in ("start", "warning_accepted")]


@pytest.mark.real_systemd
def test_a_systemd_door_restart_ends_ready_with_the_warning_answered_in_the_units_tmux(
    systemd_sandbox: SystemdSandbox,
) -> None:
    sandbox = systemd_sandbox
    config, old = tmux_unit(sandbox)
    wait_for(lambda: starts(sandbox), what="the unit's claude to start")
    first_main = sandbox.main_pid(UNIT)

    done = restart_in(sandbox, config, old)

    assert done.returncode == 0, (done.stdout, done.stderr, sandbox.console()[-2000:])
    assert done.stdout.startswith(f"ready: session {old} (pid ")
    assert "warnings answered: 1" in done.stdout and "channel servers up: companion" in done.stdout
    assert sandbox.main_pid(UNIT) not in (0, first_main)
    events = [e["event"] for e in starts(sandbox)]
    assert events[-2:] == ["start", "warning_accepted"]  # the restart's start, answered
    assert [e for e in starts(sandbox) if e["event"] == "start"][-1]["argv"] == [
        "--resume", old, *CHANNEL]
    screen = sandbox.exec("env", f"TMUX_TMPDIR={sandbox.share / 'tmux'}", "tmux", "-L", SOCKET,
                          "capture-pane", "-p", "-t", "claude:0.0").stdout
    assert "standin claude ready" in screen


@pytest.mark.real_systemd
def test_a_systemd_door_restart_without_a_terminal_refuses_before_restarting_anything(
    systemd_sandbox: SystemdSandbox,
) -> None:
    sandbox = systemd_sandbox
    config, old = tmux_unit(sandbox, terminal=False)
    wait_for(lambda: starts(sandbox), what="the unit's claude to start")
    main_before = sandbox.main_pid(UNIT)

    done = restart_in(sandbox, config, old)

    assert done.returncode == 1, done.stdout
    assert done.stderr == (
        f"tl-rebuild: error: claude in unit {UNIT!r} starts with "
        "--dangerously-load-development-channels and would wait at its warning after a "
        "restart: the systemd door has no terminal to answer it (run claude in tmux inside "
        "the unit and set switch.tmux.target; HANDOFF §7)\n")
    assert sandbox.main_pid(UNIT) == main_before


@pytest.mark.real_tmux
def test_a_tmux_restart_whose_channel_server_is_missing_fails_naming_it(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    world = tmux_world(tmp_path, tmux_server, servers=("companion", "mail"),
                       activation_timeout=4.0)
    world.start_pane(tmux_server)
    # "mail" stays registered, but its program is gone (uninstalled): claude cannot start it
    register_server(claude_json_path(world.env), "mail", [str(tmp_path / "gone" / "mail-mcp")])
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout
    assert done.stderr == ("tl-rebuild: error: claude restarted through the tmux door is not "
                           "ready: channel server(s) not running: mail (no process of its "
                           "registration below the new claude yet) (after 4s)\n")


@pytest.mark.real_tmux
def test_a_restart_whose_server_starts_after_the_health_window_still_ends_ready(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """A slow machine is not a failed restart: readiness is evidence, not a fixed wait (the
    channel server comes up 2.5 s after claude, the health window is 1 s)."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",), healthcheck=1.0)
    world.start_pane(tmux_server, extra_env={"STANDIN_SERVER_DELAY": "2.5"})
    before = tmux_server.pane_pid(world.target)
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    after = tmux_server.pane_pid(world.target)
    assert after != before
    assert done.stdout.startswith(f"ready: session {world.old_session} (pid {after}), ")
    assert done.stdout.endswith("channel servers up: companion\n")


@pytest.mark.real_tmux
def test_a_restart_whose_server_exits_soon_after_ready_fails_naming_it(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """Ready is not the end of the look: a channel server that exits within the health window
    fails the restart (the watch of runtime.switch.activation)."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",), healthcheck=6.0)
    world.start_pane(tmux_server)
    register_server(claude_json_path(world.env), "companion",
                    [sys.executable, "-c", "import time; time.sleep(2.0)", "--role", "channel"])
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("tl-rebuild: error: claude restarted through the tmux door is "
                                  "not ready: channel server(s) not running: companion (started "
                                  "as pid "), done.stderr
    assert done.stderr.endswith(", then exited) (within 6s of being ready)\n"), done.stderr


class BlindDoor:
    """The tmux door seen without a terminal, as a systemd unit running claude under
    ``script`` is: identity and pid, but no screen and no key to press."""

    def __init__(self, door: TmuxDoor) -> None:
        self.door = door
        self.name = DoorKind.SYSTEMD

    def identity(self) -> str:
        return self.door.identity()

    def process_pid(self, identity: str) -> int | None:
        return self.door.process_pid(identity)

    def screen(self) -> str:
        return ""

    def switch(self, session_id: str, resume_argv: Sequence[str], workdir: Path) -> None:
        self.door.switch(session_id, resume_argv, workdir)

    def confirm(self) -> bool:
        return False

    def settle(self) -> None:
        self.door.settle()


@pytest.mark.real_tmux
def test_a_restart_left_at_the_unanswered_warning_fails_on_the_missing_session_record(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    world = tmux_world(tmp_path, tmux_server)
    world.start_pane(tmux_server, extra_env={"STANDIN_DEV_WARNING": "1"})
    config = world.config
    door = BlindDoor(TmuxDoor(world.target, tmux_server.socket_name))
    previous = door.identity()
    want = Expectation(session_id=world.old_session, previous_identity=previous,
                       channel_flags=channel_flags(CHANNEL), workdir=config.workdir,
                       window=0.5)
    argv = [sys.executable, str(STANDIN), "--resume", world.old_session, *CHANNEL]

    report = restart(door, want, argv, world.workdir, world.project_dir.parent.parent,
                     stable=0.2, timeout=3.0)

    pid = tmux_server.pane_pid(world.target)
    assert not report.ok
    assert report.reason.startswith(f"claude pid {pid} wrote no session record ")
    assert report.reason.endswith("(claude writes it only once the development-channels "
                                  "warning is answered: it may be waiting there, deaf) "
                                  "(after 3s)")
    assert "I am using this for local development" in tmux_server.capture(world.target)


def test_a_session_that_is_no_session_id_is_refused_before_anything_is_stopped(
    tmp_path: Path,
) -> None:
    """``restart --session ../x`` probed a path outside project_dir and, had it existed,
    would have stopped claude to resume a name that is no session."""
    from runtime.switch.restart import missing_transcript

    project = tmp_path / "proj"
    project.mkdir()
    (tmp_path / "x.jsonl").write_text("{}\n")
    for bad in ("../x", "", "a b", "a\nb", "s-1\n"):
        why = missing_transcript(project, bad)
        assert why is not None and "is not a session id" in why
    (project / "s-1.jsonl").write_text("{}\n")
    assert missing_transcript(project, "s-1") is None


@pytest.mark.real_tmux
def test_a_tmux_restart_whose_target_drifted_onto_a_users_shell_refuses_and_keeps_the_shell(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """With ``renumber-windows on`` an index target (``claude:1``) moves onto the next window
    when one before it closes: here the user's interactive shell. ``restart`` respawned that
    pane with claude — killing the shell and whatever it ran; it is refused now, naming what
    runs there, and the shell and the claude window are left as they were."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",), target="claude:1.0")
    world.start_pane(tmux_server)
    claude_pid = tmux_server.pane_pid("claude:0.0")
    tmux_server.cmd("new-window", "-t", "claude:1", "-c", str(tmp_path),
                    "bash --norc --noprofile -i")
    shell_pid = tmux_server.pane_pid("claude:1.0")
    wait_for(lambda: "$" in tmux_server.capture("claude:1.0") or "#" in tmux_server.capture(
        "claude:1.0"), what="the user's shell prompt")
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(
        f"tl-rebuild: error: tmux pane 'claude:1.0' does not run claude (pid {shell_pid} runs "
        f"'bash --norc --noprofile -i' and no claude runs below it); nothing was restarted"), \
        done.stderr
    assert tmux_server.pane_pid("claude:1.0") == shell_pid
    assert tmux_server.pane_pid("claude:0.0") == claude_pid
    assert world.starts() and len(world.starts()) == 1  # the stand-in never started again


@pytest.mark.real_tmux
def test_a_tmux_restart_finds_the_claude_a_wrapper_script_runs_as_its_child(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """A pane that runs a wrapper script which starts claude without ``exec`` holds the shell
    as the pane's process and claude below it: that is a claude pane, restarted as before."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",))
    wrapper = tmp_path / "run-companion"
    argv = " ".join(f"'{arg}'" for arg in world.standin_argv(world.old_session))
    wrapper.write_text(f"#!/bin/sh\n{argv}\necho claude exited\n")  # no exec: sh stays
    wrapper.chmod(0o755)
    world.target = tmux_server.new_session("claude", [str(wrapper)], cwd=str(world.workdir),
                                           env=world.env)
    world.tmux = tmux_server
    wait_for(lambda: "ready" in tmux_server.capture(world.target), what="stand-in ready")
    before = tmux_server.pane_pid(world.target)
    assert (Path(f"/proc/{before}/cmdline").read_bytes().split(b"\0")[1]
            == str(wrapper).encode())  # the pane's process is the shell, claude its child
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ready: session {world.old_session} (pid "), done.stdout


def test_a_process_named_claude_or_carrying_a_session_record_is_a_claude(tmp_path: Path) -> None:
    """``not_a_claude`` on live processes: the native claude's argv[0] ``claude``, node's
    ``cli.js`` as argv[1], and a process whose argv says nothing but which has a session
    record in the claude config dir; a plain ``sleep`` is none of them."""
    from runtime.switch.restart import not_a_claude

    config_dir = tmp_path / "cfg"
    (config_dir / "sessions").mkdir(parents=True)
    procs = [subprocess.Popen(["bash", "-c", f"exec -a {name} sleep 60"])
             for name in ("claude", "sleep")]
    script = tmp_path / "cli.js"  # node runs claude's cli.js: argv ['node', '…/cli.js', …]
    script.write_text("import time\ntime.sleep(60)\n")
    node = subprocess.Popen(["bash", "-c", f"exec -a node {sys.executable} {script} --resume x"])
    plain = subprocess.Popen(["sleep", "61"])
    try:
        for proc in (*procs, node, plain):
            wait_for(lambda p=proc: Path(f"/proc/{p.pid}/cmdline").read_bytes()[:5] != b"bash\0",
                     what="exec")
        assert not_a_claude(procs[0].pid, (), config_dir) is None
        assert not_a_claude(node.pid, (), config_dir) is None
        assert not_a_claude(procs[1].pid, (), config_dir) == (
            f"pid {procs[1].pid} runs 'sleep 60' and no claude runs below it")
        why = not_a_claude(plain.pid, (), config_dir)
        assert why is not None and why.startswith(f"pid {plain.pid} runs 'sleep 61'")
        from runtime.procfs import start_time
        (config_dir / "sessions" / f"{plain.pid}.json").write_text(json.dumps(
            {"pid": plain.pid, "sessionId": "s-1", "cwd": str(tmp_path),
             "startedAt": 0, "procStart": str(start_time(plain.pid))}))
        from runtime.procfs import claude_session_record
        if claude_session_record(config_dir, plain.pid) is None:
            pytest.fail("the hand-made session record is not one claude_session_record reads")
        assert not_a_claude(plain.pid, (), config_dir) is None
    finally:
        for proc in (*procs, node, plain):
            proc.kill()
            proc.wait()


@pytest.mark.real_tmux
def test_a_tmux_restart_refuses_a_dead_pane_in_which_no_claude_ran(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """A user with ``remain-on-exit on`` in tmux.conf keeps every pane whose program exited.
    When the index target drifted onto such a pane that ran a shell, ``restart`` refuses,
    naming how it was started, and leaves it as it is: what a dead shell or script would
    start again is not known, and the claude window is not touched."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",), target="claude:1.0")
    world.start_pane(tmux_server)
    claude_pid = tmux_server.pane_pid("claude:0.0")
    tmux_server.cmd("set-option", "-g", "remain-on-exit", "on")
    tmux_server.cmd("new-window", "-t", "claude:1", "-c", str(tmp_path),
                    "bash --norc --noprofile -c 'exit 3'")
    wait_for(lambda: tmux_server.display("claude:1.0", "#{pane_dead}") == "1",
             what="the shell's pane dead")
    dead_pid = tmux_server.pane_pid("claude:1.0")
    done = subprocess.run([TL_REBUILD, "restart", "--session", world.old_session, "--config",
                           str(world.config_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(
        f"tl-rebuild: error: tmux pane 'claude:1.0' is dead and was not this companion's "
        f"claude (pid "
        f"{dead_pid} exited; the pane was started as "
        f"\"bash --norc --noprofile -c 'exit 3'\"); nothing was restarted"), done.stderr
    assert tmux_server.display("claude:1.0", "#{pane_dead} #{pane_pid}") == f"1 {dead_pid}"
    assert tmux_server.pane_pid("claude:0.0") == claude_pid
    assert len(world.starts()) == 1  # the stand-in never started again


@pytest.mark.parametrize(("command", "claude_ran"), [
    # as tmux 3.3a shows them: a user's shell string (one quoted word), a switch's respawn,
    # claude run by node, the stand-in of these tests (launched like resume_argv)
    ('"claude --continue --channels plugin:telegram@claude-plugins-official"', True),
    ('env CLAUDE_CONFIG_DIR=/home/claude/.claude /usr/local/bin/claude --resume abc', True),
    ("/usr/bin/node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume abc", True),
    (f"{sys.executable} {STANDIN} --resume abc {' '.join(CHANNEL)}", True),
    ('"bash --norc"', False),
    ("/home/claude/bin/start-companion", False),  # a wrapper script: what it ran is not known
    ('"claude --continue && echo done"', False),
])
def test_a_dead_pane_is_a_claudes_by_its_start_command(command: str, claude_ran: bool) -> None:
    from runtime.doors.tmux import DeadPane
    from runtime.doors.tmux_text import parse_start_command
    from runtime.switch.restart import dead_not_a_claude

    resume = [sys.executable, str(STANDIN), "--resume", "{session_id}", *CHANNEL]
    dead = DeadPane("4242", command, *parse_start_command(command))
    why = dead_not_a_claude(dead, resume)
    assert (why is None) is claude_ran, why
    if why is not None:
        assert why.startswith("pid 4242 exited; the pane was started as "), why


def test_a_dead_claude_that_resumed_another_companions_session_is_not_revived(
        tmp_path: Path) -> None:
    """Two companions on one tmux server: an index target that drifted onto the other's dead
    claude would restart it on this companion's session. A dead claude whose ``--resume``
    names a session without a transcript in this config's project folder is refused."""
    from runtime.doors.tmux import DeadPane
    from runtime.doors.tmux_text import parse_start_command
    from runtime.switch.restart import dead_not_a_claude

    project = tmp_path / "projects" / "-srv-a"
    project.mkdir(parents=True)
    (project / "0f6f8b1e-5d7a-4c55-9a7e-2b2f3c4d5e6f.jsonl").write_text("{}\n")
    ours, theirs = "0f6f8b1e-5d7a-4c55-9a7e-2b2f3c4d5e6f", "9a1b2c3d-0000-4000-8000-00000000000b"
    resume = ["claude", "--resume", "{session_id}"]
    for session, refused in ((ours, False), (theirs, True)):
        command = f"claude --resume {session} --channels plugin:telegram@claude-plugins-official"
        dead = DeadPane("4242", command, *parse_start_command(command))
        why = dead_not_a_claude(dead, resume, project)
        assert (why is not None) is refused, why
    assert why == (f"pid 4242 exited; it resumed session {theirs}, which has no transcript in "
                   f"{str(project)!r} — another companion's claude?")


def test_a_restart_with_a_codex_config_is_refused_naming_codex_resume(tmp_path: Path) -> None:
    """``restart`` starts claude (its transcript check, its argv, its session record); with a
    Codex config it said a claude transcript was missing. It refuses in one line instead,
    naming what resumes a codex thread, before anything is looked at or stopped."""
    home = tmp_path / "codex"
    (home / "sessions").mkdir(parents=True)
    config = tmp_path / "codex.toml"
    thread = "019a0000-0000-7000-8000-000000000001"
    config.write_text("\n".join([
        'agent = "codex"', f"codex_home = {toml_value(str(home))}",
        f"project_dir = {toml_value(str(home / 'sessions'))}",
        f"state_dir = {toml_value(str(tmp_path / 'state'))}", "[switch]", 'door = "tmux"',
        f"resume_argv = {toml_value(['codex', 'resume', '{session_id}'])}", "[switch.tmux]",
        'target = "no-such-session:9.9"', 'socket_name = "tl-test-no-such-socket"']) + "\n")
    done = subprocess.run([TL_REBUILD, "restart", "--session", thread, "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout
    assert done.stderr == (
        f"tl-rebuild: error: tl-rebuild restart starts claude; config {str(config)!r} is for "
        f"codex (agent = 'codex'): resume the thread in its pane with `codex resume {thread}`; "
        f"nothing was restarted\n")


@pytest.mark.real_tmux
def test_a_restart_without_a_session_resumes_the_one_the_running_claude_records(
    tmp_path: Path, tmux_server: TmuxServer,
) -> None:
    """Without ``--session`` the session is the one the running claude's session record
    names (``<config dir>/sessions/<pid>.json``) — here launched with ``--resume``, so its
    argv agrees — and the restart resumes it."""
    world = tmux_world(tmp_path, tmux_server, servers=("companion",))
    world.start_pane(tmux_server)
    before = tmux_server.pane_pid(world.target)
    done = subprocess.run([TL_REBUILD, "restart", "--config", str(world.config_path)],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ready: session {world.old_session} (pid "), done.stdout
    assert tmux_server.pane_pid(world.target) != before
    argv = world.starts()[-1]["argv"]
    assert argv[argv.index("--resume") + 1] == world.old_session


def test_a_dead_continue_launch_names_no_session_and_the_restart_asks_for_one() -> None:
    """A dead ``claude --continue`` pane says nothing about its session (its record died with
    it): the restart asks for ``--session`` in one line instead of guessing."""
    from runtime.doors.tmux import DeadPane
    from runtime.doors.tmux_text import parse_start_command
    from runtime.errors import DoorError
    from runtime.switch.restart import Found, session_to_resume

    command = '"claude --continue --channels plugin:telegram@claude-plugins-official"'
    dead = DeadPane("4242", command, *parse_start_command(command))
    with pytest.raises(DoorError) as refused:
        session_to_resume(Found("4242", None, dead.argv, dead), None)
    assert str(refused.value) == (
        "name the session to resume: --session ID (the dead claude's start command names no "
        "session (--continue); the newest transcript of the project folder is usually it); "
        "nothing was restarted")
    resumed = 'env A=1 claude --resume 5f0c2a52-7a40-4c3e-9d0e-4c1e3a8e2b11'
    dead = DeadPane("4242", resumed, *parse_start_command(resumed))
    assert session_to_resume(Found("4242", None, dead.argv, dead), None) == \
        "5f0c2a52-7a40-4c3e-9d0e-4c1e3a8e2b11"
