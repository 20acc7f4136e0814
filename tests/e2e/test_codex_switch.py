"""Switch a running Codex TUI to its rebuilt thread (issue 17), with the real Codex 0.169.0.

A TUI in a private tmux talks to the loopback fake Responses API; Codex's ``notify`` is
``tl-rebuild hook-notify``. ``tl-rebuild request`` binds a rebuild to the TUI's thread; the
next turn end starts the worker, which rebuilds the rollout, respawns the pane with
``codex resume <new id>`` and every original option, and calls it activated once the new
process holds the new thread's writer lock. The oracle is what the model is sent: the new
thread's first request carries every utterance and no reasoning or tool item.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import procfs
from runtime.agents import codex
from runtime.paths import codex_rollout
from runtime.procfs import codex_writer_locks
from runtime.switch.store import Store
from tests.e2e.codex_cli import CodexHome, codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi, reply_text
from tests.e2e.codex_tui import CodexTui
from tests.e2e.harness import _terminate
from tests.fixtures.switch_world import TL_REBUILD, toml_value
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

PLACEHOLDER = "tlplaceholdersession0"
NOT_SPEECH = ("reasoning", "function_call", "function_call_output", "custom_tool_call",
              "local_shell_call", "web_search_call")


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake
    assert fake.errors == []


def write_config(root: Path, home: CodexHome, socket_name: str, resume: list[str]) -> Path:
    """Threadline's config for the tmux door on pane ``codex:0.0`` of tmux server
    ``socket_name`` ("": the default server, found as tmux finds it)."""
    path = root / "threadline.toml"
    path.write_text("\n".join([
        'agent = "codex"',
        f"codex_home = {toml_value(str(home.root))}",
        f"project_dir = {toml_value(str(home.root / 'sessions'))}",
        f"workdir = {toml_value(str(home.work))}",
        f"state_dir = {toml_value(str(root / 'state'))}",
        "[switch]",
        'door = "tmux"',
        f"resume_argv = {toml_value(resume)}",
        'environment = ["CODEX_HOME", "HOME", "FAKE_API_KEY"]',
        "stable_seconds = 0.3",
        "healthcheck_seconds = 1.0",
        "activation_stable_seconds = 0.5",
        "activation_timeout_seconds = 60",
        "[switch.tmux]",
        'target = "codex:0.0"',
        *([f"socket_name = {toml_value(socket_name)}"] if socket_name else []),
    ]) + "\n")
    return path


def configured_resume(launch: list[str]) -> list[str]:
    """The resume argv with its ``{session_id}`` placeholder, as the installer writes it."""
    return [t if t != PLACEHOLDER else "{session_id}"
            for t in codex.resume_argv(launch, PLACEHOLDER)]


def wire_notify(home: CodexHome, config: Path) -> None:
    """Codex's notify = tl-rebuild hook-notify (the contract the installer writes)."""
    line = "notify = " + json.dumps([TL_REBUILD, "hook-notify", "--config", str(config)])
    toml = home.root / "config.toml"
    toml.write_text(line + "\n" + toml.read_text())


def input_texts(body: dict[str, object]) -> list[tuple[str, str]]:
    found = []
    for item in body.get("input") or []:  # type: ignore[union-attr]
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                found.append((str(item.get("role")), str(part.get("text", ""))))
    return found


LAUNCH_OPTIONS = ("-c", "model_auto_compact_token_limit=900000", "-s", "danger-full-access",
                  "-a", "never")


def request_and_end_turn(tmp_path: Path, tui: CodexTui, config: Path, api: CodexFakeApi,
                         env: dict[str, str] | None = None,
                         running: tuple[str, ...] = ()) -> tuple[str, str]:
    """Start the TUI with a prompt, request a rebuild of its thread, end one more turn;
    (old thread, operation id) once the operation has left its running states."""
    tui.start([*tui.argv(*LAUNCH_OPTIONS), "please remember the blue door"],
              extra_env={"TMUX_TMPDIR": os.environ["TMUX_TMPDIR"], **(env or {})})
    wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
    old = api.thread_asked("please remember the blue door")
    return old, request_rebuild(tui, config, Store(tmp_path / "state"), old, running)


