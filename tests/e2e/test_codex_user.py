"""A non-root codex user installed by root (issue 17), with the real Codex 0.169.0.

As tests/provision/test_claude_user.py does for claude: a real second user ``tlclaude``
(tests/fixtures/second_user.py, private mount namespaces) runs ``codex --no-daemon`` in its
own tmux server (socket ``tl-user`` under the test's TMUX_TMPDIR), with ``CODEX_HOME`` under
its home, owned by it, against the loopback fake Responses API. The pinned codex lives under
/root (0700, covered in the user's namespace): its prefix is bound back read-only, as a real
host installs codex where its user can execute it. Root runs ``tl-provision apply`` on a Codex
host profile; everything apply leaves must stay the user's; codex restarted as apply says (as
the user, the same argv) talks, the user requests a rebuild, and the next turn end — notify,
worker and respawn all as the user — switches the pane to the rebuilt thread. Then root's
``tl-provision accept`` (read-only and wiring) passes every line: it reaches the user's tmux
server by its socket path, as apply does, and leaves nothing of root's behind; so does root's
``accept --drill`` (its scratch codex runs as root in a scratch folder that goes after the
drill; the ``accept-drill`` folder it leaves in the user's state dir is the user's). And
``tl-rebuild`` run by root (doctor, request, cancel, status) acts as the state dir's owner.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from runtime import procfs
from runtime.switch.store import Store
from tests.e2e.codex_cli import CodexHome, codex_bin, codex_prefix  # noqa: F401 - fixture
from tests.e2e.codex_fake_api import CodexFakeApi, reply_text
from tests.e2e.codex_tui import INPUT_HINT, submit
from tests.e2e.test_codex_switch import NOT_SPEECH, RUNNING, input_texts
from tests.fixtures.second_user import GID, NAME, UID, SecondUser, second_user  # noqa: F401
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_tmux
TL_REBUILD = str(Path(sys.executable).with_name("tl-rebuild"))
TL_PROVISION = str(Path(sys.executable).with_name("tl-provision"))
TARGET = "codex:0.0"
ROOT_ENV = {"HOME": "/root", "USER": "root", "LOGNAME": "root"}  # TMUX_TMPDIR: the user's


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake
    assert fake.errors == []


class UserCodex:
    """The user's ``codex`` in pane ``codex:0.0`` of the user's own tmux server."""

    def __init__(self, user: SecondUser, home: CodexHome) -> None:
        self.user, self.home = user, home

    def argv(self) -> list[str]:
        return [str(self.home.binary), "-m", "fake-model", "--cd", str(self.home.work),
                "--no-daemon"]

    def env(self) -> dict[str, str]:
        return {**self.home.env(), "HOME": str(self.user.home),
                "TMUX_TMPDIR": str(self.user.tmux_tmpdir)}

    def start(self, argv: Sequence[str]) -> None:
        command = f"cd {shlex.quote(str(self.home.work))} && exec {shlex.join(argv)}"
        self.user.tmux("new-session", "-d", "-s", "codex", "-x", "180", "-y", "45",
                       "-c", str(self.home.work),
                       *(a for k, v in self.env().items() for a in ("-e", f"{k}={v}")), command)
        self.user.tmux("set-option", "-t", "codex", "remain-on-exit", "on")
        pid = self.pane_pid()
        wait_for(lambda: len(procfs.codex_writer_locks(self.home.root, pid)) == 1, timeout=90,
                 interval=0.2, what=f"the user's codex (pid {pid}) to lock a thread")
        wait_for(lambda: INPUT_HINT in self.capture(), timeout=90, interval=0.2,
                 what="the user's codex composer")

    def stop(self) -> None:
        self.user.tmux("kill-session", "-t", "codex")

    def pane_pid(self) -> int:
        return int(self.user.tmux("display-message", "-p", "-t", TARGET,
                                  "#{pane_pid}").stdout.strip())

    def capture(self) -> str:
        return self.user.tmux("capture-pane", "-p", "-t", TARGET).stdout

    def type_prompt(self, text: str) -> None:
        submit(lambda *keys: self.user.tmux("send-keys", "-t", TARGET, *keys), self.capture,
               text)


def owner_mode(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def deploy(user: SecondUser, binary: Path, api: CodexFakeApi) -> tuple[UserCodex, Path]:
    """CODEX_HOME ``~/.codex`` (the user's, config.toml 0600) and the profile root applies."""
    user.shown = (codex_prefix(),)
    home = CodexHome.create(user.home / ".codex", binary, api.url)
    (home.root / "config.toml").chmod(0o600)
    for path in (home.root, *home.root.rglob("*")):
        os.chown(path, UID, GID)
    root = user.root  # no etc/threadline yet: apply makes it
    profile = {
        "host": "vps", "agent": "codex", "codex": {"user": NAME, "home": str(home.root)},
        "door": {"kind": "tmux", "tmux": {"target": TARGET, "socket_name": "tl-user"}},
        "install": {"config_path": str(root / "etc" / "threadline" / "config.toml"),
                    "state_dir": str(root / "state"),
                    "prefix": str(Path(sys.executable).parent.parent)}}
    host_yml = root / "host.yml"
    host_yml.write_text(yaml.safe_dump(profile, sort_keys=False))
    return UserCodex(user, home), host_yml


def as_root(user: SecondUser, *command: str, check: bool = True,
            ) -> subprocess.CompletedProcess[str]:
    return user.run(*command, as_user=False, env=ROOT_ENV, check=check)


def not_the_users(folder: Path) -> list[str]:
    found = ((p, p.lstat()) for p in (folder, *folder.rglob("*")))
    return [f"{p} {st.st_uid}:{st.st_gid}" for p, st in found
            if (st.st_uid, st.st_gid) != (UID, GID)]


def test_apply_as_root_leaves_the_codex_users_files_its_and_its_switch_activates(
        second_user: SecondUser, codex_bin: Path, api: CodexFakeApi) -> None:  # noqa: F811
    user = second_user
    codex, host_yml = deploy(user, codex_bin, api)
    config_toml = codex.home.root / "config.toml"
    state = user.root / "state"
    runtime_config = user.root / "etc" / "threadline" / "config.toml"
    codex.start(codex.argv())

    assert Path(f"/proc/{codex.pane_pid()}").stat().st_uid == UID

    first = as_root(user, TL_PROVISION, "apply", str(host_yml), check=False)
    out = first.stdout
    assert first.returncode == 0, out + first.stderr
    assert "failed:" not in out and "changed: [vps] CodexConfig" in out, out
    assert f"ok: [vps] RestartClaude — restart codex (pid {codex.pane_pid()}," in out, out
    assert owner_mode(config_toml) == (UID, GID, 0o600)
    assert owner_mode(state) == (UID, GID, 0o700)
    assert owner_mode(runtime_config) == (UID, GID, 0o600)
    assert owner_mode(state / "provision.json") == (UID, GID, 0o600)
    assert not_the_users(codex.home.root) == []  # apply's own codex runs left nothing of root's
    second = as_root(user, TL_PROVISION, "apply", str(host_yml), check=False)
    assert second.returncode == 0 and "changed=0 failed=0" in second.stdout, second.stdout
    drift = as_root(user, TL_PROVISION, "drift", "--json", str(host_yml), check=False)
    assert drift.returncode == 0, drift.stdout + drift.stderr

    # restart codex as apply says (as the user, the same argv), then one turn
    codex.stop()
    codex.start([*codex.argv(), "please remember the blue door"])
    wait_for(lambda: reply_text(0) in codex.capture(), timeout=60, interval=0.2,
             what="the first reply")
    old = api.thread_asked("please remember the blue door")
    wait_for(lambda: any(TL_REBUILD in (procfs.cmdline(pid) or ())
                         for pid in procfs.descendants(codex.pane_pid())),
             timeout=60, interval=0.2, what="the user's codex to start tl-rebuild mcp")
    third = as_root(user, TL_PROVISION, "apply", str(host_yml))
    assert "ok: [vps] RestartClaude — nothing to restart: the live codex (pid " \
        f"{codex.pane_pid()}) runs our MCP server" in third.stdout, third.stdout

    # the switch, entirely as the user: request, turn end (notify), worker, respawn
    request = user.run(TL_REBUILD, "request", "--config", str(runtime_config), "--json",
                       "--reason", "non-root codex", "--confirm", "REBUILD", "--session", old)
    op_id = json.loads(request.stdout)["operation_id"]
    codex.type_prompt("and the number 4711")

    def ended() -> dict[str, object] | None:
        shown = json.loads(user.run(TL_REBUILD, "status", "--config", str(runtime_config),
                                    "--json", "--operation", op_id).stdout)
        return None if shown["state"] in RUNNING else shown
    result = wait_for(ended, timeout=120, interval=0.3, what="the user's switch to end")
    assert result["state"] == "activated", (result, codex.capture()[-2000:])  # type: ignore[index]
    assert not_the_users(state) == []
    assert not_the_users(codex.home.root) == []
    after = as_root(user, TL_PROVISION, "drift", "--json", str(host_yml), check=False)
    assert [f for f in json.loads(after.stdout)["findings"]
            if f["check"].startswith("owner")] == [], after.stdout

    new = str(Store(state).read(op_id).fact("new_session_id"))  # a read: nothing written
    before = len(api.requests)
    wait_for(lambda: INPUT_HINT in codex.capture(), timeout=60, interval=0.2,
             what="the resumed codex composer")
    codex.type_prompt("what did I tell you?")
    first_new = wait_for(lambda: next((r for r in api.requests[before:]
                                       if r.headers.get("session-id") == new), None),
                         timeout=60, interval=0.2, what="the new thread's first request")
    said = input_texts(first_new.body)  # type: ignore[attr-defined]
    for text in ("please remember the blue door", "and the number 4711", reply_text(0),
                 "what did I tell you?"):
        assert any(text in t for _, t in said), (text, said)
    kinds = {item.get("type") for item in first_new.body["input"]}  # type: ignore[attr-defined]
    assert not kinds & set(NOT_SPEECH)
    assert procfs.codex_writer_locks(codex.home.root, codex.pane_pid()) == (new,)
    daemons = subprocess.run(["pgrep", "-u", str(UID), "-f", "app-server"],
                             capture_output=True, text=True)
    assert daemons.stdout == "", daemons.stdout  # --no-daemon: no shared app-server

    # tl-rebuild run by root acts as the state dir's owner: doctor reaches the user's tmux,
    # a request and its cancel leave only the user's files
    doctor = as_root(user, TL_REBUILD, "doctor", "--config", str(runtime_config), "--json",
                     check=False)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"acting as {NAME} (uid {UID})" in doctor.stderr, doctor.stderr
    assert json.loads(doctor.stdout)["ok"] is True, doctor.stdout
    asked = json.loads(as_root(user, TL_REBUILD, "request", "--config", str(runtime_config),
                               "--json", "--reason", "root asked", "--confirm",
                               "REBUILD").stdout)["operation_id"]
    as_root(user, TL_REBUILD, "cancel", "--config", str(runtime_config), "--operation", asked,
            "--confirm", "CANCEL")
    shown = as_root(user, TL_REBUILD, "status", "--config", str(runtime_config), "--json",
                    "--operation", asked)
    assert json.loads(shown.stdout)["state"] == "cancelled", shown.stdout
    assert not_the_users(state) == []

    # accept as root (read-only and wiring) reaches the user's pane through its socket path
    accept = as_root(user, TL_PROVISION, "accept", str(host_yml), check=False)
    assert accept.returncode == 0, accept.stdout + accept.stderr
    assert accept.stdout.rstrip().endswith("fail=0 skip=0"), accept.stdout
    assert not_the_users(state) == [] and not_the_users(codex.home.root) == []

    # a drill run by root: its scratch is root's and goes, the drill folder stays the user's
    drill = as_root(user, TL_PROVISION, "accept", "--drill", str(host_yml), check=False)
    assert drill.returncode == 0, drill.stdout + drill.stderr
    assert "PASS  drill     drill activated" in drill.stdout, drill.stdout
    assert drill.stdout.rstrip().endswith("fail=0 skip=0"), drill.stdout
    assert (state / "accept-drill").is_dir() and os.listdir(state / "accept-drill") == []
    assert not_the_users(state) == [] and not_the_users(codex.home.root) == []
