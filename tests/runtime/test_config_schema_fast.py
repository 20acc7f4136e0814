"""runtime.config's cheap schema check: it may only ever say "valid" where jsonschema finds no
error, so skipping the jsonschema import on a valid config gives the same errors (issue 13)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from runtime.config import _schema, _surely_valid, config_from_mapping, schema_errors

SCHEMA = _schema()
VALIDATOR = Draft202012Validator(SCHEMA)

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=6,
)


def near(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values at and around what ``schema`` allows: bounds, 1.0 for 1, bools, odd strings."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from([*schema["enum"], "other", 1, True, None])
    if kind == "object":
        props = schema.get("properties", {})
        fields = {key: near(sub) for key, sub in props.items()}
        extra = st.dictionaries(st.sampled_from(["x", "unknown"]), junk, max_size=1)
        return st.builds(
            lambda chosen, more: {**chosen, **more},
            st.fixed_dictionaries({}, optional=fields) if fields else st.just({}), extra,
        )
    if kind == "array":
        return st.lists(near(schema.get("items", {})), max_size=3)
    if kind == "string":
        return st.sampled_from(["", "/abs", "~/h", "rel", "A_1", "a-b", "1x", "x:y", "é", "/"])
    if kind in ("integer", "number"):
        bounds = [schema.get(k) for k in ("minimum", "maximum", "exclusiveMinimum")]
        edges = [b for b in bounds if b is not None]
        return st.sampled_from(
            [*edges, *(b - 1 for b in edges), *(b + 1 for b in edges), *(float(b) for b in edges),
             0, 0.0, 1, 1.0, 0.5, True, False, math.nan, math.inf, -math.inf, 10**20]
        )
    if kind == "boolean":
        return st.sampled_from([True, False, 0, 1, "true"])
    return junk


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(near(SCHEMA), junk))
def test_the_cheap_check_never_passes_what_jsonschema_refuses(data: Any) -> None:
    if _surely_valid(data, SCHEMA):
        assert list(VALIDATOR.iter_errors(data)) == []


def test_a_typical_config_skips_jsonschema_and_a_bad_one_still_gets_its_errors() -> None:
    good = {
        "project_dir": "/p", "state_dir": "~/s",
        "rebuild": {"poison_threshold": 1000000, "token_cjk_factor": 1.5,
                    "injected_tags": ["system-reminder"],
                    "speech_tools": [{"name": "mcp__x", "path": "a.b"}]},
        "switch": {"door": "tmux", "environment": ["HOME", "TL_X"], "healthcheck_seconds": 5},
    }
    assert _surely_valid(good, SCHEMA)
    assert schema_errors(good) == []
    config_from_mapping(good)
    bad = {"rebuild": {"stamp_turns": "yes"}}
    assert not _surely_valid(bad, SCHEMA)
    assert schema_errors(bad) == ["rebuild.stamp_turns: 'yes' is not of type 'boolean'"]
