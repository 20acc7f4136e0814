"""The operation store under ``state_dir``: records, timelines, artifacts, one lock.

    state_dir/
      lock                          fcntl.flock; every change happens under it
      active                        id of the one active operation (absent = none)
      operations/<id>.json          the record: atomic write + fsync, 0600, ``revision`` checked
      operations/<id>.events.jsonl  append-only timeline, one line per phase with evidence
      artifacts/<id>/               0700: source backup, startup snapshot, heartbeat (0600 files)

Records and timelines hold digests, ids, counts and argv — never conversation text; the full
text lives only in the 0600 backup under ``artifacts``. ``Store.transition`` is the one function
that changes an operation's state.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from runtime import proc
from runtime.errors import BusyError, ProcError, StoreError
from runtime.switch.state import ACTIVE, State, check_transition, parse_state

ACTIVE_FILE = "active"


def clock_stamp() -> dict[str, Any]:
    """Now, as ``clock_age`` measures it: this boot's id and its monotonic clock."""
    return {"boot_id": boot_id(), "monotonic": time.monotonic()}


def clock_age(stamp: Mapping[str, Any] | None, mtime: float) -> float:
    """Seconds since ``stamp`` (``clock_stamp``) on this boot's monotonic clock, which no NTP
    step or restored snapshot moves; a stamp of another boot, or none (an older release),
    falls back to the wall clock minus ``mtime``, the time its file was written."""
    if (stamp is not None and stamp.get("boot_id") == boot_id() and boot_id()
            and type(stamp.get("monotonic")) in (int, float)):
        return max(0.0, time.monotonic() - float(stamp["monotonic"]))
    return max(0.0, time.time() - mtime)


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``; '' when unreadable)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def now_iso() -> str:
    """The current UTC time as ISO-8601 with milliseconds."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


ID_PATTERN = re.compile(r"op-(\d{8}T\d{6})\.(\d{6})Z-[0-9a-f]{6}")
LOCK_TIMEOUT_S = 10.0
_YEAR_10000 = 253402300800 * 1_000_000  # microseconds from the epoch to 10000-01-01


def _stamp(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def new_operation_id(after: str = "") -> str:
    """A sortable id: UTC time to the microsecond plus random hex, sorting after ``after``.

    Example: ``op-20261203T061312.123456Z-3fa9c1``. When the clock reads earlier than the
    stamp of ``after`` (stepped back, or a stray far-future record), the stamp is ``after``'s
    plus one microsecond: creation order never depends on a monotonic wall clock, and no
    loop waits for the clock to catch up.
    """
    now = int(time.time() * 1_000_000)
    match = ID_PATTERN.fullmatch(after)
    if match:
        previous = calendar.timegm(time.strptime(match[1], "%Y%m%dT%H%M%S")) * 1_000_000
        now = max(now, previous + int(match[2]) + 1)
    if now >= _YEAR_10000:
        raise StoreError(f"operation {after!r} is dated at the end of year 9999, so no later "
                         "id exists; remove or rename that record")
    return f"op-{_stamp(now)}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Operation:
    """One operation record as stored; ``facts`` holds evidence (digests, ids, counts, argv)."""

    operation_id: str
    state: State
    revision: int
    created_at: str
    updated_at: str
    reasons: tuple[Mapping[str, str], ...] = ()
    bound_session_id: str | None = None
    door: str = ""
    worker: Mapping[str, Any] | None = None
    failure: Mapping[str, str] | None = None
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def fact(self, key: str, default: Any = None) -> Any:
        return self.facts.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "state": self.state.value,
            "revision": self.revision,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "reasons": [dict(r) for r in self.reasons],
            "bound_session_id": self.bound_session_id,
            "door": self.door,
            "worker": dict(self.worker) if self.worker else None,
            "failure": dict(self.failure) if self.failure else None,
            "facts": _plain(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "operation record") -> Operation:
        """The operation in ``data``; a missing or bad field is a StoreError naming ``where``."""
        try:
            return cls(
                operation_id=str(data["operation_id"]),
                state=parse_state(str(data["state"])),
                revision=int(data["revision"]),
                created_at=str(data["created_at"]),
                updated_at=str(data["updated_at"]),
                reasons=tuple(MappingProxyType(dict(r)) for r in data.get("reasons", [])),
                bound_session_id=data.get("bound_session_id"),
                door=str(data.get("door", "")),
                worker=MappingProxyType(dict(data["worker"])) if data.get("worker") else None,
                failure=MappingProxyType(dict(data["failure"])) if data.get("failure") else None,
                facts=MappingProxyType(dict(data.get("facts", {}))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"malformed {where}: missing or bad field {exc}") from exc


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class Store:
    """Reads and changes operations under one ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike[str],
                 lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.root = Path(state_dir)
        self.lock_timeout = lock_timeout
        self.operations_dir = self.root / "operations"
        self.artifacts_dir = self.root / "artifacts"
        self.lock_path = self.root / "lock"
        self.active_path = self.root / ACTIVE_FILE
        self._depth = 0

    # -- layout and lock -------------------------------------------------------------------
    def ensure(self) -> Store:
        """Create the store's folders (0700) if missing."""
        for directory in (self.root, self.operations_dir, self.artifacts_dir):
            if not directory.is_dir():
                proc.ensure_dir(directory, 0o700)
        return self

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the store lock (re-entrant within this Store object)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.ensure()
        with ExitStack() as stack:
            try:
                stack.enter_context(proc.locked(self.lock_path, self.lock_timeout))
            except ProcError as exc:
                raise StoreError(f"store {exc}") from exc
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0

    # -- reading ---------------------------------------------------------------------------
    def record_path(self, operation_id: str) -> Path:
        if not operation_id or "/" in operation_id or operation_id.startswith("."):
            raise StoreError(f"invalid operation id {operation_id!r}")
        return self.operations_dir / f"{operation_id}.json"

    def events_path(self, operation_id: str) -> Path:
        return self.operations_dir / f"{operation_id}.events.jsonl"

    def read(self, operation_id: str) -> Operation:
        """Return the stored operation ``operation_id``; unknown ids are a StoreError."""
        path = self.record_path(operation_id)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError as exc:
            raise StoreError(f"no operation {operation_id!r} in {str(self.root)!r}") from exc
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read operation record {str(path)!r}: {exc}") from exc
        return Operation.from_dict(data, where=f"operation record {str(path)!r}")

    def ids(self) -> list[str]:
        """Every operation id, oldest first (names that are no operation id are left out)."""
        return sorted(i for i in self._names() if ID_PATTERN.fullmatch(i))

    def strays(self) -> list[str]:
        """Files under ``operations/`` named like records but not by an operation id."""
        return sorted(f"{i}.json" for i in self._names() if not ID_PATTERN.fullmatch(i))

    def _names(self) -> list[str]:
        try:
            names = os.listdir(self.operations_dir)
        except FileNotFoundError:
            return []  # nothing was ever requested
        except OSError as exc:  # state_dir names a file, sits below one, or is unreadable
            raise StoreError(
                f"cannot list {str(self.operations_dir)!r}: {exc.strerror}"
            ) from exc
        return [n[:-5] for n in names if n.startswith("op-") and n.endswith(".json")]

    def all(self) -> list[Operation]:
        """Every readable operation, oldest first (``unreadable`` names the others)."""
        return self.scan()[0]

    def unreadable(self) -> list[tuple[str, str]]:
        """``(operation id, why)`` of every record that cannot be read, oldest first."""
        return self.scan()[1]

    def scan(self) -> tuple[list[Operation], list[tuple[str, str]]]:
        """Every record, read: the operations, and ``(id, why)`` of those that cannot be.

        One damaged record must not take ``list``, ``rollback``, ``gc`` and the pruning after
        every operation down with it; it is named where the store is shown (list, doctor).
        """
        found: list[Operation] = []
        broken: list[tuple[str, str]] = []
        for operation_id in self.ids():
            try:
                found.append(self.read(operation_id))
            except StoreError as exc:
                broken.append((operation_id, str(exc)))
        return found, broken

    def active(self) -> Operation | None:
        """The one active operation, or None (the ``active`` file is a hint, the record rules).

        A hint naming no record (a crash between the two writes) is "none active"; a hint
        naming a record that exists but cannot be read is a StoreError: that operation may
        be half-way through a switch, so nothing else may start as if none were active.
        """
        try:
            operation_id = self.active_path.read_text("utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {str(self.active_path)!r}: {exc.strerror}") from exc
        try:
            path = self.record_path(operation_id)
        except StoreError:
            return None  # an empty or garbled hint names no record
        try:
            op = self.read(operation_id)
        except StoreError as exc:
            if not path.exists():
                return None
            raise StoreError(f"{exc}; it is the active operation (named by "
                             f"{str(self.active_path)!r}): nothing else starts until that "
                             f"record is repaired or moved out of {str(self.operations_dir)!r}"
                             ) from exc
        return op if op.active else None

    def adopt_unhinted(self) -> Operation | None:
        """The newest active record that the ``active`` hint does not name (left by a crash
        of an older version between record and hint): the hint is set to it and it is
        returned; None when the hint is right. Reads every record, so only ``recover`` calls it.
        """
        with self.lock():
            if self.active() is not None:
                return None
            for operation_id in reversed(self.ids()):
                try:
                    op = self.read(operation_id)
                except StoreError:
                    continue
                if op.active:
                    proc.atomic_write(self.active_path, op.operation_id.encode(), 0o600)
                    self.event(op.operation_id, "hint_restored", state=op.state.value)
                    return op
        return None

    def latest(self) -> Operation | None:
        ids = self.ids()
        return self.read(ids[-1]) if ids else None

    def events(self, operation_id: str) -> list[dict[str, Any]]:
        """The timeline of ``operation_id``, oldest first (unparsable lines are skipped)."""
        try:
            text = self.events_path(operation_id).read_text("utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    # -- changing --------------------------------------------------------------------------
    def create(self, *, reason: Mapping[str, str], bound_session_id: str | None, door: str,
               state: State = State.PENDING, facts: Mapping[str, Any] | None = None) -> Operation:
        """Create a new active operation; BusyError if another one is active."""
        with self.lock():
            current = self.active()
            if current is not None:
                raise BusyError(
                    f"operation {current.operation_id!r} is already active "
                    f"(state {current.state.value!r})"
                )
            stamp = now_iso()
            op = Operation(
                operation_id=new_operation_id(after=max(self.ids(), default="")),
                state=state, revision=1, created_at=stamp,
                updated_at=stamp, reasons=(MappingProxyType(dict(reason)),),
                bound_session_id=bound_session_id, door=door,
                facts=MappingProxyType(dict(facts or {})),
            )
            self._write(op)
            self.event(op.operation_id, "created", at=stamp, state=state.value,
                       source=reason.get("source", ""), bound_session_id=bound_session_id)
            return op

    def transition(self, operation_id: str, target: State, *, phase: str,
                   expect_revision: int | None = None, expect_state: State | None = None,
                   evidence: Mapping[str, Any] | None = None, **changes: Any) -> Operation:
        """Move ``operation_id`` to ``target`` (table-checked, revision-checked) and log it."""
        with self.lock():
            op = self.read(operation_id)
            self._check_expectations(op, expect_revision, expect_state)
            check_transition(op.state, target, operation_id)
            new = self._apply(op, changes, state=target)
            self._write(new)
            self.event(operation_id, phase, state=target.value, previous=op.state.value,
                       **dict(evidence or {}))
            return new

    def update(self, operation_id: str, *, phase: str | None = None,
               expect_revision: int | None = None, expect_state: State | None = None,
               evidence: Mapping[str, Any] | None = None, **changes: Any) -> Operation:
        """Change fields of ``operation_id`` without a state change (revision-checked)."""
        with self.lock():
            op = self.read(operation_id)
            self._check_expectations(op, expect_revision, expect_state)
            new = self._apply(op, changes, state=op.state)
            self._write(new)
            if phase:
                self.event(operation_id, phase, state=op.state.value, **dict(evidence or {}))
            return new

    def event(self, operation_id: str, phase: str, /, *, at: str | None = None,
              **evidence: Any) -> None:
        """Append one timeline line (timestamp, phase, evidence) to ``operation_id``; ``at``
        defaults to now (``created`` passes the record's own stamp, so it reads +0.00s)."""
        self.ensure()
        line = {**_plain(evidence), "at": at or now_iso(), "phase": phase}
        data = json_bytes(json.dumps(line, ensure_ascii=False, default=str))
        proc.append_line(self.events_path(operation_id), data)

    def artifacts(self, operation_id: str) -> Path:
        """The operation's artifact folder (created 0700)."""
        self.record_path(operation_id)
        self.ensure()
        directory = self.artifacts_dir / operation_id
        if not directory.is_dir():
            proc.ensure_dir(directory, 0o700)
        return directory

    def heartbeat(self, operation_id: str, phase: str) -> None:
        """Record that the worker of ``operation_id`` is alive: the phase, the wall-clock time,
        and the boot's monotonic clock (what ``heartbeat_age`` measures by)."""
        path = self.artifacts(operation_id) / "heartbeat"
        proc.atomic_write(path, json.dumps({"at": now_iso(), "phase": phase,
                                            **clock_stamp()}).encode())

    def heartbeat_age(self, operation_id: str) -> float | None:
        """Seconds since the worker's last heartbeat (None: it has none yet).

        Measured on the monotonic clock of the boot it was written in: the wall clock of a VPS
        steps (NTP after a pause, a restored snapshot) and a forward step of minutes made a
        live worker look hung — killed mid-switch. A heartbeat of another boot, or one
        without a monotonic reading (written before), falls back to the file's mtime."""
        path = self.artifacts_dir / operation_id / "heartbeat"
        try:
            data = path.read_bytes()
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            beat = json.loads(data)
        except ValueError:
            beat = None
        return clock_age(beat if isinstance(beat, dict) else None, mtime)

    def delete(self, operation_id: str) -> None:
        """Remove an operation's record, timeline and artifacts (gc)."""
        with self.lock():
            for path in (self.record_path(operation_id), self.events_path(operation_id),
                         self.artifacts_dir / operation_id):
                proc.remove(path)

    # -- internals -------------------------------------------------------------------------
    def _check_expectations(self, op: Operation, revision: int | None,
                            state: State | None) -> None:
        if revision is not None and op.revision != revision:
            raise StoreError(
                f"operation {op.operation_id!r} changed underneath (revision {op.revision}, "
                f"expected {revision})"
            )
        if state is not None and op.state != state:
            raise StoreError(
                f"operation {op.operation_id!r} is {op.state.value!r}, expected {state.value!r}"
            )

    def _apply(self, op: Operation, changes: Mapping[str, Any], state: State) -> Operation:
        updates: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "facts":
                merged = dict(op.facts)
                merged.update(_plain(value))
                updates["facts"] = MappingProxyType(merged)
            elif key == "reasons":
                updates["reasons"] = tuple(MappingProxyType(dict(r)) for r in value)
            elif key in ("worker", "failure"):
                updates[key] = MappingProxyType(dict(value)) if value else None
            elif key == "bound_session_id":
                updates[key] = value
            else:
                raise StoreError(f"unknown operation field {key!r}")
        return replace(op, state=state, revision=op.revision + 1, updated_at=now_iso(),
                       **updates)

    def _write(self, op: Operation) -> None:
        """Write the record and keep the ``active`` hint crash-consistent with it.

        An active record gets its hint first, a finished one loses it after: a crash between
        the two leaves a hint naming a missing or finished record (read as "none active"),
        never an active record that no hint names.
        """
        self.ensure()
        data = json_bytes(json.dumps(op.to_dict(), indent=2, ensure_ascii=False))
        if op.active:
            proc.atomic_write(self.active_path, op.operation_id.encode(), 0o600)
        proc.atomic_write(self.record_path(op.operation_id), data, 0o600)
        if not op.active:
            try:
                current = self.active_path.read_text("utf-8").strip()
            except FileNotFoundError:
                current = ""
            if current == op.operation_id:
                proc.remove(self.active_path)


def json_bytes(text: str) -> bytes:
    """UTF-8 of JSON ``text``; a lone surrogate (a non-UTF-8 byte of an argv or path, decoded
    with ``surrogateescape``) becomes its ``\\udcXX`` JSON escape, which reads back as the same
    string — so the exact bytes survive a record and a resume can exec them."""
    return text.encode("utf-8", "backslashreplace")
