"""The built wheel carries what the code loads at run time: schemas, templates, console scripts.

The wheel is built from this checkout and unpacked into a temp folder (``pip install
--no-deps --target``); the checks then import the packages from there, with the checkout off
``sys.path``, so a file that only exists in the source tree cannot make them pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.wheel import build_wheels

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = build_wheels(out, "--no-deps", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (built,) = out.glob("threadline-*.whl")
    return built


def test_the_wheel_holds_the_schemas_the_templates_and_the_console_scripts(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("runtime/schema/config.schema.json", "provision/schema/profile.schema.json",
                   "provision/templates/config.toml.j2", "provision/templates/tl-launch.conf.j2",
                   "provision/templates/tl-runner.sh.j2"):
        assert needed in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for script in ("tl-rebuild = runtime.cli:main", "tl-provision = provision.cli:main",
                   "tl-launch = runtime.doors.systemd_launch:main"):
        assert script in text


def test_the_wheel_holds_every_package_of_the_checkout(wheel: Path) -> None:
    # provision.accept was once left out: tl-provision accept then failed on every install
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = sorted(str(init.relative_to(REPO)) for top in ("runtime", "provision")
                      for init in (REPO / top).rglob("__init__.py"))
    assert "provision/accept/__init__.py" in packages
    assert [p for p in packages if p not in names] == []


def test_the_installed_wheel_validates_config_and_profiles_and_renders_away_from_the_checkout(
        wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(wheel)], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = r"""
import json, sys
import runtime.config, provision.profile, provision.render
from runtime.config import load_config
from provision.profile import load_profile
cfg = load_config(None)
profile = load_profile(sys.argv[1])
print(json.dumps({
    "runtime": runtime.config.__file__,
    "provision": provision.profile.__file__,
    "overflow": cfg.rebuild.carry_overflow,
    "door": profile.door.kind,
    "templates": sorted(provision.render._environment().list_templates()),
}))
"""
    env = {**os.environ, "PYTHONPATH": str(target)}  # ahead of the editable install
    done = subprocess.run(
        [sys.executable, "-c", probe, str(REPO / "inventories" / "tmux-vps.yml")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["runtime"].startswith(str(target))
    assert found["provision"].startswith(str(target))
    assert found["overflow"] == "drop_oldest"
    assert found["door"] == "tmux"
    assert {"config.toml.j2", "tl-launch.conf.j2", "tl-runner.sh.j2"} <= set(found["templates"])
