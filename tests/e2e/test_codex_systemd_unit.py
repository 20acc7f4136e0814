# ruff: noqa: F811 - fixtures are imported by name and injected as parameters
"""A Codex TUI deployed as a systemd service, switched through the tmux door (issue 17).

The shape many VPS users run: a unit whose ``ExecStart`` starts a tmux server
(``Type=forking``) with the real Codex 0.169.0 TUI inside, under a non-root user
(``tlclaude``, tests/fixtures/second_user.py ``user_in_systemd_sandbox``), with no
``TMUX_TMPDIR`` (a unit's environment has none: tmux uses /tmp/tmux-<uid>/default). It runs
in a real systemd 252 (tests/fixtures/systemd_sandbox.py), whose private network namespace
holds the loopback fake Responses API too (its listening socket is made there, see
``fake_api_inside``). Threadline's systemd door is refused for Codex; such a deployment is
switched through the tmux door: the pane is respawned, the unit keeps running.

The user requests a rebuild; the next turn end (Codex's ``notify``, run inside the unit) starts
the worker, which respawns the pane with ``codex resume <new id>``. Evidence: the unit's
MainPID and NRestarts are unchanged; the pane's process is ``codex resume <new id>`` as the
user and holds the new thread's writer lock; the new thread's first request carries every
earlier utterance and no reasoning or tool item; the record says activated and no worker was
lost or recovered. When the new codex dies at start, the old thread runs again in the unit.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.switch.store import Store
from tests.e2e.codex_cli import CodexHome, codex_bin, codex_prefix  # noqa: F401 - fixture
from tests.e2e.codex_fake_api import CodexFakeApi, reply_text
from tests.e2e.codex_tui import INPUT_HINT, submit
from tests.e2e.test_codex_switch import (
    LAUNCH_OPTIONS,
    NOT_SPEECH,
    RUNNING,
    configured_resume,
    input_texts,
    wire_notify,
    write_config,
)
from tests.fixtures import sysd_recipe
from tests.fixtures.second_user import GID, NAME, UID, SandboxUser, user_in_systemd_sandbox
from tests.fixtures.switch_world import TL_REBUILD
from tests.fixtures.systemd_sandbox import SystemdSandbox, boot
from tests.fixtures.tmux import wait_for

pytestmark = [pytest.mark.real_systemd, pytest.mark.real_tmux]
UNIT = "codex.service"
TARGET = "codex:0.0"
CLONE_NEWNET = 0x40000000
POLL = 0.2


@pytest.fixture
def sandbox(codex_bin: Path) -> Iterator[SystemdSandbox]:
    """A systemd instance that also sees the pinned codex (a /tmp prefix is a share)."""
    yield from boot(extra=[codex_prefix().resolve()])


def fake_api_inside(sandbox: SystemdSandbox) -> CodexFakeApi:
    """A CodexFakeApi listening on the instance's own 127.0.0.1: made in a thread that joined
    the instance's network namespace (a socket stays in the namespace it was made in; the
    thread's move leaves the rest of this process where it was)."""
    made: dict[str, Any] = {}

    def make() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{sysd_recipe.init_pid(sandbox.name)}/ns/net", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                made["error"] = OSError(ctypes.get_errno(), "setns into the instance's net")
                return
            made["api"] = CodexFakeApi()
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            made["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=make)
    thread.start()
    thread.join(timeout=30)
    if "error" in made:
        raise made["error"]
    return made["api"]  # type: ignore[no-any-return]


class UnitCodex:
    """The user's codex.service: codex in tmux's default server of uid 4242, and the user's
    plain ``tmux`` (no TMUX_TMPDIR, as in an ssh login) to look at it and type into it."""

    def __init__(self, sandbox: SystemdSandbox, user: SandboxUser, home: CodexHome) -> None:
        self.sandbox, self.user, self.home = sandbox, user, home

    def unit_text(self, argv: list[str]) -> str:
        command = shlex.join(argv)  # tmux hands it to sh; systemd keeps it one word
        return "\n".join([
            "[Unit]", "Description=Codex in tmux", "After=network.target", "",
            "[Service]", "Type=forking", f"User={NAME}", f"Group={NAME}",
            f"WorkingDirectory={self.home.work}",
            f"Environment=CODEX_HOME={self.home.root} HOME={self.user.home} "
            "FAKE_API_KEY=dummy LANG=C.UTF-8",
            f'ExecStart=/usr/bin/tmux new-session -d -s codex "{command}"',
            "ExecStop=/usr/bin/tmux kill-server", "",
            "[Install]", "WantedBy=multi-user.target", ""])

    def tmux(self, *args: str) -> str:
        done = self.user.run("tmux", *args, timeout=15)
        return done.stdout if done.returncode == 0 else ""

    def capture(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", TARGET)

    def pane_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", TARGET, "#{pane_pid}").strip()
                   or 0)

    def type_prompt(self, text: str) -> None:
        submit(lambda *keys: self.tmux("send-keys", "-t", TARGET, *keys), self.capture, text)

    def process(self, pid: int) -> dict[str, Any]:
        """Uid, argv and the threads whose writer lock the pane's codex (or its native
        child) holds — read inside the instance, with the product's own readers."""
        probe = ("import json, os, sys\nfrom pathlib import Path\n"
                 "from runtime import procfs\n"
                 "pid, home = int(sys.argv[1]), Path(sys.argv[2])\n"
                 "cgroup = [l for l in open(f'/proc/{pid}/cgroup').read().splitlines()"
                 " if l.startswith('0::')]\n"
                 "print(json.dumps({'uid': os.stat(f'/proc/{pid}').st_uid, 'cgroup': cgroup,"
                 " 'argv': list(procfs.cmdline(procfs.command_pid(pid)) or ()),"
                 " 'threads': list(procfs.codex_writer_locks(home, pid))}))\n")
        done = self.sandbox.exec(str(Path(TL_REBUILD).with_name("python")), "-c", probe,
                                 str(pid), str(self.home.root), check=True)
        return json.loads(done.stdout)  # type: ignore[no-any-return]


def deploy(sandbox: SystemdSandbox, api: CodexFakeApi, binary: Path,
           resume_extra: tuple[str, ...] = (), socket_name: str = "",
           ) -> tuple[UnitCodex, Path, Store]:
    """The user's CODEX_HOME, codex.service started, threadline's config for the tmux door."""
    user = user_in_systemd_sandbox(sandbox, shown=[codex_prefix().resolve()])
    home = CodexHome.create(user.home / ".codex", binary, api.url)
    tl = sandbox.share / "threadline"
    tl.mkdir()
    codex = UnitCodex(sandbox, user, home)
    launch = [str(binary), "-m", "fake-model", "--cd", str(home.work), *LAUNCH_OPTIONS,
              "--no-daemon"]
    config = write_config(tl, home, socket_name,
                          configured_resume(launch) + list(resume_extra))
    wire_notify(home, config)
    for top in (user.home, tl):
        for path in (top, *top.rglob("*")):
            os.chown(path, UID, GID, follow_symlinks=False)
    sandbox.write_unit(UNIT, codex.unit_text([*launch, "please remember the blue door"]))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    return codex, config, Store(tl / "state")


def first_turns(codex: UnitCodex, api: CodexFakeApi) -> str:
    """The unit's codex answers its launch prompt; the thread it was typed in."""
    wait_for(lambda: reply_text(0) in codex.capture(), timeout=60, interval=POLL,
             what="the first reply in the unit's pane")
    return api.thread_asked("please remember the blue door")


def request_and_end_turn(codex: UnitCodex, config: Path, store: Store, thread: str) -> str:
    """``tl-rebuild request`` as the user, then one more turn end; the operation id once it
    has left its running states (on timeout: everything that says where the chain stopped)."""
    done = codex.user.run(TL_REBUILD, "request", "--reason", "context full of noise",
                          "--confirm", "REBUILD", "--session", thread, "--config", str(config),
                          "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    op_id = str(json.loads(done.stdout)["operation_id"])
    codex.type_prompt("and the number 4711")
    try:
        wait_for(lambda: store.read(op_id).state.value not in RUNNING, timeout=60,
                 interval=POLL, what="the operation to end")
    except AssertionError:
        raise AssertionError(evidence(codex, store, op_id)) from None
    return op_id


def evidence(codex: UnitCodex, store: Store, op_id: str) -> str:
    """Where the chain stopped: the record, its events, the worker's log, the pane."""
    log = Path(store.root) / "worker.log"
    op = store.read(op_id)
    return json.dumps({
        "state": op.state.value, "failure": dict(op.failure or {}),
        "events": store.events(op_id),
        "worker_log": log.read_text(errors="replace")[-3000:] if log.exists() else None,
        "pane": codex.capture()[-2000:]}, indent=1, default=str)


def worker_events(store: Store, op_id: str) -> list[str]:
    return [str(e["phase"]) for e in store.events(op_id)]


def test_a_codex_unit_in_tmux_switches_by_respawning_its_pane_and_the_unit_keeps_running(
        sandbox: SystemdSandbox, codex_bin: Path) -> None:
    with fake_api_inside(sandbox) as api:
        codex, config, store = deploy(sandbox, api, codex_bin)
        main_pid = sandbox.main_pid(UNIT)
        old = first_turns(codex, api)
        old_pane = codex.pane_pid()
        # the unit's tmux: the default server of uid 4242 in tmux's default folder
        assert codex.tmux("display-message", "-p", "#{socket_path} #{pid}").split() == [
            f"/tmp/tmux-{UID}/default", str(main_pid)]

        op_id = request_and_end_turn(codex, config, store, old)

        op = store.read(op_id)
        phases = worker_events(store, op_id)
        assert op.state.value == "activated", evidence(codex, store, op_id)
        new = str(op.fact("new_session_id"))
        assert new != old
        # the unit was not restarted: same main process (the tmux server), no restart
        assert sandbox.main_pid(UNIT) == main_pid
        assert sandbox.systemctl("show", "-p", "NRestarts,ActiveState", UNIT).split() == [
            "NRestarts=0", "ActiveState=active"]
        # the pane runs `codex resume <new id>` as the user, and writes the new thread
        pane = codex.pane_pid()
        assert pane not in (0, old_pane)
        seen = codex.process(pane)
        assert seen["uid"] == UID and seen["cgroup"] == [f"0::/system.slice/{UNIT}"], seen
        assert seen["argv"][seen["argv"].index("resume"):][:2] == ["resume", new], seen
        assert seen["threads"] == [new], seen
        # one worker, spawned by the turn end without an escape (the unit is not restarted;
        # uid 4242 may not create scopes in the system manager), ran to its end by itself:
        # not lost, killed or recovered
        wait_for(lambda: "watch_ended" in worker_events(store, op_id), timeout=30,
                 interval=POLL, what="the worker's watch to end")
        events = store.events(op_id)
        phases = [str(e["phase"]) for e in events]
        [spawned] = [e for e in events if e["phase"] == "worker_spawned"]
        assert spawned["escaped_unit"] is None and spawned["argv"][1:3] == [
            "-m", "runtime.switch.worker"], spawned
        assert phases.count("worker_started") == 1 and "recovered" not in phases, phases
        assert store.read(op_id).state.value == "activated", evidence(codex, store, op_id)
        log = (Path(store.root) / "worker.log").read_text(errors="replace")
        assert "Traceback" not in log and "Killed" not in log, log
        # the model's view: the new thread's first request carries every earlier utterance
        before = len(api.requests)
        wait_for(lambda: INPUT_HINT in codex.capture(), timeout=60, interval=POLL,
                 what="the resumed TUI's composer")
        codex.type_prompt("what did I tell you?")
        first = wait_for(lambda: next((r for r in api.requests[before:]
                                       if r.session_id == new and r.kind == "turn"), None),
                         timeout=60, interval=POLL, what="the new thread's first request")
        said = input_texts(first.body)  # type: ignore[attr-defined]
        for text in ("please remember the blue door", "and the number 4711", reply_text(0),
                     "what did I tell you?"):
            assert any(text == t for _, t in said), (text, said)
        kinds = {item.get("type") for item in first.body["input"]}  # type: ignore[attr-defined]
        assert not kinds & set(NOT_SPEECH), kinds
        assert sandbox.main_pid(UNIT) == main_pid
    assert api.errors == []


def test_a_new_codex_that_dies_at_start_rolls_the_unit_back_to_the_old_thread(
        sandbox: SystemdSandbox, codex_bin: Path) -> None:
    # the resume argv carries a setting Codex refuses at start ("Error: Model provider
    # `no-such-provider` not found", exit 1): the respawned codex dies at once
    broken = ("-c", 'model_provider="no-such-provider"')
    with fake_api_inside(sandbox) as api:
        codex, config, store = deploy(sandbox, api, codex_bin, resume_extra=broken,
                                      socket_name="default")
        main_pid = sandbox.main_pid(UNIT)
        old = first_turns(codex, api)

        op_id = request_and_end_turn(codex, config, store, old)

        op = store.read(op_id)
        phases = worker_events(store, op_id)
        assert op.state.value == "rolled_back", evidence(codex, store, op_id)
        # the new codex did start in the pane, and died there; the old thread was resumed
        assert "switched" in phases and "resumed_old" in phases, phases
        assert op.failure is not None and op.failure["code"] == "unhealthy", op.failure
        assert "the new process is gone: tmux pane 'codex:0.0' is dead" in str(
            op.failure["message"]), op.failure
        [resumed] = [e for e in store.events(op_id) if e["phase"] == "resumed_health"]
        assert resumed["ok"] is True, resumed
        # inside the unit, which was not restarted: the pane writes the old thread, as the user,
        # with the old process's own argv
        assert sandbox.main_pid(UNIT) == main_pid
        assert sandbox.systemctl("show", "-p", "NRestarts,ActiveState", UNIT).split() == [
            "NRestarts=0", "ActiveState=active"]
        seen = wait_for(lambda: (lambda s: s if s["threads"] == [old] else None)(
            codex.process(codex.pane_pid())), timeout=30, interval=POLL,
            what="the pane to write the old thread again")
        assert isinstance(seen, dict) and seen["uid"] == UID, seen
        assert "no-such-provider" not in " ".join(seen["argv"]), seen
        assert seen["argv"][seen["argv"].index("resume"):][:2] == ["resume", old], seen
    assert api.errors == []
