"""runtime.config: TOML in, validated frozen records out, every error naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import (
    DEFAULT_INJECTED_TAGS,
    Config,
    SpeechTool,
    config_from_mapping,
    config_path_from,
    load_config,
)
from runtime.errors import ConfigError
from runtime.record import FrozenRecordError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "threadline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    """The ConfigError message ``load_config(path)`` raises (it must raise one)."""
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_none_gives_every_default_and_no_project_dir() -> None:
    config = load_config(None)
    assert config.project_dir is None
    assert config.rebuild.include_open_tail is True
    assert config.rebuild.carry_max_tokens == 0
    assert config.rebuild.carry_overflow == "drop_oldest"
    assert config.rebuild.dirty_budget_bytes == 524288
    assert config.rebuild.injected_tags == DEFAULT_INJECTED_TAGS
    assert "system-reminder" in config.rebuild.injected_tags
    assert config.switch.door == "tmux"
    assert config.switch.keep_operations == 20


def test_a_full_file_is_read_into_frozen_records(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
project_dir = "/p/-srv-app"
workdir = "/srv/app"
state_dir = "/var/lib/threadline"
[rebuild]
carry_max_tokens = 5000
carry_overflow = "block"
reply_chat_ids = ["42"]
speech_tools = [{ name = "mcp__x__relay", path = "payload.text" }]
injected_tags = ["system-reminder", "my-tag"]
[switch]
door = "systemd"
resume_argv = ["/usr/bin/claude", "--resume", "{session_id}"]
channel_flags = ["--channels", "plugin:telegram@x"]
[switch.tmux]
target = "main:0.0"
socket_name = "tl"
[switch.systemd]
unit = "claude.service"
pointer_path = "/run/tl/pointer"
[switch.pointer]
path = "/run/tl/p"
""",
    )
    config = load_config(path)
    assert isinstance(config, Config)
    assert config.project_dir == Path("/p/-srv-app")
    assert config.rebuild.carry_overflow == "block"
    assert config.rebuild.reply_chat_ids == ("42",)
    assert config.rebuild.speech_tools == (SpeechTool("mcp__x__relay", "payload.text"),)
    assert config.rebuild.speech_tools[0].keys == ("payload", "text")
    assert config.rebuild.injected_tags == ("system-reminder", "my-tag")
    assert config.switch.resume_argv == ("/usr/bin/claude", "--resume", "{session_id}")
    assert config.switch.tmux.target == "main:0.0"
    assert config.switch.systemd.unit == "claude.service"
    assert config.switch.pointer.path == "/run/tl/p"
    assert config.worker_log_path == Path("/var/lib/threadline/worker.log")
    assert config.source == path
    with pytest.raises(FrozenRecordError):
        config.rebuild.carry_max_tokens = 1  # type: ignore[misc]


def test_unknown_keys_are_errors_that_name_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "bogus = 1\n[rebuild]\nstamp_turn = true\n[switch.tmux]\npane = 'x'\n")
    message = refusal(path)
    assert "bogus: unknown key" in message
    assert "rebuild.stamp_turn: unknown key" in message
    assert "switch.tmux.pane: unknown key" in message
    assert str(path) in message


def test_a_misspelt_key_gets_a_did_you_mean_and_a_far_one_does_not(tmp_path: Path) -> None:
    path = write(tmp_path, "bogus = 1\n[rebuild]\nstamp_turn = true\n"
                           "[switch.tmux]\ntarge = 'x'\n")
    problems = refusal(path).split(": ", 1)[1].split("; ")
    assert "rebuild.stamp_turn: unknown key (did you mean 'stamp_turns'?)" in problems
    assert "switch.tmux.targe: unknown key (did you mean 'target'?)" in problems
    assert "bogus: unknown key" in problems  # nothing close: the message stays as it was


def test_an_unknown_key_alone_still_reaches_jsonschema_and_its_suggestion() -> None:
    """Everything else valid: the fast path must say "not sure", not "valid", for an extra key."""
    from runtime.config import schema_errors

    assert schema_errors({"rebuild": {"stamp_turn": True}}) == [
        "rebuild.stamp_turn: unknown key (did you mean 'stamp_turns'?)"]


