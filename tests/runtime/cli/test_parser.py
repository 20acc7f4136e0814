"""tl-rebuild's command line itself: --version, --debug on either side of the sub-command, and
a description with examples in every sub-command's --help (issue 15)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from runtime import package_version
from runtime.cli import _engine_command, build_parser, formatter, main
from runtime.errors import ConfigError
from tests.conftest import REPO
from tests.runtime.codex_rollouts import Rollout
from tests.runtime.helpers import conversation


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every sub-parser of ``parser``, by name (walks argparse's sub-parsers action)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def test_version_prints_the_program_and_the_installed_version(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tl-rebuild {version('threadline')}\n"


def test_the_version_is_the_one_in_pyproject() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    assert package_version() == pyproject["project"]["version"]


def test_building_the_parser_does_not_import_the_package_metadata() -> None:
    """--version looks the version up only when asked: start-up pays nothing for it."""
    code = ("import sys; from runtime.cli import build_parser; build_parser(); "
            "print('importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert done.stdout == "False\n"


@pytest.mark.parametrize("argv", [["--debug", "plan"], ["plan", "--debug"],
                                  ["--debug", "status"], ["status", "--debug"]])
def test_debug_before_or_after_the_subcommand_shows_the_traceback(
        tmp_path: Path, argv: list[str]) -> None:
    missing = str(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="config file not found"):
        main([*argv, "--config", missing])


@pytest.mark.parametrize("command", ["plan", "status"])
def test_without_debug_an_error_is_one_line(tmp_path: Path, capsys, command: str) -> None:
    missing = str(tmp_path / "missing.toml")
    assert main([command, "--config", missing]) == 1
    assert capsys.readouterr().err == (
        f"tl-rebuild: error: config file not found: {missing!r}\n")


def test_debug_after_the_subcommand_is_the_same_namespace_as_before() -> None:
    parser = build_parser()
    after = parser.parse_args(["gc", "--debug", "--keep", "3"])
    before = parser.parse_args(["--debug", "gc", "--keep", "3"])
    assert vars(after) == vars(before)
    assert vars(after)["debug"] is True
    assert parser.parse_args(["gc"]).debug is False


def test_every_subcommand_has_a_description_and_an_example_in_its_help() -> None:
    commands = subcommands(build_parser())
    assert {"plan", "dirty", "fork", "request", "status", "list", "cancel", "rollback",
            "doctor", "recover", "gc", "restart", "hook-stop", "mcp"} <= commands.keys()
    for name, parser in commands.items():
        text = parser.format_help()
        assert parser.description and "\n" not in parser.description, name
        assert parser.description in text, name
        examples = text.split("examples:\n", 1)[1].splitlines()
        assert examples and all(line.startswith(f"  tl-rebuild {name}") for line in examples), (
            name, examples)
        assert "--debug" in text, name


@pytest.mark.parametrize("argv", [["plan", "--json", "--transcript", "t.jsonl"],
                                  ["--debug", "fork", "--transcript", "t", "--into", "d"],
                                  ["dirty", "--agent", "codex", "--debug"]])
def test_an_engine_command_alone_parses_and_helps_as_in_the_full_parser(argv: list[str]) -> None:
    name = _engine_command(argv)
    assert name in ("plan", "dirty", "fork")
    alone, full = build_parser(name), build_parser()
    assert subcommands(alone).keys() == {name}
    assert vars(alone.parse_args(argv)) == vars(full.parse_args(argv))
    assert subcommands(alone)[name].format_help() == subcommands(full)[name].format_help()


@pytest.mark.parametrize("argv", [["-h", "plan"], ["--version", "plan"], ["--deb", "plan"],
                                  ["status"], [], ["report", "--html", "x"]])
def test_help_version_abbreviations_and_other_commands_get_the_full_parser(
        argv: list[str]) -> None:
    assert _engine_command(argv) is None


@pytest.mark.parametrize("columns", [None, "57", "0", "-3", "wide"])
@pytest.mark.parametrize("kind", [argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter])
def test_the_formatter_takes_the_width_argparse_would_without_importing_shutil(
        monkeypatch: pytest.MonkeyPatch, columns: str | None,
        kind: type[argparse.HelpFormatter]) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours, theirs = formatter(kind)(prog="x"), kind(prog="x")
    assert type(ours) is kind
    assert (ours._width, ours._max_help_position) == (theirs._width, theirs._max_help_position)


def added_modules(argv: list[str], watched: tuple[str, ...],
                  forgotten: tuple[str, ...] = ()) -> list[str]:
    """Which of ``watched`` a run of ``main(argv)`` in a fresh interpreter imports itself.

    Only what the run adds: site may import shutil (a .pth such as certifi's
    importlib.resources on some installs), which no command can avoid. ``forgotten`` modules
    are dropped from ``sys.modules`` after ``import orjson`` (which orjson >= 3.9 makes
    import ``dataclasses`` and ``inspect``; the bare scan of issue 13 pays that too), so a
    run that imports one of them again shows."""
    code = ("import sys, orjson\n"
            f"for name in {forgotten!r}: sys.modules.pop(name, None)\n"
            f"watched = {watched!r}\n"
            "before = {m for m in watched if m in sys.modules}\n"
            "from runtime.cli import main\n"
            f"main({argv!r})\n"
            "print('added:', *[m for m in watched if m in sys.modules and m not in before])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    last = done.stdout.splitlines()[-1].split()  # after the command's own output
    assert last[0] == "added:", done.stdout[-500:]
    return last[1:]


def test_a_plan_run_imports_neither_shutil_nor_the_other_commands(tmp_path: Path) -> None:
    watched = ("shutil", "runtime.cli.ops", "shlex", "typing_extensions")
    argv = ["plan", "--json", "--transcript", str(tmp_path / "none.jsonl")]
    assert added_modules(argv, watched) == []


@pytest.mark.parametrize("agent", ["claude", "codex"])
@pytest.mark.parametrize("command", ["plan", "dirty", "fork"])
def test_plan_dirty_and_fork_import_neither_dataclasses_nor_inspect(
        tmp_path: Path, command: str, agent: str) -> None:
    """dataclasses imports inspect (ast, dis, tokenize): ≈ 5 ms of a one-shot command where
    orjson does not import it already (issue 13); the runtime's records do without."""
    if agent == "codex":
        rollout = Rollout()
        rollout.exchange("hi", "hello")
        rollout.tool_round()
        source = rollout.write(tmp_path / "sessions")
    else:
        source = conversation().write(tmp_path / "source.jsonl")
    argv = [command, "--json", "--transcript", str(source)]
    if command == "fork":
        config = tmp_path / "config.toml"
        config.write_text("[rebuild]\npoison_threshold = 1000000\n")
        argv += ["--config", str(config), "--into", str(tmp_path / "forks")]
    forgotten = ("dataclasses", "inspect")
    assert added_modules(argv, forgotten, forgotten) == []
