"""The log format of ``worker.log`` and the hook's error log, and the loggers that write it.

Apart from ``runtime.proc`` (which keeps ``rotate_log`` and ``append_line``): importing
``logging`` cost every ``fork`` ≈ 4 ms of start-up it never used (issue 13).
"""

from __future__ import annotations

import logging
import os
import sys
import time

from runtime.proc import append_line, rotate_log


class LogFormat(logging.Formatter):
    """The one line format of ``worker.log``: ``<UTC time, ms>Z <who>[<pid>] <message>``.

    ``who`` is the last part of the logger's name (``threadline.worker`` → ``worker``).
    """

    def format(self, record: logging.LogRecord) -> str:
        t = record.created
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
        line = f"{stamp} {record.name.rsplit('.', 1)[-1]}[{record.process}] {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _Stdout:
    """Whatever ``sys.stdout`` is at the time of the write (a worker's is its log file)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


class AppendToLog(logging.Handler):
    """Appends each record to a log file the way ``worker.log`` is kept: rotated when full
    (``rotate_log``), created 0600, each line fsynced. A failure raises (a ProcError), so the
    caller can fall back to stderr."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = path
        self.setFormatter(LogFormat())

    def emit(self, record: logging.LogRecord) -> None:
        rotate_log(self.path)
        append_line(self.path, self.format(record).encode("utf-8", "replace"))


def logger(name: str, handler: logging.Handler | None = None) -> logging.Logger:
    """The logger ``threadline.<name>`` in ``LogFormat``: to ``handler``, else to stdout.

    A worker's stdout is its log file (``spawn_detached``), and a worker run in the
    foreground (the pointer runner's hook call) writes where its caller's output goes.
    """
    log = logging.getLogger(f"threadline.{name}")
    if handler is None:
        handler = logging.StreamHandler(_Stdout())
        handler.setFormatter(LogFormat())
    log.handlers[:] = [handler]
    log.propagate = False  # one format and one place, whatever the host app's root logger does
    log.setLevel(logging.INFO)
    return log
