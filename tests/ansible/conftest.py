"""A fleet of companions on this machine for real ``ansible-playbook`` runs.

Each host is a world of its own under one temp folder: its own HOME (claude's config dir is
``HOME/.claude``), a private tmux server (``-L`` socket name handed out by the guard) whose pane
runs the Python stand-in claude laid out like an npm install, a session transcript, a state dir
and a Threadline venv prefix. Ansible reaches every host with ``ansible_connection=local``; its
home, temp dirs and config are private to the run, so nothing under the real ``~/.ansible`` is
touched. The collection is the tarball ``ansible-galaxy collection build`` makes from
``provision/ansible/``, installed into a private collections path; the venvs install the wheel
built from this checkout (plus its dependencies) from a private wheelhouse, with no index
(pip's environment: PIP_NO_INDEX, PIP_FIND_LINKS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.fixtures.claude_cli import claude_bin  # noqa: F401 - fixture
from tests.fixtures.deployment import Companion, install_stand_in
from tests.fixtures.guard import claim_socket_name
from tests.fixtures.standin_claude import register_server, sleeper_argv, write_transcript
from tests.fixtures.tmux import TmuxServer, wait_for
from tests.fixtures.wheel import build_wheels
from tests.provision.test_accept_drill import STAND_IN

REPO = Path(__file__).resolve().parents[2]
COLLECTION_SRC = REPO / "provision" / "ansible" / "ansible_collections" / "threadline" / "companion"
FOREIGN_SETTINGS = {"model": "opus", "env": {"FOO": "bar"},
                    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                        {"type": "command", "command": "/usr/bin/foreign"}]}]}}
TURNS = [("remember the blue door", "noted: the blue door"), ("and 4711", "4711, got it")]
RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")


def parse_recap(stdout: str) -> dict[str, dict[str, int]]:
    """``{host: {ok, changed, unreachable, failed, skipped, rescued, ignored}}`` from the
    PLAY RECAP of ansible-playbook's default output."""
    _, _, recap = stdout.rpartition("PLAY RECAP")
    hosts: dict[str, dict[str, int]] = {}
    for line in recap.splitlines()[1:]:
        match = RECAP.match(line.strip())
        if match:
            hosts[match["host"]] = {key: int(value) for key, value in
                                    (pair.split("=") for pair in match["counts"].split())}
    return hosts


