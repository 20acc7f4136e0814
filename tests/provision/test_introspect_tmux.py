"""Introspection of a real tmux pane running a stand-in claude (private socket, temp HOME)."""

from __future__ import annotations

import json

import pytest

from provision import engine
from provision.cli import introspect_tasks, main
from provision.errors import IntrospectError
from provision.host import LocalHost
from provision.introspect import introspect
from provision.profile import Profile, load_profile
from provision.result import Context, Status
from tests.fixtures.deployment import LAUNCH_FLAGS, Deployment, write_profile
from tests.fixtures.tmux import wait_for

pytestmark = pytest.mark.real_tmux


def _profile(d: Deployment, **changes) -> Profile:
    import yaml

    data = yaml.safe_load(d.profile_path.read_text())
    data.update(changes)
    write_profile(d.profile_path, data)
    return load_profile(d.profile_path)


def test_pane_start_command_and_live_process_agree(deployment: Deployment) -> None:
    pid = deployment.start()
    launch = introspect(LocalHost(), load_profile(deployment.profile_path))
    assert launch.argv == (str(deployment.claude), *LAUNCH_FLAGS)
    assert launch.live is not None and launch.live.pid == pid
    assert launch.live.argv == launch.argv
    assert launch.workdir == str(deployment.workdir)
    assert launch.channel_flags == LAUNCH_FLAGS[3:]


def test_exec_form_pane_with_quoted_arguments(deployment: Deployment) -> None:
    argv = [str(deployment.claude), "--continue", "--append-system-prompt", "it's a \"test\" #1",
            "--channels", "plugin:a b"]
    deployment.tmux.new_session("main", argv, cwd=str(deployment.workdir))
    wait_for(lambda: str(deployment.claude).encode() in open(
        f"/proc/{deployment.tmux.pane_pid('main:0.0')}/cmdline", "rb").read(), what="claude")
    launch = introspect(LocalHost(), load_profile(deployment.profile_path))
    assert launch.argv == tuple(argv)
    assert launch.live is not None and launch.live.argv == tuple(argv)


def _wrapper_pane(d: Deployment) -> None:
    wrapper = d.bin_dir / "start-claude"
    wrapper.write_text(f"#!/bin/sh\n{d.claude} --continue --channels plugin:x@y\n")
    wrapper.chmod(0o755)
    d.tmux.new_session("main", [str(wrapper)], cwd=str(d.workdir))
    wait_for(lambda: any(str(d.claude).encode() in open(f"/proc/{p}/cmdline", "rb").read()
                         for p in _tree(d.tmux.pane_pid("main:0.0"))), what="claude child")


def _tree(pid: int) -> list[int]:
    host, out, queue = LocalHost(), [], [pid]
    while queue:
        current = queue.pop()
        out.append(current)
        queue.extend(host.proc_children(current))
    return out


def test_configured_and_live_disagree_fails_with_both_argvs(deployment: Deployment) -> None:
    _wrapper_pane(deployment)
    with pytest.raises(IntrospectError) as caught:
        introspect(LocalHost(), load_profile(deployment.profile_path))
    message = str(caught.value)
    assert "start-claude" in message and "--channels plugin:x@y" in message
    assert "prefer: configured" in message


def test_prefer_live_takes_the_live_argv(deployment: Deployment) -> None:
    _wrapper_pane(deployment)
    launch = introspect(LocalHost(), _profile(deployment, prefer="live"))
    assert launch.argv == (str(deployment.claude), "--continue", "--channels", "plugin:x@y")
    assert any("profile prefers live" in line for line in launch.evidence)


def test_missing_pane_names_the_target_the_server_and_the_panes_found(
        deployment: Deployment) -> None:
    deployment.start()
    profile = _profile(deployment, door={"kind": "tmux", "tmux": {
        "target": "nosuch:0.0", "socket_name": deployment.tmux.socket_name}})
    with pytest.raises(IntrospectError, match=rf"'nosuch:0.0' not found on socket "
                                              rf"'{deployment.tmux.socket_name}' "
                                              rf"\(panes: main:0.0\)"):
        introspect(LocalHost(), profile)


def test_two_continue_flags_fail_the_resume_task_with_the_reason(deployment: Deployment) -> None:
    deployment.start(("--continue", "-c", "--channels", "plugin:x@y"))
    profile = load_profile(deployment.profile_path)
    report = engine.run(introspect_tasks(), LocalHost(), Context(profile, check=True))
    results = {r.task: r for r in report.results}
    assert results["LaunchCommand"].status is Status.OK
    assert results["ResumeCommand"].status is Status.FAILED
    assert "more than once" in results["ResumeCommand"].message
    assert report.exit_code == 2


