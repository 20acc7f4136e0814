"""Completion in a real interactive zsh: keystrokes typed into a pane of a private tmux server
(``tests.fixtures.tmux``: its own socket under the sandbox's TMUX_TMPDIR), HOME and ZDOTDIR
temporary, a ``.zshrc`` that runs ``compinit`` and ``source <(PROG completion zsh)`` exactly as
the README says. A Tab must make zsh itself complete the word on the command line, read back
from the captured pane (polled with a bound, never slept on)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.real_tmux
PROMPT = "tl-zsh> "
BIN = Path(sys.executable).parent  # this checkout's tl-rebuild and tl-provision


@pytest.fixture
def zsh(tmux_server: TmuxServer, tmp_path: Path) -> Iterator[tuple[TmuxServer, str]]:  # noqa: F811
    """An interactive zsh in a pane, both programs' completions loaded; its target."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (.ci/run installs it with apt)")
    home, zdot = tmp_path / "home", tmp_path / "zdot"
    home.mkdir()
    zdot.mkdir()
    (zdot / ".zshrc").write_text(
        "autoload -U compinit\n"
        f"compinit -u -d {zdot / '.zcompdump'}\n"
        "source <(tl-rebuild completion zsh)\n"
        "source <(tl-provision completion zsh)\n"
        "unsetopt beep\n"
        f"PROMPT='{PROMPT}'\nRPROMPT=''\n", encoding="utf-8")
    env = {"HOME": str(home), "ZDOTDIR": str(zdot), "TERM": "xterm-256color",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    target = tmux_server.new_session("zsh", ["env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                             "zsh", "-i"], str(tmp_path), width=160, height=40)
    try:
        wait_for(lambda: last_line(tmux_server, target) == PROMPT.rstrip(), timeout=30,
                 what="the zsh prompt")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; pane: {tmux_server.capture(target)!r}") from None
    yield tmux_server, target


def last_line(server: TmuxServer, target: str) -> str:
    """The pane's last non-blank line, trailing blanks cut (capture -J keeps them)."""
    lines = [x.rstrip() for x in server.capture(target).splitlines() if x.strip()]
    return lines[-1] if lines else ""


def tab(shell: tuple[TmuxServer, str], typed: str, completed: str) -> None:
    """Type ``typed``, press Tab, and wait until the command line reads ``completed``; then
    clear the line (Ctrl-U) for the next one."""
    server, target = shell
    server.cmd("send-keys", "-t", target, "-l", typed)
    wait_for(lambda: last_line(server, target) == (PROMPT + typed).rstrip(), timeout=20,
             what=f"{typed!r} echoed")
    server.cmd("send-keys", "-t", target, "Tab")
    wait_for(lambda: last_line(server, target) == PROMPT + completed, timeout=20,
             what=f"zsh completing {typed!r} to {completed!r} "
                  f"(pane: {server.capture(target)[-400:]!r})")
    server.cmd("send-keys", "-t", target, "C-u")
    wait_for(lambda: last_line(server, target) == PROMPT.rstrip(), timeout=20,
             what="the cleared line")


def test_zsh_completes_tl_rebuilds_sub_command_and_option_from_a_prefix_and_tab(
        zsh: tuple[TmuxServer, str]) -> None:
    tab(zsh, "tl-rebuild pl", "tl-rebuild plan")
    tab(zsh, "tl-rebuild plan --tr", "tl-rebuild plan --transcript")
    tab(zsh, "tl-rebuild plan --agent co", "tl-rebuild plan --agent codex")
    tab(zsh, "tl-rebuild completion z", "tl-rebuild completion zsh")


def test_zsh_completes_tl_provisions_sub_command_and_option_from_a_prefix_and_tab(
        zsh: tuple[TmuxServer, str]) -> None:
    tab(zsh, "tl-provision dr", "tl-provision drift")
    tab(zsh, "tl-provision apply --rest", "tl-provision apply --restart-claude")
    tab(zsh, "tl-provision accept --dr", "tl-provision accept --drill")
