"""Speed and memory of ``plan``, ``dirty`` and ``fork`` on a 100 MB Codex rollout (issue 16).

Run: ``python tests/benchmarks/bench_codex.py [--mb 100] [--runs 3]``

Builds two real-shaped rollouts in a temp dir from the recorded 0.169 corpus: line 0 is the
source's ``session_meta``; the rest of the file repeats the source's later lines (fresh uuids
per copy, ordinals renumbered), a tool-heavy one from ``--source`` (reasoning, function calls)
and a speech-heavy one from ``--speech-source``. Measures each command in its own subprocess
against a bare orjson line scan, with the machinery and targets of ``bench_engine.py``; the
targets are judged on CPU time (user+sys), wall time is printed too.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.benchmarks.bench_engine import (  # noqa: E402 - after the path is set
    CORPUS,
    RSS_LIMIT_MIB,
    UUID,
    commands,
    measure_all,
    show,
)

FOLDER = CORPUS / "codex-0.169"
DEFAULT_SOURCE = "02-exec-reasoning-toolcall-4-turns.jsonl"
SPEECH_SOURCE = "03-multi-turn-exec-resume-then-tui-resume.jsonl"


def build_rollout(source: Path, target: Path, megabytes: int) -> int:
    """Write line 0 of ``source``, then its other lines repeated until ``megabytes`` MB."""
    head, *body = source.read_bytes().splitlines()
    want = megabytes * 1_000_000
    ordinal = 1
    copy = 0
    with open(target, "wb") as out:
        written = out.write(head + b"\n")
        while written < want:
            mapping: dict[bytes, bytes] = {}

            def fresh(match: re.Match[bytes], copy: int = copy,
                      mapping: dict[bytes, bytes] = mapping) -> bytes:
                return _fresh(match.group(0), copy, mapping)

            for line in body:
                event = orjson.loads(UUID.sub(fresh, line))
                event["ordinal"] = ordinal
                ordinal += 1
                written += out.write(orjson.dumps(event) + b"\n")
            copy += 1
    return written


def _fresh(old: bytes, copy: int, mapping: dict[bytes, bytes]) -> bytes:
    if old not in mapping:
        mapping[old] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{copy}:{old!r}")).encode()
    return mapping[old]


def cpu_ratio(results: dict[str, tuple[float, float, float]], name: str) -> float:
    """CPU time of ``name`` over the orjson scan's, both best of the same runs."""
    return results[name][1] / results["orjson scan"][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="tool-heavy rollout")
    parser.add_argument("--speech-source", default=SPEECH_SOURCE, help="speech-heavy rollout")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name in (args.source, args.speech_source):
        if not (FOLDER / name).is_file():
            print(f"corpus file not found: {FOLDER / name}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="tl-bench-codex-") as tmp:
        folder = Path(tmp)
        tool = folder / f"rollout-2026-12-03T10-00-00-{uuid.uuid4()}.jsonl"
        speech = folder / f"rollout-2026-12-03T10-00-00-{uuid.uuid4()}.jsonl"
        forks = folder / "forks"
        forks.mkdir()
        sizes = [build_rollout(FOLDER / args.source, tool, args.mb),
                 build_rollout(FOLDER / args.speech_source, speech, args.mb)]
        print(f"tool-heavy {sizes[0] / 1e6:.1f} MB from {args.source}; speech-heavy "
              f"{sizes[1] / 1e6:.1f} MB from {args.speech_source}; best of {args.runs} runs; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        both = {f"tool {k}": v for k, v in commands(tool, forks).items()}
        both |= {f"speech {k}": v for k, v in commands(speech, forks).items()}
        measured = measure_all(both, args.runs, folder / "pycache")
    heavy = {k[5:]: v for k, v in measured.items() if k.startswith("tool ")}
    spoken = {k[7:]: v for k, v in measured.items() if k.startswith("speech ")}
    show("tool-heavy:", heavy)
    show("speech-heavy:", spoken)
    # judged on CPU time (user+sys of the process): the machine is shared, and wall time
    # moves with the other processes' load far more than CPU time does
    checks = [
        ("tool-heavy plan / orjson scan (CPU)", cpu_ratio(heavy, "plan"), 1.0),
        ("speech-heavy plan / orjson scan (CPU)", cpu_ratio(spoken, "plan"), 1.2),
        ("speech-heavy dirty / orjson scan (CPU)", cpu_ratio(spoken, "dirty"), 1.0),
        ("tool-heavy fork / orjson scan (CPU)", cpu_ratio(heavy, "fork"), 1.5),
        ("speech-heavy fork / orjson scan (CPU)", cpu_ratio(spoken, "fork"), 1.5),
        ("peak RSS MiB (plan, dirty, fork)", max(
            r[name][2] for r in (heavy, spoken) for name in ("plan", "dirty", "fork")
        ), RSS_LIMIT_MIB),
    ]
    failed = 0
    for label, value, target in checks:
        ok = value <= target
        failed += not ok
        print(f"  {label:<42} {value:7.2f}  target <= {target:<5} {'ok' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