def test_string_false_is_not_a_boolean(tmp_path: Path) -> None:
    path = write(tmp_path, '[rebuild]\nstamp_turns = "false"\n')
    expected = r"rebuild\.stamp_turns: 'false' is not of type 'boolean'"
    with pytest.raises(ConfigError, match=expected):
        load_config(path)


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[rebuild]\ncarry_overflow = "x"\ncarry_max_tokens = -1\n[switch]\ndoor = "ssh"\n',
    )
    message = refusal(path)
    assert "rebuild.carry_overflow: 'x' is not one of ['drop_oldest', 'block']" in message
    assert "rebuild.carry_max_tokens:" in message
    assert "switch.door: 'ssh' is not one of" in message


def test_a_regex_that_does_not_compile_names_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[rebuild]\npoison_patterns = ['ok', '(unclosed']\n")
    with pytest.raises(ConfigError, match=r"rebuild\.poison_patterns\.1: '\(unclosed'"):
        load_config(path)


def test_speech_tool_needs_name_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, "[rebuild]\nspeech_tools = [{ name = 'x' }]\n")
    with pytest.raises(ConfigError, match=r"rebuild\.speech_tools\.0: 'path' is a required"):
        load_config(path)


def test_missing_file_and_bad_toml_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    bad = write(tmp_path, "rebuild = [\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)


def test_config_path_comes_from_flag_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_CONFIG", "/etc/tl.toml")
    assert config_path_from("/x.toml") == Path("/x.toml")
    assert config_path_from(None) == Path("/etc/tl.toml")
    monkeypatch.delenv("THREADLINE_CONFIG")
    assert config_path_from(None) is None


def test_activation_knobs_default_and_are_validated(tmp_path: Path) -> None:
    switch = load_config(None).switch
    assert (switch.activation_stable_seconds, switch.activation_timeout_seconds,
            switch.healthcheck_seconds) == (0.5, 20.0, 5.0)
    path = write(tmp_path, "[switch]\nactivation_stable_seconds = 0\n"
                           "activation_timeout_seconds = 3.5\n")
    switch = load_config(path).switch
    assert (switch.activation_stable_seconds, switch.activation_timeout_seconds) == (0.0, 3.5)
    bad = write(tmp_path, "[switch]\nactivation_stable_seconds = -1\n"
                          "activation_timeout_seconds = 0\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert "switch.activation_stable_seconds" in str(err.value)
    assert "switch.activation_timeout_seconds" in str(err.value)


def test_agent_defaults_to_claude_and_codex_needs_its_home() -> None:
    assert config_from_mapping({}).agent == "claude"
    cfg = config_from_mapping({"agent": "codex", "codex_home": "/srv/codex-home"})
    assert (cfg.agent, cfg.codex_home) == ("codex", Path("/srv/codex-home"))
    with pytest.raises(ConfigError, match=r"agent: 'codex' needs codex_home"):
        config_from_mapping({"agent": "codex"})
    with pytest.raises(ConfigError, match=r"agent: 'gemini' is not one of"):
        config_from_mapping({"agent": "gemini"})
    with pytest.raises(ConfigError, match=r"codex_home: 'sessions' does not match"):
        config_from_mapping({"agent": "codex", "codex_home": "sessions"})


@pytest.mark.parametrize("door", ["systemd", "pointer"])
def test_agent_codex_on_a_door_that_cannot_switch_it_is_refused_in_one_line(door: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"agent": "codex", "codex_home": "/c", "switch": {"door": door}})
    message = str(err.value)
    assert message.startswith(f"invalid config: switch.door: {door!r} does not run codex yet; "
                              "agent codex needs the tmux door")
    assert "\n" not in message
    assert ("tmux.unit" in message) == (door == "systemd")  # how a unit's codex is supported
    assert config_from_mapping({"agent": "codex", "codex_home": "/c",
                                "switch": {"door": "tmux"}}).switch.door.value == "tmux"
