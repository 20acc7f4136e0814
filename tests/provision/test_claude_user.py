"""A non-root claude user (issue 10 §6), with a real second user (tests/fixtures/second_user.py).

claude runs as ``tlclaude`` (uid 4242) in that user's own tmux server; ``tl-provision apply``
runs as root with ``claude.user: tlclaude``. Before the apply, an earlier root run left a
root-owned, 0700 ``operations`` folder in the state dir (as ``tl-rebuild status`` run by root
does) — with it in place the user's hook cannot record anything. apply must leave the state
dir, config, manifest and settings.json the user's (0700/0600), drift and accept must say so
(and say it when it breaks), and a real switch, run entirely by that user, must activate.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
import yaml

from tests.fixtures.second_user import GID, NAME, UID, SecondUser, second_user  # noqa: F401
from tests.fixtures.standin_claude import project_dir_for, write_transcript
from tests.fixtures.switch_world import STANDIN, TURNS
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_tmux
TL_REBUILD = str(Path(sys.executable).with_name("tl-rebuild"))
TL_PROVISION = str(Path(sys.executable).with_name("tl-provision"))
TASKS = ("HostFacts", "LaunchCommand", "ResumeCommand", "Directories", "RuntimeConfig",
         "StopHook", "Verify", "Manifest")
APPLY = f"""
import json, sys
from provision import engine
from provision.cli import apply_tasks
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context
profile = load_profile(sys.argv[1])
tasks = [t for t in apply_tasks() if t.name in {TASKS!r}]
report = engine.run(tasks, LocalHost(profile.host), Context(profile))
print(json.dumps({{r.task: [r.status.value, r.message] for r in report.results}}))
"""
DRILL = """
import json, sys
from provision.accept.checklist import Checklist, load_scene
from provision.accept.drill import drill_stage
from provision.host import LocalHost
from provision.profile import load_profile
profile = load_profile(sys.argv[1])
out = Checklist(profile.host)
scene = load_scene(profile, LocalHost(profile.host), out)
out.stage = "drill"
drill_stage(scene, out)
print(json.dumps([line.to_dict() for line in out.lines]))
"""
LIVE = """
import json, sys
from provision.accept.checklist import Checklist, load_scene
from provision.accept.live import live_stage
from provision.host import LocalHost
from provision.profile import load_profile
profile = load_profile(sys.argv[1])
out = Checklist(profile.host)
scene = load_scene(profile, LocalHost(profile.host), out)
out.stage = "live"
live_stage(scene, out, 60.0)
print(json.dumps([line.to_dict() for line in out.lines]))
"""
ACCEPT_LINE = """
import json, sys
from provision.accept.checklist import Checklist, Scene
from provision.accept.readonly import _ownership
from provision.host import LocalHost
from provision.profile import load_profile
profile = load_profile(sys.argv[1])
out = Checklist(profile.host)
_ownership(Scene(profile, LocalHost(profile.host)), out)
print(json.dumps(out.lines[0].to_dict()))
"""


def owner_mode(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def deploy(user: SecondUser, *flags: str) -> tuple[Path, Path, str]:
    """The user's claude (a stand-in, with ``flags``) in its own tmux (``-L tl-user``, or
    ``-S user.tmux_socket_path`` when set); a profile; a root-owned leftover."""
    root, home = user.root, user.home
    workdir = home / "work dir"
    project = project_dir_for(str(workdir), str(home / ".claude"))
    old = str(uuid.uuid4())
    workdir.mkdir()
    write_transcript(project / f"{old}.jsonl", old, str(workdir), TURNS)
    for path in (workdir, *project.parents, project, project / f"{old}.jsonl"):
        if str(path).startswith(str(home)):
            os.chown(path, UID, GID)
    claude = root / "bin" / "claude"
    claude.parent.mkdir()
    # a script of its own (its path stays in the process's argv, as the real claude's does)
    claude.write_text(f"#!{sys.executable}\nimport runpy\n"
                      f"runpy.run_path({str(STANDIN)!r}, run_name='__main__')\n")
    claude.chmod(0o755)
    config, state = root / "etc" / "threadline" / "config.toml", root / "state"
    env = {"STANDIN_RECORD": str(home / "standin.jsonl"),
           "STANDIN_HOOK": f"{TL_REBUILD} hook-stop --config {shlex.quote(str(config))}"}
    command = f"cd {shlex.quote(str(workdir))} && exec {claude} {' '.join(flags)} --resume {old}"
    user.tmux("new-session", "-d", "-s", "claude", "-x", "150", "-y", "40", "-c", str(workdir),
              *(a for k, v in env.items() for a in ("-e", f"{k}={v}")), command)
    wait_for(lambda: "ready" in user.tmux("capture-pane", "-p", "-t", "claude:0.0").stdout,
             what="the user's stand-in claude")
    state.mkdir(mode=0o755)
    (state / "operations").mkdir(mode=0o700)  # an earlier root run's leftover
    profile = {
        "host": "vps", "claude": {"user": NAME, "home": str(home), "binary": str(claude)},
        "door": {"kind": "tmux", "tmux": {"target": "claude:0.0", **(
            {"socket_path": user.tmux_socket_path} if user.tmux_socket_path
            else {"socket_name": "tl-user"})}},
        "install": {"config_path": str(config), "state_dir": str(state)}}
    host_yml = root / "host.yml"
    host_yml.write_text(yaml.safe_dump(profile, sort_keys=False))
    return host_yml, config, old


def apply(user: SecondUser, host_yml: Path) -> dict[str, list[str]]:
    done = user.run(sys.executable, "-c", APPLY, str(host_yml), as_user=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_apply_as_root_leaves_everything_the_claude_users_and_its_switch_activates(
        second_user: SecondUser) -> None:  # noqa: F811
    user = second_user
    host_yml, config, old = deploy(user)
    state = user.root / "state"
    assert owner_mode(state / "operations") == (0, 0, 0o700)

    first = apply(user, host_yml)

    assert all(status in ("ok", "changed") for status, _ in first.values()), json.dumps(first)
    assert first["Directories"][0] == "changed"
    assert owner_mode(state) == (UID, GID, 0o700)
    assert owner_mode(state / "operations") == (UID, GID, 0o700)
    assert owner_mode(config) == (UID, GID, 0o600)
    assert owner_mode(state / "provision.json") == (UID, GID, 0o600)
    assert owner_mode(user.home / ".claude" / "settings.json")[:2] == (UID, GID)
    second = apply(user, host_yml)
    assert [t for t, (status, _) in second.items() if status != "ok"] == [], second
    drift = user.run(TL_PROVISION, "drift", "--json", str(host_yml), as_user=False, check=False)
    assert drift.returncode == 0, drift.stdout + drift.stderr

    # The switch, entirely as the user: request, Stop (the hook in the pane), worker, respawn.
    request = user.run(TL_REBUILD, "request", "--config", str(config), "--json",
                       "--reason", "non-root", "--confirm", "REBUILD", "--session", old)
    op_id = json.loads(request.stdout)["operation_id"]
    user.tmux("send-keys", "-t", "claude:0.0", "stop", "Enter")

    def ended() -> dict[str, object] | None:
        shown = json.loads(user.run(TL_REBUILD, "status", "--config", str(config), "--json",
                                    "--operation", op_id).stdout)
        return shown if shown["state"] in ("activated", "failed", "rolled_back") else None
    result = wait_for(ended, timeout=90, interval=0.3, what="the user's switch to end")
    assert result["state"] == "activated", result  # type: ignore[index]
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in state.rglob("*")}
    assert owners == {(UID, GID)}
    assert owner_mode(state / "worker.log")[:2] == (UID, GID)
    after = user.run(TL_PROVISION, "drift", "--json", str(host_yml), as_user=False,
                     check=False)
    # (remain-on-exit left on by the switch is issue 10 §3's, reported separately)
    assert [f for f in json.loads(after.stdout)["findings"]
            if f["check"].startswith("owner")] == []


def test_apply_as_root_reaches_the_users_tmux_on_its_own_socket_file(
        second_user: SecondUser) -> None:  # noqa: F811
    user = second_user
    folder = user.root / "run"
    folder.mkdir(mode=0o700)
    os.chown(folder, UID, GID)
    user.tmux_socket_path = str(folder / "claude.sock")  # tmux -S: no tmux-<uid> folder
    host_yml, config, _ = deploy(user)

    first = apply(user, host_yml)

    assert all(status in ("ok", "changed") for status, _ in first.values()), json.dumps(first)
    assert tomllib.loads(config.read_text())["switch"]["tmux"]["socket_path"] == \
        user.tmux_socket_path
    drift = user.run(TL_PROVISION, "drift", "--json", str(host_yml), as_user=False, check=False)
    assert drift.returncode == 0, drift.stdout + drift.stderr
    # the runtime door, as the user, from the rendered config: the same pane
    pid = user.tmux("display-message", "-p", "-t", "claude:0.0", "#{pane_pid}").stdout.strip()
    shown = user.run(sys.executable, "-c", "import sys; from runtime.config import load_config; "
                     "from runtime.doors.tmux import TmuxDoor; "
                     "print(TmuxDoor.from_config(load_config(sys.argv[1])).identity())",
                     str(config))
    assert shown.stdout.strip() == pid


def test_drift_and_accept_name_a_state_dir_entry_that_is_not_the_claude_users(
        second_user: SecondUser) -> None:  # noqa: F811
    user = second_user
    host_yml, config, _ = deploy(user)
    apply(user, host_yml)
    stray = user.root / "state" / "operations" / "left-by-root.json"
    stray.write_text("{}")  # root-owned

    drift = user.run(TL_PROVISION, "drift", "--json", str(host_yml), as_user=False, check=False)
    findings = json.loads(drift.stdout)["findings"]
    assert drift.returncode == 1
    assert [f["after"] for f in findings if f["check"] == "owner or mode of an installed path"] \
        == [f"chown 0:0 → {UID}:{GID} {stray}"]
    # accept's line, as its read-only stage runs it (the rest of accept is tested elsewhere)
    accept = user.run(sys.executable, "-c", ACCEPT_LINE, str(host_yml), as_user=False)
    owned = json.loads(accept.stdout.strip().splitlines()[-1])
    assert owned["status"] == "fail" and str(stray) in json.dumps(owned["evidence"])


def test_apply_fails_when_the_claude_user_cannot_run_the_hook_program(
        second_user: SecondUser) -> None:  # noqa: F811
    from tests.fixtures.second_user import _python_root

    if _python_root() is None:
        pytest.skip("this checkout's Python is not under /root: nothing to hide from the user")
    user = second_user
    host_yml, _, _ = deploy(user)
    user.reachable_python = False  # tl-rebuild's interpreter lives under /root (0700)

    report = apply(user, host_yml)

    status, message = report["Verify"]
    assert status == "failed"
    assert f"tl-rebuild runs as {NAME} ({TL_REBUILD} as {NAME}: rc=" in message, message


def test_a_drill_run_by_root_runs_the_scratch_claude_as_the_claude_user(
        second_user: SecondUser) -> None:  # noqa: F811
    """claude refuses ``--dangerously-skip-permissions`` as root (the stand-in does as 2.1.328
    does): root's drill of a non-root deployment launched with it must run the scratch claude
    as the user — before, its scratch claude was root's and the drill failed there."""
    user = second_user
    host_yml, _, _ = deploy(user, "--dangerously-skip-permissions")
    assert all(status in ("ok", "changed") for status, _ in apply(user, host_yml).values())

    done = user.run(sys.executable, "-c", DRILL, str(host_yml), as_user=False, timeout=240)
    lines = {line["name"]: line for line in json.loads(done.stdout.strip().splitlines()[-1])}

    old = lines["drill old claude running"]
    assert old["status"] == "pass", old
    assert old["evidence"]["uid"] == UID
    manifest = json.loads((user.root / "state" / "provision.json").read_text())
    assert "--dangerously-skip-permissions" in manifest["resume_argv"]  # what the drill ran
    failed = {name: line["evidence"] for name, line in lines.items()
              if line["status"] == "fail"}
    assert failed == {}, failed
    assert lines["drill activated"]["status"] == "pass"
    assert not Path(lines["drill scratch ready"]["evidence"]["root"]).exists()
    state = user.root / "state"
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (state, *state.rglob("*"))} == {
        (UID, GID)}


