"""``tl-provision accept --drill`` on a Codex host (issue 17), with the real Codex 0.169.0.

The deployment: a ``codex --no-daemon`` TUI in a private tmux, talking to the loopback fake
Responses API, installed with ``tl-provision apply`` and restarted so it reads the merged
config.toml. The drill copies the thread the pane runs into a scratch CODEX_HOME, starts a real
scratch codex on it in its own private tmux server, and switches it through our notify head;
its model stand-in must see no request, and the deployment (its pane, its rollout, its
config.toml, its fake model) must not notice anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.cli import main
from runtime import procfs
from runtime.switch.schedule import codex_rollout
from tests.e2e.codex_cli import CodexHome, codex_bin  # noqa: F401 - pytest fixture
from tests.e2e.codex_fake_api import CodexFakeApi
from tests.e2e.codex_tui import CodexTui
from tests.e2e.test_codex_provision import api, apply_restart_and_talk  # noqa: F401 - fixture
from tests.fixtures.tmux import TmuxServer, tmux_server, wait_for  # noqa: F401 - fixture

OPTIONS = ("--no-daemon", "-c", "model_auto_compact_token_limit=900000")


@pytest.fixture
def deployed(tmp_path: Path, codex_bin: Path, api: CodexFakeApi,  # noqa: F811 - fixtures
             tmux_server: TmuxServer,  # noqa: F811
             capfd: pytest.CaptureFixture[str]) -> Iterator[tuple[CodexTui, Path, str]]:
    """(the TUI, the profile, the thread it runs) after apply, a restart and one turn."""
    home = CodexHome.create(tmp_path / "codex-home", codex_bin, api.url)
    tui = CodexTui(home, tmux_server)
    try:
        profile = apply_restart_and_talk(tmp_path, tui, OPTIONS, capfd)
        # the TUI also asks for a title after a first turn (notes §1; its body quotes the
        # prompt): wait for both, so that any later request the fake sees is someone else's
        def settled() -> str | None:
            bodies = [(r, json.dumps(r.body)) for r in api.requests]
            titles = [r for r, body in bodies if "single-line task title" in body]
            turns = [r for r, body in bodies if "please remember the blue door" in body
                     and r not in titles]
            return turns[0].headers["session-id"] if titles and turns else None
        thread = str(wait_for(settled, timeout=60, what="the turn and the TUI's title request"))
        wait_for(lambda: tui.threads() == (thread,), timeout=30,
                 what="the pane to hold only the thread it talked on")
        yield tui, profile, thread
    finally:
        tui.close()


def _accept(profile: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["accept", "--drill", "--json", str(profile)])
    return code, json.loads(capfd.readouterr().out)


def _scratch_processes(root: Path) -> list[int]:
    """Live processes whose HOME is under ``root`` (the drills' scratch HOMEs)."""
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    return [pid for pid in pids
            if (procfs.environ(pid) or {}).get("HOME", "").startswith(str(root) + "/")]


def test_the_drill_switches_a_scratch_codex_and_leaves_the_deployment_alone(
        tmp_path: Path, deployed: tuple[CodexTui, Path, str],
        api: CodexFakeApi,  # noqa: F811 - the fixture
        capfd: pytest.CaptureFixture[str]) -> None:
    tui, profile, thread = deployed
    rollout = codex_rollout(tui.home.root / "sessions", thread)
    assert rollout is not None
    config = tui.home.root / "config.toml"
    before = (rollout.read_bytes(), config.read_bytes(), tui.pane_pid(), len(api.requests))

    code, report = _accept(profile, capfd)
    lines = {line["name"]: line for line in report["lines"]}
    failed = {n: line for n, line in lines.items() if line["status"] != "pass"}
    assert code == 0 and not failed, json.dumps(failed, indent=1)[:4000]
    for name in ("source thread held by the pane", "notify runs tl-rebuild hook-notify",
                 "notify exits 0 on a synthetic turn end", "notify schedules nothing",
                 "codex mcp list shows the server", "MCP server lists its 7 tools",
                 "resume argv ≡ launch argv", "live argv ≡ launch argv",
                 "codex holds its thread in the pane", "drill old codex running",
                 "drill activated", "drill new codex holds the new thread",
                 "drill old rollout byte-identical", "drill backup present",
                 "drill timeline complete", "drill no model request", "drill no orphans"):
        assert lines[name]["status"] == "pass", name
    assert lines["source thread held by the pane"]["evidence"]["threads"] == [thread]
    new = lines["drill new codex holds the new thread"]["evidence"]
    assert new["threads"] == [new["new_thread"]] and new["new_thread"] != thread
    assert [*OPTIONS] == new["argv"][-len(OPTIONS):]  # every option of the launch kept
    assert lines["drill no model request"]["evidence"]["requests"] == []
    assert report["numbers"]["drill_switch_seconds"] > 0
    with capfd.disabled():  # the measured numbers, for the record (pytest -s shows them)
        print(f"\ncodex accept --drill numbers: {report['numbers']}")
    scratch = Path(lines["drill scratch ready"]["evidence"]["root"])
    assert not scratch.exists()  # removed: every line passed
    assert _scratch_processes(scratch.parent) == []
    # the deployment noticed nothing: same process, rollout, config.toml, no model request
    after = (rollout.read_bytes(), config.read_bytes(), tui.pane_pid(), len(api.requests))
    assert after == before, [(r.headers.get("session-id"), json.dumps(r.body)[-300:])
                             for r in api.requests[before[3]:]]
    assert tui.threads() == (thread,)


def test_a_drill_whose_scratch_codex_does_not_start_fails_there_and_skips_what_follows(
        tmp_path: Path, deployed: tuple[CodexTui, Path, str],
        capfd: pytest.CaptureFixture[str]) -> None:
    """A hand-edited resume argv with an option codex refuses: the wiring line names the
    difference, the scratch codex dies at once (its screen is the evidence), and every drill
    line that needed it is SKIP naming 'drill old codex running', not a second FAIL."""
    import tomllib

    from tests.fixtures.switch_world import toml_value

    tui, profile, _ = deployed
    rendered = tmp_path / "threadline.toml"
    data = tomllib.loads(rendered.read_text())
    resume = data["switch"]["resume_argv"]
    edited = [*resume, "--no-such-option"]
    text = rendered.read_text().replace(f"resume_argv = {toml_value(resume)}",
                                        f"resume_argv = {toml_value(edited)}")
    assert text != rendered.read_text()
    rendered.write_text(text)

    code, report = _accept(profile, capfd)
    assert code == 1
    lines = {line["name"]: line for line in report["lines"]}
    assert lines["resume argv ≡ launch argv"]["status"] == "fail"
    old = lines["drill old codex running"]
    assert old["status"] == "fail" and "hint" in old
    assert "--no-such-option" in old["evidence"]["screen"], old["evidence"]
    for name in ("drill activated", "drill new codex holds the new thread",
                 "drill old rollout byte-identical", "drill backup present",
                 "drill timeline complete"):
        assert (lines[name]["status"], lines[name].get("because")) == (
            "skip", "drill old codex running"), lines[name]
    assert lines["drill no orphans"]["status"] == "pass", lines["drill no orphans"]
    assert lines["drill no model request"]["status"] == "pass"
    scratch = Path(lines["drill scratch ready"]["evidence"]["root"])
    assert scratch.is_dir()  # kept for a look: a drill line failed
    assert _scratch_processes(scratch.parent) == []
    main(["accept", "--drill", str(profile)])  # the table names the root cause
    table = capfd.readouterr().out
    assert "SKIP  drill     drill activated — skipped (because 'drill old codex running' " \
        "failed)" in table, table
