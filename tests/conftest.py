"""Suite-wide safety: every test runs harmless by construction.

Before any test (and any subprocess a test starts) the environment is rewritten so that the
suite cannot reach anything it did not create:
- HOME and CLAUDE_CONFIG_DIR point into a temp folder of this run;
- TMUX is unset and TMUX_TMPDIR points into that folder, so even a tmux call without ``-L``
  talks to a server of this run, never to the user's;
- XDG_RUNTIME_DIR is private too; ANTHROPIC_BASE_URL points at a closed loopback port.
tests/test_guard.py proves it, and at the end of the run the suite compares the things it must
never touch (the real user's claude settings and state, the default tmux socket folder, the
host's systemd unit folder) with a snapshot taken before the first test: any change this run
could have made fails the run — a socket name it handed out or a server of its own in the
default socket folder, the user's default server gone, a ``default`` socket in its own
TMUX_TMPDIR (a tmux call without -L/-S), any change to the claude files or units. Other
processes' sockets and claude sessions elsewhere on the machine are not the suite's business
(tests/fixtures/guard.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fixtures import guard

REPO = Path(__file__).resolve().parents[1]
_REAL_HOME = os.environ.get("HOME", "")
SANDBOX = Path(tempfile.mkdtemp(prefix="threadline-tests-"))
os.environ["THREADLINE_TEST_REAL_HOME"] = _REAL_HOME
os.environ["THREADLINE_TEST_SANDBOX"] = str(SANDBOX)
for _name in ("home", "claude-config", "tmux", "xdg-runtime"):
    (SANDBOX / _name).mkdir(mode=0o700)
os.environ["HOME"] = str(SANDBOX / "home")
os.environ["CLAUDE_CONFIG_DIR"] = str(SANDBOX / "claude-config")
os.environ["TMUX_TMPDIR"] = str(SANDBOX / "tmux")
os.environ["XDG_RUNTIME_DIR"] = str(SANDBOX / "xdg-runtime")
os.environ.pop("TMUX", None)
os.environ.pop("TMUX_PANE", None)
os.environ["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"  # discard port: nothing answers
os.environ["ANTHROPIC_API_KEY"] = "sk-ant-test-dummy-key-not-real-000000"
os.environ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
os.environ["DISABLE_AUTOUPDATER"] = "1"
os.environ.pop("THREADLINE_CONFIG", None)


def real_world_snapshot() -> dict[str, object]:
    """Digests and listings of what no test may touch: the real HOME's claude files, the
    default tmux socket folder (with the server behind each socket) and the host's systemd unit
    folder (tests/fixtures/guard.py)."""
    return guard.snapshot(guard.Places.real(_REAL_HOME))


def this_run(session: pytest.Session | None = None) -> guard.Run:
    """This run's roots (the sandbox, pytest's base temp folder) and its tmux socket names."""
    roots = [str(SANDBOX)]
    factory = getattr(session.config, "_tmp_path_factory", None) if session else None
    if factory is not None:  # pytest's own object: tmp_path folders live under its base
        roots.append(str(factory.getbasetemp()))
    return guard.Run(tuple(roots), frozenset(guard.SUITE_SOCKET_NAMES))


REAL_WORLD_BEFORE = real_world_snapshot()


def corpus_dir() -> Path | None:
    """The shared corpus of real transcripts, or None when this checkout has none beside it."""
    override = os.environ.get("THREADLINE_CORPUS")
    candidate = Path(override) if override else REPO.parent / "shared" / "corpus"
    return candidate if candidate.is_dir() else None


@pytest.fixture
def corpus() -> Path:
    """Path of ../shared/corpus; skips with the reason when it is absent."""
    found = corpus_dir()
    if found is None:
        pytest.skip("shared corpus not found beside the checkout (../shared/corpus)")
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    touched = guard.sandbox_findings(os.environ["TMUX_TMPDIR"])
    shutil.rmtree(SANDBOX, ignore_errors=True)
    touched += guard.findings(REAL_WORLD_BEFORE, real_world_snapshot(), this_run(session))
    if touched:
        print(f"\nGUARD: the suite touched what it did not create: {touched}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
