"""Introspection per door on a fake host: systemd units (captured `systemctl cat` shapes),
a tmux session started by a unit, and a runner script."""

from __future__ import annotations

import pytest

from provision.errors import IntrospectError
from provision.introspect import introspect
from provision.parsers.facts import PANE_FORMAT
from provision.profile import profile_from_mapping
from tests.fakes import FakeHost

UNIT = "claude.service"
CLAUDE = "/usr/local/bin/claude"
LIVE = (CLAUDE, "--continue", "--channels", "plugin:telegram@claude-plugins-official",
        "--dangerously-load-development-channels", "server:companion")
FRAGMENT = """# /etc/systemd/system/claude.service
[Unit]
Description=claude companion
[Service]
User=claude
WorkingDirectory=/srv/app
ExecStart=/usr/local/bin/claude --print hello

"""
DROP_IN = """# /etc/systemd/system/claude.service.d/override.conf
[Service]
Environment="CHANNELS=plugin:telegram@claude-plugins-official"
ExecStart=
ExecStart=/usr/local/bin/claude --continue --channels ${CHANNELS} \\
  --dangerously-load-development-channels server:companion
"""
SHOW = ("MainPID=52\nNeedDaemonReload=no\nActiveState=active\n"
        "FragmentPath=/etc/systemd/system/claude.service\n"
        "DropInPaths=/etc/systemd/system/claude.service.d/override.conf\n")
SHOW_ARGS = ["systemctl", "show", "-p", "MainPID", "-p", "NeedDaemonReload", "-p",
             "FragmentPath", "-p", "DropInPaths", "-p", "ActiveState"]


def _profile(door: dict, **extra):
    return profile_from_mapping({
        "host": "h", "claude": {"user": "claude", "home": "/home/claude"}, "door": door,
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}, **extra})


def _systemd_host(cat: str, live: tuple[str, ...] = LIVE, show: str = SHOW) -> FakeHost:
    host = FakeHost()
    host.add_command(["systemctl", "cat", UNIT], cat)
    host.add_command([*SHOW_ARGS, UNIT], show)
    host.files["/proc/52/cmdline"] = b"\0".join(a.encode() for a in live) + b"\0"
    host.links["/proc/52/cwd"] = "/srv/app"
    return host


SYSTEMD = {"kind": "systemd", "systemd": {"unit": UNIT}}


def test_systemd_drop_in_reset_and_environment_give_the_launch_argv() -> None:
    launch = introspect(_systemd_host(FRAGMENT + DROP_IN), _profile(SYSTEMD))
    assert launch.argv == LIVE
    assert launch.workdir == "/srv/app"
    assert launch.live is not None and launch.live.pid == 52
    assert launch.unit_files == ("/etc/systemd/system/claude.service",
                                 "/etc/systemd/system/claude.service.d/override.conf")
    assert not launch.need_daemon_reload


def test_systemd_live_process_predating_the_unit_change_is_a_disagreement() -> None:
    host = _systemd_host(FRAGMENT + DROP_IN, live=(CLAUDE, "--print", "hello"))
    with pytest.raises(IntrospectError, match="configured and live claude argv differ"):
        introspect(host, _profile(SYSTEMD))
    launch = introspect(host, _profile(SYSTEMD, prefer="configured"))
    assert launch.argv == LIVE


def _tl_launch_drop_in(name: str, argv: tuple[str, ...]) -> str:
    return (f"# /etc/systemd/system/claude.service.d/{name}\n[Service]\n"
            "ExecStart=\nExecStart=/opt/tl/bin/tl-launch --pointer /var/lib/tl/pointer -- "
            + " ".join(argv) + "\n")


def test_a_foreign_tl_launch_exec_start_is_unwrapped() -> None:
    cat = FRAGMENT + _tl_launch_drop_in("zz-hand.conf", LIVE)
    launch = introspect(_systemd_host(cat), _profile(SYSTEMD))
    assert launch.argv == LIVE and launch.via_tl_launch


