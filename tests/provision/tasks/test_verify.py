"""Step 9 checks: the deaf process (a live channel flag missing from the resume argv) and
unregistered development channel servers are failures that name what is missing."""

from __future__ import annotations

from provision import engine
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.launcher import LaunchCommand, ResumeCommand
from provision.tasks.verify import Verify, missing_channel_flags
from tests.fakes import FakeHost
from tests.provision.test_introspect import LIVE, SHOW, SHOW_ARGS, UNIT

CLAUDE = LIVE[0]
CONFIGURED_WITHOUT_DEV_CHANNEL = """# /etc/systemd/system/claude.service
[Service]
WorkingDirectory=/srv/app
ExecStart=/usr/local/bin/claude --continue --channels plugin:telegram@claude-plugins-official
"""
CLAUDE_JSON = "/home/claude/.claude.json"
REGISTERED = (b'{"mcpServers": {"companion": {"type": "stdio", "command": "/opt/companion", '
              b'"args": []}}}')


def _host(cat: str) -> FakeHost:
    host = FakeHost()
    host.add_command(["systemctl", "cat", UNIT], cat)
    host.add_command([*SHOW_ARGS, UNIT], SHOW)
    host.add_command([CLAUDE, "--version"], "2.1.328\n")
    host.files["/proc/52/cmdline"] = b"\0".join(a.encode() for a in LIVE) + b"\0"
    host.links["/proc/52/cwd"] = "/srv/app"
    host.files[CLAUDE] = b"bin"
    host.executables.update({CLAUDE})
    host.dirs.update({"/srv/app": 0o755, "/home/claude/.claude/projects/-srv-app": 0o700})
    return host


def _profile(**extra):
    return profile_from_mapping({
        "host": "h", "claude": {"user": "claude", "home": "/home/claude", "binary": CLAUDE},
        "door": {"kind": "systemd", "systemd": {"unit": UNIT}},
        "install": {"config_path": "/etc/tl/config.toml", "state_dir": "/var/lib/tl"}, **extra})


def _verify(host: FakeHost, **extra):
    report = engine.run([LaunchCommand(), ResumeCommand(), Verify()], host,
                        Context(_profile(**extra), check=True))
    return report.results[-1]


def test_channel_flag_pairs_missing_from_the_resume_argv() -> None:
    assert missing_channel_flags(LIVE, (CLAUDE, "--resume", "x", *LIVE[2:4])) == \
        ["--dangerously-load-development-channels server:companion"]
    assert missing_channel_flags(LIVE, (CLAUDE, "--resume", "x", *LIVE[2:])) == []


def test_all_checks_pass_with_evidence_when_the_channel_server_is_registered() -> None:
    host = _host(CONFIGURED_WITHOUT_DEV_CHANNEL.replace(
        "plugin:telegram@claude-plugins-official",
        "plugin:telegram@claude-plugins-official --dangerously-load-development-channels "
        "server:companion"))
    host.files[CLAUDE_JSON] = REGISTERED
    result = _verify(host)
    assert result.status is Status.OK, result.message
    assert result.message == "5 checks passed"
    assert "pass: channel server:companion registered — scope: user" in result.notes


def test_channel_registration_is_read_from_the_files_without_starting_the_server() -> None:
    """``claude mcp get`` starts the server it probes (a Telegram bridge would lose updates)."""
    host = _host(CONFIGURED_WITHOUT_DEV_CHANNEL.replace(
        "plugin:telegram@claude-plugins-official",
        "plugin:telegram@claude-plugins-official --dangerously-load-development-channels "
        "server:companion"))
    host.files["/srv/app/.mcp.json"] = REGISTERED
    result = _verify(host)
    assert result.status is Status.OK, result.message
    assert "pass: channel server:companion registered — scope: project" in result.notes
    assert not [argv for argv in host.ran if "mcp" in argv]


def test_the_deaf_process_resume_without_a_live_channel_flag_fails() -> None:
    host = _host(CONFIGURED_WITHOUT_DEV_CHANNEL)
    host.files[CLAUDE_JSON] = REGISTERED
    result = _verify(host, prefer="configured")
    assert result.status is Status.FAILED
    assert "every live channel flag in the resume argv (missing: " \
           "--dangerously-load-development-channels server:companion)" in result.message


def test_unregistered_dev_channel_server_and_missing_store_fail() -> None:
    host = _host(CONFIGURED_WITHOUT_DEV_CHANNEL)
    del host.dirs["/home/claude/.claude/projects/-srv-app"]
    host.files[CLAUDE_JSON] = b'{"mcpServers": {}}'
    result = _verify(host, prefer="live")
    assert result.status is Status.FAILED
    assert ("channel server:companion registered (not in /home/claude/.claude.json (user/local) "
            "nor in /srv/app/.mcp.json)") in result.message
    assert "session store exists (project_dir = encoded workdir) " \
           "(/home/claude/.claude/projects/-srv-app)" in result.message
