"""The lasting hostile-input guard (issue 11): seeded, bounded fuzzing of the reader and of the
``tl-rebuild`` entry points with mutated real corpus lines and arbitrary JSON values.

Every case asserts: no traceback (only ThreadlineError subclasses, exit 0 or 1 with one line),
never a hang (each case is small and the CLI runs under a timeout), and every planted human
sentence — a clean typed prompt placed among the mutated lines — is carried into the
candidate. The seed is fixed so a failure reproduces; ``THREADLINE_FUZZ_SEED`` varies it.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from runtime.cli import main as cli_main
from runtime.config import Config
from runtime.engine import candidate
from runtime.errors import BlockedError, NothingToCarryError, ThreadlineError
from tests.conftest import corpus_dir
from tests.fixtures.transcripts import Transcript

SEED = int(os.environ.get("THREADLINE_FUZZ_SEED", "1103"))
READER_CASES = 5000
CLI_CASES = 1000
SUBPROCESS_CASES = 12
ODD_STRINGS = ["", " ", "\ud83d", "we chose \udc00 x", "0000-01-01T00:00:00Z",
               "9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00", "[Request interrupted",
               "<system-reminder>x</system-reminder>", "\x00", "é" * 50, "<channel source=\"x\">"]
# Fields whose odd values broke the reader before (issue 11 §3): tried more often.
HOSTILE_KEYS = {"timestamp", "signature", "data", "thinking", "text", "content", "type",
                "isMeta", "origin", "attachment", "prompt", "name", "input"}
ODD_STAMPS = ["0000-01-01T00:00:00Z", "9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00"]
TL_REBUILD = str(Path(sys.executable).with_name("tl-rebuild"))


def corpus_lines() -> list[bytes]:
    found = corpus_dir()
    if found is None:
        pytest.skip("shared corpus not found beside the checkout (../shared/corpus)")
    lines: list[bytes] = []
    for path in sorted(found.glob("*.jsonl")) + sorted((found / "live-2.1.328").glob("*.jsonl")):
        with open(path, "rb") as handle:
            lines.extend(line.rstrip(b"\n") for _, line in zip(range(400), handle, strict=False))
    return [line for line in lines if 0 < len(line) < 20_000]


def odd_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(12 if depth < 3 else 8)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 7, 2**63, -(2**64), 10**30])
    if pick == 3:
        return rng.choice([0.5, -1e308, 1e-320, 3.0])
    if pick in (4, 5, 6, 7):
        return rng.choice(ODD_STRINGS)
    if pick in (8, 9):
        return [odd_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["type", "text", "content", "signature", "data", "x"]):
            odd_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out.extend(_paths(inner, (*prefix, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:5]):
            out.extend(_paths(inner, (*prefix, index)))
    return out


def mutate(rng: random.Random, line: bytes) -> bytes:
    """One mutation of a real line: an odd value in any field, a dropped key, a cut, bytes, or
    an extra block with odd values spliced into a message's content."""
    how = rng.randrange(7)
    if how == 0:
        cut = rng.randrange(len(line))
        return line[:cut]
    if how == 1:
        at = rng.randrange(len(line))
        return line[:at] + rng.choice([b"\\ud83d", b"\xff", b"\x00", b"}", b'"']) + line[at:]
    try:
        event = json.loads(line)
    except ValueError:
        return line
    content = event.get("message", {}).get("content") if isinstance(event, dict) and \
        isinstance(event.get("message"), dict) else None
    if how == 6 and isinstance(content, list):
        content.insert(rng.randrange(len(content) + 1), {
            "type": rng.choice(["thinking", "redacted_thinking", "image", "tool_use", "text"]),
            "thinking": odd_value(rng), "signature": odd_value(rng), "data": odd_value(rng),
            "text": odd_value(rng), "source": odd_value(rng), "name": odd_value(rng)})
        return json.dumps(event).encode("utf-8", "surrogatepass")
    paths = _paths(event)
    if not paths:
        return line
    hostile = [p for p in paths if p[-1] in HOSTILE_KEYS]
    path = rng.choice(hostile if hostile and rng.random() < 0.6 else paths)
    holder = event
    for part in path[:-1]:
        holder = holder[part]
    if how == 2 and isinstance(holder, dict):
        del holder[path[-1]]
    else:
        holder[path[-1]] = odd_value(rng)
    return json.dumps(event).encode("utf-8", "surrogatepass")