def test_accept_live_run_by_root_switches_the_claude_users_session(
        second_user: SecondUser) -> None:  # noqa: F811
    """The live request goes through ``tl-rebuild request`` (acting as the state dir's owner):
    written in-process by root, the record was root's and the user's hook could not move it."""
    import subprocess

    user = second_user
    host_yml, config, _ = deploy(user)
    assert all(status in ("ok", "changed") for status, _ in apply(user, host_yml).values())
    live = subprocess.Popen(user.argv([sys.executable, "-c", LIVE, str(host_yml)], False),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        def pending() -> str | None:
            shown = user.run(TL_REBUILD, "list", "--config", str(config), "--json",
                             check=False)
            rows = json.loads(shown.stdout) if shown.returncode == 0 else []
            return next((r["operation_id"] for r in rows if r["state"] == "pending"), None)
        wait_for(pending, timeout=60, interval=0.3, what="the live request")
        user.tmux("send-keys", "-t", "claude:0.0", "stop", "Enter")  # the human's turn ends
        out, err = live.communicate(timeout=180)
    finally:
        if live.poll() is None:
            live.kill()
            live.wait(timeout=30)
    lines = {line["name"]: line for line in json.loads(out.strip().splitlines()[-1])}
    assert lines["live requested"]["status"] == "pass", (lines, err)
    assert lines["live switched"]["status"] == "pass", lines["live switched"]
    state = user.root / "state"
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (state, *state.rglob("*"))} == {
        (UID, GID)}