def test_our_drop_in_is_looked_through_so_unit_edits_below_it_are_seen() -> None:
    stale = (CLAUDE, "--continue", "--channels", "plugin:old@x")
    cat = FRAGMENT + DROP_IN + _tl_launch_drop_in("threadline-launch.conf", stale)
    launch = introspect(_systemd_host(cat), _profile(SYSTEMD))
    assert launch.argv == LIVE and launch.via_tl_launch


def test_a_live_claude_resumed_by_tl_launch_still_agrees_with_a_continue_launch() -> None:
    resumed = (CLAUDE, "--resume", "0b7c6f1e-0000-4000-8000-000000000000", *LIVE[2:])
    launch = introspect(_systemd_host(FRAGMENT + DROP_IN, live=resumed), _profile(SYSTEMD))
    assert launch.argv == LIVE
    assert launch.live is not None and launch.live.argv == resumed


def test_unresolvable_variable_is_a_failure_naming_it() -> None:
    cat = FRAGMENT.replace("--print hello", "--continue $EXTRA_FLAGS")
    with pytest.raises(IntrospectError, match=r"unresolvable \$EXTRA_FLAGS"):
        introspect(_systemd_host(cat), _profile(SYSTEMD))


def test_two_effective_exec_start_commands_are_ambiguous() -> None:
    cat = FRAGMENT + "# /etc/systemd/system/claude.service.d/x.conf\n[Service]\n" \
        "ExecStart=/usr/local/bin/claude --continue\n"
    with pytest.raises(IntrospectError, match="2 effective ExecStart commands"):
        introspect(_systemd_host(cat), _profile(SYSTEMD))


def test_need_daemon_reload_is_reported() -> None:
    host = _systemd_host(FRAGMENT + DROP_IN, show=SHOW.replace("NeedDaemonReload=no",
                                                               "NeedDaemonReload=yes"))
    assert introspect(host, _profile(SYSTEMD)).need_daemon_reload


def test_unknown_unit_is_a_failure_with_systemctl_message() -> None:
    host = FakeHost()
    host.add_command(["systemctl", "cat", UNIT], rc=1, stderr="No files found for claude.service.")
    with pytest.raises(IntrospectError, match="No files found for claude.service"):
        introspect(host, _profile(SYSTEMD))


def test_tmux_session_started_by_a_unit_takes_argv_from_the_tmux_command_string() -> None:
    cat = ("# /etc/systemd/system/companion-tmux.service\n[Service]\nType=forking\n"
           "ExecStart=/usr/bin/tmux -L comp new-session -d -s main -c /srv/app "
           "\"claude --continue --channels plugin:telegram@claude-plugins-official "
           "--dangerously-load-development-channels server:companion\"\n")
    host = _systemd_host("")
    host.add_command(["systemctl", "cat", "companion-tmux.service"], cat)
    host.add_command([*SHOW_ARGS, "companion-tmux.service"], "MainPID=40\n")
    host.add_command(["tmux", "-L", "comp", "list-panes", "-a", "-F", PANE_FORMAT],
                     "main:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1fclaude --resume abc\n")
    profile = _profile({"kind": "tmux", "tmux": {"target": "main:0.0", "socket_name": "comp",
                                                 "unit": "companion-tmux.service"}})
    launch = introspect(host, profile)
    assert launch.argv == LIVE
    assert launch.source.startswith("systemd unit companion-tmux.service")


