"""Speed and memory of ``plan``, ``dirty`` and ``fork`` against a bare orjson scan (issue 13).

Run: ``python tests/benchmarks/bench_engine.py [--mb 100] [--runs 5] [--gb]``

Builds two transcripts in a temp dir by repeating a real corpus file with fresh uuids and
sessionIds — a tool-heavy one (``--source``) and a speech-heavy one (``--speech-source``) —
and measures on each, in the same run, each command in its own subprocess (wall and CPU time,
best of ``--runs``, runs interleaved; peak RSS via ``/usr/bin/time``): a bare line-by-line
``orjson.loads`` scan, the same with stdlib ``json``, ``tl-rebuild plan --json``, ``dirty
--json`` and ``fork --json``. ``--gb`` adds a 1 GB tool-heavy file (written to the temp dir
and deleted) and compares its ``plan`` time with the 100 MB one. Prints every ratio and the
targets and exits 1 when one is missed. On a shared machine wall time is noisy: the CPU-time
ratios are printed beside the wall ones.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("THREADLINE_CORPUS", REPO.parent / "shared" / "corpus"))
DEFAULT_SOURCE = "samar-58__scout__claude-session.jsonl"  # 99 % noise, images and tools
# the corpus file with the most speech per byte (38 % conversation bytes)
SPEECH_SOURCE = "bastion-defend__bastion__claude-session.jsonl"
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


Result = dict[str, tuple[float, float, float]]


def commands(path: Path, into: Path) -> dict[str, list[str]]:
    """The timed commands on ``path``; fork writes into ``into``.

    The repeated source trips the poison check (the same poison words in every copy), which
    would make ``fork`` refuse; ``fork`` alone gets a config that turns it off, so its time
    includes reading a config (JSON Schema validation), as in real use. ``plan`` and ``dirty``
    run on the defaults, as on an explicit ``--transcript``.
    """
    py = sys.executable
    config = into.parent / "bench.toml"
    config.write_text("[rebuild]\npoison_threshold = 1000000\n")
    cli = [py, "-m", "runtime.cli"]
    return {
        "orjson scan": [py, "-c", SCAN.format(mod="orjson"), str(path)],
        "json scan": [py, "-c", SCAN.format(mod="json"), str(path)],
        "plan": [*cli, "plan", "--json", "--transcript", str(path)],
        "dirty": [*cli, "dirty", "--json", "--transcript", str(path)],
        "fork": [*cli, "fork", "--config", str(config), "--json", "--transcript", str(path)]
        + ["--into", str(into)],
    }


def show(title: str, results: Result) -> None:
    print(title)
    scan_wall, scan_cpu, _ = results["orjson scan"]
    for name, (wall, cpu, rss) in results.items():
        print(
            f"  {name:<12} wall {wall:6.3f} s ({wall / scan_wall:4.2f}x)   "
            f"cpu {cpu:6.3f} s ({cpu / scan_cpu:4.2f}x)   peak RSS {rss:6.1f} MiB"
        )


def ratio(results: Result, name: str) -> float:
    return results[name][0] / results["orjson scan"][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="tool-heavy corpus file")
    parser.add_argument("--speech-source", default=SPEECH_SOURCE, help="speech-heavy file")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gb", action="store_true", help="also time plan on a 1 GB file")
    args = parser.parse_args()
    for name in (args.source, args.speech_source):
        if not (CORPUS / name).is_file():
            print(f"corpus file not found: {CORPUS / name}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="tl-bench-") as tmp:
        folder = Path(tmp)
        tool = folder / f"{uuid.uuid4()}.jsonl"
        speech = folder / f"{uuid.uuid4()}.jsonl"
        forks = folder / "forks"
        forks.mkdir()
        sizes = [build_transcript(CORPUS / args.source, tool, args.mb)]
        sizes.append(build_transcript(CORPUS / args.speech_source, speech, args.mb))
        print(
            f"tool-heavy {sizes[0] / 1e6:.1f} MB from {args.source}; speech-heavy "
            f"{sizes[1] / 1e6:.1f} MB from {args.speech_source}; best of {args.runs} runs; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        subprocess.run(["cat", str(tool), str(speech)], stdout=subprocess.DEVNULL, check=True)
        both = {f"tool {k}": v for k, v in commands(tool, forks).items()}
        both |= {f"speech {k}": v for k, v in commands(speech, forks).items()}
        measured = measure_all(both, args.runs, folder / "pycache")
        heavy = {k[5:]: v for k, v in measured.items() if k.startswith("tool ")}
        spoken = {k[7:]: v for k, v in measured.items() if k.startswith("speech ")}
        big_plan = None
        if args.gb:
            tool.unlink()
            speech.unlink()
            shutil.rmtree(forks)
            big = folder / f"{uuid.uuid4()}.jsonl"
            build_transcript(CORPUS / args.source, big, args.mb * 10)
            plan_argv = commands(big, folder)["plan"]
            big_plan = measure_all({"plan": plan_argv}, 1, folder / "pycache")["plan"]
            big.unlink()
    show("tool-heavy:", heavy)
    show("speech-heavy:", spoken)
    checks = [
        ("tool-heavy plan / orjson scan (wall)", ratio(heavy, "plan"), 1.0),
        ("speech-heavy plan / orjson scan (wall)", ratio(spoken, "plan"), 1.2),
        ("speech-heavy dirty / orjson scan (wall)", ratio(spoken, "dirty"), 1.0),
        ("tool-heavy fork / orjson scan (wall)", ratio(heavy, "fork"), 1.5),
        ("speech-heavy fork / orjson scan (wall)", ratio(spoken, "fork"), 1.5),
        ("peak RSS MiB (plan, dirty, fork)", max(
            r[name][2] for r in (heavy, spoken) for name in ("plan", "dirty", "fork")
        ), RSS_LIMIT_MIB),
    ]
    if big_plan is not None:
        print(f"  1 GB plan   wall {big_plan[0]:6.3f} s   peak RSS {big_plan[2]:6.1f} MiB")
        checks.append(("1 GB plan / 100 MB plan (wall)", big_plan[0] / heavy["plan"][0], 11.0))
        checks.append(("1 GB plan peak RSS MiB", big_plan[2], RSS_LIMIT_MIB))
    failed = 0
    for label, value, target in checks:
        ok = value <= target
        failed += not ok
        print(f"  {label:<42} {value:7.2f}  target <= {target:<5} {'ok' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