def request_rebuild(tui: CodexTui, config: Path, store: Store, thread: str,
                    running: tuple[str, ...] = ()) -> str:
    """``tl-rebuild request`` bound to ``thread``, then one more turn end; the operation id
    once the operation has left its running states."""
    done = subprocess.run([TL_REBUILD, "request", "--reason", "context full of noise",
                           "--confirm", "REBUILD", "--session", thread, "--config", str(config),
                           "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    op_id = str(json.loads(done.stdout)["operation_id"])
    tui.type_prompt("and the number 4711")
    wait_for(lambda: store.read(op_id).state.value not in (running or RUNNING), timeout=120,
             what="the operation to end")
    return op_id


RUNNING = ("pending", "scheduled", "running", "verifying", "activating", "rollback_scheduled")


def test_a_running_tui_switches_to_its_rebuilt_thread_and_rolls_back(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    config = write_config(tmp_path, home, tmux_server.socket_name,
                          configured_resume(tui.argv(*LAUNCH_OPTIONS)))
    wire_notify(home, config)
    store = Store(tmp_path / "state")
    try:
        old, op_id = request_and_end_turn(tmp_path, tui, config, api)
        op = store.read(op_id)
        phases = [e["phase"] for e in store.events(op_id)]
        assert op.state.value == "activated", (op.state.value, op.failure, phases)
        new = str(op.fact("new_session_id"))
        pid = tui.pane_pid()
        tui.pids.add(pid)
        assert codex_writer_locks(home.root, pid) == (new,)  # the pane writes the new thread

        before = len(api.requests)
        wait_for(lambda: "Ask Codex to do anything" in tui.capture(), timeout=60,
                 what="the resumed TUI's composer")
        tui.type_prompt("what did I tell you?")
        first = wait_for(lambda: next((r for r in api.requests[before:]
                                       if r.headers.get("session-id") == new), None),
                         timeout=60, what="the new thread's first request")
        said = input_texts(first.body)  # type: ignore[attr-defined]
        for text in ("please remember the blue door", "and the number 4711",
                     reply_text(0), "what did I tell you?"):
            assert any(text in t for _, t in said), (text, said)
        kinds = {item.get("type") for item in first.body["input"]}  # type: ignore[attr-defined]
        assert not kinds & set(NOT_SPEECH)
        wait_for(lambda: "watch_ended" in [e["phase"] for e in store.events(op_id)],
                 timeout=60, what="the watch to end")
        assert store.read(op_id).state.value == "activated"

        # roll back: at the new thread's next turn end the old thread runs again
        done = subprocess.run([TL_REBUILD, "rollback", "--operation", op_id, "--confirm",
                               "ROLLBACK", "--config", str(config), "--json"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        tui.type_prompt("please go back")
        wait_for(lambda: store.read(op_id).state.value not in RUNNING + ("rollback_pending",),
                 timeout=120, what="the rollback to end")
        op = store.read(op_id)
        assert op.state.value == "rolled_back", (op.state.value, op.failure)
        pid = tui.pane_pid()
        tui.pids.add(pid)
        assert codex_writer_locks(home.root, pid) == (old,)
    finally:
        tui.close()


def test_a_resume_argv_that_loses_an_option_is_refused_and_the_old_thread_resumed(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    lossy = configured_resume(tui.argv(*LAUNCH_OPTIONS[:-2]))  # without "-a never"
    config = write_config(tmp_path, home, tmux_server.socket_name, lossy)
    wire_notify(home, config)
    store = Store(tmp_path / "state")
    try:
        old, op_id = request_and_end_turn(tmp_path, tui, config, api)
        op = store.read(op_id)
        assert op.state.value == "rolled_back", (op.state.value, op.failure)
        assert "'-a never'" in str(op.failure)
        pid = tui.pane_pid()
        tui.pids.add(pid)
        wait_for(lambda: codex_writer_locks(home.root, pid) == (old,), timeout=30,
                 what="the pane to write the old thread again")
        assert "-a" in (procfs.cmdline(procfs.command_pid(pid)) or ())  # its own argv
    finally:
        tui.close()


def test_a_tui_that_forked_holds_two_threads_and_is_not_switched(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    config = write_config(tmp_path, home, tmux_server.socket_name,
                          configured_resume(tui.argv(*LAUNCH_OPTIONS)))
    wire_notify(home, config)
    store = Store(tmp_path / "state")
    try:
        tui.start([*tui.argv(*LAUNCH_OPTIONS), "please remember the blue door"],
                  extra_env={"TMUX_TMPDIR": os.environ["TMUX_TMPDIR"]})
        wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
        old = api.thread_asked("please remember the blue door")
        # the reply shows before the turn ends, and '/fork' is "disabled while a task is in
        # progress": wait for the turn's end, Codex's task_complete record in the rollout
        sessions = home.root / "sessions"
        wait_for(lambda: (lambda p: p is not None and b'"task_complete"' in p.read_bytes())(
            codex_rollout(sessions, old)), timeout=60, what="the first turn to end")
        # typed and entered like a prompt: an Enter right after the popup showed could fall
        # in codex's paste-burst window and become a newline
        tui.type_prompt("/fork", timeout=60, sent=lambda: "Fork created" in tui.capture())
        pid = tui.pane_pid()
        both = wait_for(lambda: (lambda t: t if len(t) == 2 else None)(
            codex_writer_locks(home.root, pid)), timeout=30, what="two writer locks")
        (forked,) = set(both) - {old}  # type: ignore[arg-type]
        op = store.read(request_rebuild(tui, config, store, forked))
        assert op.state.value == "failed", (op.state.value, op.failure)
        assert op.failure["code"] == "session_conflict"  # type: ignore[index]
        assert "2 threads'" in op.failure["message"]  # type: ignore[index]
        assert tui.pane_pid() == pid and codex_writer_locks(home.root, pid) == both
    finally:
        tui.close()


def test_a_worker_killed_after_the_switch_is_recovered_as_activated_from_the_lock(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    config = write_config(tmp_path, home, tmux_server.socket_name,
                          configured_resume(tui.argv(*LAUNCH_OPTIONS)))
    wire_notify(home, config)
    store = Store(tmp_path / "state")
    try:
        # codex → its notify → the worker inherit the fault: the worker dies once switched
        _, op_id = request_and_end_turn(tmp_path, tui, config, api,
                                        env={"THREADLINE_WORKER_FAULT": "kill:switched"},
                                        running=("pending", "scheduled", "running",
                                                 "verifying"))
        wait_for(lambda: "switched" in [e["phase"] for e in store.events(op_id)],
                 timeout=60, what="the switch")
        worker = store.read(op_id).worker or {}
        wait_for(lambda: not procfs.alive(int(worker["pid"]), worker.get("start_time")),
                 timeout=30, what="the killed worker to be gone")
        op = store.read(op_id)
        assert op.state.value == "activating"
        new = str(op.fact("new_session_id"))
        done = subprocess.run([TL_REBUILD, "recover", "--config", str(config), "--json"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        op = store.read(op_id)
        assert op.state.value == "activated", (op.state.value, op.failure)
        tui.pids.add(tui.pane_pid())
        assert codex_writer_locks(home.root, tui.pane_pid()) == (new,)
    finally:
        tui.close()


def test_a_tui_on_the_shared_daemon_rolls_back_naming_the_daemon_and_the_fix(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    """A plain codex (no --no-daemon, no -c) runs its thread in the shared app-server daemon
    (its child at first). The respawn orphans the daemon; the resumed TUI attaches to it and
    holds no lock in the pane, so the switch cannot be proven: rolled back, and the reason
    names the process that holds the lock and the fix."""
    home = CodexHome.create(tmp_path / "codex", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    config = write_config(tmp_path, home, tmux_server.socket_name, configured_resume(tui.argv()))
    config.write_text(config.read_text().replace("activation_timeout_seconds = 60",
                                                 "activation_timeout_seconds = 8"))
    wire_notify(home, config)
    store = Store(tmp_path / "state")
    try:
        tui.start([*tui.argv(), "please remember the blue door"],
                  extra_env={"TMUX_TMPDIR": os.environ["TMUX_TMPDIR"]})
        wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
        old = api.thread_asked("please remember the blue door")
        op = store.read(request_rebuild(tui, config, store, old))
        assert op.state.value == "rolled_back", (op.state.value, op.failure)
        message = str(op.failure["message"])  # type: ignore[index]
        assert "outside the pane holds it (" in message and "--managed-daemon" in message, message
        assert "launch codex with --no-daemon" in message
    finally:
        tui.close()
        for entry in Path("/proc").iterdir():  # the orphaned daemon: its binary is in home
            argv = procfs.cmdline(int(entry.name)) if entry.name.isdigit() else None
            if argv and argv[0].startswith(f"{home.root}/") and "app-server" in argv:
                _terminate(int(entry.name), expect=("codex",))
