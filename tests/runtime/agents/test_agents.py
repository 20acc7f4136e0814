"""runtime.agents: the /proc cmdline decoding every agent shares, and the agent registry."""

from __future__ import annotations

import os

import pytest

from runtime.agents import carried_environment, claude, cli_for, decode_cmdline
from runtime.errors import ConfigError


def test_non_utf8_bytes_survive_decoding_and_exec_again_unchanged() -> None:
    argv = decode_cmdline(b"/usr/bin/claude\0--append-system-prompt\0caf\xe9 \xff\0")
    assert argv[:2] == ("/usr/bin/claude", "--append-system-prompt")
    assert os.fsencode(argv[2]) == b"caf\xe9 \xff"  # what exec would pass


def test_two_decodings_of_the_same_bytes_compare_equal_and_differ_from_other_bytes() -> None:
    assert decode_cmdline(b"claude\0\xe9\0") == decode_cmdline(b"claude\0\xe9\0")
    assert decode_cmdline(b"claude\0\xe9\0") != decode_cmdline(b"claude\0\xe8\0")


def test_an_empty_last_argument_is_kept_and_a_zombie_has_none() -> None:
    assert decode_cmdline(b"claude\0-p\0\0") == ("claude", "-p", "")
    assert decode_cmdline(b"claude\0--resume\0x y\0") == ("claude", "--resume", "x y")
    assert decode_cmdline(b"") == ()


def test_carried_variables_are_those_the_process_has() -> None:
    environ = {"CLAUDE_CONFIG_DIR": "/c d", "TL_TOKEN": "t", "OTHER": "o"}
    assert carried_environment(["TL_TOKEN", "CLAUDE_CONFIG_DIR", "MISSING"], environ) == {
        "TL_TOKEN": "t", "CLAUDE_CONFIG_DIR": "/c d"}


def test_claude_has_rules_and_another_agent_is_refused_by_name() -> None:
    assert cli_for("claude") is claude
    with pytest.raises(ConfigError, match="'gemini'"):
        cli_for("gemini")
