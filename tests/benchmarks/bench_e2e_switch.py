"""Benchmark: claude start in tmux and the tmux-door switch latency, with the real CLI 2.1.328.

Run from the repo root: ``python -m tests.benchmarks.bench_e2e_switch [--runs N]`` (needs
the pinned CLI in the cache prefix and tmux). Everything lives in a temp folder: HOME, tmux
socket dir, state.
Reports medians of:
- ``start``: ``new-session`` → claude ready (warning accepted, input box, session record, the
  channel server listening);
- ``stop→switched`` and ``stop→activated`` from the operation timeline (``scheduled`` is the
  Stop hook; ``activated`` comes once the positive evidence has held
  ``activation_stable_seconds``, runtime/switch/activation.py; the watch of ``healthcheck_seconds``
  follows it and is not counted);
- ``stop→listening``: the Stop hook → the new claude's channel server is ready to push (its own
  log line after the MCP handshake; ``activated`` only sees the server process, so it may come
  first).
A channel message is pushed after activation and must reach the new session (else the run fails).
Target (issue 13 §2): Stop → ``activated`` ≤ 3 s median over 5 runs with the stand-in model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

SANDBOX = Path(tempfile.mkdtemp(prefix="tl-bench-e2e-"))
os.environ["TMUX_TMPDIR"] = str(SANDBOX)
os.environ.pop("TMUX", None)

from tests.e2e.fake_api import FakeApi  # noqa: E402 - after the sandboxed environment
from tests.e2e.harness import ClaudePane, prepare_machine  # noqa: E402
from tests.e2e.test_tmux_rebuild import provision_and_launch, wait_terminal  # noqa: E402
from tests.fixtures.claude_cli import claude_prefix  # noqa: E402
from tests.fixtures.tmux import TmuxServer, wait_for  # noqa: E402


def at(op: dict, phase: str) -> float:
    event = next(e for e in op["events"] if e["phase"] == phase)
    return datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()


def switch_run(claude: Path, root: Path) -> dict[str, float]:
    with FakeApi() as api:
        machine = prepare_machine(root / "machine", claude, api.url)
        pane = ClaudePane(machine, TmuxServer(f"bench-{uuid.uuid4().hex[:8]}"))
        try:
            config, _ = provision_and_launch(pane, api, machine, root)
            pane.type_prompt("please PLEASE-REBUILD now")
            op = wait_terminal(config)
            if op["state"] != "activated":
                raise SystemExit(f"run ended {op['state']}: {op.get('failure')}")
            new_pid = pane.pane_pid()
            pane.pids.add(new_pid)
            probe = f"bench probe {uuid.uuid4().hex[:6]}"
            wait_for(lambda: pane.channel_listening(new_pid), timeout=30, interval=0.02)
            machine.push_channel(probe)
            heard = api.wait_for_text(probe, timeout=60)
            if heard.session_id != op["facts"]["new_session_id"]:
                raise SystemExit("the probe reached another session")
            listening = next(e["t"] for e in machine.channel_events("listening")
                             if e["ppid"] == new_pid)
            stop = at(op, "scheduled")
            return {"stop→switched": at(op, "switched") - stop,
                    "stop→listening": listening - stop,
                    "stop→activated": at(op, "activated") - stop}
        finally:
            pane.close()


def start_run(claude: Path, root: Path) -> float:
    with FakeApi() as api:
        machine = prepare_machine(root / "machine", claude, api.url)
        pane = ClaudePane(machine, TmuxServer(f"bench-{uuid.uuid4().hex[:8]}"))
        try:
            began = time.monotonic()
            pane.start(pane.launch_argv())
            return time.monotonic() - began
        finally:
            pane.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    claude = claude_prefix() / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        raise SystemExit(f"the pinned CLI is not installed at {claude}")
    samples: dict[str, list[float]] = {"start": []}
    for n in range(args.runs):
        samples["start"].append(start_run(claude, SANDBOX / f"start-{n}"))
        for key, value in switch_run(claude, SANDBOX / f"switch-{n}").items():
            samples.setdefault(key, []).append(value)
    for key, values in samples.items():
        print(f"{key:16s} median {statistics.median(values):6.2f}s  "
              f"runs {' '.join(f'{v:.2f}' for v in values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