def _ansible_bin(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        raise RuntimeError(f"{name} is not installed beside {sys.executable} "
                           f"(pip install -e '.[test]' installs ansible-core)")
    return str(path)


@dataclass(kw_only=True)
class World(Companion):
    """One companion host: its folders, its tmux server, its profile variables."""

    name: str

    @property
    def prefix(self) -> Path:
        return self.root / "opt" / "threadline"

    @property
    def profile_path(self) -> Path:
        return self.root / "etc" / "host.yml"

    def host_vars(self) -> dict:
        return {"threadline_prefix": str(self.prefix),
                "threadline_profile_path": str(self.profile_path),
                "threadline_profile": self.profile()}

    def build(self, claude_running: bool = True) -> None:
        """Lay the world out and start its pane: the stand-in claude, or (``claude_running``
        False) a plain shell, so introspection finds no claude to read."""
        from runtime.paths import encode_project_dir

        for directory in (self.bin_dir, self.home / ".claude", self.workdir):
            directory.mkdir(parents=True)
        install_stand_in(self.bin_dir, STAND_IN)
        session = str(uuid.uuid4())
        project = self.home / ".claude" / "projects" / encode_project_dir(str(self.workdir))
        write_transcript(project / f"{session}.jsonl", session, str(self.workdir), TURNS)
        register_server(self.home / ".claude.json", "companion", sleeper_argv(self.name))
        self.settings.write_text(json.dumps(FOREIGN_SETTINGS, indent=4))
        self.run_as_the_user()
        command = (self.launch_command() if claude_running
                   else "exec sh -c 'while :; do sleep 3600; done'")
        self.tmux.new_session("main", command, cwd=str(self.workdir))
        if claude_running:
            wait_for(self.stand_in_pid, what=f"stand-in claude running on {self.name}")


@dataclass
class Fleet:
    """The worlds, the inventory and a private Ansible set-up to run playbooks with."""

    root: Path
    worlds: dict[str, World]
    wheelhouse: Path
    collections: Path
    env: dict[str, str]

    def inventory(self, name: str = "inventory.yml", **overrides: dict) -> Path:
        """Write an inventory of every world (``overrides[host]`` merged into its vars)."""
        hosts = {world.name: {**world.host_vars(), **overrides.get(world.name, {})}
                 for world in self.worlds.values()}
        data = {"all": {
            "vars": {"ansible_connection": "local",
                     "ansible_python_interpreter": sys.executable,
                     "threadline_python": sys.executable,
                     "threadline_pip_environment": {"PIP_NO_INDEX": "1",
                                                    "PIP_FIND_LINKS": str(self.wheelhouse)}},
            "children": {"companions": {"hosts": hosts}}}}
        path = self.root / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def play(self, playbook: str, *args: str,
             inventory: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``ansible-playbook -i INVENTORY PLAYBOOK ARGS`` with the private set-up."""
        argv = [_ansible_bin("ansible-playbook"), "-i", str(inventory or self.inventory()),
                playbook, *args]
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              cwd=self.root, timeout=600, stdin=subprocess.DEVNULL)
        with (self.root / "runs.log").open("a") as log:  # to read after a failure
            log.write(f"$ {' '.join(argv)}\n{done.stdout}\n{done.stderr}\n")
        return done


def _private_ansible_env(base: Path, collections: Path) -> dict[str, str]:
    config = base / "ansible.cfg"
    config.write_text("[defaults]\nforks = 5\nretry_files_enabled = false\n"
                      "interpreter_python = auto_silent\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update({
        "ANSIBLE_CONFIG": str(config),
        "ANSIBLE_HOME": str(base / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(base / "ansible-tmp"),
        "ANSIBLE_REMOTE_TEMP": str(base / "ansible-remote-tmp"),
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    })
    return env


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of this checkout and of its dependencies (pip's cache makes the second build
    quick), so the role's venvs install offline (PIP_NO_INDEX + PIP_FIND_LINKS)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    done = build_wheels(out)
    if done.returncode != 0:
        raise RuntimeError(f"pip wheel {REPO} failed rc={done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    return out


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection tarball as ``ansible-galaxy collection build`` makes it."""
    out = tmp_path_factory.mktemp("galaxy-build")
    env = _private_ansible_env(out, out / "unused")
    done = subprocess.run([_ansible_bin("ansible-galaxy"), "collection", "build",
                           str(COLLECTION_SRC), "--output-path", str(out)],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    (tarball,) = out.glob("threadline-companion-*.tar.gz")
    return tarball


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory: pytest.TempPathFactory,
                         collection_tarball: Path) -> tuple[Path, dict[str, str]]:
    """A private collections path with the built tarball installed; and the env to use it."""
    base = tmp_path_factory.mktemp("ansible")
    collections = base / "collections"
    env = _private_ansible_env(base, collections)
    done = subprocess.run([_ansible_bin("ansible-galaxy"), "collection", "install",
                           str(collection_tarball), "-p", str(collections)],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return collections, env


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path,
          installed_collection: tuple[Path, dict[str, str]],
          claude_bin: Path) -> Iterator[Fleet]:  # noqa: F811
    """Three healthy companions (alpha, beta, gamma) and ``broken``, whose pane runs no
    claude, each a world of its own."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it with apt)")
    root = tmp_path_factory.mktemp("fleet")
    collections, env = installed_collection
    worlds: dict[str, World] = {}
    try:
        for name in ("alpha", "beta", "gamma", "broken"):
            server = TmuxServer(claim_socket_name(f"tl-ansible-{name}-{uuid.uuid4().hex[:8]}"))
            worlds[name] = World(name=name, root=root / name, tmux=server, binary=claude_bin)
            worlds[name].build(claude_running=name != "broken")
        yield Fleet(root, worlds, wheelhouse, collections, env)
    finally:
        for world in worlds.values():
            world.tmux.kill()
