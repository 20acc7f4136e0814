"""The floor under ``plan``: what the reader's unavoidable ingredients cost alone (issue 13).

Run: ``python tests/benchmarks/bench_floor.py [--mb 100] [--runs 5]``

Builds the two 100 MB files of ``bench_engine.py`` (tool-heavy, speech-heavy), holds their
lines in memory and times, in this one process, best of ``--runs``, rounds interleaved:

- ``orjson scan``: ``orjson.loads`` of every line — the yardstick of every target;
- ``head decode``: the prefilter's typed ``msgspec`` decode of every line it decodes (the
  cheapest way found to tell speech from noise without building the noise; a long line whose
  first bytes look spoken goes straight to the full parse);
- ``UTF-8 check``: ``bytes.decode`` of every non-ASCII line the prefilter settles (orjson
  rejects invalid UTF-8 anywhere, msgspec does not look inside the fields it skips, so the
  reference would count such a line malformed);
- ``full parse``: ``orjson.loads`` of every line the prefilter hands to the full parse.

Their sum is what the prefilter design costs before one line of classification, turn or
token logic runs; the other design, ``orjson.loads`` of every line, costs the scan itself plus
that logic. Prints each ingredient and the sum as a ratio to the scan. It measures no
product behaviour and asserts nothing: it says how close to the targets a reader built from
these parts can get.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_engine import CORPUS, DEFAULT_SOURCE, SPEECH_SOURCE, build_transcript  # noqa: E402

from runtime.config import RebuildConfig  # noqa: E402
from runtime.engine import prefilter  # noqa: E402
from runtime.engine.classify import Classifier  # noqa: E402
from runtime.engine.dirty import Ledger  # noqa: E402
from runtime.engine.speech import SpeechRules  # noqa: E402
from runtime.engine.transcript import ReadStats  # noqa: E402


def split(lines: list[bytes]) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(lines the prefilter decodes, non-ASCII lines it settles, lines it hands to the full
    parse)."""
    classifier = Classifier(SpeechRules.from_config(RebuildConfig()), ReadStats(), Ledger(), None)
    take = prefilter.Prefilter(classifier).take
    decoded: list[bytes] = []
    settled_wide: list[bytes] = []
    parsed: list[bytes] = []
    for line in lines:
        if not (len(line) > prefilter.PEEK and prefilter._looks_spoken(line)):
            decoded.append(line)
        if take(line, len(line)):
            if not line.isascii():
                settled_wide.append(line)
        else:
            parsed.append(line)
    return decoded, settled_wide, parsed


def loops(lines: list[bytes]) -> dict[str, Callable[[], None]]:
    decoded, settled_wide, parsed = split(lines)
    loads = orjson.loads
    head = prefilter._decode_head

    def scan() -> None:
        for line in lines:
            try:
                loads(line)
            except ValueError:
                pass

    def heads() -> None:
        for line in decoded:
            try:
                head(line)
            except msgspec.DecodeError:
                pass

    def utf8() -> None:
        for line in settled_wide:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                pass

    def full() -> None:
        for line in parsed:
            try:
                loads(line)
            except ValueError:
                pass

    return {"orjson scan": scan, "head decode": heads, "UTF-8 check": utf8, "full parse": full}


def best_of(timed: dict[str, Callable[[], None]], runs: int) -> dict[str, float]:
    best = dict.fromkeys(timed, float("inf"))
    for _ in range(runs):
        for name, loop in timed.items():
            start = time.process_time()
            loop()
            best[name] = min(best[name], time.process_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for name in (DEFAULT_SOURCE, SPEECH_SOURCE):
        if not (CORPUS / name).is_file():
            print(f"corpus file not found: {CORPUS / name}", file=sys.stderr)
            return 2
    print(f"in-process CPU, lines in memory, best of {args.runs}")
    with tempfile.TemporaryDirectory(prefix="tl-floor-") as tmp:
        for label, source in (("tool-heavy", DEFAULT_SOURCE), ("speech-heavy", SPEECH_SOURCE)):
            path = Path(tmp) / f"{label}.jsonl"
            build_transcript(CORPUS / source, path, args.mb)
            with open(path, "rb") as handle:
                lines = handle.readlines()
            path.unlink()
            best = best_of(loops(lines), args.runs)
            scan = best.pop("orjson scan")
            print(f"{label}: {len(lines)} lines, orjson scan {scan:.3f} s")
            for name, seconds in best.items():
                print(f"  {name:<12} {seconds:.3f} s  {seconds / scan:5.2f}x")
            floor = sum(best.values())
            print(f"  {'floor (sum)':<12} {floor:.3f} s  {floor / scan:5.2f}x of the scan")
            del lines
    return 0


if __name__ == "__main__":
    sys.exit(main())
