"""Issue 11 §5: introspect never runs a program it has not identified as claude, and a launch
command that is not claude is a clear failure (real tmux pane, private socket, temp HOME)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from provision.introspect import claude_identity
from tests.fixtures.deployment import Deployment, write_profile
from tests.fixtures.tmux import wait_for

TL_PROVISION = str(Path(sys.executable).with_name("tl-provision"))
NOT_CLAUDE = """#!/bin/sh
if [ "$1" = "--version" ]; then echo ran > {marker}; echo "2.1.328 (Claude Code)"; exit 0; fi
while :; do sleep 3600; done
"""


def _start_impostor(d: Deployment, name: str) -> Path:
    marker = d.root / "executed"
    program = d.root / "other" / name
    program.parent.mkdir(exist_ok=True)
    program.write_text(NOT_CLAUDE.format(marker=marker))
    program.chmod(0o755)
    d.tmux.new_session("main", [str(program), "--continue"], cwd=str(d.workdir))
    pid = d.tmux.pane_pid("main:0.0")
    wait_for(lambda: str(program).encode() in Path(f"/proc/{pid}/cmdline").read_bytes(),
             what="impostor running")
    return marker


@pytest.mark.parametrize("name", ["run-bot.sh", "claude"])
def test_a_pane_running_something_unidentified_fails_introspect_and_runs_nothing(
    deployment: Deployment, name: str,
) -> None:
    import yaml

    data = yaml.safe_load(deployment.profile_path.read_text())
    data["claude"]["binary"] = str(deployment.claude)  # configured: the real (npm) install
    write_profile(deployment.profile_path, data)
    marker = _start_impostor(deployment, name)

    done = subprocess.run([TL_PROVISION, "introspect", str(deployment.profile_path)],
                          capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode != 0 and "is not claude" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not marker.exists(), "introspect executed a program it had not identified"


def test_the_npm_installed_stand_in_is_identified_by_its_package_layout(
    deployment: Deployment,
) -> None:
    deployment.start()
    done = subprocess.run([TL_PROVISION, "introspect", str(deployment.profile_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "claude identified by the Claude Code package layout" in done.stdout


@pytest.mark.parametrize(("real", "binary", "exe", "how"), [
    ("/opt/c/claude", "/opt/c/claude", None, "claude.binary"),
    ("/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", None, None, "package layout"),
    ("/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe", None, None, "package layout"),
    ("/x/node_modules/@anthropic-ai/claude-code-linux-x64/claude", None, None, "package layout"),
    ("/home/u/.local/share/claude/versions/2.1.328", None, None, "package layout"),
    ("/opt/c/claude", None, "/opt/c/claude", "live claude"),
])
def test_claude_is_identified_by_binary_layout_or_live_exe(
    real: str, binary: str | None, exe: str | None, how: str,
) -> None:
    assert how in (claude_identity(real, binary, exe) or "")


@pytest.mark.parametrize("real", ["/usr/local/bin/claude", "/srv/bot/run.sh",
                                  "/x/node_modules/@anthropic-ai/claude-code/evil.sh",
                                  "/x/node_modules/claude-code/cli.js"])
def test_a_name_alone_never_identifies_claude(real: str) -> None:
    assert claude_identity(real, "/opt/c/claude", "/usr/bin/node") is None
