"""$CODEX_HOME/config.toml merge (issue 17): our notify chain and [mcp_servers.threadline] go in,
everything the user wrote comes out byte for byte, theirs is chained never dropped, a second
merge is the identity, removal restores their file, a malformed file is refused untouched."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from provision.engine import run_task
from provision.errors import FactError
from provision.host import LocalHost
from provision.parsers.codex_config import Wanted, findings, merge, remove
from provision.profile import profile_from_mapping
from provision.result import Context, Status
from provision.tasks.codex_config import CodexConfig
from tests.fakes import FakeHost

TL = "/opt/tl/bin/tl-rebuild"
CFG = "/etc/threadline/codex.toml"
WANTED = Wanted(TL, CFG)
HEAD = [TL, "hook-notify", "--config", CFG]

# Shaped like a real user's file after a few weeks of Codex: comments, a provider with env_key,
# another MCP server, trusted projects, and the hook trust entry the TUI writes (mode 0600).
USER = '''# ~/.codex/config.toml — mine, hand-kept
model = "gpt-5-codex"  # the default model
model_reasoning_effort = "high"
approval_policy = "on-request"
notify = ["python3", "/home/u/bin/notify.py"]

[model_providers.azure]
name = "Azure"
base_url = "https://example.openai.azure.com/openai"
env_key = "AZURE_OPENAI_API_KEY"   # read at start
wire_api = "responses"

# tools
[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_x" }

[projects."/home/u/src/app"]
trust_level = "trusted"

[projects."/srv/other project"]
trust_level = "untrusted"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "python3 /home/u/bin/stop.py"

[hooks.state."/home/u/.codex/config.toml:stop:0:0"]
trusted_hash = "sha256:9f2c1e0d4b"
'''

OUR_TABLE = f'''[mcp_servers.threadline]
command = "{TL}"
args = ["mcp", "--config", "{CFG}"]

'''


def test_user_notify_is_chained_after_ours_and_every_other_byte_is_kept() -> None:
    out = merge(USER, WANTED, "/h/config.toml")
    ours = f'notify = ["{TL}", "hook-notify", "--config", "{CFG}", "--", "python3", ' \
        '"/home/u/bin/notify.py"]\n'
    expected = USER.replace('notify = ["python3", "/home/u/bin/notify.py"]\n', ours)
    expected = expected.replace("\n[projects.", "\n" + OUR_TABLE + "[projects.", 1)
    assert out == expected
    data = tomllib.loads(out)
    assert data["notify"] == [*HEAD, "--", "python3", "/home/u/bin/notify.py"]
    assert data["hooks"]["state"]["/home/u/.codex/config.toml:stop:0:0"]["trusted_hash"] \
        == "sha256:9f2c1e0d4b"


def test_a_second_merge_changes_nothing() -> None:
    once = merge(USER, WANTED, "/h/config.toml")
    assert merge(once, WANTED, "/h/config.toml") is once


def test_without_a_user_notify_ours_goes_before_the_first_table() -> None:
    text = USER.replace('notify = ["python3", "/home/u/bin/notify.py"]\n', "")
    out = merge(text, WANTED, "/h/config.toml")
    assert tomllib.loads(out)["notify"] == HEAD
    top = out.split("\n[", 1)[0]
    assert top.endswith(f'notify = ["{TL}", "hook-notify", "--config", "{CFG}"]\n')


def test_an_empty_file_gets_both() -> None:
    data = tomllib.loads(merge("", WANTED, "/h/config.toml"))
    server = {"command": TL, "args": ["mcp", "--config", CFG]}
    assert data == {"notify": HEAD, "mcp_servers": {"threadline": server}}


def test_a_moved_tl_rebuild_is_replaced_and_the_user_chain_survives() -> None:
    old = merge(USER, Wanted("/usr/local/bin/tl-rebuild", CFG), "/h/config.toml")
    out = merge(old, WANTED, "/h/config.toml")
    assert tomllib.loads(out)["notify"] == [*HEAD, "--", "python3", "/home/u/bin/notify.py"]
    assert tomllib.loads(out)["mcp_servers"]["threadline"]["command"] == TL


def test_our_table_keeps_keys_the_user_added_to_it() -> None:
    text = USER + '\n[mcp_servers.threadline]\ncommand = "old"\nstartup_timeout_sec = 30\n'
    server = tomllib.loads(merge(text, WANTED, "/h/c.toml"))["mcp_servers"]["threadline"]
    assert server == {"command": TL, "args": ["mcp", "--config", CFG], "startup_timeout_sec": 30}


def test_removal_restores_the_user_file_exactly() -> None:
    assert remove(merge(USER, WANTED, "/h/c.toml"), WANTED, "/h/c.toml") == USER
    bare = USER.replace('notify = ["python3", "/home/u/bin/notify.py"]\n', "")
    assert remove(merge(bare, WANTED, "/h/c.toml"), WANTED, "/h/c.toml") == bare


def test_a_malformed_file_is_refused_with_its_path_and_line() -> None:
    broken = USER.replace('trust_level = "trusted"', 'trust_level = trusted')
    with pytest.raises(FactError, match=r"'/h/config.toml' is not valid TOML .*line 20") as err:
        merge(broken, WANTED, "/h/config.toml")
    assert "\n" not in str(err.value)


def test_findings_name_a_replaced_notify_and_a_changed_server() -> None:
    data = tomllib.loads(merge(USER, WANTED, "/h/c.toml"))
    assert findings(data, WANTED) == []
    data["notify"] = ["python3", "/x.py"]
    data["mcp_servers"]["threadline"]["args"] = ["mcp"]
    problems = findings(data, WANTED)
    assert problems[0].startswith("the notify program is not Threadline's")
    assert problems[1].startswith("[mcp_servers.threadline] runs")
    del data["mcp_servers"]["threadline"]
    assert findings(data, WANTED)[1] == "[mcp_servers.threadline] is gone"


# ---------------------------------------------------------------- the task

def _profile(home: str, prefix: str):
    return profile_from_mapping({
        "host": "h", "agent": "codex", "codex": {"user": "codex", "home": home},
        "door": {"kind": "tmux", "tmux": {"target": "codex:0.0"}},
        "install": {"config_path": CFG, "state_dir": "/var/lib/tl", "prefix": prefix}})


def test_the_task_plans_one_write_then_reports_ok_on_a_fake_host() -> None:
    host = FakeHost(files={TL: b"#!/bin/sh\n", "/c/config.toml": USER.encode()},
                    modes={"/c/config.toml": 0o600}, executables={TL})
    ctx = Context(profile=_profile("/c", "/opt/tl"))
    first = run_task(CodexConfig(), host, ctx)
    assert first.status is Status.CHANGED, first.message
    assert first.message.startswith("update /c/config.toml (the notify program is not")
    assert host.modes["/c/config.toml"] == 0o600 and "/c/config.toml.bak~" in host.files
    second = run_task(CodexConfig(), host, ctx)
    assert second.status is Status.OK
    assert "chained to ['python3', '/home/u/bin/notify.py']" in second.message


def test_check_mode_writes_nothing_and_the_diff_shows_our_lines() -> None:
    host = FakeHost(files={TL: b"#!/bin/sh\n", "/c/config.toml": USER.encode()},
                    executables={TL})
    result = run_task(CodexConfig(), host, Context(profile=_profile("/c", "/opt/tl"), check=True))
    assert result.status is Status.CHANGED and result.message.startswith("would update")
    assert host.written == [] and host.files["/c/config.toml"] == USER.encode()
    added = [line for line in result.diff.splitlines() if line.startswith("+")]
    assert f'+args = ["mcp", "--config", "{CFG}"]' in added
    assert all("projects" not in line and "hooks" not in line for line in added)


def test_a_claude_profile_skips_the_task() -> None:
    profile = profile_from_mapping({
        "host": "h", "claude": {"user": "u", "home": "/home/u"},
        "door": {"kind": "tmux", "tmux": {"target": "a:0.0"}},
        "install": {"config_path": CFG, "state_dir": "/var/lib/tl"}})
    result = run_task(CodexConfig(), FakeHost(), Context(profile=profile))
    assert result.status is Status.SKIPPED
    assert result.message == "agent is claude; CodexConfig is codex's"


def test_on_disk_the_mode_is_kept_a_backup_made_and_a_malformed_file_left_alone(
        tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    tl = prefix / "bin" / "tl-rebuild"
    tl.write_text("#!/bin/sh\n")
    tl.chmod(0o755)
    home = tmp_path / "codex-home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text(USER)
    config.chmod(0o600)  # what Codex leaves after recording hook trust
    ctx = Context(profile=_profile(str(home), str(prefix)))
    result = run_task(CodexConfig(), LocalHost("h"), ctx)
    assert result.status is Status.CHANGED, result.message
    assert os.stat(config).st_mode & 0o777 == 0o600
    backups = [p for p in home.iterdir() if p.name.startswith("config.toml.")]
    assert len(backups) == 1 and backups[0].read_text() == USER
    assert run_task(CodexConfig(), LocalHost("h"), ctx).status is Status.OK

    broken = "model = \n[x\n"
    config.write_text(broken)
    failed = run_task(CodexConfig(), LocalHost("h"), ctx)
    assert failed.status is Status.FAILED and f"{str(config)!r} is not valid TOML" in \
        failed.message
    assert config.read_text() == broken


# ---------------------------------------------------------------- uninstall

def test_uninstall_removes_only_ours_restores_theirs_and_a_second_run_is_ok() -> None:
    from provision.tasks.codex_config import CodexConfigRemoved

    merged = merge(USER, WANTED, "/c/config.toml")
    host = FakeHost(files={TL: b"#!/bin/sh\n", "/c/config.toml": merged.encode()},
                    modes={"/c/config.toml": 0o600}, executables={TL})
    ctx = Context(profile=_profile("/c", "/opt/tl"))
    checked = run_task(CodexConfigRemoved(), host, Context(profile=ctx.profile, check=True))
    assert checked.status is Status.CHANGED and host.written == []
    assert checked.message == ("would remove our notify head (yours restored: ['python3', "
                               "'/home/u/bin/notify.py']) and [mcp_servers.threadline] from "
                               "/c/config.toml (backup kept)")
    assert "-[mcp_servers.threadline]" in checked.diff
    done = run_task(CodexConfigRemoved(), host, ctx)
    assert done.status is Status.CHANGED, done.message
    assert host.files["/c/config.toml"] == USER.encode()  # byte for byte
    assert host.modes["/c/config.toml"] == 0o600 and "/c/config.toml.bak~" in host.files
    again = run_task(CodexConfigRemoved(), host, ctx)
    assert (again.status, again.message) == (Status.OK, "no Threadline notify head or "
                                             "[mcp_servers.threadline] in /c/config.toml")


def test_uninstall_leaves_another_companions_head_and_a_table_the_user_replaced() -> None:
    other = Wanted(TL, "/etc/threadline/other.toml")
    text = (f"notify = {json.dumps(other.notify_head)}\n" + USER.split("\n", 5)[5]
            + f'\n[mcp_servers.threadline]\ncommand = "{TL}"\nargs = ["mcp", "--config", '
            f'"{CFG}"]\n')
    out = tomllib.loads(remove(text, WANTED, "/c/config.toml"))
    assert out["notify"] == other.notify_head  # another companion's head: not ours
    assert "threadline" not in out["mcp_servers"] and "github" in out["mcp_servers"]
    replaced = USER + '\n[mcp_servers.threadline]\ncommand = "node"\nargs = ["my-server.js"]\n'
    assert remove(replaced, WANTED, "/c/config.toml") == replaced



def test_a_config_toml_that_root_creates_is_given_to_the_codex_user_one_found_keeps_its_owner(
        ) -> None:
    from provision.actions import RunCommand, WriteFile
    from provision.tasks.codex_config import CodexConfigFacts
    from provision.tasks.files import DirFacts, Owners

    ctx = Context(profile=_profile("/c", "/opt/tl"))
    ctx.facts["Directories"] = DirFacts((), (), Owners(claude=(4242, 4242), writer=(0, 0)))
    missing = CodexConfigFacts("/c/config.toml", None, None, None, WANTED)

    write, chown = CodexConfig().plan(missing, ctx)

    assert isinstance(write, WriteFile) and write.mode == 0o600
    assert isinstance(chown, RunCommand)
    assert chown.argv == ("chown", "-h", "4242:4242", "/c/config.toml")
    found = CodexConfigFacts("/c/config.toml", USER.encode(), 0o600, (0, 0), WANTED)
    assert [type(a) for a in CodexConfig().plan(found, ctx)] == [WriteFile]  # theirs: kept
