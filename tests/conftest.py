"""Suite-wide safety: every test runs harmless by construction.

Before any test (and any subprocess a test starts) the environment is rewritten so that the
suite cannot reach anything it did not create:
- HOME and CLAUDE_CONFIG_DIR point into a temp folder of this run;
- TMUX is unset and TMUX_TMPDIR points into that folder, so even a tmux call without ``-L``
  talks to a server of this run, never to the user's;
- XDG_RUNTIME_DIR is private too; ANTHROPIC_BASE_URL points at a closed loopback port.
tests/test_guard.py proves it, and at the end of the run the suite compares the things it must
never touch (the real user's claude settings and state, the default tmux socket folder, the
host's systemd unit folder) with a snapshot taken before the first test: any difference fails
the run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

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
    default tmux socket folder and the host's systemd unit folder."""
    snap: dict[str, object] = {}
    home = Path(_REAL_HOME) if _REAL_HOME else None
    files = [home / ".claude.json", home / ".claude" / "settings.json",
             home / ".claude" / "settings.local.json"] if home else []
    for path in files:
        snap[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    dirs = [Path(f"/tmp/tmux-{os.getuid()}"), Path("/etc/systemd/system")]
    if home:
        dirs += [home / ".claude" / "projects", home / ".claude" / "sessions"]
    for folder in dirs:
        snap[str(folder)] = (sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
                             if folder.is_dir() else None)
    return snap


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
    shutil.rmtree(SANDBOX, ignore_errors=True)
    after = real_world_snapshot()
    touched = [key for key in REAL_WORLD_BEFORE if REAL_WORLD_BEFORE[key] != after.get(key)]
    if touched:
        print(f"\nGUARD: the suite touched what it did not create: {touched}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
