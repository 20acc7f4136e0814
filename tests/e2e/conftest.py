"""Fixtures of the end-to-end suite: the fake model, a prepared user machine, a claude pane.

Real-claude tests import nothing else: ``fake_api`` (a started FakeApi), ``machine`` (a temp
HOME prepared by tests/e2e/harness.py against that fake), ``resume_machine`` (the same without
channel or hook, for print-mode resumes), ``pane`` (a ClaudePane on a private
tmux server, closed — tmux killed, every claude/channel pid it saw terminated — after the test).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import ClaudePane, Machine, prepare_machine
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - pytest fixture
from tests.fixtures.tmux import TmuxServer, tmux_server  # noqa: F401 - pytest fixture


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    """A fake Messages API on 127.0.0.1, stopped after the test; a broken cue fails the test."""
    with FakeApi() as api:
        yield api
    assert api.errors == [], f"the fake API failed to answer: {api.errors}"


@pytest.fixture
def machine(tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> Machine:  # noqa: F811
    """A temp user machine: onboarding state, settings with a recording Stop hook, a channel."""
    return prepare_machine(tmp_path / "machine", claude_bin, fake_api.url)


@pytest.fixture
def resume_machine(tmp_path: Path, claude_bin: Path, fake_api: FakeApi) -> Machine:  # noqa: F811
    """A machine without channel or hook: print-mode resumes only."""
    return prepare_machine(tmp_path / "machine", claude_bin, fake_api.url, channel=False,
                           recording_hook=False)


@pytest.fixture
def pane(machine: Machine, tmux_server: TmuxServer) -> Iterator[ClaudePane]:  # noqa: F811
    """An interactive-claude pane driver (not started); closed after the test."""
    driver = ClaudePane(machine, tmux_server)
    try:
        yield driver
    finally:
        driver.close()
