"""Hostile host profiles (issue 11 §7, §8, §12): NaN never reaches the rendered config, regex and
schema errors come together, deep nesting and alias bombs are a one-line error with rc 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from provision.errors import ProfileError
from provision.profile import load_profile, profile_from_mapping
from tests.provision.test_profile import _with

TL_PROVISION = str(Path(sys.executable).with_name("tl-provision"))
BOMB = "\n".join(
    [f"{chr(97)}: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    + [f"{chr(97 + n)}: &{chr(97 + n)} [" + ", ".join([f"*{chr(96 + n)}"] * 9) + "]"
       for n in range(1, 9)]
) + "\n"


def test_a_nan_rebuild_knob_is_refused_naming_the_key() -> None:
    with pytest.raises(ProfileError, match=r"rebuild\.token_cjk_factor: nan is not a finite"):
        profile_from_mapping(_with(rebuild={"token_cjk_factor": float("nan")}))


def test_a_bad_regex_is_reported_together_with_schema_errors() -> None:
    data = _with(rebuild={"reply_tool_pattern": "(", "stamp_turns": "yes"})
    with pytest.raises(ProfileError) as caught:
        profile_from_mapping(data)
    assert "rebuild.stamp_turns" in str(caught.value)
    assert "rebuild.reply_tool_pattern: '(' is not a valid regular expression" in str(
        caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper than 64 levels"),
    ("a: " + "[" * 100 + "]" * 100 + "\n", "nested deeper than 64 levels"),
    (BOMB, "expands to more than 100000 values"),
], ids=["nested-3000", "nested-100", "alias-bomb"])
def test_deep_nesting_and_alias_bombs_are_a_one_line_error_with_rc_2(
    tmp_path: Path, text: str, message: str,
) -> None:
    path = tmp_path / "host.yml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_profile(path)
    done = subprocess.run([TL_PROVISION, "introspect", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_profile_with_shared_aliases_of_modest_size_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "host.yml"
    path.write_text(
        "host: h\nclaude: {user: u, home: /home/u}\n"
        "door: {kind: tmux, tmux: {target: 'main:0.0'}}\n"
        "install: {config_path: /etc/threadline/config.toml, state_dir: /var/lib/tl}\n"
        "rebuild: {poison_patterns: &p [boom], injected_tags: *p}\n")
    assert load_profile(path).rebuild["injected_tags"] == ["boom"]


def test_any_odd_value_anywhere_in_a_shipped_inventory_is_a_profile_or_a_profile_error(
    tmp_path: Path,
) -> None:
    """Seeded fuzz: 600 shipped inventories with one value replaced by an arbitrary one (NaN,
    NUL, huge numbers, surrogates, nesting) load or fail with ProfileError — nothing else."""
    import random

    import yaml

    from tests.provision.test_profile import INVENTORIES
    from tests.runtime.engine.test_fuzz_guard import SEED, _paths, odd_value

    rng = random.Random(SEED)
    bases = [yaml.safe_load(path.read_text()) for path in INVENTORIES]
    outcomes = {"loaded": 0, "refused": 0}
    for number in range(600):
        data = json_copy(rng.choice(bases))
        path = rng.choice(_paths(data))
        holder = data
        for part in path[:-1]:
            holder = holder[part]
        holder[path[-1]] = odd_value(rng) if rng.random() < 0.9 else float("nan")
        try:
            profile_from_mapping(data, f"case-{number}")
            outcomes["loaded"] += 1
        except ProfileError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0, outcomes


def json_copy(value):
    import copy

    return copy.deepcopy(value)


def test_a_lone_surrogate_in_a_profile_value_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "host.yml"
    path.write_text('host: "box \\ud83d"\nclaude: {user: u, home: /home/u}\n'
                    "door: {kind: tmux, tmux: {target: 'main:0.0'}}\n"
                    "install: {config_path: /etc/tl/config.toml, state_dir: /var/lib/tl}\n")
    with pytest.raises(ProfileError, match="host: contains a lone UTF-16 surrogate"):
        load_profile(path)


@pytest.mark.parametrize(("where", "yaml_text", "shown"), [
    ("install.state_dir", "  state_dir: |\n    /var/lib/tl\n", r"'/var/lib/tl\n'"),
    ("install.config_path", '  config_path: "/etc/tl/con\\tfig.toml"\n',
     r"'/etc/tl/con\tfig.toml'"),
])
def test_a_control_character_in_a_path_is_refused_naming_the_key(
    tmp_path: Path, where: str, yaml_text: str, shown: str,
) -> None:
    """``state_dir: |`` keeps a trailing newline: apply created '/var/lib/tl\\n' silently."""
    path = tmp_path / "host.yml"
    install = {"config_path": "  config_path: /etc/tl/config.toml\n",
               "state_dir": "  state_dir: /var/lib/tl\n"}
    install[where.split(".")[1]] = yaml_text
    path.write_text("host: h\nclaude: {user: u, home: /home/u}\n"
                    "door: {kind: tmux, tmux: {target: 'main:0.0'}}\ninstall:\n"
                    + "".join(install.values()))
    done = subprocess.run([TL_PROVISION, "validate", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"{where}: {shown} contains the control character" in done.stderr
