"""Suite-wide safety: every test runs harmless by construction.

Before any test (and any subprocess a test starts) the environment is rewritten so that the
suite cannot reach anything it did not create:
- HOME and CLAUDE_CONFIG_DIR point into a temp folder of this run;
- TMUX is unset and TMUX_TMPDIR points into that folder, so even a tmux call without ``-L``
  talks to a server of this run, never to the user's;
- XDG_RUNTIME_DIR is private too; ANTHROPIC_BASE_URL points at a closed loopback port.
tests/test_guard.py proves it.
"""

from __future__ import annotations

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
