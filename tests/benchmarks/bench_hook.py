"""Benchmark: ``tl-rebuild hook-stop`` with nothing pending vs ``python -I -c pass``.

Run: ``python tests/benchmarks/bench_hook.py [--runs N]``. Both commands are timed in the
same run, interleaved, on the same interpreter; the median ratio is the figure to report
(target ≤ 1.5, issue 13 §3). A temp config with a state_dir and no active operation is used, so
the hook takes its real idle path (config read, one stat, ``{}`` out).
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

TARGET = 1.5
PAYLOAD = json.dumps({"session_id": "bench", "transcript_path": "/nonexistent/bench.jsonl",
                      "cwd": "/", "hook_event_name": "Stop", "stop_hook_active": False})


def timed(argv: list[str], stdin: str, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv!r} failed: {done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(f'state_dir = "{tmp}/state"\n')
        tl_rebuild = str(Path(sys.executable).with_name("tl-rebuild"))
        hook = [tl_rebuild, "hook-stop", "--config", str(config)]
        bare = [sys.executable, "-I", "-c", "pass"]
        # bytecode cached as for an installed package (the warm-up run fills the cache);
        # without it every run would compile the hook's modules when the environment sets
        # PYTHONDONTWRITEBYTECODE
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        timed(hook, PAYLOAD, env), timed(bare, "", env)  # warm the page and bytecode caches
        hook_t, bare_t = [], []
        for _ in range(args.runs):
            bare_t.append(timed(bare, "", env))
            hook_t.append(timed(hook, PAYLOAD, env))
    h, b = statistics.median(hook_t), statistics.median(bare_t)
    print(f"python -I -c pass   median {b * 1000:7.1f} ms  (min {min(bare_t) * 1000:.1f})")
    print(f"tl-rebuild hook-stop median {h * 1000:7.1f} ms  (min {min(hook_t) * 1000:.1f})")
    print(f"ratio (median)      {h / b:.2f}x   target <= {TARGET}x")
    print(f"ratio (min)         {min(hook_t) / min(bare_t):.2f}x   (steadier on a loaded machine)")
    return 0 if h / b <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
