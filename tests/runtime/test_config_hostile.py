"""Hostile runtime configs (issue 11 §7, §8): relative paths, NUL bytes, NaN/Infinity and absurd
numbers are refused at validation naming the key, together with regex errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import load_config
from runtime.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("key", ["state_dir", "project_dir", "workdir"])
def test_a_relative_path_is_refused_naming_the_key(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: 'state' does not match"):
        load_config(write(tmp_path, f'{key} = "state"\n'))


def test_a_relative_worker_log_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"switch\.worker_log: 'w\.log' does not match"):
        load_config(write(tmp_path, '[switch]\nworker_log = "w.log"\n'))


@pytest.mark.parametrize(("line", "message"), [
    ("token_cjk_factor = nan", r"rebuild\.token_cjk_factor: nan is not a finite number"),
    ("token_cjk_factor = inf", r"rebuild\.token_cjk_factor: inf is not a finite number"),
    ("token_other_divisor = 1e-320", r"rebuild\.token_other_divisor: 1e-320 is less than"),
    ("carry_max_tokens = 9223372036854775807",
     r"rebuild\.carry_max_tokens: 9223372036854775807 is greater than"),
])
def test_nan_infinity_and_absurd_numbers_are_refused_naming_the_key(
    tmp_path: Path, line: str, message: str,
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, f"[rebuild]\n{line}\n"))


def test_a_nul_byte_in_a_path_or_argv_token_is_refused_naming_the_key(tmp_path: Path) -> None:
    text = 'state_dir = "/var/lib/x\\u0000y"\n[switch]\nresume_argv = ["claude", "a\\u0000b"]\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert "state_dir: contains a NUL byte" in str(caught.value)
    assert "switch.resume_argv.1: contains a NUL byte" in str(caught.value)


def test_a_bad_regex_is_reported_together_with_schema_errors(tmp_path: Path) -> None:
    text = '[rebuild]\npoison_patterns = ["("]\nstamp_turns = "yes"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    message = str(caught.value)
    assert "rebuild.stamp_turns: 'yes' is not of type 'boolean'" in message
    assert "rebuild.poison_patterns.0: '(' is not a valid regular expression" in message


def test_a_fifo_or_device_as_the_config_is_refused_not_read_forever(tmp_path: Path) -> None:
    """``--config`` naming a FIFO hung in open() waiting for a writer (``hook-stop`` with
    THREADLINE_CONFIG on one hung Claude Code's turn end); /dev/zero would never end."""
    import os
    import threading

    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    caught: list[BaseException] = []

    def load() -> None:
        try:
            load_config(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            caught.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # blocked in open(): a writer end lets it go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=30)
        pytest.fail("load_config waited for a writer on a FIFO")
    assert [str(e) for e in caught] == [f"config {str(fifo)!r} is not a regular file"]
    with pytest.raises(ConfigError, match="'/dev/zero' is not a regular file"):
        load_config("/dev/zero")