def test_a_codex_in_tmux_started_by_a_unit_is_introspected_through_the_tmux_door() -> None:
    """The supported shape for a Codex under systemd (the systemd door refuses codex): the
    unit runs codex in tmux; the tmux door with tmux.unit reads the argv from the unit's tmux
    command and corroborates it with the live npm wrapper under the pane."""
    codex = "/opt/codex/node_modules/.bin/codex"
    cat = ("# /etc/systemd/system/codex-tmux.service\n[Service]\nType=forking\nUser=codex\n"
           "Environment=CODEX_HOME=/home/codex/.codex\n"
           "ExecStart=/usr/bin/tmux -L cx new-session -d -s codex -c /srv/app "
           f"\"exec {codex} --no-daemon -m gpt\"\n")
    host = FakeHost(users={"codex": (0, 0), "root": (0, 0)})
    host.add_command(["systemctl", "cat", "codex-tmux.service"], cat)
    host.add_command([*SHOW_ARGS, "codex-tmux.service"], "MainPID=40\n")
    host.add_command(["tmux", "-L", "cx", "list-panes", "-a", "-F", PANE_FORMAT],
                     f"codex:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1fexec {codex} --no-daemon -m gpt\n")
    host.files["/proc/52/cmdline"] = b"node\0" + codex.encode() + b"\0--no-daemon\0-m\0gpt\0"
    host.files["/proc/52/environ"] = b"CODEX_HOME=/home/codex/.codex\0HOME=/home/codex\0"
    host.links["/proc/52/cwd"] = "/srv/app"
    host.links[codex] = "../@openai/codex/bin/codex.js"  # the npm bin link
    profile = profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": "codex", "home": "/home/codex/.codex"},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0", "socket_name": "cx",
                                          "unit": "codex-tmux.service"}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    launch = introspect(host, profile)
    assert launch.argv == (codex, "--no-daemon", "-m", "gpt")
    assert launch.source.startswith("systemd unit codex-tmux.service")
    assert launch.live is not None and launch.live.pid == 52


def test_runner_script_claude_line_with_exported_variables() -> None:
    host = FakeHost(files={"/usr/local/bin/loop.sh": b"""#!/bin/sh
cd /srv/jobs
export CH=plugin:telegram@claude-plugins-official
while true; do
  /usr/local/bin/claude -p --continue --channels $CH "next job"
  tl-rebuild hook-stop --config /etc/tl/config.toml
done
"""})
    profile = _profile({"kind": "pointer", "pointer": {"path": "/var/lib/tl/pointer",
                                                       "runner": "/usr/local/bin/loop.sh"}})
    launch = introspect(host, profile)
    assert launch.argv == (CLAUDE, "-p", "--continue", "--channels",
                           "plugin:telegram@claude-plugins-official", "next job")
    assert launch.workdir == "/srv/jobs" and launch.live is None


def test_lossless_pane_start_command_list_is_preferred_when_tmux_has_it() -> None:
    host = FakeHost()
    host.add_command(["tmux", "-L", "default", "list-panes", "-a", "-F", PANE_FORMAT],
                     "main:0.0\x1f%3\x1f52\x1f0\x1f/srv/app\x1fclaude --continue lossy words\n")
    host.add_command(["tmux", "-L", "default", "display-message", "-p", "-t", "%3",
                      "#{pane_start_command_list}"],
                     "'/usr/local/bin/claude' '--continue' '--append-system-prompt' 'two words'\n")
    host.files["/proc/52/cmdline"] = (b"/usr/local/bin/claude\0--continue\0"
                                      b"--append-system-prompt\0two words\0")
    launch = introspect(host, _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}))
    assert launch.argv == (CLAUDE, "--continue", "--append-system-prompt", "two words")


def test_a_dead_pane_is_refused_naming_how_to_start_claude_again() -> None:
    """A pane tmux kept after claude exited (remain-on-exit) has nothing to introspect; the
    error says how to bring claude back before apply can look again."""
    host = FakeHost()
    host.add_command(["tmux", "-L", "default", "list-panes", "-a", "-F", PANE_FORMAT],
                     "main:0.0\x1f%3\x1f52\x1f1\x1f/srv/app\x1fclaude --continue\n")
    profile = _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}})
    with pytest.raises(IntrospectError) as refused:
        introspect(host, profile)
    assert str(refused.value) == (
        f"tmux pane 'main:0.0' is dead; nothing runs claude there — start it again first "
        f"(tl-rebuild restart --config {profile.install.config_path} once threadline is "
        f"installed, or tmux respawn-pane)")


NATIVE = "/home/claude/.local/bin/claude"  # the native installer's link …
NATIVE_VERSION = "/home/claude/.local/share/claude/versions/2.1.328"  # … to the binary it runs


