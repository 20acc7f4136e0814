"""accept --live: a real rebuild of the (test) target, then which channel was heard.

The target is the installed deployment's pane, running the Python stand-in claude with the Stop
hook of settings.json; the test plays the human: it finishes a turn (``stop``) and then delivers
one channel message into the new session's transcript, the way Claude Code records it.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from provision.accept import FAIL, PASS
from provision.accept.live import channel_source, expected_channels
from runtime.config import load_config
from runtime.switch.store import Store
from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import LAUNCH_FLAGS, Deployment
from tests.fixtures.tmux import wait_for
from tests.provision.test_accept import accept, evidence, installed  # noqa: F401 - fixture
from tests.provision.test_accept_drill import STAND_IN
from tests.provision.test_apply_tmux import ready  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]
CHANNEL_EVENT = '<channel source="companion" chat_id="7">\nare you still there?\n</channel>'


@pytest.fixture
def deployment(deployment: Deployment) -> Deployment:
    deployment.claude.write_text(STAND_IN)
    return deployment


def test_channel_source_reads_both_transcript_shapes() -> None:
    new = {"type": "user", "isMeta": True, "origin": {"kind": "channel", "server": "chan"},
           "message": {"role": "user", "content": '<channel source="chan">\nhi\n</channel>'}}
    old = {"type": "user", "isMeta": True,
           "message": {"role": "user", "content": [{"type": "text", "text": CHANNEL_EVENT}]}}
    typed = {"type": "user", "message": {"role": "user", "content": "<channel is a word"}}
    assert channel_source(json.dumps(new).encode()) == "chan"
    assert channel_source(json.dumps(old).encode()) == "companion"
    assert channel_source(json.dumps(typed).encode()) is None
    assert channel_source(b"{not json") is None


def test_expected_channels_come_from_the_channel_flags(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[switch]\nchannel_flags = ["--channels", "plugin:telegram@market", '
                      '"--dangerously-load-development-channels", "server:companion"]\n')
    assert expected_channels(load_config(config)) == ["telegram", "companion"]


def _wire_pane(d: Deployment) -> None:
    """Restart the pane's claude with the hook; it starts its registered servers like claude."""
    hook = next(h["command"] for g in json.loads(d.settings.read_text())["hooks"]["Stop"]
                for h in g["hooks"] if "tl-rebuild" in h["command"])
    # The stand-in starts `companion` from its registration in HOME/.claude.json (ready).
    for key, value in (("HOME", str(d.home)), ("STANDIN_HOOK", hook)):
        d.tmux.cmd("set-environment", "-g", key, value)
    d.tmux.cmd("set-environment", "-gu", "CLAUDE_CONFIG_DIR")
    d.tmux.cmd("respawn-pane", "-k", "-t", d.target, "-c", str(d.workdir),
               f"exec {d.claude} {' '.join(LAUNCH_FLAGS)}")
    wait_for(lambda: "ready" in d.tmux.capture(d.target), what="stand-in ready")


def _send(d: Deployment, line: str) -> None:
    d.tmux.cmd("send-keys", "-t", d.target, "-l", line)
    d.tmux.cmd("send-keys", "-t", d.target, "Enter")


def test_live_switches_then_reports_which_channel_was_heard(
        installed: Deployment) -> None:  # noqa: F811
    _wire_pane(installed)
    _send(installed, "say hello from the terminal")
    wait_for(lambda: "said: hello" in installed.tmux.capture(installed.target), what="said")
    config = load_config(installed.config_path)
    store = Store(config.state_dir)
    result = {}
    runner = threading.Thread(target=lambda: result.update(report=accept(
        installed, live=True, confirm="REBUILD", wait_minutes=0.5)))
    runner.start()
    try:
        op_id = str(wait_for(lambda: store.ids() and store.ids()[-1], timeout=120,
                             what="the live request"))
        _send(installed, "stop")  # the human finishes a turn: the Stop hook fires
        wait_for(lambda: store.read(op_id).state.value == "activated", timeout=60,
                 what="activated")
        new_id = store.read(op_id).fact("new_session_id")
        new = config.project_dir / f"{new_id}.jsonl"
        event = {"type": "user", "isMeta": True, "uuid": str(uuid.uuid4()),
                 "origin": {"kind": "channel", "server": "companion"},
                 "message": {"role": "user", "content": CHANNEL_EVENT}}
        with open(new, "a", encoding="utf-8") as handle:  # the human's channel message lands
            handle.write(json.dumps(event) + "\n")
    finally:
        runner.join(timeout=180)
    report = result["report"]
    seen = {line.name: line.status for line in report.lines if line.stage == "live"}
    assert seen == {"live requested": PASS, "live switched": PASS,
                    "live channel heard [telegram]": FAIL,
                    "live channel heard [companion]": PASS}
    assert evidence(report, "live switched")["new_session_id"] == new_id
    assert evidence(report, "live channel heard [companion]")["source"] == "companion"
    assert report.exit_code == 1


def test_live_without_a_stop_cancels_its_request(installed: Deployment) -> None:  # noqa: F811
    report = accept(installed, live=True, confirm="REBUILD", wait_minutes=0.05)
    line = next(x for x in report.lines if x.name == "live switched")
    assert line.status == FAIL and line.evidence["state"] == "cancelled"
    store = Store(load_config(installed.config_path).state_dir)
    assert [op.state.value for op in store.all()] == ["cancelled"]
