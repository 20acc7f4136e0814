"""``tl-provision apply`` on a Codex host (issue 17), with the real Codex 0.169.0.

A TUI runs in a private tmux against the loopback fake Responses API, in a scratch CODEX_HOME
whose config.toml already has the user's own ``notify`` program. Apply from a Codex host profile
introspects the pane, renders the runtime config (agent codex, the resume argv with
``resume {session_id}`` inserted) and merges config.toml. The oracles are Codex itself:
``codex mcp list`` lists the threadline server, and a real ``codex exec`` turn runs the notify
chain, so the user's program receives the turn's payload through ``tl-rebuild hook-notify``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.cli import main
from tests.e2e.codex_cli import RUN_TIMEOUT_SECONDS, CodexHome, codex_bin  # noqa: F401
from tests.e2e.codex_fake_api import CodexFakeApi
from tests.e2e.codex_tui import CodexTui
from tests.fixtures.switch_world import TL_REBUILD
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

USER_NOTIFY = '''import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    out.write(json.dumps(sys.argv[2:]) + "\\n")
'''


@pytest.fixture
def api() -> Iterator[CodexFakeApi]:
    with CodexFakeApi() as fake:
        yield fake


@pytest.fixture
def tui(tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811
        tmux_server: TmuxServer) -> Iterator[CodexTui]:  # noqa: F811
    home = CodexHome.create(tmp_path / "codex-home", codex_bin, api.url)
    driver = CodexTui(home, tmux_server)
    yield driver
    driver.close()


def _profile(root: Path, tui: CodexTui) -> Path:
    import getpass

    path = root / "codex-host.yml"
    path.write_text(json.dumps({
        "host": "scratch", "agent": "codex",
        "codex": {"user": getpass.getuser(), "home": str(tui.home.root)},
        "door": {"kind": "tmux", "tmux": {"target": tui.target,
                                          "socket_name": tui.tmux.socket_name}},
        "install": {"config_path": str(root / "threadline.toml"),
                    "state_dir": str(root / "state"),
                    "prefix": str(Path(sys.executable).parent.parent)},
    }))
    return path


def test_apply_wires_notify_and_the_mcp_server_that_the_real_codex_uses(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    seen = tmp_path / "user-notify.jsonl"
    (tmp_path / "user_notify.py").write_text(USER_NOTIFY)
    theirs = ["python3", str(tmp_path / "user_notify.py"), str(seen)]
    config = tui.home.root / "config.toml"
    config.write_text(f"notify = {json.dumps(theirs)}\n" + config.read_text())
    config.chmod(0o600)
    launch = tui.argv()
    tui.start(launch)
    before = config.read_text()  # after the start: the TUI itself adds [tui] to the file
    profile = _profile(tmp_path, tui)

    assert main(["apply", "--check", "--diff", str(profile)]) == 0, capsys.readouterr().out
    checked = capsys.readouterr().out
    assert config.read_text() == before and not (tmp_path / "threadline.toml").exists()
    assert "changed: [scratch] CodexConfig — would update" in checked, checked
    assert "+[mcp_servers.threadline]" in checked and "-notify = [\"python3\"" in checked
    assert "ok: [scratch] Verify" in checked  # nothing merged yet: said, not failed

    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "changed: [scratch] CodexConfig — update" in out, out
    assert f"ok: [scratch] LaunchCommand — tmux pane {tui.target} start command (live pid " \
        f"{tui.pane_pid()} agrees): {' '.join(launch)}" in out, out
    runtime = tomllib.loads((tmp_path / "threadline.toml").read_text())
    assert (runtime["agent"], runtime["codex_home"]) == ("codex", str(tui.home.root))
    assert runtime["switch"]["resume_argv"] == [
        launch[0], "resume", "{session_id}", *launch[1:]]
    assert runtime["switch"]["launch_argv"] == launch
    assert "CODEX_HOME" in runtime["switch"]["environment"]
    merged = tomllib.loads(config.read_text())
    cfg = str(tmp_path / "threadline.toml")
    assert merged["notify"] == [TL_REBUILD, "hook-notify", "--config", cfg, "--", *theirs]
    assert config.stat().st_mode & 0o777 == 0o600
    rest = before.split("\n", 1)[1]  # everything after the user's notify line, untouched
    assert config.read_text().split("\n", 1)[1] == rest + (
        f'\n[mcp_servers.threadline]\ncommand = "{TL_REBUILD}"\n'
        f'args = ["mcp", "--config", "{cfg}"]\n\n')

    assert "ok: [scratch] Verify — 5 checks passed" in out, out
    assert main(["apply", "-v", str(profile)]) == 0
    again = capsys.readouterr().out
    assert f"pass: codex mcp list shows threadline — {TL_REBUILD} mcp --config {cfg}" \
        in again, again
    assert "codex identified by the @openai/codex package layout" in again
    assert "changed:" not in again.replace("changed=0", ""), again
    assert "ok: [scratch] CodexConfig — notify runs tl-rebuild hook-notify, chained to" in again

    listed = subprocess.run([str(tui.home.binary), "mcp", "list", "--json"],
                            env=tui.home.env(), capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    servers = {entry["name"]: entry for entry in json.loads(listed.stdout)}
    assert servers["threadline"]["transport"]["command"] == TL_REBUILD
    assert servers["threadline"]["transport"]["args"] == ["mcp", "--config", cfg]

    turn = subprocess.run(
        [str(tui.home.binary), "exec", "--skip-git-repo-check", "say hi"],
        env=tui.home.env(), cwd=tui.home.work, capture_output=True, text=True,
        timeout=RUN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    assert turn.returncode == 0, turn.stderr[-2000:]
    wait_for(lambda: seen.exists() and seen.read_text().strip() or None, timeout=30,
             what="the user's notify program, chained behind tl-rebuild hook-notify")
    payload = json.loads(json.loads(seen.read_text().splitlines()[0])[-1])
    assert payload["type"] == "agent-turn-complete"
    assert payload["input-messages"] == ["say hi"]


def test_drift_is_clean_after_apply_then_names_the_lost_trigger_and_a_changed_launch(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    tui.start(tui.argv())
    profile = _profile(tmp_path, tui)
    assert main(["apply", str(profile)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["drift", str(profile)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.endswith("scratch : no drift since the last apply\n")

    config = tui.home.root / "config.toml"
    text = config.read_text()
    ours = next(line for line in text.splitlines(keepends=True) if line.startswith("notify ="))
    table = text[text.index("[mcp_servers.threadline]"):].split("\n\n", 1)[0] + "\n"
    config.write_text(text.replace(ours, 'notify = ["python3", "/x.py"]\n').replace(table, ""))
    tui.close()
    tui.start(tui.argv("-c", "model_auto_compact_token_limit=900000"))
    assert main(["drift", str(profile)]) == 1
    out = capsys.readouterr().out
    assert "DRIFT resume argv stale: " in out and "model_auto_compact_token_limit" in out
    assert "DRIFT Codex config.toml: the notify program is not Threadline's" in out
    assert "DRIFT Codex config.toml: [mcp_servers.threadline] is gone" in out


def test_introspect_refuses_a_profile_whose_codex_home_is_not_the_one_codex_runs_with(
        tmp_path: Path, tui: CodexTui, capsys: pytest.CaptureFixture[str]) -> None:
    tui.start(tui.argv())
    profile = _profile(tmp_path, tui)
    data = json.loads(profile.read_text())
    data["codex"]["home"] = str(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    profile.write_text(json.dumps(data))
    assert main(["introspect", str(profile)]) == 2
    out = capsys.readouterr().out
    assert f"codex runs with CODEX_HOME={tui.home.root} but the profile says codex.home: " \
        f"{tmp_path / 'elsewhere'}" in out, out