def planted(rng: random.Random, n: int) -> tuple[str, bytes]:
    """A human sentence that must be carried, in one of the shapes that once lost it: plain,
    after an interrupt marker, with a lone surrogate escape, with an overflowing timestamp,
    or as the second block of a multi-block prompt."""
    sentence = f"planted sentence number {n} about the blue door"
    t = Transcript()
    shape = rng.randrange(5)
    if shape == 1:
        t.user(f"[Request interrupted by user]\n{sentence}")
    elif shape == 3:
        t.user(sentence, timestamp=rng.choice(ODD_STAMPS))
    elif shape == 4:
        t.user([{"type": "text", "text": "[Request interrupted by user for tool use]"},
                {"type": "text", "text": sentence}])
    else:
        t.user(sentence)
    line = t.lines[0]
    if shape == 2:
        line = line.replace(sentence.encode(), sentence.encode() + b" \\ud83d")
    return sentence, line


def case(rng: random.Random, lines: list[bytes], number: int) -> tuple[bytes, list[str]]:
    chosen = [mutate(rng, rng.choice(lines)) if rng.random() < 0.7 else rng.choice(lines)
              for _ in range(rng.randrange(1, 8))]
    sentences = []
    for k in range(rng.randrange(0, 3)):
        sentence, line = planted(rng, number * 10 + k)
        chosen.insert(rng.randrange(len(chosen) + 1), line)
        sentences.append(sentence)
    return b"\n".join(chosen) + b"\n", sentences


def carried_texts(built: candidate.Build) -> str:
    return "\n".join(block.get("text", "") for item in built.items
                     for block in item["message"]["content"])


def test_mutated_corpus_lines_never_crash_the_reader_and_planted_words_are_carried(
    tmp_path: Path,
) -> None:
    rng, lines = random.Random(SEED), corpus_lines()
    path = tmp_path / "fuzz.jsonl"
    for number in range(READER_CASES):
        data, sentences = case(rng, lines, number)
        path.write_bytes(data)
        try:
            built = candidate.build(path, Config())
        except NothingToCarryError:
            assert not sentences, f"case {number} (seed {SEED}): planted words not carried"
            continue
        except BlockedError:
            continue  # a mutated line can poison the context; blocking is the right answer
        except ThreadlineError as exc:
            assert not sentences, f"case {number} (seed {SEED}): {exc}"
            continue
        text = carried_texts(built)
        missing = [s for s in sentences if s not in text]
        assert not missing, f"case {number} (seed {SEED}): {missing} dropped"


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            rc = cli_main(argv)
        except SystemExit as exc:  # argparse usage errors
            rc = int(exc.code or 0)
    return rc, err.getvalue()


def test_the_cli_entry_points_answer_mutated_transcripts_with_exit_0_or_1_and_one_line(
    tmp_path: Path,
) -> None:
    rng, lines = random.Random(SEED + 1), corpus_lines()
    path = tmp_path / "fuzz.jsonl"
    into = tmp_path / "out"
    into.mkdir()
    for number in range(CLI_CASES):
        data, _ = case(rng, lines, number)
        path.write_bytes(data)
        command = rng.choice([["plan"], ["dirty"], ["fork", "--into", str(into)],
                              ["plan", "--json"]])
        rc, err = run_cli([*command, "--transcript", str(path)])
        assert rc in (0, 1), f"case {number}: {command} rc={rc} {err}"
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
        for written in into.iterdir():
            written.unlink()


def test_the_installed_commands_never_hang_or_trace_on_hostile_input(tmp_path: Path) -> None:
    rng, lines = random.Random(SEED + 2), corpus_lines()
    config = tmp_path / "threadline.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    for number in range(SUBPROCESS_CASES):
        data, _ = case(rng, lines, number)
        path = tmp_path / f"fuzz-{number}.jsonl"
        path.write_bytes(data)
        argv, stdin = rng.choice([
            ([TL_REBUILD, "plan", "--transcript", str(path)], b""),
            ([TL_REBUILD, "hook-stop", "--config", str(config)], data),
            ([TL_REBUILD, "request", "--config", str(config), "--confirm", "REBUILD",
              "--reason", json.dumps(odd_value(rng))], b""),
        ])
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=60, check=False)
        assert done.returncode in (0, 1), (argv, done.stderr)
        assert b"Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 1
