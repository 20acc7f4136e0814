"""The suite is harmless by construction: it never points at anything it did not create."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import guard
from tests.fixtures.tmux import wait_for

REPO = Path(__file__).resolve().parents[1]
SANDBOX = os.environ["THREADLINE_TEST_SANDBOX"]


def test_home_and_claude_config_dir_are_inside_the_test_sandbox() -> None:
    assert os.environ["HOME"].startswith(SANDBOX)
    assert os.environ["CLAUDE_CONFIG_DIR"].startswith(SANDBOX)
    assert os.path.expanduser("~").startswith(SANDBOX)


def test_tmux_cannot_reach_a_server_the_suite_did_not_create() -> None:
    assert "TMUX" not in os.environ
    assert os.environ["TMUX_TMPDIR"].startswith(SANDBOX)


def test_the_model_api_points_at_loopback_only() -> None:
    assert re.match(r"^http://127\.0\.0\.1:\d+$", os.environ["ANTHROPIC_BASE_URL"])


def test_no_test_names_a_real_home_or_default_tmux_socket() -> None:
    """No test source targets /root/.claude, the default tmux socket or a real unit by hand."""
    forbidden = [
        re.compile(r"/root/\.claude"),
        re.compile(r"/tmp/tmux-\d+/default"),
        re.compile(r"""["']tmux["']\s*,\s*["'](?!-L)(?:send-keys|respawn-pane|kill-server|kill-session)"""),
        re.compile(r"""systemctl["']\s*,\s*["'](?:restart|stop|start)["']\s*,\s*["']claude"""),
    ]
    offenders = []
    for path in (REPO / "tests").rglob("*.py"):
        if path.name == "test_guard.py":
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in forbidden:
            if pattern.search(text):
                offenders.append(f"{path.relative_to(REPO)}: {pattern.pattern}")
    assert offenders == []


def test_the_real_users_claude_files_tmux_sockets_and_units_are_unchanged_so_far(
        request: pytest.FixtureRequest) -> None:
    """The same comparison runs once more after the last test (tests/conftest.py)."""
    from tests.conftest import REAL_WORLD_BEFORE, real_world_snapshot, this_run

    assert any(key.endswith("settings.json") for key in REAL_WORLD_BEFORE)
    assert "dir:/etc/systemd/system" in REAL_WORLD_BEFORE
    assert f"tmux:/tmp/tmux-{os.getuid()}" in REAL_WORLD_BEFORE
    assert guard.findings(REAL_WORLD_BEFORE, real_world_snapshot(),
                          this_run(request.session)) == []
    assert guard.sandbox_findings(os.environ["TMUX_TMPDIR"]) == []


def test_a_switch_world_without_a_tmux_server_names_a_private_socket_nobody_serves(
    tmp_path: Path,
) -> None:
    from runtime.doors.base import open_door
    from runtime.errors import IdentityConflictError
    from tests.fixtures.switch_world import make_world

    config = make_world(tmp_path).config
    assert config.switch.tmux.socket_name  # never the default server
    assert config.switch.tmux.target.startswith("tl-test-")
    with pytest.raises(IdentityConflictError):
        open_door(config).identity()


# -- the guard itself: strict about what the run could have done, blind to everybody else ----

