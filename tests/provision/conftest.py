"""A harmless tmux deployment for provision tests: private tmux socket, temp HOME, and a
stand-in ``claude`` (a shell script named claude that stays alive and answers --version)."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

LAUNCH_FLAGS = ("--continue", "--thinking-display", "summarized", "--channels",
                "plugin:telegram@claude-plugins-official",
                "--dangerously-load-development-channels", "server:companion")
STAND_IN = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.328 (Claude Code stand-in)"; exit 0; fi
while :; do sleep 3600; done
"""


def install_stand_in(bin_dir: Path, text: str = STAND_IN) -> Path:
    """The stand-in laid out as npm installs claude (``bin/claude`` → the package's
    executable), so introspect identifies it the way it identifies a real install, never by
    its name; returns ``bin_dir/claude``."""
    package = bin_dir.parent / "lib" / "node_modules" / "@anthropic-ai" / "claude-code" / "bin"
    package.mkdir(parents=True, exist_ok=True)
    (package / "claude.exe").write_text(text)
    (package / "claude.exe").chmod(0o755)
    (bin_dir / "claude").symlink_to(package / "claude.exe")
    return bin_dir / "claude"


@dataclass
class Deployment:
    """Everything one fake deployment consists of, all under tmp_path."""

    tmux: TmuxServer
    root: Path
    bin_dir: Path
    home: Path
    workdir: Path
    profile_path: Path
    target: str

    @property
    def claude(self) -> Path:
        return self.bin_dir / "claude"

    @property
    def config_path(self) -> Path:
        return self.root / "etc" / "config.toml"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def settings(self) -> Path:
        return self.home / ".claude" / "settings.json"

    def start(self, flags: tuple[str, ...] = LAUNCH_FLAGS, respawn: bool = False) -> int:
        """Run ``claude FLAGS`` in the pane (one shell string, like a human types it)."""
        command = f"PATH={self.bin_dir}:$PATH claude {' '.join(flags)}"
        old = self.tmux.pane_pid(self.target) if respawn else None
        if respawn:
            self.tmux.cmd("respawn-pane", "-k", "-t", self.target, command)
        else:
            self.tmux.new_session("main", command, cwd=str(self.workdir))
        return int(wait_for(lambda: self._stand_in_pid(old), what="stand-in claude running"))

    def _stand_in_pid(self, old: int | None) -> int | None:
        pid = self.tmux.pane_pid(self.target)
        if pid == old:
            return None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        return pid if str(self.claude).encode() in cmdline else None


def write_profile(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def deployment(tmp_path: Path, tmux_server: TmuxServer) -> Deployment:  # noqa: F811
    root = tmp_path / "deploy"
    bin_dir, home, workdir = root / "bin", root / "home", root / "srv app"
    for directory in (bin_dir, home, workdir):
        directory.mkdir(parents=True)
    install_stand_in(bin_dir)
    from runtime.paths import encode_project_dir

    (home / ".claude" / "projects" / encode_project_dir(str(workdir))).mkdir(parents=True)
    profile = {
        "host": "testbox", "connection": "local",
        "claude": {"user": pwd.getpwuid(os.getuid()).pw_name, "home": str(home)},
        "door": {"kind": "tmux", "tmux": {"target": "main:0.0",
                                          "socket_name": tmux_server.socket_name}},
        "install": {"config_path": str(root / "etc" / "config.toml"),
                    "state_dir": str(root / "state")},
        "rebuild": {"carry_max_tokens": 50000},
    }
    profile_path = write_profile(root / "host.yml", profile)
    # The user's tmux runs with the user's HOME and no CLAUDE_CONFIG_DIR (claude uses
    # HOME/.claude, as the profile says), not with the suite's sandbox config dir.
    tmux_server.env = {**{k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"},
                       "HOME": str(home)}
    return Deployment(tmux_server, root, bin_dir, home, workdir, profile_path, "main:0.0")

