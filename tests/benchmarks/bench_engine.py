"""Speed and memory of ``plan`` and ``dirty`` on a 100 MB transcript (issue 2 targets).

Run: ``python tests/benchmarks/bench_engine.py [--mb 100] [--source NAME] [--runs 3]``

Builds a transcript in a temp dir by repeating a real corpus file with fresh uuids and
sessionIds, then measures in the same run, each in its own subprocess (wall time, best of
``--runs``; peak RSS of that child via ``os.wait4``): a bare line-by-line ``orjson.loads``
scan, the same with stdlib ``json``, ``tl-rebuild plan --json`` and ``tl-rebuild dirty
--json``. Prints the ratios against the targets and exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("THREADLINE_CORPUS", REPO.parent / "shared" / "corpus"))
DEFAULT_SOURCE = "samar-58__scout__claude-session.jsonl"
EARLIER_PLAN_SECONDS = 3.47
RSS_LIMIT_MIB = 64.0
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

SCAN = """
import sys, {mod}
loads = {mod}.loads
n = 0
for line in open(sys.argv[1], "rb"):
    try:
        loads(line)
    except ValueError:
        pass
    n += 1
"""


def build_transcript(source: Path, target: Path, megabytes: int) -> int:
    """Write ``source`` repeated (fresh ids per copy) until ``target`` holds ``megabytes`` MB."""
    data = source.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    want = megabytes * 1_000_000
    written = 0
    copy = 0
    with open(target, "wb") as out:
        while written < want:
            mapping: dict[bytes, bytes] = {}

            def fresh(
                match: re.Match[bytes], copy: int = copy, mapping: dict[bytes, bytes] = mapping
            ) -> bytes:
                old = match.group(0)
                if old not in mapping:
                    mapping[old] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{copy}:{old!r}")).encode()
                return mapping[old]

            chunk = UUID.sub(fresh, data)
            out.write(chunk)
            written += len(chunk)
            copy += 1
    return written


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall time (s), CPU time (user+sys, s) and peak RSS (MiB) of one run of ``argv``.

    RSS and CPU come from ``/usr/bin/time`` when present: a child forked from this (bigger)
    process would otherwise report the parent's pages in its ``ru_maxrss``.
    """
    timer = ["/usr/bin/time", "-f", "%M"] if os.access("/usr/bin/time", os.X_OK) else []
    start = time.perf_counter()
    child = subprocess.Popen(
        [*timer, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=env
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode() if child.stderr else ""
    if code != 0:
        raise SystemExit(f"benchmark command failed ({code}): {argv}\n{stderr}")
    kib = int(stderr.strip().splitlines()[-1]) if timer else usage.ru_maxrss
    return elapsed, usage.ru_utime + usage.ru_stime, kib / 1024


def measure_all(
    commands: dict[str, list[str]], runs: int, cache: Path
) -> dict[str, tuple[float, float, float]]:
    """Best wall and CPU time and peak RSS per command.

    Runs are interleaved so that load from other processes on a shared machine hits every
    command alike. Bytecode is cached in ``cache`` (a warm-up round fills it), as it is for an
    installed package; without it every run would compile the modules again when the
    environment sets PYTHONDONTWRITEBYTECODE.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    for argv in commands.values():
        run_once(argv, env)
    best: dict[str, tuple[float, float, float]] = {}
    for _ in range(runs):
        for name, argv in commands.items():
            wall, cpu, rss = run_once(argv, env)
            old = best.get(name, (float("inf"), float("inf"), 0.0))
            best[name] = (min(old[0], wall), min(old[1], cpu), max(old[2], rss))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="corpus file name to repeat")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    source = CORPUS / args.source
    if not source.is_file():
        print(f"corpus file not found: {source}", file=sys.stderr)
        return 2
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="tl-bench-") as tmp:
        path = Path(tmp) / f"{uuid.uuid4()}.jsonl"
        size = build_transcript(source, path, args.mb)
        print(f"transcript: {size / 1e6:.1f} MB from {args.source}, best of {args.runs} runs")
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm cache
        cli = [py, "-m", "runtime.cli"]
        results = measure_all(
            {
                "cat": ["cat", str(path)],
                "orjson scan": [py, "-c", SCAN.format(mod="orjson"), str(path)],
                "json scan": [py, "-c", SCAN.format(mod="json"), str(path)],
                "plan": [*cli, "plan", "--json", "--transcript", str(path)],
                "dirty": [*cli, "dirty", "--json", "--transcript", str(path)],
            },
            args.runs,
            Path(tmp) / "pycache",
        )
    for name, (wall, cpu, rss) in results.items():
        print(f"  {name:<12} wall {wall:6.3f} s   cpu {cpu:6.3f} s   peak RSS {rss:6.1f} MiB")
    scan = results["orjson scan"][0]
    plan, plan_cpu, plan_rss = results["plan"]
    dirty, dirty_cpu, dirty_rss = results["dirty"]
    scan_cpu = results["orjson scan"][1]
    print(f"  (cpu-time ratios: plan {plan_cpu / scan_cpu:.2f}, dirty {dirty_cpu / scan_cpu:.2f})")
    checks = [
        ("plan / orjson scan (wall)", plan / scan, "<=", 1.5),
        ("speed-up vs earlier plan (3.47 s)", EARLIER_PLAN_SECONDS / plan, ">=", 8.0),
        ("dirty / orjson scan (wall)", dirty / scan, "<=", 1.2),
        ("plan peak RSS MiB", plan_rss, "<=", RSS_LIMIT_MIB),
        ("dirty peak RSS MiB", dirty_rss, "<=", RSS_LIMIT_MIB),
    ]
    failed = 0
    for label, value, op, target in checks:
        ok = value <= target if op == "<=" else value >= target
        failed += not ok
        print(f"  {label:<36} {value:7.2f}  target {op} {target:<5} {'ok' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
