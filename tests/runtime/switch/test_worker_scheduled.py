"""``python -m runtime.switch.worker --scheduled`` (issue 10 §6): under sudo the worker is started
by
one exact command line, so it finds the one scheduled operation itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import config_from_mapping
from runtime.errors import StoreError
from runtime.switch import ops
from runtime.switch.state import State
from runtime.switch.store import Store
from runtime.switch.worker import main, scheduled_operation


def _config(tmp_path: Path):  # noqa: ANN202
    return config_from_mapping({"state_dir": str(tmp_path / "state"),
                                "project_dir": str(tmp_path / "p"),
                                "workdir": str(tmp_path)}, tmp_path / "config.toml")


def test_the_scheduled_operation_is_the_one_the_worker_takes(tmp_path: Path) -> None:
    config = _config(tmp_path)
    op_id = str(ops.request(config, "why", "REBUILD")["operation_id"])
    with pytest.raises(StoreError, match="no scheduled operation"):
        scheduled_operation(config)  # pending: its Stop has not come yet
    Store(config.state_dir).transition(op_id, State.SCHEDULED, phase="scheduled")  # type: ignore[arg-type]
    assert scheduled_operation(config) == op_id


def test_an_id_and_scheduled_together_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["some-id", "--scheduled", "--config", str(tmp_path / "c.toml")])
    with pytest.raises(SystemExit):
        main(["--config", str(tmp_path / "c.toml")])