def _native_pane_host(user_path: str) -> FakeHost:
    """A pane started as ``claude --continue`` by name: the user's PATH finds the native
    install, tl-provision's own PATH (root's, sudo's secure_path) an older npm install. A
    native binary's /proc/PID/cmdline keeps argv[0] as the shell passed it: ``claude``."""
    host = FakeHost(path=("/usr/local/sbin", "/usr/local/bin", "/usr/bin"))
    host.add_command(["tmux", "-L", "default", "list-panes", "-a", "-F", PANE_FORMAT],
                     "main:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1fclaude --continue\n")
    host.files["/proc/52/cmdline"] = b"claude\0--continue\0"
    host.files["/proc/52/environ"] = f"HOME=/home/claude\0PATH={user_path}\0".encode()
    host.links["/proc/52/cwd"] = "/srv/app"
    host.links["/proc/52/exe"] = NATIVE_VERSION
    host.links[NATIVE] = NATIVE_VERSION
    for program in (NATIVE, NATIVE_VERSION, "/usr/bin/claude"):
        host.files[program] = b"\x7fELF"
        host.executables.add(program)
    return host


def test_claude_by_name_resolves_on_the_live_claude_s_path_not_on_tl_provision_s() -> None:
    """root's PATH found /usr/bin/claude (another install) while the pane ran the user's
    native claude: the resume would have started another program, reported as agreeing."""
    host = _native_pane_host("/home/claude/.local/bin:/usr/local/bin:/usr/bin:/bin")
    launch = introspect(host, _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}))
    assert launch.argv == (NATIVE, "--continue")  # the link, which survives an auto-update


def test_a_native_claude_that_updated_itself_since_it_started_is_the_same_program() -> None:
    """The native installer updates in the background: the link now names a newer version
    (kept beside the one the live claude still runs). That is the user's claude, not another
    install — refusing it would stop introspect on most native hosts after a few days."""
    host = _native_pane_host("/home/claude/.local/bin:/usr/local/bin:/usr/bin:/bin")
    newer = NATIVE_VERSION.replace("2.1.328", "2.1.329")
    host.links[NATIVE] = newer
    host.files[newer] = b"\x7fELF"
    host.executables.add(newer)
    launch = introspect(host, _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}))
    assert launch.argv == (NATIVE, "--continue")


def test_a_claude_on_tl_provision_s_path_that_the_live_claude_does_not_run_is_refused() -> None:
    host = _native_pane_host("")  # the live PATH unreadable or without claude's folder
    with pytest.raises(IntrospectError, match=r"/usr/bin/claude.*live claude \(pid 52\) runs "
                       + NATIVE_VERSION + r".*set claude\.binary"):
        introspect(host, _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}))


def _unit_in(workdir: str, user: str = "claude") -> str:
    return (f"# /etc/systemd/system/claude.service\n[Service]\nUser={user}\n"
            f"WorkingDirectory={workdir}\nExecStart={' '.join(LIVE)}\n")


@pytest.mark.parametrize("workdir", ["~", "-~"])
def test_working_directory_tilde_is_the_home_of_the_unit_s_user(workdir: str) -> None:
    """systemd.exec(5): "~" is User='s home. Taken literally, the workdir was "~" and the
    project dir encoded from it named no session store (the wrong-project-dir incident)."""
    launch = introspect(_systemd_host(_unit_in(workdir)), _profile(SYSTEMD))
    assert launch.workdir == "/home/claude"


def test_working_directory_tilde_of_another_user_or_a_specifier_is_refused() -> None:
    with pytest.raises(IntrospectError, match=r"WorkingDirectory=~ of unit 'claude.service' is "
                                              r"the home of User=bot, not of claude.user"):
        introspect(_systemd_host(_unit_in("~", user="bot")), _profile(SYSTEMD))
    with pytest.raises(IntrospectError, match=r"WorkingDirectory=%h of unit 'claude.service' "
                                              r"uses a systemd specifier"):
        introspect(_systemd_host(_unit_in("%h")), _profile(SYSTEMD))
    profile = _profile(SYSTEMD, claude={"user": "claude", "home": "/home/claude",
                                        "workdir": "/srv/app"})
    assert introspect(_systemd_host(_unit_in("%h")), profile).workdir == "/srv/app"


