"""The model asks for the rebuild over MCP (issue 17), with the real Codex 0.169.0.

``tl-provision apply`` installs Threadline on a live ``codex --no-daemon`` from a Codex host
profile (notify chain and ``[mcp_servers.threadline]`` in config.toml); codex is restarted so it
starts the real ``tl-rebuild mcp``. The loopback fake model talks with cues
(tests/e2e/codex_fake_api.py): a tool-heavy turn (reasoning, ``exec_command`` and its output), a
``codex queue`` message, then a ``thread_rebuild_request`` call into the ``mcp__threadline``
namespace. That turn's end switches the pane; the oracle is what the model is sent: the new
thread's first request carries every utterance and no reasoning or tool item, a message queued
after the switch reaches the new thread, and a rollback asked for over MCP (status, then
``thread_rebuild_rollback_request`` with the id the status returned) resumes the old thread,
whose ``thread_rebuild_dirty`` then measures that thread's rollout, not the newer abandoned one.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.cli import main
from runtime.paths import codex_rollout
from runtime.procfs import codex_writer_locks
from runtime.switch.store import Store
from tests.e2e.codex_cli import codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import Call, CodexFakeApi, Cue, Request, mcp_output, reply_text
from tests.e2e.codex_tui import INPUT_HINT, CodexTui
from tests.e2e.test_codex_config_reload import offered_namespaces
from tests.e2e.test_codex_provision import host_profile, tui  # noqa: F401 - fixture
from tests.e2e.test_codex_switch import NOT_SPEECH, RUNNING, input_texts
from tests.fixtures.tmux import tmux_server, wait_for  # noqa: F401 - fixture

MCP = "mcp__threadline"
TOOL_MARK = "TOOL-OUTPUT-42"  # only in the command's output: its argv says $((6*7))
THOUGHT = "the listing needs a shell"
CUES = (
    Cue("run the listing", (Call("exec_command", {"cmd": "echo TOOL-OUTPUT-$((6*7))"}),),
        after_text="the listing ran fine", reasoning=THOUGHT),
    Cue("REBUILD", (Call("thread_rebuild_request", {"reason": "context full of tool noise",
                                                   "confirmation": "REBUILD"}, MCP),),
        after_text="rebuild registered, it happens when this turn ends"),
    Cue("ROLLBACK", (Call("thread_rebuild_status", {}, MCP),
                     Call("thread_rebuild_rollback_request",
                          lambda status: {"operation_id": mcp_output(status)["operation_id"],
                                          "confirmation": "ROLLBACK"}, MCP)),
        after_text="rollback requested, it happens when this turn ends"),
    Cue("DIRTY", (Call("thread_rebuild_dirty", {}, MCP),), after_text="noise measured"),
)
OPTIONS = ("--no-daemon",)
PROBES = itertools.count(1)  # each probe prompt is unique in the thread


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi(CUES) as fake:
        yield fake
    assert fake.errors == []


def first_request(api: CodexFakeApi, session: str, after: int, text: str) -> Request:
    """The first request of ``session`` since request ``after`` whose input has ``text``."""
    found = wait_for(lambda: next((r for r in api.requests[after:] if r.session_id == session
                                   and text in json.dumps(r.body)), None),
                     timeout=60, what=f"a request of {session} with {text!r}")
    assert isinstance(found, Request)
    return found


def call_results(api: CodexFakeApi, session: str, after: int) -> list[Request]:
    """The requests of ``session`` since request ``after`` that bring a call's output back."""
    return [r for r in api.requests[after:] if r.session_id == session
            and (r.body.get("input") or [{}])[-1].get("type") == "function_call_output"]


