# ruff: noqa: F811 - fixtures are imported by name and injected as parameters
"""Two companions under one claude user, with the real Claude Code CLI 2.1.328.

Two interactive claudes in two panes of a private tmux server, same HOME, same workdir (so
the same projects folder: the hardest case to tell apart), each installed by a real
``tl-provision apply`` with its own config, state dir and MCP name. Both claudes run both Stop
hooks. The model of companion a registered a request with companion b's tool as well: a's
Stop must switch a only and must neither run nor fail b's request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import load_config
from runtime.switch import ops
from runtime.switch.store import Store
from tests.e2e.fake_api import FakeApi
from tests.e2e.harness import ClaudePane, Machine, install_threadline
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_claude, pytest.mark.real_tmux]


def test_a_stop_in_one_real_companion_switches_it_and_leaves_the_others_request_alone(
        fake_api: FakeApi, machine: Machine, tmux_server: TmuxServer, tmp_path: Path) -> None:
    a, b = ClaudePane(machine, tmux_server, "a"), ClaudePane(machine, tmux_server, "b")
    try:
        for pane in (a, b):
            pane.start(pane.launch_argv(channel=False))
            pane.type_prompt(f"first words in {pane.session}")
            pane.wait_said(f"first words in {pane.session}")
        config_a = install_threadline(machine, a, tmp_path / "a", mcp_name="threadline-a")
        config_b = install_threadline(machine, b, tmp_path / "b", mcp_name="threadline-b")
        session_a = a.respawn(a.launch_argv(channel=False))  # hooks are read at start
        b.respawn(b.launch_argv(channel=False))
        a.type_prompt("hello from companion a")
        a.wait_said("hello from companion a")
        op_a = ops.request(load_config(config_a), "a", "REBUILD", session_id=session_a)
        op_b = ops.request(load_config(config_b), "b", "REBUILD", session_id=session_a)
        store_a, store_b = Store(tmp_path / "a" / "state"), Store(tmp_path / "b" / "state")
        pid_a, pid_b = a.pane_pid(), b.pane_pid()

        a.type_prompt("the turn whose Stop switches")

        wait_for(lambda: store_a.read(op_a["operation_id"]).state.value
                 in ("activated", "failed", "rolled_back"), timeout=120, what="a's switch")
        final_a = store_a.read(op_a["operation_id"])
        assert final_a.state.value == "activated", final_a.failure
        assert a.pane_pid() != pid_a and b.pane_pid() == pid_b
        ignored = [e for e in store_b.events(op_b["operation_id"])
                   if e["phase"] == "stop_ignored"]
        assert ignored and "another companion" in ignored[0]["reason"]
        assert store_b.read(op_b["operation_id"]).state.value == "pending"
    finally:
        a.close()
        b.close()