def test_cli_introspect_json_shows_launch_resume_and_channels(deployment: Deployment,
                                                              capsys) -> None:
    deployment.start()
    assert main(["introspect", "--json", str(deployment.profile_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["launch"]["argv"][1:] == list(LAUNCH_FLAGS)
    assert data["resume_argv"][1:3] == ["--resume", "{session_id}"]
    assert data["resume_argv"][3:] == list(LAUNCH_FLAGS[1:])
    assert data["launch"]["channel_flags"] == list(LAUNCH_FLAGS[3:])
    assert data["recap"]["changed"] == 0


def test_cli_introspect_text_shows_the_token_table(deployment: Deployment, capsys) -> None:
    deployment.start()
    assert main(["introspect", str(deployment.profile_path)]) == 0
    out = capsys.readouterr().out
    assert "* '--continue'" in out and "'--resume'" in out
    assert "ok: [testbox] LaunchCommand — tmux pane main:0.0 start command" in out


def test_respawn_hook_and_remain_on_exit_are_recorded_as_evidence(deployment: Deployment) -> None:
    deployment.start()
    deployment.tmux.cmd("set-option", "-gw", "remain-on-exit", "on")
    deployment.tmux.cmd("set-hook", "-g", "pane-died", "respawn-pane -k")
    launch = introspect(LocalHost(), load_profile(deployment.profile_path))
    assert "tmux remain-on-exit on" in launch.evidence
    assert any(line.startswith("tmux hook pane-died") and "respawn-pane" in line
               for line in launch.evidence)


@pytest.mark.parametrize("pane_command", [[], ["sh"]], ids=["default-shell", "sh"])
@pytest.mark.parametrize("prefer", [None, "live"])
def test_claude_typed_in_a_shell_pane_is_refused_naming_the_pane_command_to_use(
    deployment: Deployment, pane_command: list[str], prefer: str | None,
) -> None:
    """The commonest VPS shape: ``tmux new -s main``, then claude typed at the prompt. The door
    respawns the pane's own process and reads argv, environment and session from it — the
    shell's — so it is refused, with the command that makes the pane claude's own."""
    d = deployment
    d.tmux.new_session("main", pane_command, cwd=str(d.workdir))
    d.tmux.cmd("send-keys", "-t", "main:0.0", d.launch_command(), "Enter")
    shell = d.tmux.pane_pid("main:0.0")
    wait_for(lambda: any(str(d.claude).encode() in open(f"/proc/{p}/cmdline", "rb").read()
                         for p in _tree(shell)[1:]), what="claude under the shell")
    profile = _profile(d, prefer=prefer) if prefer else load_profile(d.profile_path)

    with pytest.raises(IntrospectError) as caught:
        introspect(LocalHost(), profile)

    message = str(caught.value)
    assert message.startswith("tmux pane main:0.0 runs a shell (")
    assert f"tmux respawn-pane -k -t main:0.0 -c '{d.workdir}' " in message
    assert f"exec {d.claude} {' '.join(LAUNCH_FLAGS)}" in message


def test_a_shell_pane_without_claude_says_so(deployment: Deployment) -> None:
    deployment.tmux.new_session("main", ["sh"], cwd=str(deployment.workdir))
    with pytest.raises(IntrospectError, match=r"main:0.0 runs a shell \(sh\) and no claude runs "
                                              r"in it; start the pane with claude's own command"):
        introspect(LocalHost(), load_profile(deployment.profile_path))


def test_a_shell_running_a_wrapper_script_is_a_wrapper_not_a_shell_pane(
    deployment: Deployment,
) -> None:
    """``sh ~/start-claude`` runs a script (which execs claude): the pane's process is claude's,
    so it is the wrapper case (configured ≠ live, the profile decides), not a refused shell."""
    d = deployment
    wrapper = d.bin_dir / "start-claude"
    wrapper.write_text(f"exec {d.claude} --continue --channels plugin:x@y\n")
    d.tmux.new_session("main", ["sh", str(wrapper)], cwd=str(d.workdir))
    wait_for(lambda: str(d.claude).encode() in open(
        f"/proc/{d.tmux.pane_pid('main:0.0')}/cmdline", "rb").read(), what="claude exec'd")
    with pytest.raises(IntrospectError, match="configured and live claude argv differ"):
        introspect(LocalHost(), load_profile(d.profile_path))
    launch = introspect(LocalHost(), _profile(d, prefer="live"))
    assert launch.argv == (str(d.claude), "--continue", "--channels", "plugin:x@y")
