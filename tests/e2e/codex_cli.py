"""The real Codex CLI from npm, pinned, run offline against the fake Responses API.

``codex_bin`` (session fixture) is ``node_modules/.bin/codex`` of ``@openai/codex`` at the
version pinned in tests/fixtures/versions.py, in ``$THREADLINE_CODEX_PREFIX`` or
``<real home>/.cache/threadline/codex-<version>`` (where .ci/run installs it). Absent, the tests
skip with that reason. ``CodexHome`` is a temp ``CODEX_HOME`` whose config.toml points Codex at a
loopback fake (notes/codex-live.md §1) and ``resume`` runs
``codex exec --skip-git-repo-check resume <id> PROMPT </dev/null`` there, bounded in time.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.versions import CODEX_VERSION

RUN_TIMEOUT_SECONDS = 120


def codex_prefix() -> Path:
    override = os.environ.get("THREADLINE_CODEX_PREFIX")
    if override:
        return Path(override)
    real_home = os.environ.get("THREADLINE_TEST_REAL_HOME") or os.path.expanduser("~")
    return Path(real_home) / ".cache" / "threadline" / f"codex-{CODEX_VERSION}"


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """Absolute path of the pinned codex CLI; skips with the reason when it is not installed."""
    binary = codex_prefix() / "node_modules" / ".bin" / "codex"
    if not (binary.exists() and os.access(binary, os.X_OK)):
        pytest.skip(f"@openai/codex@{CODEX_VERSION} is not installed at {binary} "
                    "(.ci/run installs it with npm)")
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if done.stdout.split()[-1:] != [CODEX_VERSION]:
        raise RuntimeError(f"{binary} reports {done.stdout.strip()!r}, pinned is {CODEX_VERSION}")
    return binary.absolute()


@dataclass(frozen=True)
class CodexHome:
    """A temp CODEX_HOME (also HOME) and a trusted work folder, wired to ``api_url``."""

    root: Path
    work: Path
    binary: Path

    @classmethod
    def create(cls, root: Path, binary: Path, api_url: str) -> CodexHome:
        work = root / "work"
        work.mkdir(parents=True)
        (root / "sessions").mkdir()
        (root / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n\n'
            f'[model_providers.fake]\nname = "Fake"\nbase_url = "{api_url}"\n'
            'env_key = "FAKE_API_KEY"\nwire_api = "responses"\nrequest_max_retries = 0\n'
            'stream_max_retries = 0\n\n[analytics]\nenabled = false\n[feedback]\n'
            f'enabled = false\n\n[projects."{work}"]\ntrust_level = "trusted"\n',
            encoding="utf-8",
        )
        return cls(root, work, binary)

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CODEX_HOME": str(self.root),
                "HOME": str(self.root), "FAKE_API_KEY": "dummy", "LANG": "C.UTF-8"}

    def resume(self, session_id: str, prompt: str) -> subprocess.CompletedProcess[str]:
        """``codex exec --skip-git-repo-check resume <id> PROMPT </dev/null`` in the work dir."""
        return subprocess.run(
            [str(self.binary), "exec", "--skip-git-repo-check", "resume", session_id, prompt],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=self.env(),
            cwd=self.work, timeout=RUN_TIMEOUT_SECONDS,
        )
