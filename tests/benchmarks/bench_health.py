"""Benchmark: one look of the health check's channel-server recognition on this machine.

Run: ``python tests/benchmarks/bench_health.py [--runs N] [--servers K]``. Starts K stand-in
servers (``python -c`` sleepers, none naming its registration) under a parent, registers them in
a temp ``CLAUDE_CONFIG_DIR``, then times ``runtime.channels.running.resolve`` (read the
registrations as
that parent would) and ``runtime.channels.running.look`` (walk /proc, read argv + environ, match).
The
health check looks every 0.5 s during the window; the figure to report is the median look in ms
with the number of processes on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPAWN = """
import json, os, subprocess, sys, time
specs = json.loads(sys.argv[1])
kids = [subprocess.Popen(s, stdin=subprocess.PIPE) for s in specs]
print("ready", flush=True)
sys.stdin.readline()
for k in kids:
    k.kill()
"""


def main() -> int:
    from runtime.channels import running as srv

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--servers", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        specs = [[sys.executable, "-c", "import time; time.sleep(600)", "--instance", str(i)]
                 for i in range(args.servers)]
        names = [f"channel{i}" for i in range(args.servers)]
        Path(tmp, ".claude.json").write_text(json.dumps({"mcpServers": {
            n: {"type": "stdio", "command": s[0], "args": s[1:], "env": {}}
            for n, s in zip(names, specs, strict=True)}}))
        parent = subprocess.Popen([sys.executable, "-c", SPAWN, json.dumps(specs)],
                                  env={**os.environ, "CLAUDE_CONFIG_DIR": tmp},
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
            start = time.perf_counter()
            expected, _where = srv.resolve(parent.pid, names)
            resolve_ms = (time.perf_counter() - start) * 1000
            looks = []
            for _ in range(args.runs):
                start = time.perf_counter()
                found = srv.look(parent.pid, expected, None)
                looks.append((time.perf_counter() - start) * 1000)
            running = sum(f["status"] == "running" for f in found.values())
        finally:
            if parent.stdin is not None:
                parent.stdin.write("done\n")  # the parent kills its servers, then exits
                parent.stdin.flush()
            try:
                parent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                parent.kill()
    procs = sum(1 for p in os.listdir("/proc") if p.isdigit())
    print(json.dumps({"processes": procs, "servers": args.servers, "recognised": running,
                      "resolve_ms": round(resolve_ms, 2),
                      "look_ms_median": round(statistics.median(looks), 2),
                      "look_ms_max": round(max(looks), 2)}))
    return 0 if running == args.servers else 1


if __name__ == "__main__":
    raise SystemExit(main())
