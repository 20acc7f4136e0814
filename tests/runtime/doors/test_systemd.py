"""The systemd door against a real systemd 252 (PID 1 in private namespaces), and its parsers.

The end-to-end test plays what happens on a server: a unit starts a stand-in claude through
tl-launch; "claude" runs a Stop-hook stand-in inside the unit's cgroup; the hook escapes with
``systemd-run --scope`` (runtime.doors.systemd.escape_prefix) and starts a worker that switches
the door; the restart kills the old claude but not the worker, and the new main process runs
``--resume <new id>`` with every channel flag.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from runtime.doors.systemd import (
    EscapePlan,
    SystemdDoor,
    escape_prefix,
    parse_main_pid,
    parse_proc_cgroup,
    worker_scope_name,
)
from runtime.errors import IdentityConflictError
from runtime.paths import encode_project_dir
from runtime.procfs import alive
from tests.fixtures.systemd_sandbox import (  # noqa: F401 - fixtures
    SystemdSandbox,
    systemd_sandbox,
    systemd_sandbox_hybrid,
)
from tests.fixtures.tmux import wait_for

UNIT = "tl-door-test.service"
OLD_ID = "11111111-1111-4111-8111-111111111111"
NEW_ID = "22222222-2222-4222-8222-222222222222"
CORPUS_TRANSCRIPT = "iansherr__claude-code-log__03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
CHANNELS = ("--dangerously-load-development-channels", "server:companion")

# /proc/self/cgroup texts captured on this machine kind (Debian 12, kernel 6.18, systemd 252).
HOST_HYBRID_NO_SYSTEMD = """9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/a8ade9c1f7732a64f7c28a966f941fa4
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
"""
# A service of the sandboxed systemd (unified mode on a kernel that still has v1 hierarchies):
# the v1 lines come first and say "/", only the 0:: line names the unit.
UNIFIED_SERVICE = """9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/system.slice/tl-door-test.service
"""
# The sandbox in --hybrid layout (like this host): name=systemd and 0:: both name the unit.
HYBRID_SERVICE = """9:name=systemd:/system.slice/claude.service
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/system.slice/claude.service
"""
HYBRID_SCOPE = """9:name=systemd:/system.slice/run-r56e12cb51ecf435d8b182e30e5024d10.scope
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/system.slice/run-r56e12cb51ecf435d8b182e30e5024d10.scope
"""
# Not captured here (no such host at hand); written after systemd's documented layouts.
PURE_UNIFIED_USER_SERVICE = (
    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/claude.service\n"
)
LEGACY_V1_SERVICE = "2:cpu:/\n1:name=systemd:/system.slice/claude.service\n0::/\n"

STAND_IN_CLAUDE = """#!{python}
# Stands in for claude: records who it is, stays alive, runs the "Stop hook" when asked.
import json, os, subprocess, sys, time
share = os.environ["TL_TEST_SHARE"]
cgroup = [l for l in open("/proc/self/cgroup").read().splitlines() if l.startswith("0::")][0]
with open(os.path.join(share, "claude-events.jsonl"), "a") as out:
    out.write(json.dumps({{"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd(),
                          "cgroup": cgroup}}) + "\\n")
def say_session():
    # Like claude 2.1.328, at start and every turn: which session this process runs, in
    # <config dir>/sessions/<pid>.json (--resume X; --continue: the newest transcript).
    import glob, re
    args, cfg = sys.argv[1:], os.environ["CLAUDE_CONFIG_DIR"]
    folder = os.path.join(cfg, "projects", re.sub("[^A-Za-z0-9]", "-", os.getcwd()))
    newest = sorted(glob.glob(os.path.join(folder, "*.jsonl")), key=os.path.getmtime)
    session = (args[args.index("--resume") + 1] if "--resume" in args else
               os.path.basename(newest[-1])[:-6] if newest else "new-%d" % os.getpid())
    started = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
    os.makedirs(os.path.join(cfg, "sessions"), exist_ok=True)
    with open(os.path.join(cfg, "sessions", "%d.json" % os.getpid()), "w") as out:
        json.dump({{"pid": os.getpid(), "sessionId": session, "procStart": started}}, out)
