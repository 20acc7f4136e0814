"""A running codex TUI is identified by the thread whose writer lock it holds (issue 17).

The real Codex 0.169.0 in a private tmux against the loopback fake Responses API: the pane's
process (the npm wrapper) is identified by the thread its native child locked — the thread the
fake model saw in the ``session-id`` header of the turn — and nothing else is: a process that
merely has the lock file open, or a codex of another CODEX_HOME.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.agents import RunningFacts, codex
from runtime.procfs import codex_writer_locks
from tests.e2e.codex_cli import CodexHome, codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi, reply_text
from tests.e2e.codex_tui import CodexTui
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake
    assert fake.errors == []


def test_a_running_tui_is_identified_by_its_thread_and_only_by_it(
        tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> None:  # noqa: F811
    mine = CodexHome.create(tmp_path / "mine", codex_bin, api.url)
    theirs = CodexHome.create(tmp_path / "theirs", codex_bin, api.url)
    tui, other = CodexTui(mine, tmux_server, "mine"), CodexTui(theirs, tmux_server, "theirs")
    opener: subprocess.Popen[str] | None = None
    try:
        # a TUI started with a prompt, launched as apply requires (--no-daemon: the TUI's own
        # process holds the thread; a plain codex hands it to the shared app-server daemon)
        thread = tui.start(tui.argv("--no-daemon", "say hello"))
        try:
            wait_for(lambda: reply_text(0) in tui.capture(), timeout=60,
                     what="the first reply")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; requests the fake model had: {len(api.turns())}; "
                                 f"the pane shows:\n{tui.capture()[-1500:]}") from exc
        first = api.turns()[0]
        assert first.headers["session-id"] == thread  # the oracle: the model saw this thread
        other_thread = other.start(other.argv("--no-daemon"))
        assert other_thread != thread

        pid = tui.pane_pid()
        assert codex_writer_locks(mine.root, pid) == (thread,)
        assert codex.running_session(pid, RunningFacts(writer_locks=(thread,))) == thread
        assert codex_writer_locks(theirs.root, pid) == ()  # another home's codex: not it
        assert codex_writer_locks(mine.root, other.pane_pid()) == ()

        lock = mine.root / "thread-writer-locks" / f"{thread}.lock"
        opener = subprocess.Popen([sys.executable, "-c", "import sys; f = open(sys.argv[1]); "
                                   "print('open', flush=True); sys.stdin.read()", str(lock)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert opener.stdout is not None and opener.stdout.readline().strip() == "open"
        assert codex_writer_locks(mine.root, opener.pid) == ()  # merely has the file open
    finally:
        if opener is not None:
            opener.communicate(timeout=10)
        tui.close()
        other.close()