def queued_turn(api: CodexFakeApi, tui: CodexTui,  # noqa: F811 - not the fixture
                thread: str, message: str) -> Request:
    """``codex queue --thread THREAD --message MESSAGE``; the request the running TUI then
    sends for it (a turn of THREAD triggered by the queue), once its reply is on screen."""
    before = len(api.requests)
    done = subprocess.run([str(tui.home.binary), "queue", "--thread", thread, "--message",
                           message], env=tui.home.env(), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and f"for thread {thread}." in done.stdout, done.stderr[-2000:]
    request = first_request(api, thread, before, message)
    assert request.metadata.get("turn_trigger") == "queue"
    wait_for(lambda: reply_text(request.index) in tui.capture(), timeout=60,
             what=f"the reply to the queued {message!r}")
    return request


def say(api: CodexFakeApi, tui: CodexTui, thread: str, text: str) -> Request:  # noqa: F811
    """Type ``text`` into the pane and press Enter until the fake model has the request of
    ``thread`` that carries it (codex_tui.CodexTui.type_prompt); that request."""
    before = len(api.requests)

    def sent() -> bool:
        return any(r.session_id == thread and text in json.dumps(r.body)
                   for r in api.requests[before:])
    tui.type_prompt(text, timeout=60, sent=sent)
    return first_request(api, thread, before, text)


def tools_up(api: CodexFakeApi, tui: CodexTui, thread: str) -> None:  # noqa: F811
    """Type cue-free prompts until a turn of ``thread`` offers the ``mcp__threadline`` tools.

    A codex started by a switch or a rollback does not wait for its MCP servers (measured with
    0.169.0: ``tl-rebuild mcp`` takes 1.4 s to answer initialize on an idle 2-core machine, and
    turns sent meanwhile carry no ``mcp__threadline`` namespace), so a cue typed at once can
    reach a model that has no tool to call: the bounded probe waits the way a user would."""
    offered: list[set[str]] = []
    for _ in range(10):
        prompt = f"are your tools up yet, probe {next(PROBES)}?"
        request = say(api, tui, thread, prompt)
        reply = reply_text(request.index)
        wait_for(lambda: reply in tui.capture(), timeout=60,  # noqa: B023 - called at once
                 what=f"the reply to {prompt!r}")
        offered.append(offered_namespaces(request.body))
        if MCP in offered[-1]:
            return
    raise AssertionError(f"no turn of {thread} offered {MCP}: {offered}")


def test_the_model_requests_the_rebuild_over_mcp_and_a_rollback_over_mcp(
        tmp_path: Path, tui: CodexTui, api: CodexFakeApi,  # noqa: F811 - fixture
        capsys: pytest.CaptureFixture[str]) -> None:
    tmux_env = {"TMUX_TMPDIR": os.environ["TMUX_TMPDIR"]}
    tui.start(tui.argv(*OPTIONS), extra_env=tmux_env)
    assert main(["apply", str(host_profile(tmp_path, tui))]) == 0, capsys.readouterr().out
    capsys.readouterr()
    tui.close()  # restarted: codex reads config.toml (notify, our MCP server) at start
    tui.start([*tui.argv(*OPTIONS), "please remember the blue door"], extra_env=tmux_env)
    wait_for(lambda: reply_text(0) in tui.capture(), timeout=60, what="the first reply")
    old = next(r.session_id for r in api.requests
               if r.kind == "turn" and "please remember the blue door" in json.dumps(r.body))
    assert old is not None

    # a tool-heavy turn: reasoning, a command and its output, then a reply
    tui.type_prompt("now run the listing please")
    wait_for(lambda: "the listing ran fine" in tui.capture(), timeout=60, what="the tool turn")
    # a message queued from outside, run as a turn of the old thread
    queued = queued_turn(api, tui, old, "a queued note: the key is under the mat")

    # the model asks for the rebuild over MCP; the end of that turn switches the pane
    tools_up(api, tui, old)
    before = len(api.requests)
    say(api, tui, old, "the context is noisy, please REBUILD")
    wait_for(lambda: "rebuild registered" in tui.capture(), timeout=60, what="the MCP reply")
    (answered,) = call_results(api, old, before)
    output = answered.body["input"][-1]["output"]  # the request call's, last of the input
    registered = mcp_output(output)
    assert registered["bound_session_id"] == old  # the server found its codex's thread
    assert registered["state"] == "pending", registered
    seen_by_old = json.dumps(answered.body)  # the old thread did carry the noise
    assert TOOL_MARK in seen_by_old and THOUGHT in seen_by_old

    store = Store(tmp_path / "state")
    op_id = str(registered["operation_id"])
    wait_for(lambda: store.read(op_id).state.value not in RUNNING, timeout=60,
             what="the switch to end")
    op = store.read(op_id)
    assert op.state.value == "activated", (op.state.value, op.failure, tui.capture()[-2000:])
    new = str(op.fact("new_session_id"))
    tui.pids.add(tui.pane_pid())
    assert codex_writer_locks(tui.home.root, tui.pane_pid()) == (new,)

    # the new codex's first request: every utterance verbatim, no reasoning or tool item
    wait_for(lambda: INPUT_HINT in tui.capture(), timeout=60, what="the resumed composer")
    first = say(api, tui, new, "what did I tell you?")
    said = input_texts(first.body)
    for text in ("please remember the blue door", reply_text(0), "now run the listing please",
                 "the listing ran fine", "a queued note: the key is under the mat",
                 reply_text(queued.index), "the context is noisy, please REBUILD",
                 "rebuild registered, it happens when this turn ends", "what did I tell you?"):
        assert any(text == t for _, t in said), (text, said)
    assert not {item.get("type") for item in first.body["input"]} & set(NOT_SPEECH)
    assert TOOL_MARK not in json.dumps(first.body) and THOUGHT not in json.dumps(first.body)
    wait_for(lambda: reply_text(first.index) in tui.capture(), timeout=60,
             what="the new thread's reply")

    # a message queued after the switch reaches the new thread
    queued_turn(api, tui, new, "after the switch: one more note")
    wait_for(lambda: "watch_ended" in [e["phase"] for e in store.events(op_id)], timeout=60,
             what="the watch to end")

    # the model asks to go back over MCP: status, then rollback with the id it returned
    tools_up(api, tui, new)
    before = len(api.requests)
    say(api, tui, new, "that was wrong, ROLLBACK please")
    wait_for(lambda: "rollback requested" in tui.capture(), timeout=60, what="the MCP rollback")
    wait_for(lambda: store.read(op_id).state.value not in (*RUNNING, "rollback_pending"),
             timeout=60, what="the rollback to end")
    op = store.read(op_id)
    assert op.state.value == "rolled_back", (op.state.value, op.failure)
    tui.pids.add(tui.pane_pid())
    wait_for(lambda: codex_writer_locks(tui.home.root, tui.pane_pid()) == (old,), timeout=30,
             what="the pane to write the old thread again")
    wait_for(lambda: INPUT_HINT in tui.capture(), timeout=60, what="the resumed composer")
    status, rollback = call_results(api, new, before)  # both calls ran in the new thread
    assert mcp_output(status.body["input"][-1]["output"])["operation_id"] == op_id
    assert mcp_output(rollback.body["input"][-1]["output"])["state"] == "rollback_pending"

    # dirty, by default, measures the thread the pane's codex writes (the old one again)
    tools_up(api, tui, old)
    before = len(api.requests)
    say(api, tui, old, "how much noise is left, DIRTY?")
    wait_for(lambda: "noise measured" in tui.capture(), timeout=60, what="the MCP dirty")
    (measured,) = call_results(api, old, before)
    dirty = mcp_output(measured.body["input"][-1]["output"])
    assert dirty["transcript_source"] == "served session", dirty
    assert dirty["transcript"] == str(codex_rollout(tui.home.root / "sessions", old))
