"""What a person sees from ``tl-rebuild``: units, yes/no, aligned rows, a status that leads with
the state, its age and the failure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from runtime.cli import main, render
from runtime.cli.ops import doctor_lines, status_lines
from tests.runtime.cli.test_mcp_results import CREATED, failed_record


@pytest.mark.parametrize(("nbytes", "shown"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1412, "1.4 KiB"),
    (2_202_010, "2.1 MiB"), (3 * 1024**3, "3.0 GiB")])
def test_sizes_have_binary_units(nbytes: int, shown: str) -> None:
    assert render.size(nbytes) == shown


def test_percent_yes_no_and_aligned_rows() -> None:
    assert render.percent(0.98912) == "98.9 %"
    assert (render.percent(0.0001), render.percent(0)) == ("<0.1 %", "0.0 %")
    assert (render.yes_no(True), render.yes_no(False)) == ("yes", "no")
    assert render.aligned([("a", 1, "x"), ("long key", 22, "y")], indent="  ") == [
        "  a         1   x", "  long key  22  y"]


def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert render.paint("failed", "red", Tty()) == "\033[31mfailed\033[0m"  # type: ignore[arg-type]
    assert render.paint("failed", "red") == "failed"  # pytest's stdout is no terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert render.paint("failed", "red", Tty()) == "failed"  # type: ignore[arg-type]


def test_status_leads_with_state_age_and_failure_and_hides_facts_without_verbose() -> None:
    full = failed_record(phases=8)
    lines = status_lines(full, CREATED + timedelta(minutes=5))
    assert lines[0] == "failed, created 5m00s ago  (operation op-20261205T083057.851736Z-2148d3)"
    assert lines[1].startswith("failure: unhealthy — new session unhealthy (channel server "
                               "'telegram' not running")
    assert "reason         " + "the context is full of tool output " * 8 + " (3 requests)" in lines
    assert "  +0.01s created → pending  (0.69s)" in lines
    assert "  +0.70s phase_1 → running  (0.70s)" in lines
    assert lines[lines.index("timeline (8 phases):") + 8] == "  +5.60s failed unhealthy"
    assert not [line for line in lines if "facts." in line or "{" in line]
    assert len(lines) < 30  # was ~130 lines of dotted keys and dicts
    assert lines[-1] == ("next: read the failure above and check with tl-rebuild doctor "
                         "before requesting again")


def test_status_shows_the_facts_with_verbose() -> None:
    lines = status_lines(failed_record(phases=4), CREATED + timedelta(minutes=5), verbose=True)
    assert any(line.startswith("  facts.transcript_path ") for line in lines)
    assert any(line.startswith("  facts.stats.speech.not_carried.kind_7 ") for line in lines)
    assert lines[0].startswith("failed, created 5m00s ago")


def test_status_of_nothing_says_so() -> None:
    assert status_lines({"operation_id": None, "state": None, "message": "no operations yet"},
                        CREATED) == ["no operations yet"]


def test_doctor_is_a_pass_fail_checklist_with_readable_details() -> None:
    result = {"ok": False, "active": None, "checks": {
        "config": {"ok": True, "detail": "/etc/threadline/config.toml"},
        "resume_argv": {"ok": True, "detail": ["claude", "--resume", "{session_id}"]},
        "resume_argv_channels": {"ok": False, "detail": {
            "required": ["--channels", "plugin:tg@mkt"], "missing": ["plugin:tg@mkt"]}},
        "door": {"ok": True, "detail": {"door": "tmux", "identity": "main:0.0"}},
        "store": {"ok": True, "detail": {"operations": 3, "active": None}},
        "state_dir_size": {"ok": True, "detail": {"bytes": 30106, "files": 12,
                                                  "shown": "29.4 KiB"}},
    }}
    assert doctor_lines(result) == [
        "PASS  config                /etc/threadline/config.toml",
        "PASS  resume_argv           claude --resume '{session_id}'",
        "FAIL  resume_argv_channels  required --channels plugin:tg@mkt; missing plugin:tg@mkt",
        "PASS  door                  door tmux, identity main:0.0",
        "PASS  store                 3 operations, active: none",
        "PASS  state_dir_size        29.4 KiB in 12 files",
        "doctor: pass=5 fail=1 — fix the FAIL lines first",
    ]


def test_doctor_cli_prints_the_checklist_and_exits_1_on_a_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("THREADLINE_CONFIG", raising=False)
    config = tmp_path / "c.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
    assert main(["doctor", "--config", str(config)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"PASS  config                {config}"
    assert "FAIL  project_dir           (not set)" in lines
    assert f"PASS  state_dir             {tmp_path / 'state'}" in lines
    assert lines[-1].startswith("doctor: pass=") and lines[-1].endswith("fix the FAIL lines first")
    assert not [line for line in lines if "{" in line or "True" in line]


@pytest.mark.parametrize(("state", "last"), [
    ("pending", "next: it runs after the current turn ends (call it off: tl-rebuild cancel "
                "--operation OP --confirm CANCEL)"),
    ("activated", "next: nothing to do (back to the old session: tl-rebuild rollback "
                  "--operation OP --confirm ROLLBACK)"),
    ("rolled_back", "next: the old session was resumed; read the failure above and check with "
                    "tl-rebuild doctor before requesting again"),
    ("running", "next: it is under way; watch it: tl-rebuild status --operation OP"),
])
def test_status_ends_with_what_to_do_next_in_its_state(state: str, last: str) -> None:
    from runtime.cli.ops import status_next

    assert status_next(state, "OP") == last
