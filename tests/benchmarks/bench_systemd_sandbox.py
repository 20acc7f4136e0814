"""Timings of the real-systemd sandbox and the systemd door (not part of the default test run).

    python tests/benchmarks/bench_systemd_sandbox.py [--runs N] [--hybrid]

Per run: boot (cgroup + namespaces + PID 1 'running'), unit start through daemon-reload,
one ``systemctl`` round trip through nsenter, the door switch (pointer + restart, until the
new MainPID), and teardown. Needs root, like the fixture.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runtime.doors.systemd import SystemdDoor  # noqa: E402
from tests.fixtures import sysd_recipe  # noqa: E402

UNIT = "tl-bench.service"


def one_run(hybrid: bool) -> dict[str, float]:
    name = "b" + uuid.uuid4().hex[:10]
    times: dict[str, float] = {}
    began = time.perf_counter()
    launcher = sysd_recipe.start(name, ttl=120, hybrid=hybrid)
    times["boot"] = time.perf_counter() - began
    state = sysd_recipe.state_dir(name)
    try:
        (state / "etc-units" / UNIT).write_text("[Service]\nExecStart=/bin/sleep 1000\n")
        mark = time.perf_counter()
        sysd_recipe.run_in(name, ["systemctl", "daemon-reload"])
        sysd_recipe.run_in(name, ["systemctl", "start", UNIT])
        times["reload_start"] = time.perf_counter() - mark
        mark = time.perf_counter()
        sysd_recipe.run_in(name, ["systemctl", "is-system-running"])
        times["round_trip"] = time.perf_counter() - mark
        door = SystemdDoor(UNIT, state / "share" / "pointer",
                           systemctl=(*sysd_recipe.enter_argv(name), "systemctl"))
        before = door.identity()
        mark = time.perf_counter()
        door.switch("bench-session")
        after = door.identity()
        times["switch"] = time.perf_counter() - mark
        assert after != before, (before, after)
    finally:
        mark = time.perf_counter()
        sysd_recipe.stop(name, launcher)
        times["stop"] = time.perf_counter() - mark
        shutil.rmtree(state, ignore_errors=True)
    times["total"] = time.perf_counter() - began
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hybrid", action="store_true")
    args = parser.parse_args()
    reason = sysd_recipe.missing_requirements()
    if reason:
        print(f"skipped: {reason}")
        return 0
    runs = [one_run(args.hybrid) for _ in range(args.runs)]
    layout = "hybrid" if args.hybrid else "unified"
    print(f"systemd sandbox ({layout}), {args.runs} runs, milliseconds: min / median / max")
    for key in runs[0]:
        values = [r[key] * 1000 for r in runs]
        print(f"  {key:<13} {min(values):7.1f} {statistics.median(values):7.1f} "
              f"{max(values):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
