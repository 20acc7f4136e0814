"""What a person sees from ``tl-rebuild``: units, yes/no, aligned rows, a status that leads with
the state, its age and the failure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runtime.cli import render
from runtime.cli.ops import status_lines
from tests.runtime.cli.test_mcp_results import CREATED, failed_record


@pytest.mark.parametrize(("nbytes", "shown"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1412, "1.4 KiB"),
    (2_202_010, "2.1 MiB"), (3 * 1024**3, "3.0 GiB")])
def test_sizes_have_binary_units(nbytes: int, shown: str) -> None:
    assert render.size(nbytes) == shown


def test_percent_yes_no_and_aligned_rows() -> None:
    assert render.percent(0.98912) == "98.9 %"
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
    assert "  +0.01s created → pending  (0.69s)" in lines
    assert "  +0.70s phase_1 → running  (0.70s)" in lines
    assert lines[lines.index("timeline (8 phases):") + 8] == "  +5.60s failed unhealthy"
    assert not [line for line in lines if "facts." in line or "{" in line]
    assert len(lines) < 30  # was ~130 lines of dotted keys and dicts


def test_status_shows_the_facts_with_verbose() -> None:
    lines = status_lines(failed_record(phases=4), CREATED + timedelta(minutes=5), verbose=True)
    assert any(line.startswith("  facts.transcript_path ") for line in lines)
    assert any(line.startswith("  facts.stats.speech.not_carried.kind_7 ") for line in lines)
    assert lines[0].startswith("failed, created 5m00s ago")


def test_status_of_nothing_says_so() -> None:
    assert status_lines({"operation_id": None, "state": None, "message": "no operations yet"},
                        CREATED) == ["no operations yet"]
