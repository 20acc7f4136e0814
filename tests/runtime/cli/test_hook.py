"""The Stop hook: always exit 0 with ``{}``, nothing heavy when idle, only its own session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.switch import ops
from tests.fixtures.switch_world import TL_REBUILD, World, make_world

HEAVY = ("jsonschema", "mcp", "jinja2", "yaml", "plumbum", "orjson", "runtime.config",
         "runtime.switch.store", "runtime.switch.worker", "subprocess", "runtime.cli.render")


def heavy_imports(setup: str, argv: list[str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``tl-rebuild ARGV`` in a fresh interpreter (after ``setup``); the result and the
    HEAVY modules it imported (``"[]"``: none). An idle hook must stay that light."""
    code = (
        f"import sys\n{setup}"
        "from runtime.cli import main\n"
        f"main({argv!r})\n"
        "heavy = [m for m in " + repr(HEAVY) + " if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    return done, done.stderr.strip()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def run_hook(args: list[str], stdin: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TL_REBUILD, "hook-stop", *args], input=stdin, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=60)


def test_nothing_pending_exits_0_prints_empty_json_and_writes_nothing(world: World) -> None:
    done = world.hook()
    assert (done.returncode, done.stdout, done.stderr) == (0, "{}\n", "")
    assert not world.state_dir.exists()


@pytest.mark.parametrize("stdin", ["", "not json", "[1,2]", '{"session_id": 5}'])
def test_any_stdin_and_no_config_still_exit_0_with_empty_json(stdin: str) -> None:
    done = run_hook([], stdin)
    assert (done.returncode, done.stdout) == (0, "{}\n")


def test_a_fifo_named_as_the_config_does_not_hang_the_hook(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    done = run_hook([], '{"session_id": "s-1"}', {"THREADLINE_CONFIG": str(fifo)})
    assert (done.returncode, done.stdout) == (0, "{}\n")


def test_config_from_the_environment_is_used_when_no_flag_is_given(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id="elsewhere")["operation_id"]
    done = run_hook([], json.dumps({"session_id": "another"}),
                    env={"THREADLINE_CONFIG": str(world.config_path)})
    assert done.returncode == 0
    assert "stop_ignored" in world.events(op_id)


def test_the_idle_path_imports_nothing_heavy(world: World) -> None:
    done, heavy = heavy_imports("import io\nsys.stdin = io.TextIOWrapper(io.BytesIO(b'{}'))\n",
                                ["hook-stop", "--config", str(world.config_path)])
    assert done.returncode == 0 and done.stdout == "{}\n"
    assert heavy == "[]"


def test_stop_from_another_session_is_ignored_with_a_timeline_entry(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)["operation_id"]
    done = world.hook(session_id="a-different-session")
    assert (done.returncode, done.stdout) == (0, "{}\n")
    op = world.store.read(op_id)
    assert op.state.value == "pending"
    ignored = [e for e in world.store.events(op_id) if e["phase"] == "stop_ignored"]
    assert ignored and ignored[0]["session_id"] == "a-different-session"
    assert ignored[0]["bound_session_id"] == world.old_session


def test_stop_with_a_transcript_outside_project_dir_fails_the_bound_operation(
    world: World, tmp_path: Path
) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id="s-9")["operation_id"]
    outside = tmp_path / "s-9.jsonl"
    outside.write_text("{}\n")
    done = world.hook(session_id="s-9", transcript=str(outside))
    assert done.returncode == 0
    op = world.store.read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert "not a session file of project_dir" in op.failure["message"]



def test_stop_with_a_transcript_that_is_a_symlink_loop_fails_the_bound_operation(
    world: World,
) -> None:
    """Python 3.11's ``resolve(strict=True)`` raises RuntimeError (not OSError) on a loop:
    it escaped the check and left the operation pending with a traceback on stderr."""
    op_id = ops.request(world.config, "x", "REBUILD", session_id="s-loop")["operation_id"]
    loop = world.config.project_dir / "s-loop.jsonl"  # type: ignore[operator]
    loop.symlink_to(loop)
    done = world.hook(session_id="s-loop", transcript=str(loop))
    assert done.returncode == 0 and "Traceback" not in done.stderr
    op = world.store.read(op_id)
    assert op.state.value == "failed" and op.failure is not None
    assert "does not exist" in op.failure["message"] or "cannot" in op.failure["message"]

def test_an_error_while_handling_is_reported_off_stdout_and_still_exits_0(world: World) -> None:
    ops.request(world.config, "x", "REBUILD")
    broken = world.config_path.read_text() + "\nunknown_key = 1\n"
    world.config_path.write_text(broken)
    done = world.hook()
    assert (done.returncode, done.stdout) == (0, "{}\n")
    assert "hook-stop: ConfigError" in done.stderr and "unknown_key" in done.stderr


def age_request(world: World, operation_id: str, hours: float) -> None:
    """Rewrite the stored record as if the request had been made ``hours`` ago."""
    import time

    path = world.store.record_path(operation_id)
    record = json.loads(path.read_text())
    then = time.time() - hours * 3600
    record["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(then))
    path.write_text(json.dumps(record))


def test_a_request_older_than_a_day_is_cancelled_as_expired_at_the_next_stop(
        world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)["operation_id"]
    age_request(world, op_id, hours=25)

    done = world.hook()

    assert (done.returncode, done.stdout) == (0, "{}\n")
    op = world.store.read(op_id)
    assert op.state.value == "cancelled" and op.fact("cancel_reason") == "expired"
    assert world.events(op_id) == ["created", "expired"]  # never scheduled, no worker
    expired = world.store.events(op_id)[-1]
    assert expired["reason"] == "expired" and expired["by"] == "stop"
    assert expired["session_id"] == world.old_session
    assert 25 * 3600 - 60 < expired["age_s"] < 25 * 3600 + 60
    assert world.store.active() is None


def test_a_request_younger_than_the_limit_is_still_scheduled_at_the_next_stop(
        world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)["operation_id"]
    age_request(world, op_id, hours=23)

    world.hook()

    assert "scheduled" in world.events(op_id) and "expired" not in world.events(op_id)


def test_a_stop_from_another_session_also_ends_an_expired_request(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id=world.old_session)["operation_id"]
    age_request(world, op_id, hours=48)

    world.hook(session_id="another-session")

    assert world.store.read(op_id).state.value == "cancelled"
    assert world.events(op_id) == ["created", "expired"]


# -- issue 11 §9: exit 0 whatever happens; the stdin read is bounded in size and time ---------
def test_a_closed_stdout_still_exits_0_without_a_traceback(world: World) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the write gets EPIPE
    try:
        done = subprocess.run([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                              input=b"{}", stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 0 and b"Traceback" not in done.stderr


def test_a_full_stdout_pipe_never_blocks_the_hook(world: World) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    try:
        done = subprocess.run([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                              input=b"{}", stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
        os.close(read_end)
    assert done.returncode == 0 and b"Traceback" not in done.stderr


def test_stdin_held_open_without_eof_is_abandoned_and_nothing_is_acted_on(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id="s-1")["operation_id"]
    hook = subprocess.Popen([TL_REBUILD, "hook-stop", "--config", str(world.config_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert hook.stdin is not None
    hook.stdin.write(b'{"session_id": "s-1", ')
    hook.stdin.flush()  # and never closed: the writer keeps the pipe open
    try:
        hook.wait(timeout=60)
        assert hook.stdout is not None and hook.stderr is not None
        out, err = hook.stdout.read(), hook.stderr.read()
    finally:
        hook.stdin.close()
    assert hook.returncode == 0 and out == b"{}\n" and b"Traceback" not in err
    assert "stdin gave no EOF" in (world.state_dir / "worker.log").read_text()
    assert world.store.read(op_id).state.value == "pending"


def test_stdin_larger_than_any_stop_payload_is_ignored(world: World) -> None:
    op_id = ops.request(world.config, "x", "REBUILD", session_id="s-1")["operation_id"]
    payload = json.dumps({"session_id": "s-1", "pad": "x" * (5 << 20)})
    done = run_hook(["--config", str(world.config_path)], payload)
    assert done.returncode == 0 and done.stdout == "{}\n"
    assert "stdin exceeds" in (world.state_dir / "worker.log").read_text()
    assert world.store.read(op_id).state.value == "pending"
