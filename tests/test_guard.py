"""The suite is harmless by construction: it never points at anything it did not create."""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def test_the_real_users_claude_files_tmux_sockets_and_units_are_unchanged_so_far() -> None:
    """The same comparison runs once more after the last test (tests/conftest.py)."""
    from tests.conftest import REAL_WORLD_BEFORE, real_world_snapshot

    assert any(key.endswith("settings.json") for key in REAL_WORLD_BEFORE)
    assert "/etc/systemd/system" in REAL_WORLD_BEFORE
    assert real_world_snapshot() == REAL_WORLD_BEFORE


def test_a_switch_world_without_a_tmux_server_names_a_private_socket_nobody_serves(
    tmp_path: Path,
) -> None:
    import pytest

    from runtime.doors.base import open_door
    from runtime.errors import IdentityConflictError
    from tests.fixtures.switch_world import make_world

    config = make_world(tmp_path).config
    assert config.switch.tmux.socket_name  # never the default server
    assert config.switch.tmux.target.startswith("tl-test-")
    with pytest.raises(IdentityConflictError):
        open_door(config).identity()
