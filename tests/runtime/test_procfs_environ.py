"""Reading a process's environment (issue 10 §5): the parser on captured bytes, the reader and
the health check's environment comparison on real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from runtime.procfs import command_pid, environ, parse_environ, value_digest
from runtime.switch import health
from tests.fixtures.tmux import wait_for


def test_environ_bytes_split_at_nul_and_the_first_equals_sign() -> None:
    data = b"HOME=/root\0CLAUDE_CONFIG_DIR=/srv/c d\0TOKEN=a=b\0EMPTY=\0junk\0"
    assert parse_environ(data) == {"HOME": "/root", "CLAUDE_CONFIG_DIR": "/srv/c d",
                                   "TOKEN": "a=b", "EMPTY": ""}


def test_a_value_digest_is_short_stable_and_not_the_value() -> None:
    digest = value_digest("sk-secret-value")
    assert digest == value_digest("sk-secret-value") != value_digest("sk-secret-valuf")
    assert digest.startswith("sha256:") and "secret" not in digest and len(digest) == 23


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    env = {"PATH": os.environ["PATH"], "CARRIED": "the value"}
    # a running process, as the health check reads it: Popen returns once execve has closed
    # its error pipe, before the kernel has set the new image's environment bounds, and
    # /proc/PID/environ read in that window is empty (seen once in 1 730 tests)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_environment_of_a_running_process_is_read_from_proc(
        child: subprocess.Popen[bytes]) -> None:
    env = environ(child.pid)
    assert env is not None and env["CARRIED"] == "the value" and "HOME" not in env


def test_the_health_check_passes_when_every_carried_value_matches(
        child: subprocess.Popen[bytes]) -> None:
    evidence: dict[str, object] = {}
    wanted = (("CARRIED", value_digest("the value")),)
    assert health._check_environment(child.pid, wanted, evidence) == []
    assert evidence["environment"] == {"CARRIED": value_digest("the value")}


def test_the_health_check_names_a_variable_lost_or_changed_by_digest_only(
        child: subprocess.Popen[bytes]) -> None:
    evidence: dict[str, object] = {}
    wanted = (("CARRIED", value_digest("another value")),
              ("CLAUDE_CONFIG_DIR", value_digest("/srv/cfg")))
    problems = health._check_environment(child.pid, wanted, evidence)
    assert len(problems) == 1 and "launch environment not carried" in problems[0]
    assert "CLAUDE_CONFIG_DIR (unset" in problems[0] and "CARRIED (sha256:" in problems[0]
    assert "another value" not in problems[0] and "the value" not in problems[0]


def test_a_shell_running_a_command_hands_over_to_its_child() -> None:
    shell = subprocess.Popen(["/bin/dash", "-c", f"X=1 {sys.executable} -c 'import time; "
                              "time.sleep(60)'; true"])
    found = 0
    try:
        found = int(wait_for(lambda: command_pid(shell.pid) != shell.pid
                             and command_pid(shell.pid), what="the shell's child"))  # type: ignore[arg-type]
        assert (environ(found) or {}).get("X") == "1"
        assert "X" not in (environ(shell.pid) or {})
    finally:
        if found:
            os.kill(found, signal.SIGKILL)
        shell.kill()
        shell.wait(timeout=10)
