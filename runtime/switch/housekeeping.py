"""State housekeeping (issue 12 §2, §4): the kept manifest, pruning, the state dir's size.

After every operation ends, the artifact folders of finished operations beyond
``keep_operations`` are removed, oldest first; records and timelines stay as evidence. The
manifest an operation kept is read back only after its digest matches the record.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from runtime import proc
from runtime.config import Config
from runtime.errors import StoreError
from runtime.switch.state import State
from runtime.switch.store import Operation, Store


def read_manifest(op: Operation) -> list[dict[str, Any]]:
    """The manifest kept with ``op``, checked against the digest in its record."""
    path, digest = op.fact("manifest"), op.fact("manifest_sha256")
    if not path or not digest:
        raise StoreError(f"operation {op.operation_id!r} kept no manifest (it never built a "
                         "candidate, or predates kept manifests)")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise StoreError(f"manifest {path!r} of operation {op.operation_id!r} cannot be read: "
                         f"{exc.strerror}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise StoreError(f"manifest {path!r} of operation {op.operation_id!r} has digest "
                         f"{actual}, the record says {digest}")
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def beyond(ops: list[Operation], keep: int, spare: str | None = None) -> list[Operation]:
    """Finished operations beyond the newest ``keep``, oldest first, that may go.

    Never an active one, never ``spare``, never the newest activated one (its backup is what
    a rollback would resume; a rollback of an older one is refused anyway).
    """
    finished = [o for o in ops if not o.active]
    newest_activated = next((o.operation_id for o in reversed(ops)
                             if o.state == State.ACTIVATED), None)
    return [o for o in finished[: max(0, len(finished) - keep)]
            if o.operation_id not in (newest_activated, spare)]


def prune_artifacts(config: Config, store: Store, finished: str) -> list[str]:
    """After ``finished`` reached a terminal state: drop the artifacts beyond keep_operations.

    Records and timelines stay (they are small and are the evidence); the artifact folders —
    source backups, snapshots, manifests — go, oldest first, with a timeline line saying so.
    The operation that just finished, an active one and the newest activated one are kept.
    """
    pruned = []
    with store.lock():
        for op in beyond(store.all(), config.switch.keep_operations, spare=finished):
            folder = store.artifacts_dir / op.operation_id
            if folder.exists():
                proc.remove(folder)
                store.event(op.operation_id, "artifacts_pruned", state=op.state.value,
                            by=finished, keep_operations=config.switch.keep_operations)
                pruned.append(op.operation_id)
    return pruned


def state_size(config: Config, store: Store) -> dict[str, Any]:
    """How much space the state dir holds (and the worker log, when it lives elsewhere)."""
    total, files = 0, 0
    for folder, _, names in os.walk(store.root):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
                files += 1
            except OSError:
                continue
    out: dict[str, Any] = {"bytes": total, "files": files, "shown": _human(total)}
    log = config.worker_log_path
    if log is not None and not log.is_relative_to(store.root):
        out["worker_log_bytes"] = sum(p.stat().st_size for p in log.parent.glob(log.name + "*")
                                      if p.is_file())
    return out


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
