"""DoorPrivileges (issue 10 §6): a systemd door whose claude user is not root gets a sudoers
rule for exactly the three commands the runtime runs through ``sudo -n`` — planned from facts,
checked with visudo before it is moved into /etc/sudoers.d, shown by --check/--diff."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from provision import engine
from provision.errors import FactError
from provision.result import Context, Status
from provision.tasks.files import Directories, RuntimeConfig
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from provision.tasks.privileges import DoorPrivileges, privileged_commands, sudoers_word
from runtime.config import config_from_mapping
from runtime.doors.systemd import SystemdDoor, escape_prefix
from runtime.switch.schedule import worker_argv
from tests.provision.tasks.test_files import BIN, UNIT, _systemd

TASKS = [LaunchCommand(), ResumeCommand(), Directories(), RuntimeConfig(), DoorPrivileges()]
RULE = f"/etc/sudoers.d/threadline-{UNIT.replace('.', '_')}"
PYTHON = "/opt/threadline/bin/python3"
CGROUP = f"0::/system.slice/{UNIT}\n"


def host_for(uid: int):  # noqa: ANN201 - the FakeHost of tasks/test_files
    host, profile = _systemd()
    host.users["claude"] = (uid, uid)
    for tool in ("/usr/bin/systemctl", "/usr/bin/systemd-run", "/usr/sbin/visudo"):
        host.executables.add(tool)
    host.executables.add(f"{BIN}/tl-rebuild")
    host.files[f"{BIN}/tl-rebuild"] = f"#!{PYTHON}\nimport sys\n".encode()
    return host, profile


def test_a_non_root_claude_user_gets_exactly_the_restart_the_main_pid_and_the_worker() -> None:
    host, profile = host_for(1000)
    report = engine.run(TASKS, host, Context(profile, check=True))
    result = next(r for r in report.results if r.task == "DoorPrivileges")

    assert result.status is Status.CHANGED
    assert ("claude may not run systemctl restart claude.service, systemctl show -p MainPID "
            "claude.service, systemd-run --scope") in result.message
    assert RULE not in host.files and f"{RULE}.new" not in host.files  # --check writes nothing
    facts = DoorPrivileges().facts(host, _ctx_after_directories(host, profile))
    rule = facts.rendered.decode()
    assert rule.splitlines()[2:] == [
        r"Cmnd_Alias TL_WORKER_CLAUDE = /usr/bin/systemd-run --scope -p KillMode\=process "
        r"--unit\=tl-worker-claude_service --uid\=claude -- "
        f"{PYTHON} -m runtime.switch.worker --scheduled --config /etc/tl/config.toml",
        'Defaults!TL_WORKER_CLAUDE env_keep += "TMUX_TMPDIR HOME CLAUDE_CONFIG_DIR"',
        "claude ALL=(root) NOPASSWD: /usr/bin/systemctl restart claude.service, \\",
        "    /usr/bin/systemctl show -p MainPID --value claude.service, \\",
        "    TL_WORKER_CLAUDE"]
    assert "*" not in rule  # no wildcard: nothing but these three command lines
    actions = DoorPrivileges().plan(facts, _ctx_after_directories(host, profile))
    assert [getattr(a, "argv", ("write", getattr(a, "path", ""))) for a in actions] == [
        ("write", f"{RULE}.new"), ("visudo", "-cf", f"{RULE}.new"),
        ("mv", "-f", f"{RULE}.new", RULE)]


def _ctx_after_directories(host, profile) -> Context:  # noqa: ANN001
    ctx = Context(profile, check=True)
    engine.run([LaunchCommand(), ResumeCommand(), Directories()], host, ctx)
    return ctx


def test_an_installed_rule_with_mode_0440_is_ok_and_a_root_claude_needs_none() -> None:
    host, profile = host_for(1000)
    ctx = _ctx_after_directories(host, profile)
    facts = DoorPrivileges().facts(host, ctx)
    host.files[RULE], host.modes[RULE] = facts.rendered, 0o440
    assert DoorPrivileges().plan(DoorPrivileges().facts(host, ctx), ctx) == []
    host.modes[RULE] = 0o644
    assert DoorPrivileges().plan(DoorPrivileges().facts(host, ctx), ctx) != []

    root_host, root_profile = host_for(0)
    report = engine.run(TASKS, root_host, Context(root_profile, check=True))
    skipped = next(r for r in report.results if r.task == "DoorPrivileges")
    assert skipped.status is Status.SKIPPED and "root" in skipped.message


def test_without_sudo_the_task_fails_saying_what_is_needed() -> None:
    host, profile = host_for(1000)
    host.executables.discard("/usr/sbin/visudo")
    report = engine.run(TASKS, host, Context(profile, check=True))
    failed = next(r for r in report.results if r.task == "DoorPrivileges")
    assert failed.status is Status.FAILED
    assert "visudo not found" in failed.message and "install sudo" in failed.message


def test_the_rendered_config_tells_the_runtime_to_use_sudo_for_a_non_root_user() -> None:
    host, profile = host_for(1000)
    ctx = Context(profile, check=True)
    engine.run(TASKS[:4], host, ctx)
    facts = ctx.facts_of("RuntimeConfig")
    assert tomllib.loads(facts.rendered.decode())["switch"]["systemd"]["sudo_user"] == "claude"
    root_host, root_profile = host_for(0)
    ctx = Context(root_profile, check=True)
    engine.run(TASKS[:4], root_host, ctx)
    assert tomllib.loads(ctx.facts_of("RuntimeConfig").rendered.decode())[
        "switch"]["systemd"]["sudo_user"] == ""


def test_the_rule_allows_exactly_what_the_door_and_the_hook_run(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("")
    config = config_from_mapping({"state_dir": str(tmp_path), "switch": {
        "door": "systemd", "systemd": {"unit": UNIT, "pointer_path": str(tmp_path / "p"),
                                       "sudo_user": "claude"}}}, config_file)
    restart, main_pid, worker = privileged_commands("claude", UNIT, "/usr/bin/systemctl",
                                          "/usr/bin/systemd-run", sys.executable,
                                          str(config_file.resolve()))
    door = SystemdDoor.from_config(config)
    assert door.systemctl == ("sudo", "-n", "systemctl")
    assert restart[1:] == ("restart", UNIT)
    assert main_pid[1:] == (*SystemdDoor.MAIN_PID, UNIT)  # what main_pid() runs
    plan = escape_prefix(UNIT, CGROUP, "/usr/bin/systemd-run", sudo_user="claude")
    argv = (*plan.prefix, *worker_argv(config, "any-operation-id"))
    assert argv == ("sudo", "-n", *worker)


@pytest.mark.parametrize("word, escaped", [("--unit=a", r"--unit\=a"), ("a,b:c", r"a\,b\:c"),
                                           ("back\\slash", "back\\\\slash")])
def test_sudoers_words_escape_the_characters_sudo_gives_meaning(word: str, escaped: str) -> None:
    assert sudoers_word(word) == escaped


def test_a_path_with_a_space_cannot_become_a_sudoers_rule() -> None:
    with pytest.raises(FactError, match="whitespace"):
        sudoers_word("/etc/thread line/config.toml")
