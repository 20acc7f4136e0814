"""The real interactive Codex TUI (0.169.0) in a pane of a private tmux server.

``CodexTui`` starts ``codex …`` with a ``CodexHome``'s environment in pane ``NAME:0.0``
(``cd WORK && exec ARGV``: the pane pid is the npm wrapper, ``node …/.bin/codex``; its native
child does the work and takes the thread-writer lock), waits until the process holds a writer
lock, types prompts and closes everything it saw. The thread a pane runs is read the way the
product reads it (``runtime.procfs.codex_writer_locks``), and checked against the oracle the
fake model gives (the ``session-id`` header of its requests).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence

from runtime import procfs
from tests.e2e.codex_cli import CodexHome
from tests.e2e.harness import _terminate
from tests.fixtures.tmux import TmuxServer, wait_for

INPUT_HINT = "Ask Codex to do anything"  # the empty composer's placeholder


PASTE_WINDOW = 0.3  # > codex's PASTE_ENTER_SUPPRESS_WINDOW (120 ms), see ``submit``


def submit(send_keys: Callable[..., object], capture: Callable[[], str], text: str,
           timeout: float = 30.0, sent: Callable[[], object] | None = None) -> None:
    """Type ``text`` into a codex composer (``send_keys(*keys)`` runs ``tmux send-keys -t
    PANE KEYS…``, ``capture()`` reads the pane), wait until the pane shows it, then press Enter
    until it is sent: until ``sent()`` is true when given (the fake model has the request, the
    TUI shows a command's result), else until the composer is empty (its placeholder
    ``INPUT_HINT`` shows).

    Keys sent at once arrive as a burst, which codex 0.169.0 takes for a paste without
    bracketed-paste markers: an Enter within 120 ms of its last character
    (``PASTE_ENTER_SUPPRESS_WINDOW`` in codex-rs/tui paste_burst.rs) becomes a newline and
    nothing is sent — the first Enter waits ``PASTE_WINDOW`` after the typing. Enter is pressed
    again, 2 s after the previous press, while the composer still holds text: a codex that has
    just resumed a thread can take the prompt out of the composer and put it back unsent (seen
    after a rollback: the placeholder showed, then the prompt again, and no request came for a
    minute until Enter was pressed)."""
    send_keys("-l", text)
    typed = time.monotonic()
    probe = text[-30:]
    wait_for(lambda: probe in capture().replace("\n", ""), timeout=timeout,
             what=f"typed text {probe!r} to show in the pane")
    deadline = time.monotonic() + timeout
    press = typed + PASTE_WINDOW
    while time.monotonic() < deadline:
        empty = INPUT_HINT in capture()
        if sent() if sent is not None else empty:
            return
        if not empty and time.monotonic() >= press:
            send_keys("Enter")
            press = time.monotonic() + 2.0
        time.sleep(0.05)
    raise AssertionError(f"{probe!r} was not sent within {timeout:g}s of Enter presses; "
                         f"the pane shows:\n{capture()[-1500:]}")


class CodexTui:
    """Interactive codex in pane ``session:0.0`` of ``tmux``, run with ``home``'s environment."""

    def __init__(self, home: CodexHome, tmux: TmuxServer, session: str = "codex") -> None:
        self.home, self.tmux, self.session = home, tmux, session
        self.target = f"{session}:0.0"
        self.pids: set[int] = set()

    def argv(self, *extra: str) -> list[str]:
        """``<codex> -m fake-model --cd WORK EXTRA…`` (the shape of notes §9)."""
        return [str(self.home.binary), "-m", "fake-model", "--cd", str(self.home.work), *extra]

    def shell_command(self, argv: Sequence[str]) -> str:
        return f"cd {shlex.quote(str(self.home.work))} && exec {shlex.join(argv)}"

    def start(self, argv: Sequence[str], timeout: float = 90.0,
              extra_env: dict[str, str] | None = None) -> str:
        """Start codex in a new session of the server; the thread it holds once ready."""
        self.tmux.new_session(self.session, self.shell_command(argv), str(self.home.work),
                              env={**self.home.env(), **(extra_env or {})}, width=180,
                              height=45)
        self.tmux.cmd("set-option", "-t", self.session, "remain-on-exit", "on")
        return self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 90.0) -> str:
        """Wait for the composer and exactly one writer lock; return that thread."""
        pid = self.pane_pid()
        self.pids.add(pid)

        def one_thread() -> str | None:
            self._check_alive()
            threads = self.threads(pid)
            return threads[0] if len(threads) == 1 else None
        thread = wait_for(one_thread, timeout=timeout, what=f"codex pid {pid} to lock a thread")
        wait_for(lambda: INPUT_HINT in self.capture(), timeout=timeout, what="codex's composer")
        self.pids.update(procfs.descendants(pid))
        return str(thread)

    def threads(self, pid: int | None = None) -> tuple[str, ...]:
        return procfs.codex_writer_locks(self.home.root, pid or self.pane_pid())

    def type_prompt(self, text: str, timeout: float = 30.0,
                    sent: Callable[[], object] | None = None) -> None:
        """``submit`` ``text`` into this pane's composer."""
        submit(lambda *keys: self.tmux.cmd("send-keys", "-t", self.target, *keys),
               self.capture, text, timeout, sent)

    def pane_pid(self) -> int:
        return self.tmux.pane_pid(self.target)

    def capture(self) -> str:
        return self.tmux.capture(self.target)

    def _check_alive(self) -> None:
        if self.tmux.display(self.target, "#{pane_dead}") == "1":
            raise AssertionError(f"codex exited; screen:\n{self.capture()[-3000:]}")

    def close(self) -> None:
        """Kill the session, then every codex pid this driver saw."""
        try:
            self.pids.add(self.pane_pid())
            self.pids.update(procfs.descendants(self.pane_pid()))
        except (RuntimeError, ValueError):
            pass
        self.tmux.cmd("kill-session", "-t", self.session, check=False)
        for pid in self.pids:
            _terminate(pid, expect=("codex",))
