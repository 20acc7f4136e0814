"""runtime.record: each record behaves as its ``@dataclass(frozen=True)`` twin would, without
``dataclasses`` on the one-shot commands' start-up (issue 13)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle
from typing import Any, ClassVar

import pytest

from runtime import proc
from runtime.config import Config, RebuildConfig, SwitchConfig, config_from_mapping
from runtime.engine import candidate
from runtime.engine.codex import candidate as codex_candidate
from runtime.engine.verify import verify_candidate
from runtime.record import FrozenRecordError, Record, defaults, field, fields
from tests.runtime.codex_rollouts import Rollout
from tests.runtime.helpers import build, conversation

KINDS = ("SpeechTool", "RebuildConfig", "TmuxConfig", "SystemdConfig", "PointerConfig",
         "SwitchConfig", "Config", "Build", "CodexBuild", "VerifyReport", "Result")


def _config() -> Config:
    return config_from_mapping({
        "project_dir": "/srv/agent/.claude/projects/-srv-app",
        "state_dir": "/var/lib/threadline",
        "rebuild": {"carry_max_tokens": 90000, "poison_threshold": 3,
                    "speech_tools": [{"name": "mcp__discord__reply", "path": "payload.text"}]},
        "switch": {"door": "tmux", "resume_argv": ["claude", "--resume", "{session_id}"],
                   "tmux": {"target": "main:0.0", "socket_name": "tl"}},
    })


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Record]:
    """One real instance of every record class the one-shot commands make."""
    tmp_path = tmp_path_factory.mktemp("records")
    config = _config()
    built = build(tmp_path, conversation())
    path = candidate.write(built, tmp_path / "forks")
    rollout = Rollout()
    rollout.exchange("hi", "hello")
    rollout.tool_round()
    codex = codex_candidate.build(rollout.write(tmp_path / "codex"), Config())
    failed = proc.Result(("tmux", "-L", "tl", "ls"), 1, "", "no server running on /tmp/tl\n")
    found: dict[str, Record] = {
        "SpeechTool": config.rebuild.speech_tools[0], "RebuildConfig": config.rebuild,
        "TmuxConfig": config.switch.tmux, "SystemdConfig": config.switch.systemd,
        "PointerConfig": config.switch.pointer, "SwitchConfig": config.switch,
        "Config": config, "Build": built, "CodexBuild": codex,
        "VerifyReport": verify_candidate(path, built), "Result": failed,
    }
    assert [type(r).__name__ for r in found.values()] == list(KINDS)
    return found


def _twin(cls: type[Record]) -> Any:
    """``cls`` as plain ``@dataclass(frozen=True)`` makes it: every method generated."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        hints.update(klass.__dict__.get("__annotations__", {}))
    body: dict[str, Any] = {"__annotations__": {name: hints[name] for name in fields(cls)}}
    for name in defaults(cls):
        made = functools.partial(lambda n: defaults(cls)[n], name)
        body[name] = dataclasses.field(default_factory=made)
    return dataclasses.dataclass(frozen=True)(type(cls.__name__, (), body))


def _outcome(make: Any) -> Any:
    try:
        return make()
    except TypeError as err:
        return TypeError, "unhashable" in str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_shows_compares_hashes_and_replaces_as_its_dataclass_twin(
        records: dict[str, Record], kind: str) -> None:
    ours = records[kind]
    cls = type(ours)
    values = [getattr(ours, name) for name in fields(cls)]
    twin = _twin(cls)(*values)
    assert repr(ours) == repr(twin)
    assert _outcome(lambda: hash(ours)) == _outcome(lambda: hash(twin))
    assert ours == cls(*values) == cls(**dict(zip(fields(cls), values, strict=True)))
    assert ours != twin and ours != tuple(values)
    first = fields(cls)[0]
    other = ours.replace(**{first: "x"})
    assert getattr(other, first) == "x" and other != ours and type(other) is cls
    assert repr(other) == repr(dataclasses.replace(twin, **{first: "x"}))
    assert ours.replace() == ours and ours.replace() is not ours


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_is_built_and_refused_as_its_dataclass_twin(
        records: dict[str, Record], kind: str) -> None:
    ours = records[kind]
    cls, values = type(ours), [getattr(ours, name) for name in fields(ours)]
    twin = _twin(cls)
    required = len(fields(cls)) - len(defaults(cls))
    assert repr(cls(*values[:required])) == repr(twin(*values[:required]))
    for wrong in ((*values, 1), (*values[:-1],) if required == len(values) else ()):
        if wrong:
            with pytest.raises(TypeError):
                twin(*wrong)
            with pytest.raises(TypeError, match=cls.__qualname__):
                cls(*wrong)
    for wrong_keywords in ({"not_a_field": 1}, {fields(cls)[0]: values[0]}):
        with pytest.raises(TypeError):
            twin(*values, **wrong_keywords)
        with pytest.raises(TypeError, match=repr(next(iter(wrong_keywords)))):
            cls(*values, **wrong_keywords)
    with pytest.raises(TypeError, match="'not_a_field'"):
        ours.replace(not_a_field=1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_cannot_be_changed_but_copies_and_pickles(
        records: dict[str, Record], kind: str) -> None:
    ours = records[kind]
    first = fields(ours)[0]
    with pytest.raises(FrozenRecordError, match=f"cannot assign to field {first!r}"):
        setattr(ours, first, "y")
    with pytest.raises(AttributeError):  # as dataclasses.FrozenInstanceError is one
        delattr(ours, first)
    with pytest.raises(FrozenRecordError):
        ours.not_a_field = 1  # type: ignore[attr-defined]
    assert copy.copy(ours) == ours
    if kind not in ("Build", "CodexBuild"):  # a build's turns compare by identity
        assert copy.deepcopy(ours) == ours and pickle.loads(pickle.dumps(ours)) == ours


def test_factory_defaults_are_made_per_record_and_cached_properties_still_cache() -> None:
    first, second = SwitchConfig(), SwitchConfig()
    assert first.tmux == second.tmux and first.tmux is not second.tmux
    assert Config().rebuild == RebuildConfig()
    rebuild = RebuildConfig(poison_patterns=("refus",))
    assert rebuild.poison_regexes is rebuild.poison_regexes
    assert rebuild.poison_regexes[0].pattern == "refus"


def test_a_field_without_a_default_after_one_with_a_default_is_refused_at_the_class() -> None:
    with pytest.raises(TypeError, match="'late' has no default but follows one that has"):
        class Wrong(Record):
            early: int = 0
            late: str


def test_a_subclass_adds_its_fields_after_its_base_and_class_variables_are_not_fields() -> None:
    class Base(Record):
        scale: ClassVar[int] = 2
        kept: tuple[str, ...]
        made: list[int] = field(default_factory=list)

    class Child(Base):
        limit: int = 3

    assert fields(Child) == ("kept", "made", "limit") and fields(Base) == ("kept", "made")
    assert repr(Child(("a",))).endswith(".<locals>.Child(kept=('a',), made=[], limit=3)")
    assert Child(("a",)).scale == 2
    assert "made" not in Base.__dict__  # the factory is no class attribute
    assert "__record_fields__" not in fields(Record)
