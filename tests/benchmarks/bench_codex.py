"""Speed and memory of ``plan``, ``dirty`` and ``fork`` on a 100 MB Codex rollout (issue 16).

Run: ``python tests/benchmarks/bench_codex.py [--mb 100] [--runs 3]``

Builds four rollouts in a temp dir. The two the targets are judged on are real-shaped: the
Claude benchmark's real transcripts (tool-heavy ``--source``, speech-heavy
``--speech-source``) carried over line for line into Codex 0.169 records
(``codex_shape.translate``), then resumed copies of that conversation (fresh uuids, ordinals
numbered on) up to the size. The two dense ones repeat the recorded 0.169 samples
(``--dense-source``, ``--dense-speech-source``: line 0, then the later lines) — recorded
against a fake Responses API, a message every six lines and 500-byte tool outputs, nothing like
a real session's shape; their ratios are printed, not judged. Measures each command in its own
subprocess against a bare orjson line scan, with the machinery and targets of
``bench_engine.py``; the targets are judged on CPU time (user+sys), wall time is printed too.
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
from runtime.config import Config  # noqa: E402 - after the path is set
from runtime.engine.report import dirty_report  # noqa: E402
from tests.benchmarks.bench_engine import (  # noqa: E402
    CORPUS,
    RSS_LIMIT_MIB,
    UUID,
    commands,
    measure_all,
    show,
)
from tests.benchmarks.bench_engine import DEFAULT_SOURCE as CLAUDE_SOURCE  # noqa: E402
from tests.benchmarks.bench_engine import SPEECH_SOURCE as CLAUDE_SPEECH  # noqa: E402
from tests.benchmarks.codex_shape import SAMPLE, translate  # noqa: E402

FOLDER = CORPUS / "codex-0.169"
DENSE_SOURCE = SAMPLE  # the recorded sample the translation copies its lines from
DENSE_SPEECH = "03-multi-turn-exec-resume-then-tui-resume.jsonl"


def build_rollout(head: list[bytes], body: list[bytes], target: Path, megabytes: int,
                  keep: frozenset[bytes] = frozenset()) -> int:
    """Write the ``head`` lines, then the ``body`` lines repeated until ``megabytes`` MB: each
    copy with fresh uuids (but those in ``keep``), ordinals numbered on from the head's."""
    want = megabytes * 1_000_000
    ordinal = len(head)
    copy = 0
    with open(target, "wb") as out:
        written = out.write(b"".join(line + b"\n" for line in head))
        while written < want:
            mapping: dict[bytes, bytes] = {old: old for old in keep}

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


def _name(folder: Path, thread: str) -> Path:
    return folder / f"rollout-2026-12-03T10-00-00-{thread}.jsonl"


def build_files(args: argparse.Namespace, folder: Path) -> dict[str, tuple[Path, str]]:
    """The four rollouts of the run: label -> (path, what it was built from)."""
    files: dict[str, tuple[Path, str]] = {}
    for label, name in (("tool-heavy", args.source), ("speech-heavy", args.speech_source)):
        thread = str(uuid.uuid4())
        head, body = translate(CORPUS / name, FOLDER / SAMPLE, thread)
        path = _name(folder, thread)
        build_rollout(head, body, path, args.mb, keep=frozenset({thread.encode()}))
        files[label] = (path, f"{name} as Codex lines")
    for label, name in (("dense tool", args.dense_source),
                        ("dense speech", args.dense_speech_source)):
        head, *body = (FOLDER / name).read_bytes().splitlines()
        path = _name(folder, str(uuid.uuid4()))
        build_rollout([head], body, path, args.mb)
        files[label] = (path, f"{name} repeated")
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--source", default=CLAUDE_SOURCE, help="tool-heavy Claude transcript")
    parser.add_argument("--speech-source", default=CLAUDE_SPEECH, help="speech-heavy one")
    parser.add_argument("--dense-source", default=DENSE_SOURCE, help="fake-API tool sample")
    parser.add_argument("--dense-speech-source", default=DENSE_SPEECH, help="fake-API speech")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    wanted = [CORPUS / args.source, CORPUS / args.speech_source, FOLDER / SAMPLE,
              FOLDER / args.dense_source, FOLDER / args.dense_speech_source]
    for path in wanted:
        if not path.is_file():
            print(f"corpus file not found: {path}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="tl-bench-codex-") as tmp:
        folder = Path(tmp)
        forks = folder / "forks"
        forks.mkdir()
        files = build_files(args, folder)
        for label, (path, made) in files.items():
            ratio = dirty_report(path, Config(), agent="codex")["noise_ratio"]
            print(f"{label + ':':<14} {path.stat().st_size / 1e6:5.1f} MB from {made}; "
                  f"noise share {ratio:.3f}")
        print(f"best of {args.runs} runs; load average {os.getloadavg()[0]:.2f} on "
              f"{os.cpu_count()} cores")
        every = {f"{label}|{k}": v for label, (path, _) in files.items()
                 for k, v in commands(path, forks).items()}
        measured = measure_all(every, args.runs, folder / "pycache")
    results = {label: {k.split("|", 1)[1]: v for k, v in measured.items()
                       if k.startswith(label + "|")} for label in files}
    for label, result in results.items():
        dense = " (fake-API sample: printed, not judged)" if label.startswith("dense") else ""
        show(f"{label}{dense}:", result)
    heavy, spoken = results["tool-heavy"], results["speech-heavy"]
    print("dense files, printed for comparison with earlier rounds (not judged): " + ", ".join(
        f"{label} plan {cpu_ratio(results[label], 'plan'):.2f}x dirty "
        f"{cpu_ratio(results[label], 'dirty'):.2f}x fork {cpu_ratio(results[label], 'fork'):.2f}x"
        for label in ("dense tool", "dense speech")))
    # judged on CPU time (user+sys of the process) on the two real-shaped files: the machine
    # is shared, and wall time moves with the other processes' load far more than CPU time
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