def test_prefer_live_behind_an_exec_wrapper_takes_the_live_program_not_the_wrapper() -> None:
    """``~/bin/start-companion`` (``export PATH=…; exec claude --continue``) as the pane
    command: preferring live built the wrapper's path with claude's arguments, then said "set
    claude.binary if it is a wrapper" — a wrapper that drops a resume's arguments."""
    host = _native_pane_host("/home/claude/.local/bin:/usr/bin:/bin")
    host.add_command(["tmux", "-L", "default", "list-panes", "-a", "-F", PANE_FORMAT],
                     "main:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1f/home/claude/bin/start-companion\n")
    host.files["/home/claude/bin/start-companion"] = b"#!/bin/sh\nexec claude --continue\n"
    host.executables.add("/home/claude/bin/start-companion")
    profile = _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}, prefer="live")
    launch = introspect(host, profile)
    assert launch.argv == (NATIVE, "--continue")


def test_the_launch_line_says_live_differs_when_the_profile_chose_the_configured_argv() -> None:
    from provision.result import Context
    from provision.tasks.launcher import LaunchCommand

    host = _systemd_host(FRAGMENT + DROP_IN, live=(CLAUDE, "--print", "hello"))
    host.add_command([CLAUDE, "--version"], "2.1.328 (Claude Code)\n")
    ctx = Context(_profile(SYSTEMD, prefer="configured"), check=True)
    task = LaunchCommand()
    message = task.ok_message(task.facts(host, ctx), ctx)
    assert "(differs from live pid 52; profile prefers configured)" in message
    assert "agrees" not in message


def test_a_codex_shell_pane_names_codex_s_own_command() -> None:
    host = FakeHost(users={"codex": (0, 0), "root": (0, 0)})
    host.add_command(["tmux", "-L", "cx", "list-panes", "-a", "-F", PANE_FORMAT],
                     "codex:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1f\n")  # tmux's default-shell
    profile = profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": "codex", "home": "/home/codex/.codex"},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0", "socket_name": "cx"}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    with pytest.raises(IntrospectError, match=r"runs a shell \(the default-shell\) and no codex "
                                              r"runs in it; .* 'codex --no-daemon …'"):
        introspect(host, profile)


def test_a_codex_typed_in_a_shell_pane_gets_the_command_with_its_codex_home() -> None:
    codex = "/opt/codex/node_modules/.bin/codex"
    host = FakeHost(users={"codex": (0, 0), "root": (0, 0)})
    host.add_command(["tmux", "-L", "cx", "list-panes", "-a", "-F", PANE_FORMAT],
                     "codex:0.0\x1f%0\x1f52\x1f0\x1f/srv/app\x1fbash\n")
    host.files["/proc/52/cmdline"] = b"bash\0"
    host.files["/proc/52/task/52/children"] = b"60 "
    host.files["/proc/60/cmdline"] = b"node\0" + codex.encode() + b"\0--no-daemon\0"
    host.files["/proc/60/environ"] = b"CODEX_HOME=/home/codex/.codex\0TOKEN=secret\0"
    host.links["/proc/60/cwd"] = "/srv/app"
    profile = profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": "codex", "home": "/home/codex/.codex"},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0", "socket_name": "cx"}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}})
    with pytest.raises(IntrospectError) as caught:
        introspect(host, profile)
    message = str(caught.value)
    assert ("tmux respawn-pane -k -t codex:0.0 -c /srv/app 'exec env "
            f"CODEX_HOME=/home/codex/.codex {codex} --no-daemon'") in message
    assert "secret" not in message


def test_a_claude_on_the_live_path_that_the_live_claude_does_not_run_is_passed_over() -> None:
    """A unit's Environment=PATH may list another claude first, while systemd resolved
    ExecStart=claude on its own search path: the live PATH's hit must be the program the live
    claude runs (/proc/PID/exe)."""
    host = _native_pane_host("/opt/old/bin:/home/claude/.local/bin:/usr/bin")
    host.files["/opt/old/bin/claude"] = b"\x7fELF"
    host.executables.add("/opt/old/bin/claude")
    launch = introspect(host, _profile({"kind": "tmux", "tmux": {"target": "main:0.0"}}))
    assert launch.argv == (NATIVE, "--continue")
