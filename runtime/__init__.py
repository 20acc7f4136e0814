"""Threadline's runtime: rebuild a session transcript and switch a running agent to it."""

from __future__ import annotations


def package_version() -> str:
    """The installed ``threadline`` version, else the one in the source tree's pyproject.toml.

    Called only for ``--version``: ``importlib.metadata`` costs start-up time the Stop hook
    must not pay (README, start-up numbers)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("threadline")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"])
