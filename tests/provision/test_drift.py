"""drift against a real tmux deployment after a real apply: clean, then each kind of drift."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from provision import engine
from provision.cli import main
from provision.drift import check_drift
from provision.errors import ManifestError
from provision.host import LocalHost
from provision.profile import load_profile
from provision.result import Context
from tests.fixtures.claude_cli import claude_bin, claude_env  # noqa: F401 - fixture
from tests.fixtures.deployment import LAUNCH_FLAGS, Deployment
from tests.fixtures.tmux import wait_for
from tests.provision.test_apply_tmux import _tasks, ready  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_tmux, pytest.mark.real_claude]


@pytest.fixture
def applied(ready: Deployment) -> Deployment:  # noqa: F811
    profile = load_profile(ready.profile_path)
    tasks = [t for t in _tasks() if t.name != "McpTools"]
    report = engine.run(tasks, LocalHost(profile.host), Context(profile))
    assert report.exit_code == 0, [r.message for r in report.results]
    return ready


def _drift(d: Deployment) -> list:
    profile = load_profile(d.profile_path)
    return check_drift(LocalHost(profile.host), profile)


def test_no_drift_right_after_apply(applied: Deployment, capsys) -> None:
    assert main(["drift", str(applied.profile_path)]) == 0
    assert "no drift since the last apply" in capsys.readouterr().out


def test_respawn_with_other_flags_is_drift_naming_the_resume_argv(applied: Deployment,
                                                                  capsys) -> None:
    applied.start(("--continue", "--channels", "plugin:telegram@claude-plugins-official"),
                  respawn=True)
    rc = main(["drift", "--json", str(applied.profile_path)])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["exit_code"] == 1
    headline = report["findings"][0]
    assert headline["check"] == "resume argv stale"
    assert "server:companion" in headline["before"]
    assert "server:companion" not in headline["after"]
    assert any(f["check"] == "live channel flags changed" for f in report["findings"])


def test_a_switch_to_another_session_is_not_drift(applied: Deployment) -> None:
    resumed = ("--resume", "0b7c6f1e-1111-2222-3333-444455556666", *LAUNCH_FLAGS[1:])
    applied.start(resumed, respawn=True)
    assert _drift(applied) == []


def test_hand_edited_config_and_removed_hook_are_drift(applied: Deployment) -> None:
    with applied.config_path.open("a") as handle:
        handle.write("# edited by hand\n")
    settings = json.loads(applied.settings.read_text())
    settings["hooks"]["Stop"] = [g for g in settings["hooks"]["Stop"]
                                 if "tl-rebuild" not in json.dumps(g)]
    applied.settings.write_text(json.dumps(settings))
    checks = [f.check for f in _drift(applied)]
    assert f"managed file edited: {applied.config_path}" in checks
    assert any(c.startswith("Stop hook missing or altered") for c in checks)


def test_invalid_settings_json_is_reported_not_overwritten(applied: Deployment) -> None:
    applied.settings.write_text("{ // jsonc\n}")
    findings = _drift(applied)
    assert any(f.check == "settings.json invalid" for f in findings)
    assert applied.settings.read_text() == "{ // jsonc\n}"


def test_missing_session_store_is_drift(applied: Deployment) -> None:
    from runtime.paths import encode_project_dir

    store = applied.home / ".claude" / "projects" / encode_project_dir(str(applied.workdir))
    store.rmdir()
    assert any(f.check == "session store missing" for f in _drift(applied))


def test_mcp_server_removed_is_drift(applied: Deployment, claude_bin: Path) -> None:  # noqa: F811
    import subprocess

    subprocess.run([str(claude_bin), "mcp", "remove", "--scope", "user", "threadline"],
                   cwd=applied.workdir, env=claude_env(applied.home), check=True,
                   capture_output=True, timeout=120)
    findings = _drift(applied)
    assert any("MCP server 'threadline' missing" in f.check and f.after == "absent"
               for f in findings)


def test_drift_without_a_manifest_is_an_error_exit_2(ready: Deployment,  # noqa: F811
                                                     capsys) -> None:
    profile = load_profile(ready.profile_path)
    with pytest.raises(ManifestError, match="run 'tl-provision apply' first"):
        check_drift(LocalHost(profile.host), profile)
    assert main(["drift", str(ready.profile_path)]) == 2
    assert "tl-provision: error: no manifest" in capsys.readouterr().err


def test_claude_restarted_in_another_directory_is_workdir_drift(applied: Deployment) -> None:
    elsewhere = applied.root / "elsewhere"
    elsewhere.mkdir()
    old = applied.tmux.pane_pid(applied.target)
    applied.tmux.cmd("respawn-pane", "-k", "-c", str(elsewhere), "-t", applied.target,
                     f"PATH={applied.bin_dir}:$PATH claude {' '.join(LAUNCH_FLAGS)}")
    wait_for(lambda: applied.tmux.pane_pid(applied.target) != old, what="respawned pane")
    findings = {f.check: f for f in _drift(applied)}
    moved = findings["workdir changed (resume looks up sessions by cwd)"]
    assert (moved.before, moved.after) == (str(applied.workdir), str(elsewhere))


def test_an_edited_managed_file_shows_a_unified_diff_of_the_edit(applied: Deployment,
                                                                  capsys) -> None:
    text = applied.config_path.read_text()
    old = next(x for x in text.splitlines() if x.startswith("request_max_age_hours = "))
    applied.config_path.write_text(text.replace(old, "request_max_age_hours = 99.0", 1))
    rc = main(["drift", str(applied.profile_path)])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1
    head = next(i for i, x in enumerate(lines)
                if x.startswith(f"DRIFT managed file edited: {applied.config_path}: sha256 "))
    path = applied.config_path
    assert lines[head + 1:head + 3] == [f"    --- {path} (last apply)", f"    +++ {path} (now)"]
    body = lines[head + 3:head + 11]
    assert f"    -{old}" in body and "    +request_max_age_hours = 99.0" in body
    assert sum(x.startswith(("    -", "    +")) for x in body) == 2  # '---'/'+++' not in body
    assert lines[-1] == f"{applied.name} : drift=1"
    main(["drift", "--json", str(applied.profile_path)])
    finding = json.loads(capsys.readouterr().out)["findings"][0]
    assert set(finding) == {"check", "before", "after"}  # the diff is human output only


def test_a_long_diff_is_cut_with_the_count_of_the_lines_left() -> None:
    from provision.drift import file_diff

    before = "".join(f"line {i}\n" for i in range(100)).encode()
    after = "".join(f"LINE {i}\n" for i in range(100)).encode()
    diff = file_diff("/etc/x.toml", before, after, limit=60)
    assert len(diff) == 61
    assert diff[:3] == ("--- /etc/x.toml (last apply)", "+++ /etc/x.toml (now)",
                        "@@ -1,100 +1,100 @@")
    assert diff[3] == "-line 0" and diff[-1] == "… 143 more lines"


def test_a_long_diff_shows_its_head_and_the_whole_of_it_only_with_v() -> None:
    from provision.drift import DIFF_LINES, Finding, file_diff

    before = "".join(f"line {i}\n" for i in range(100)).encode()
    after = "".join(f"LINE {i}\n" for i in range(100)).encode()
    diff = file_diff("/etc/x.toml", before, after)
    assert len(diff) == 203  # ---, +++, one hunk, 100 removed, 100 added: nothing cut
    finding = Finding("managed file edited: /etc/x.toml", "sha256 a…", "sha256 b…", diff)
    short = finding.lines()
    assert short[0] == "DRIFT managed file edited: /etc/x.toml: sha256 a… → sha256 b…"
    assert short[1:DIFF_LINES + 1] == [f"    {x}" for x in diff[:DIFF_LINES]]
    assert short[-1] == f"    … {203 - DIFF_LINES} more lines (-v shows the whole diff)"
    assert finding.lines(verbose=1) == [short[0], *(f"    {x}" for x in diff)]
    painted = finding.lines(verbose=1, colour=True)
    assert painted[0] == f"\x1b[33m{short[0]}\x1b[0m"
    assert painted[4] == "    \x1b[31m-line 0\x1b[0m"
    assert painted[-1] == "    \x1b[32m+LINE 99\x1b[0m"


def test_drift_v_first_says_what_it_compared_with_and_drift_without_v_does_not(
        applied: Deployment, capsys) -> None:
    profile = load_profile(applied.profile_path)
    recorded = json.loads(Path(profile.install.manifest_path).read_text())
    assert main(["drift", "-v", str(applied.profile_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"compared with the last apply's manifest "
                        f"{profile.install.manifest_path}:")
    rows = {x.split()[0]: x for x in lines[1:-1]}
    assert rows["resume"].split(None, 2)[2].strip() == shlex.join(recorded["resume_argv"])
    assert rows["workdir"] == f"    workdir        {recorded['launch']['workdir']}"
    assert rows["session"] == f"    session store  {recorded['session_store']}"
    assert rows["tmux"].split(None, 2)[2].strip().startswith(
        f"remain-on-exit {recorded['wiring']['tmux']['remain_on_exit']}, respawn hooks: ")
    files = [x for x in lines if x.startswith("    managed file   ")]
    assert [x[19:].rsplit(" sha256 ", 1)[0] for x in files] == sorted(recorded["files"])
    assert lines[-1] == f"{applied.name} : no drift since the last apply"
    assert main(["drift", str(applied.profile_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{applied.name} : no drift since the last apply"]


def test_a_hand_edited_hook_timeout_or_a_second_copy_is_drift_naming_what_differs(
    applied: Deployment,
) -> None:
    """A finding read "X → X" (the command alone) when the user changed only the timeout, or
    pasted our handler a second time."""
    settings = json.loads(applied.settings.read_text())
    ours = next(h for g in settings["hooks"]["Stop"] for h in g["hooks"]
                if "hook-stop" in h["command"])
    ours["timeout"] = 30
    applied.settings.write_text(json.dumps(settings, indent=4))
    finding = next(f for f in _drift(applied) if f.check.startswith("Stop hook missing"))
    assert finding.before == f"{ours['command']} timeout=10"
    assert finding.after == f"{ours['command']} timeout=30"

    ours["timeout"] = 10
    settings["hooks"]["Stop"].append({"hooks": [dict(ours)]})
    applied.settings.write_text(json.dumps(settings, indent=4))
    finding = next(f for f in _drift(applied) if f.check.startswith("Stop hook missing"))
    assert finding.after == f"{ours['command']} (listed 2 times)"
