"""The Stop hook: ``tl-rebuild hook-stop [--config C] [--wait]`` with the hook JSON on stdin.

Claude Code runs it after every turn, so the path with nothing pending reads one small file
and imports only ``json``/``os``/``tomllib`` (plus ``select``/``fcntl`` for its bounds). It
always exits 0 and prints ``{}`` — never blocking on a full or closed stdout: a Stop hook that
exits 2 would feed its stderr to the model and start another turn. Stdin is read to EOF
within 4 MiB and 3 s; a cut read acts on nothing. Errors go to the
operation timeline and the worker log.

With a pending operation bound to this session it marks the operation ``scheduled`` and
spawns a detached worker (``setsid``; inside a systemd service wrapped in ``systemd-run
--scope -p KillMode=process``, or the operation fails with that reason). A Stop from another
session is ignored with a timeline entry. ``--wait`` runs the worker in the foreground.

Pointer door: the runner's payload-less call (``< /dev/null``) between two ``claude -p`` calls
runs the worker in the foreground (the next call then sees the new pointer); a Stop with
Claude Code's payload (from inside ``claude -p``, which waits for this hook) never does — it
records ``stop_deferred`` and returns at once (runtime.switch.schedule).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

ACTIVE_FILE = "active"
CONFIG_ENV = "THREADLINE_CONFIG"


STDIN_MAX_BYTES = 4 << 20  # Claude Code's Stop payload is a few KB (ids, paths, last message)
STDIN_MAX_SECONDS = 3.0  # a writer that keeps the pipe open without EOF is not Claude Code


def main(argv: Sequence[str]) -> int:
    """Run the hook; always returns 0 and prints ``{}`` (unless stdout is closed or full)."""
    try:
        payload = _read_stdin()
        config_path = _config_path(argv)
        if config_path:
            state_dir = _state_dir(config_path)
            if state_dir and os.path.exists(os.path.join(state_dir, ACTIVE_FILE)):
                _handle(config_path, payload, wait="--wait" in argv)
    except BaseException as exc:  # noqa: BLE001 - a Stop hook must never fail the turn
        _report(argv, exc)
    _answer()
    return 0


class StdinUnbounded(Exception):
    """The hook input was larger or slower than any Stop payload: nothing is acted on."""


def _read_stdin() -> bytes:
    """The hook input, read to EOF within STDIN_MAX_BYTES and STDIN_MAX_SECONDS.

    A cut read raises StdinUnbounded instead of returning a part: an empty or truncated
    payload would look like the pointer runner's payload-less call.
    """
    import select
    import time

    stream = sys.stdin
    if stream is None or stream.isatty():
        return b""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # an in-memory stream (embedding, tests): bounded by size
        data = stream.buffer.read(STDIN_MAX_BYTES + 1)
        if len(data) > STDIN_MAX_BYTES:
            raise StdinUnbounded(f"stdin exceeds {STDIN_MAX_BYTES} bytes; ignored") from None
        return bytes(data)
    deadline = time.monotonic() + STDIN_MAX_SECONDS
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise StdinUnbounded(f"stdin gave no EOF within {STDIN_MAX_SECONDS:g}s; ignored")
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > STDIN_MAX_BYTES:
            raise StdinUnbounded(f"stdin exceeds {STDIN_MAX_BYTES} bytes; ignored")
        chunks.append(chunk)


def _answer() -> None:
    """Write ``{}`` to stdout without ever blocking or failing: a closed or full pipe
    (nobody reading) is ignored, and stdout then points at /dev/null so the interpreter's
    final flush cannot fail either."""
    try:
        import fcntl
        import stat

        if stat.S_ISFIFO(os.fstat(1).st_mode):  # never on a terminal shared with a shell
            fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)
        os.write(1, b"{}\n")
    except OSError:
        pass
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _config_path(argv: Sequence[str]) -> str:
    args = list(argv)
    for i, token in enumerate(args):
        if token == "--config" and i + 1 < len(args):
            return os.path.abspath(args[i + 1])
        if token.startswith("--config="):
            return os.path.abspath(token.split("=", 1)[1])
    env = os.environ.get(CONFIG_ENV, "")
    return os.path.abspath(env) if env else ""


def _state_dir(config_path: str) -> str:
    """Only ``state_dir`` from the TOML file: the full (validated) config is read lazily.

    A path that is no regular file gives none (a FIFO would hang the hook; ``load_config``
    refuses it where an operator sees the error)."""
    import tomllib

    if not os.path.isfile(config_path):
        return ""

    with open(config_path, "rb") as handle:
        value = tomllib.load(handle).get("state_dir", "")
    return os.path.expanduser(value) if isinstance(value, str) else ""


def _payload(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _handle(config_path: str, raw: bytes, wait: bool) -> None:
    from runtime.config import load_config
    from runtime.switch.schedule import on_stop

    config = load_config(config_path)
    on_stop(config, _payload(raw), wait=wait)


def _report(argv: Sequence[str], exc: BaseException, name: str = "hook-stop") -> None:
    """Write the error to the worker log when one is known, else to stderr (exit stays 0)."""
    line = f"{type(exc).__name__}: {exc}"
    try:
        from runtime.config import load_config

        config = load_config(_config_path(argv) or None)
        log = config.worker_log_path
        if log is not None and log.parent.is_dir():
            from runtime import logs

            logs.logger(name, logs.AppendToLog(log)).error("%s", line)
            return
    except BaseException:  # noqa: BLE001, S110 - fall back to stderr below
        pass
    print(f"{name}: {line}", file=sys.stderr)
