"""A harmless tmux deployment for provision tests: private tmux socket, temp HOME, and a
stand-in ``claude`` (a shell script named claude that stays alive and answers --version)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.deployment import Deployment, install_stand_in, write_profile
from tests.fixtures.tmux import TmuxServer, tmux_server  # noqa: F401 - fixture


@pytest.fixture
def deployment(tmp_path: Path, tmux_server: TmuxServer) -> Deployment:  # noqa: F811
    d = Deployment(root=tmp_path / "deploy", tmux=tmux_server)
    for directory in (d.bin_dir, d.home, d.workdir):
        directory.mkdir(parents=True)
    install_stand_in(d.bin_dir)
    from runtime.paths import encode_project_dir

    (d.home / ".claude" / "projects" / encode_project_dir(str(d.workdir))).mkdir(parents=True)
    write_profile(d.profile_path, d.profile())
    d.run_as_the_user()
    return d
