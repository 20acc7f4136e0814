"""The Codex drill's scratch config.toml (pure): the deployment's model settings with every
provider on the loopback stand-in and the drill key, nothing that starts a process, no
credential (provision/accept/codex_drill.py)."""

from __future__ import annotations

import tomllib

import tomlkit

from provision.accept.codex_drill import DRILL_KEY, scratch_codex_config
from tests.provision.test_codex_config import USER

STAND_IN = "http://127.0.0.1:4711/v1"
NOTIFY = ["/opt/tl/bin/tl-rebuild", "hook-notify", "--config", "/s/threadline.toml"]


def test_the_scratch_config_keeps_the_model_and_points_every_provider_at_the_stand_in() -> None:
    real = tomllib.loads(USER + '\n[profiles.fast]\nmodel = "gpt-5-mini"\n'
                         'notify = ["/bin/evil"]\n')
    data = scratch_codex_config(real, STAND_IN, "/srv/app", NOTIFY)
    text = tomlkit.dumps(data)
    assert tomllib.loads(text) == data  # valid TOML, quoted path keys included
    assert (data["model"], data["model_reasoning_effort"], data["approval_policy"]) == (
        "gpt-5-codex", "high", "on-request")
    assert data["openai_base_url"] == STAND_IN  # the built-in openai provider
    assert data["model_providers"] == {"azure": {
        "name": "Azure", "base_url": STAND_IN, "env_key": DRILL_KEY, "wire_api": "responses",
        "request_max_retries": 0, "stream_max_retries": 0}}
    assert data["profiles"] == {"fast": {"model": "gpt-5-mini"}}
    assert data["notify"] == NOTIFY and data["projects"] == {"/srv/app": {"trust_level":
                                                                         "trusted"}}
    for gone in ("mcp_servers", "hooks", "AZURE_OPENAI_API_KEY", "ghp_x", "azure.com",
                 "notify.py", "stop.py"):
        assert gone not in text, gone