say_session()
request = os.path.join(share, "run-hook.json")
while True:
    if os.path.exists(request):
        taken = request + ".%d" % os.getpid()
        os.rename(request, taken)
        hook = json.load(open(taken))
        if isinstance(hook, list):
            hook = {{"argv": hook}}
        say_session()
        subprocess.run(hook["argv"], input=hook.get("stdin", "").encode(),
                       stdout=subprocess.DEVNULL)  # claude waits for its Stop hook
    time.sleep(0.05)
"""

HOOK = """
# Stands in for `tl-rebuild hook-stop`: escape the unit's cgroup, then spawn the worker.
import json, os, subprocess, sys
from runtime.doors.systemd import escape_prefix
share = os.environ["TL_TEST_SHARE"]
plan = escape_prefix("op-1")
with open(os.path.join(share, "hook.json"), "w") as out:
    json.dump({"prefix": list(plan.prefix), "unit": plan.unit, "reason": plan.reason}, out)
if plan.ok:
    log = open(os.path.join(share, "worker.log"), "ab")
    subprocess.Popen([*plan.prefix, sys.executable, os.path.join(share, "worker.py")],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
"""

WORKER = """
# Stands in for the worker's switch phase: CAS on MainPID, switch, read the new identity.
import json, os, sys
from pathlib import Path
from runtime.doors.systemd import SystemdDoor
share = os.environ["TL_TEST_SHARE"]
door = SystemdDoor(unit=sys.argv[1], pointer_path=Path(sys.argv[2]))
cgroup = [l for l in open("/proc/self/cgroup").read().splitlines() if l.startswith("0::")][0]
old = door.identity()
door.switch(sys.argv[3])
new = door.identity()
with open(os.path.join(share, "worker.json"), "w") as out:
    json.dump({"old": old, "new": new, "cgroup": cgroup, "pid": os.getpid()}, out)
"""


def tl_launch_argv() -> list[str]:
    script = Path(sys.executable).parent / "tl-launch"
    return [str(script)] if script.exists() else [sys.executable, "-m",
                                                  "runtime.doors.systemd_launch"]


# ---------------------------------------------------------------- pure parsers


def test_the_0_line_names_the_service_even_when_v1_lines_come_first() -> None:
    where = parse_proc_cgroup(UNIFIED_SERVICE)
    assert where.unified == "/system.slice/tl-door-test.service"
    assert where.named_systemd == "/"
    assert where.service == "tl-door-test.service"


def test_a_host_without_systemd_is_in_no_unit() -> None:
    where = parse_proc_cgroup(HOST_HYBRID_NO_SYSTEMD)
    assert where.unified == "/" and where.unit is None and where.service is None


def test_a_hybrid_scope_is_a_unit_but_not_a_service_a_restart_would_kill() -> None:
    where = parse_proc_cgroup(HYBRID_SCOPE)
    assert where.unit == "run-r56e12cb51ecf435d8b182e30e5024d10.scope"
    assert where.service is None


def test_a_hybrid_service_is_named_by_both_lines_and_found() -> None:
    where = parse_proc_cgroup(HYBRID_SERVICE)
    assert where.named_systemd == where.unified == "/system.slice/claude.service"
    assert where.service == "claude.service" and not where.user_manager


def test_a_user_service_is_recognised_as_belonging_to_the_user_manager() -> None:
    where = parse_proc_cgroup(PURE_UNIFIED_USER_SERVICE)
    assert where.service == "claude.service" and where.user_manager


def test_legacy_v1_hosts_fall_back_to_the_name_systemd_line() -> None:
    assert parse_proc_cgroup(LEGACY_V1_SERVICE).service == "claude.service"


def test_escape_inside_a_service_is_a_systemd_run_scope_that_keeps_the_worker_alive() -> None:
    plan = escape_prefix("op/1 x", cgroup_text=UNIFIED_SERVICE, systemd_run="/usr/bin/systemd-run")
    assert plan == EscapePlan(
        ("/usr/bin/systemd-run", "--scope", "-p", "KillMode=process", "--unit=tl-worker-op_1_x",
         "--"),
        "tl-door-test.service",
    )
    assert plan.ok


def test_escape_from_a_user_service_goes_through_the_user_manager() -> None:
    plan = escape_prefix("op", cgroup_text=PURE_UNIFIED_USER_SERVICE, systemd_run="systemd-run")
    assert plan.prefix[:3] == ("systemd-run", "--user", "--scope")


def test_outside_any_service_no_escape_is_needed() -> None:
    assert escape_prefix("op", cgroup_text=HOST_HYBRID_NO_SYSTEMD) == EscapePlan((), None)
    assert escape_prefix("op", cgroup_text=HYBRID_SCOPE).prefix == ()


def test_inside_a_service_without_systemd_run_the_reason_is_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: systemd-run cannot be found
    plan = escape_prefix("op", cgroup_text=UNIFIED_SERVICE)
    assert not plan.ok and plan.prefix == ()
    assert plan.reason is not None
    assert "'tl-door-test.service'" in plan.reason and "systemd-run is not installed" in plan.reason


@pytest.mark.parametrize("text, pid", [("52\n", 52), ("0\n", None), ("", None), ("n/a", None)])
def test_main_pid_zero_empty_or_junk_is_no_identity(text: str, pid: int | None) -> None:
    assert parse_main_pid(text) == pid


# ---------------------------------------------------------------- real systemd


def stand_in_unit(sandbox: SystemdSandbox, work: Path, pointer: Path) -> str:
    claude = sandbox.share / "claude"
    claude.write_text(STAND_IN_CLAUDE.format(python=sys.executable))
    claude.chmod(0o755)
    launch = " ".join([*tl_launch_argv(), "--pointer", str(pointer), "--", str(claude),
                       "--continue", *CHANNELS])
    return (
        "[Unit]\nDescription=stand-in claude behind tl-launch (door test)\n"
        "[Service]\n"
        f"WorkingDirectory={work}\n"
        f"Environment=TL_TEST_SHARE={sandbox.share} CLAUDE_CONFIG_DIR={sandbox.share}/cfg "
        f"HOME={sandbox.share}/home\n"
        f"ExecStart={launch}\n"
        f"StandardError=append:{sandbox.share}/launch.log\n"
    )


def claude_events(sandbox: SystemdSandbox) -> list[dict[str, object]]:
    path = sandbox.share / "claude-events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def make_session(sandbox: SystemdSandbox, work: Path, session_id: str) -> None:
    folder = sandbox.share / "cfg" / "projects" / encode_project_dir(str(work))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{session_id}.jsonl").write_text("{}\n")


def run_hook(sandbox: SystemdSandbox, hook: dict[str, object]) -> None:
    """Make the stand-in claude run a Stop hook (inside its unit's cgroup) and wait for it."""
    request = sandbox.share / "run-hook.json.tmp"
    request.write_text(json.dumps(hook))
    request.rename(sandbox.share / "run-hook.json")  # atomic: claude never reads half a file


def door_from_host(sandbox: SystemdSandbox, pointer: Path) -> SystemdDoor:
    """The door as the pytest process uses it: every systemctl runs inside the sandbox."""
    return SystemdDoor(UNIT, pointer, systemctl=(*sandbox.enter_argv(), "systemctl"))


@pytest.fixture
def running_unit(systemd_sandbox: SystemdSandbox) -> tuple[SystemdSandbox, Path, Path]:  # noqa: F811
    """The stand-in claude running as UNIT through tl-launch (pointer not written yet)."""
    sandbox = systemd_sandbox
    work = sandbox.share / "srv" / "app"
    work.mkdir(parents=True)
    pointer = sandbox.share / "session.pointer"
    sandbox.write_unit(UNIT, stand_in_unit(sandbox, work, pointer))
    sandbox.daemon_reload()
    sandbox.systemctl("start", UNIT)
    wait_for(lambda: claude_events(sandbox), what="the stand-in claude to start")
    return sandbox, work, pointer


@pytest.mark.real_systemd
def test_first_start_without_a_pointer_runs_the_launch_argv_and_says_so(
    running_unit: tuple[SystemdSandbox, Path, Path],
) -> None:
    sandbox, work, _ = running_unit
    [first] = claude_events(sandbox)
    assert first["argv"] == ["--continue", *CHANNELS]
    assert first["cwd"] == str(work)
    assert first["cgroup"] == f"0::/system.slice/{UNIT}"
    assert sandbox.main_pid(UNIT) == first["pid"]  # tl-launch exec'd: MainPID is claude
    assert "tl-launch: WARNING: pointer" in (sandbox.share / "launch.log").read_text()


@pytest.mark.real_systemd
def test_worker_escapes_the_unit_restarts_it_and_the_new_main_process_resumes_the_new_session(
    running_unit: tuple[SystemdSandbox, Path, Path],
) -> None:
    sandbox, work, pointer = running_unit
    make_session(sandbox, work, NEW_ID)
    (sandbox.share / "hook.py").write_text(HOOK)
    [old_claude] = claude_events(sandbox)
    hook = [sys.executable, str(sandbox.share / "hook.py")]
    worker_args = [UNIT, str(pointer), NEW_ID]
    (sandbox.share / "worker.py").write_text(
        f"import sys\nsys.argv[1:] = {worker_args!r}\n" + WORKER
    )
    run_hook(sandbox, {"argv": hook})

    wait_for(lambda: (sandbox.share / "worker.json").exists(), what="the escaped worker")
    plan = json.loads((sandbox.share / "hook.json").read_text())
    worker = json.loads((sandbox.share / "worker.json").read_text())
    events = wait_for(lambda: len(claude_events(sandbox)) == 2 and claude_events(sandbox),
                      what="the restarted claude")
    assert isinstance(events, list)
    new_claude = events[1]

    assert plan["unit"] == UNIT and plan["reason"] is None
    assert plan["prefix"][1:] == ["--scope", "-p", "KillMode=process", "--unit=tl-worker-op-1",
                                  "--"]
    assert worker["cgroup"] == "0::/system.slice/tl-worker-op-1.scope"
    assert worker["old"] == str(old_claude["pid"])
    assert worker["new"] == str(new_claude["pid"]) != worker["old"]
    assert new_claude["argv"] == ["--resume", NEW_ID, *CHANNELS]
    assert pointer.read_text() == NEW_ID + "\n"
    # From outside: the unit's only main process, seen from the host, runs the new session.
    [host_pid] = [p for p in sandbox.host_pid(UNIT)
                  if NEW_ID.encode() in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert Path(f"/proc/{host_pid}/cmdline").read_bytes().split(b"\0")[2:4] == [
        b"--resume", NEW_ID.encode()]
    assert sandbox.main_pid(UNIT) == new_claude["pid"]


@pytest.mark.real_systemd
def test_switch_back_to_the_old_session_is_the_same_door_call(
    running_unit: tuple[SystemdSandbox, Path, Path],
) -> None:
    sandbox, work, pointer = running_unit
    make_session(sandbox, work, OLD_ID)
    door = door_from_host(sandbox, pointer)
    before = door.identity()
    door.switch(OLD_ID)
    events = wait_for(lambda: len(claude_events(sandbox)) == 2 and claude_events(sandbox),
                      what="the restarted claude")
    assert isinstance(events, list)
    assert door.identity() == str(events[1]["pid"]) != before
    assert events[1]["argv"] == ["--resume", OLD_ID, *CHANNELS]
    assert door.current_session() == OLD_ID


@pytest.mark.real_systemd
def test_a_unit_that_is_not_running_has_no_identity_and_is_a_conflict(
    systemd_sandbox: SystemdSandbox,  # noqa: F811
) -> None:
    sandbox = systemd_sandbox
    sandbox.write_unit(UNIT, "[Service]\nExecStart=/bin/sleep 1000\n")
    sandbox.daemon_reload()
    door = door_from_host(sandbox, sandbox.share / "pointer")
    for _ in ("loaded but inactive", "stopped after running"):
        assert door.main_pid() is None
        with pytest.raises(IdentityConflictError, match=f"'{UNIT}' has no main process"):
            door.identity()
        sandbox.systemctl("start", UNIT)
        assert door.identity() == str(sandbox.main_pid(UNIT))
        sandbox.systemctl("stop", UNIT)
    unknown = SystemdDoor("no-such-unit.service", sandbox.share / "p",
                          systemctl=(*sandbox.enter_argv(), "systemctl"))
    with pytest.raises(IdentityConflictError):
        unknown.identity()


@pytest.mark.real_systemd
def test_inside_the_service_the_cgroup_parser_sees_the_unit_and_outside_it_none(
    systemd_sandbox: SystemdSandbox,  # noqa: F811
) -> None:
    sandbox = systemd_sandbox
    out = sandbox.share / "cgroup.txt"
    probe = f"[Service]\nType=oneshot\nExecStart=/bin/sh -c 'cat /proc/self/cgroup > {out}'\n"
    sandbox.write_unit("tl-cgroup-probe.service", probe)
    sandbox.daemon_reload()
    sandbox.systemctl("start", "tl-cgroup-probe.service")
    inside = parse_proc_cgroup(out.read_text())
    assert inside.service == "tl-cgroup-probe.service"
    assert inside.named_systemd == "/"  # unified mode: the v1 line says nothing
    outside = sandbox.exec("cat", "/proc/self/cgroup", check=True).stdout
    assert parse_proc_cgroup(outside).service is None


@pytest.mark.real_systemd
def test_in_the_hybrid_layout_a_service_is_found_and_the_escape_lands_in_its_own_scope(
    systemd_sandbox_hybrid: SystemdSandbox,  # noqa: F811
) -> None:
    sandbox = systemd_sandbox_hybrid
    out = sandbox.share / "escape.json"
    script = sandbox.share / "probe.py"
    script.write_text(
        "import json, subprocess, sys\n"
        "from runtime.doors.systemd import escape_prefix, parse_proc_cgroup\n"
        "text = open('/proc/self/cgroup').read()\n"
        "plan = escape_prefix('hybrid-op')\n"
        "moved = subprocess.run([*plan.prefix, 'cat', '/proc/self/cgroup'],\n"
        "                       capture_output=True, text=True).stdout\n"
        f"json.dump({{'text': text, 'unit': plan.unit, 'moved': moved}}, open({str(out)!r}, 'w'))\n"
    )
    sandbox.write_unit("tl-hybrid-probe.service",
                       f"[Service]\nType=oneshot\nExecStart={sys.executable} {script}\n")
    sandbox.daemon_reload()
    sandbox.systemctl("start", "tl-hybrid-probe.service")
    seen = json.loads(out.read_text())
    inside = parse_proc_cgroup(seen["text"])
    assert inside.named_systemd == inside.unified == "/system.slice/tl-hybrid-probe.service"
    assert seen["unit"] == "tl-hybrid-probe.service"
    moved = parse_proc_cgroup(seen["moved"])
    assert moved.named_systemd == moved.unified == "/system.slice/tl-worker-hybrid-op.scope"


@pytest.mark.real_systemd
def test_the_sandbox_never_touches_the_hosts_units(
    systemd_sandbox: SystemdSandbox,  # noqa: F811
) -> None:
    sandbox = systemd_sandbox
    host_units = sorted(os.listdir("/etc/systemd/system"))
    sandbox.write_unit("tl-guard-probe.service", "[Service]\nExecStart=/bin/true\n")
    sandbox.daemon_reload()
    assert "tl-guard-probe.service" in sandbox.systemctl("cat", "tl-guard-probe.service")
    assert sorted(os.listdir("/etc/systemd/system")) == host_units
    assert sandbox.exec("systemd-detect-virt").stdout.strip() == "container-other"
    assert sandbox.exec("touch", "/etc/tl-guard-probe").returncode != 0  # host root is read-only
    with pytest.raises(AssertionError, match="not a unit file name"):
        sandbox.write_unit("../../../etc/systemd/system/evil.service", "")


@pytest.mark.real_systemd
def test_stop_hook_inside_the_unit_rebuilds_and_switches_it_to_activated(
    running_unit: tuple[SystemdSandbox, Path, Path], corpus: Path
) -> None:
    """The real hook and worker: request → Stop inside the unit → escape → restart → activated."""
    from runtime.config import load_config
    from runtime.switch import ops

    sandbox, work, pointer = running_unit
    project = sandbox.share / "cfg" / "projects" / encode_project_dir(str(work))
    project.mkdir(parents=True)
    source = project / f"{OLD_ID}.jsonl"
    shutil.copyfile(corpus / CORPUS_TRANSCRIPT, source)
    before = source.read_bytes()
    config_path = sandbox.share / "threadline.toml"
    config_path.write_text(
        f'project_dir = "{project}"\nworkdir = "{work}"\nstate_dir = "{sandbox.share}/state"\n'
        f'[switch]\ndoor = "systemd"\nhealthcheck_seconds = 1.0\nstable_seconds = 0.2\n'
        f'channel_flags = {json.dumps(list(CHANNELS))}\n'
        f'[switch.systemd]\nunit = "{UNIT}"\npointer_path = "{pointer}"\n'
    )
    config = load_config(config_path)
    [old_claude] = claude_events(sandbox)
    made = ops.request(config, "too much tool noise", "REBUILD", session_id=OLD_ID)
    payload = {"session_id": OLD_ID, "transcript_path": str(source), "cwd": str(work),
               "hook_event_name": "Stop", "stop_hook_active": False}
    tl_rebuild = Path(sys.executable).parent / "tl-rebuild"
    hook = ([str(tl_rebuild)] if tl_rebuild.exists() else [sys.executable, "-m", "runtime.cli"])
    run_hook(sandbox, {"argv": [*hook, "hook-stop", "--config", str(config_path)],
                       "stdin": json.dumps(payload)})

    def settled() -> dict[str, object] | None:
        status = ops.status(config, made["operation_id"])
        return status if status["state"] in ("activated", "failed", "rolled_back") else None

    status = wait_for(settled, timeout=60, what="the operation to settle")
    assert isinstance(status, dict)
    events = [e["phase"] for e in status["events"]]
    assert status["state"] == "activated", (status.get("failure"), events)
    [spawned] = [e for e in status["events"] if e["phase"] == "worker_spawned"]
    assert spawned["escaped_unit"] == UNIT
    assert spawned["argv"][1:5] == ["--scope", "-p", "KillMode=process",
                                    f"--unit={worker_scope_name(made['operation_id'])}"]
    new_id = pointer.read_text().strip()
    assert new_id not in ("", OLD_ID) and (project / f"{new_id}.jsonl").is_file()
    restarted = wait_for(lambda: len(claude_events(sandbox)) >= 2 and claude_events(sandbox),
                         what="the restarted claude")
    assert isinstance(restarted, list)
    assert restarted[-1]["argv"] == ["--resume", new_id, *CHANNELS]
    assert restarted[-1]["pid"] != old_claude["pid"]
    assert sandbox.main_pid(UNIT) == restarted[-1]["pid"]
    assert source.read_bytes() == before  # the old transcript is byte-identical


@pytest.mark.real_systemd
def test_the_dead_man_switch_ends_an_abandoned_sandbox_and_stop_touches_only_its_own(
    systemd_sandbox: SystemdSandbox,  # noqa: F811
) -> None:
    """A sandbox nobody stops dies after its TTL; stopping it leaves the other one running."""
    from tests.fixtures import sysd_recipe

    name = "t" + uuid.uuid4().hex[:10]
    launcher = sysd_recipe.start(name, ttl=2)
    try:
        abandoned = sysd_recipe.init_pid(name)
        assert abandoned is not None
        wait_for(lambda: sysd_recipe.init_pid(name) is None and launcher.poll() is not None,
                 timeout=30, what="the TTL to kill the abandoned instance")
        assert not alive(abandoned)  # gone, or a zombie waiting for the host's init
    finally:
        sysd_recipe.stop(name, launcher)
        shutil.rmtree(sysd_recipe.state_dir(name), ignore_errors=True)
    assert not sysd_recipe.cgroup_dir(name).exists()
    assert systemd_sandbox.systemctl("is-system-running") == "running"  # the other one lives on