class Scratch:
    """A stand-in for the machine: its own "default" tmux folder and claude HOME, a run root."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="g-", dir=SANDBOX))  # short: socket paths
        self.tmpdir = self.base / "t"  # plays /tmp: tmux puts sockets in t/tmux-UID/
        self.tmpdir.mkdir()
        self.home = self.base / "h"
        (self.home / ".claude" / "sessions").mkdir(parents=True)
        (self.home / ".claude" / "projects").mkdir(parents=True)
        self.run_root = self.base / "run"
        self.run_root.mkdir()
        self.places = guard.Places(self.home, self.tmpdir / f"tmux-{os.getuid()}",
                                   self.base / "units")
        self.servers: list[tuple[list[str], dict[str, str]]] = []

    def run(self, names: set[str] | None = None) -> guard.Run:
        return guard.Run((str(self.run_root),), frozenset(names or ()))

    def start_tmux(self, name: str | None, env: dict[str, str] | None = None,
                   cwd: str = "/", tmpdir: Path | None = None) -> Path:
        """Start a real tmux server (``-L name``, or the default one) under ``tmpdir``."""
        # tmux falls back to /tmp when TMUX_TMPDIR does not exist: never start one then.
        assert (tmpdir or self.tmpdir).is_dir()
        full = {"PATH": os.environ["PATH"], "TMUX_TMPDIR": str(tmpdir or self.tmpdir),
                **(env or {})}
        base = ["tmux", *(["-L", name] if name else [])]
        subprocess.run([*base, "new-session", "-d", "-s", "g", "sleep 600"], env=full,
                       cwd=cwd, check=True, timeout=15, capture_output=True)
        self.servers.append((base, full))
        socket = Path(full["TMUX_TMPDIR"]) / f"tmux-{os.getuid()}" / (name or "default")
        wait_for(lambda: guard.socket_servers(str(socket)), timeout=15,
                 what=f"a server listening on {socket}")
        return socket

    def stop_tmux(self, socket: Path) -> None:
        for base, env in self.servers:
            if Path(env["TMUX_TMPDIR"]) / f"tmux-{os.getuid()}" / (
                    base[2] if len(base) > 1 else "default") == socket:
                subprocess.run([*base, "kill-server"], env=env, timeout=15,
                               capture_output=True)
        wait_for(lambda: not guard.socket_servers(str(socket)), timeout=15,
                 what=f"the server on {socket} to exit")

    def close(self) -> None:
        for base, env in self.servers:
            subprocess.run([*base, "kill-server"], env=env, timeout=15, capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def scratch() -> Iterator[Scratch]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it with apt)")
    world = Scratch()
    try:
        yield world
    finally:
        world.close()


def _name() -> str:
    return f"x-{uuid.uuid4().hex[:8]}"


def test_a_foreign_tmux_server_in_the_default_socket_folder_does_not_fail_the_guard(
        scratch: Scratch) -> None:
    before = guard.snapshot(scratch.places)
    scratch.start_tmux(_name(), env={"HOME": str(scratch.base / "someone")})

    assert guard.findings(before, guard.snapshot(scratch.places), scratch.run()) == []


def test_a_foreign_server_that_exits_during_the_run_does_not_fail_the_guard(
        scratch: Scratch) -> None:
    socket = scratch.start_tmux(_name())
    before = guard.snapshot(scratch.places)
    scratch.stop_tmux(socket)

    assert guard.findings(before, guard.snapshot(scratch.places), scratch.run()) == []


def test_a_socket_name_the_run_handed_out_in_the_default_folder_fails_the_guard(
        scratch: Scratch) -> None:
    name = _name()
    before = guard.snapshot(scratch.places)
    scratch.start_tmux(name)  # e.g. a worker started with TMUX_TMPDIR scrubbed from its env

    found = guard.findings(before, guard.snapshot(scratch.places), scratch.run({name}))

    assert len(found) == 1 and "a socket name this run handed out" in found[0]


def test_a_server_of_this_run_under_any_name_in_the_default_folder_fails_the_guard(
        scratch: Scratch) -> None:
    before = guard.snapshot(scratch.places)
    scratch.start_tmux(_name(), env={"HOME": str(scratch.run_root / "home")})

    found = guard.findings(before, guard.snapshot(scratch.places), scratch.run())

    assert len(found) == 1 and "of this run" in found[0]


def test_the_users_default_tmux_server_going_away_fails_the_guard(scratch: Scratch) -> None:
    socket = scratch.start_tmux(None)
    before = guard.snapshot(scratch.places)
    scratch.stop_tmux(socket)  # what a kill-server without -L and without TMUX_TMPDIR does

    found = guard.findings(before, guard.snapshot(scratch.places), scratch.run())

    assert found == [f"{scratch.places.tmux_dir}/default: the user's default tmux server is "
                     "gone or replaced"]


def test_a_tmux_call_without_a_socket_name_inside_the_sandbox_fails_the_guard(
        scratch: Scratch) -> None:
    own = scratch.run_root / "tmux"
    own.mkdir()
    assert guard.sandbox_findings(str(own)) == []

    scratch.start_tmux(None, tmpdir=own)

    assert "ran tmux without -L/-S" in guard.sandbox_findings(str(own))[0]


def test_claude_sessions_elsewhere_on_the_machine_do_not_fail_the_guard_but_ours_do(
        scratch: Scratch) -> None:
    claude = scratch.home / ".claude"
    before = guard.snapshot(scratch.places)
    (claude / "sessions" / "111.json").write_text('{"cwd": "/work/elsewhere"}')
    (claude / "projects" / "-work-elsewhere").mkdir()
    assert guard.findings(before, guard.snapshot(scratch.places), scratch.run()) == []

    (claude / "sessions" / "222.json").write_text(json.dumps({"cwd": str(scratch.run_root)}))
    (claude / "projects" / guard.encode_cwd(str(scratch.run_root / "w"))).mkdir()
    found = guard.findings(before, guard.snapshot(scratch.places), scratch.run())

    assert sorted(f.rsplit("/", 1)[1] for f in found) == sorted([
        "222.json added", guard.encode_cwd(str(scratch.run_root / "w")) + " added"])


def test_any_change_to_the_users_claude_settings_fails_the_guard(scratch: Scratch) -> None:
    settings = scratch.home / ".claude" / "settings.json"
    before = guard.snapshot(scratch.places)
    settings.write_text("{}")

    assert guard.findings(before, guard.snapshot(scratch.places), scratch.run()) == [
        f"{settings} changed"]
