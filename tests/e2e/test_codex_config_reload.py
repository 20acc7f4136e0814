"""Does a running Codex TUI (0.169.0, ``--no-daemon``) re-read ``notify`` and ``[mcp_servers]``
from config.toml, or only at start? What ``tl-provision apply`` must tell the operator.

The TUI starts with a notify program A; once its first turn has ended (A ran for its thread),
config.toml is rewritten the way ``apply`` merges it: notify program B, and a new MCP server
(``tl-rebuild mcp``). The next turn's end shows which notify program the running codex runs, and
that turn's request which MCP tools it offers the model. Measured: neither (the program it
started with runs, the new server is not offered) until codex is restarted; the control restarts
it on the same file and sees both.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import procfs
from tests.e2e.codex_cli import codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi, Request, reply_text
from tests.e2e.codex_tui import CodexTui
from tests.e2e.test_codex_provision import tui  # noqa: F401 - fixture
from tests.fixtures.switch_world import TL_REBUILD, toml_value
from tests.fixtures.tmux import tmux_server, wait_for  # noqa: F401 - fixture

RECORD = '''import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    out.write(sys.argv[-1] + "\\n")
'''


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake
    assert fake.errors == []


def notify_line(record: Path) -> str:
    return "notify = " + json.dumps([sys.executable, "-c", RECORD, str(record)]) + "\n"


def turn_ends(record: Path, thread: str) -> list[str]:
    """The turn ids a notify program was run for, for ``thread`` (not the title thread)."""
    if not record.exists():
        return []
    payloads = [json.loads(line) for line in record.read_text().splitlines()]
    return [p["turn-id"] for p in payloads if p.get("thread-id") == thread]


def offered_namespaces(body: dict[str, Any]) -> set[str]:
    return {str(tool.get("name")) for tool in body.get("tools") or []
            if isinstance(tool, dict) and tool.get("type") == "namespace"}


def test_a_running_codex_keeps_the_notify_and_mcp_servers_it_started_with(
        tmp_path: Path, tui: CodexTui, api: CodexFakeApi) -> None:  # noqa: F811 - fixture
    first, second = tmp_path / "notify-a.jsonl", tmp_path / "notify-b.jsonl"
    toml = tui.home.root / "config.toml"
    toml.write_text(notify_line(first) + toml.read_text())
    tui.start(tui.argv("--no-daemon"))
    thread = str(turn(api, tui, None, "first prompt").session_id)
    wait_for(lambda: turn_ends(first, thread), timeout=60, what="notify A after the first turn")

    runtime_config = tmp_path / "threadline.toml"
    runtime_config.write_text(
        f'agent = "codex"\ncodex_home = {toml_value(str(tui.home.root))}\n'
        f"project_dir = {toml_value(str(tui.home.root / 'sessions'))}\n"
        f"state_dir = {toml_value(str(tmp_path / 'state'))}\n")
    server = ("\n[mcp_servers.latecomer]\ncommand = " + json.dumps(TL_REBUILD)
              + "\nargs = " + json.dumps(["mcp", "--config", str(runtime_config)]) + "\n")
    toml.write_text(toml.read_text().replace(notify_line(first), notify_line(second)) + server)

    second_turn = turn(api, tui, thread, "second prompt after the config changed")
    wait_for(lambda: len(turn_ends(first, thread)) + len(turn_ends(second, thread)) >= 2,
             timeout=30, what="a notify program for the second turn end")
    third_turn = turn(api, tui, thread, "third prompt, the MCP server had time to start")
    wait_for(lambda: len(turn_ends(first, thread)) + len(turn_ends(second, thread)) >= 3,
             timeout=30, what="a notify program for the third turn end")
    # measured with 0.169.0: the program from start runs again, the new one never; the new
    # server was not even started (no process of it below the running codex)
    assert len(turn_ends(first, thread)) == 3 and turn_ends(second, thread) == []
    assert "mcp__latecomer" not in offered_namespaces(second_turn.body)
    assert "mcp__latecomer" not in offered_namespaces(third_turn.body)
    assert latecomers(tui, runtime_config) == []

    # the control: the same file is read at start (B runs, the new server is started and
    # offered once up: a fresh codex does not wait for its MCP servers — ``tl-rebuild mcp``
    # takes 1.6 s to answer initialize on a loaded 2-core machine — so its first turns can go
    # out without them; later turns are typed until one offers it, a bounded poll)
    tui.close()
    tui.start(tui.argv("--no-daemon"))
    restarted = str(turn(api, tui, None, "first prompt after a restart").session_id)
    wait_for(lambda: turn_ends(second, restarted), timeout=60, what="notify B after a restart")
    wait_for(lambda: latecomers(tui, runtime_config), timeout=60,
             what="the restarted codex to start the latecomer MCP server")
    offered = []
    for attempt in range(1, 11):
        later = turn(api, tui, restarted, f"after a restart, prompt #{attempt}.")
        offered.append(offered_namespaces(later.body))
        if "mcp__latecomer" in offered[-1]:
            break
    assert "mcp__latecomer" in offered[-1], offered
    assert turn_ends(first, restarted) == []


def latecomers(codex: CodexTui, config: Path) -> list[int]:
    """The processes below the codex in the pane that run ``tl-rebuild mcp --config config``."""
    found = []
    for pid in procfs.descendants(codex.pane_pid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if b"mcp" in argv and str(config).encode() in argv:
            found.append(pid)
    return found


def turn(api: CodexFakeApi, tui: CodexTui,  # noqa: F811 - not the fixture
         thread: str | None, prompt: str) -> Request:
    """Type ``prompt``; its request (of ``thread``; None: the first turn request that carries
    it, whose session-id is the thread — at start the TUI can briefly lock a rollout-less helper
    thread, so the pane's lock does not say) once the reply is on screen."""
    before = len(api.requests)
    tui.type_prompt(prompt)
    request = wait_for(lambda: next((r for r in api.requests[before:] if r.kind == "turn"
                                     and (thread is None or r.session_id == thread)
                                     and prompt in json.dumps(r.body)), None),
                       timeout=60, what=f"the request of {prompt!r}")
    assert isinstance(request, Request)
    wait_for(lambda: reply_text(request.index) in tui.capture(), timeout=60,
             what=f"the reply to {prompt!r}")
    return request
