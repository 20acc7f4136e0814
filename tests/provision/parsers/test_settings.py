"""settings.json: strict parsing and the lossless Stop-hook merge (pure)."""

from __future__ import annotations

import json

import pytest

from provision.errors import SettingsError
from provision.parsers.settings import (
    dump_settings,
    find_stop_hook,
    hook_config,
    is_our_handler,
    merge_stop_hook,
    other_stop_hooks,
    parse_settings,
    remove_stop_hook,
    stop_subtree_diff,
)

OURS = {"type": "command",
        "command": "/usr/local/bin/tl-rebuild hook-stop --config /etc/threadline/config.toml",
        "timeout": 10}

FOREIGN_STOP = {"type": "command", "command": "notify-send done", "timeout": 5,
                "x-unknown": {"keep": [1, 2.5, None, True]}}

RICH = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "env": {"FOO": "bar", "ÜNICODE": "日本語"},
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
        "Stop": [
            {"matcher": "", "hooks": [FOREIGN_STOP], "x-group-field": "kept"},
            {"hooks": [{"type": "prompt", "prompt": "Are you done?"}]},
        ],
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo hi", "async": True}]}],
    },
    "statusLine": {"type": "command", "command": "~/bin/status"},
    "enabledPlugins": {"telegram@claude-plugins-official": True},
    "zzz-unknown-top-level": [{"nested": {"deep": 1e100}}],
}


# ---- strict parsing: every malformed form is a one-line SettingsError ----

@pytest.mark.parametrize(("raw", "words"), [
    (b"", "is empty"),
    (b"  \n\t\n", "is empty"),
    (b'\xef\xbb\xbf{"a": 1}', "byte-order mark"),
    (b'{\n  // a comment\n  "a": 1\n}\n', "comment (JSONC) at line 2 column 3"),
    (b'{"a": 1 /* block */}', "comment (JSONC)"),
    (b'{"a": 1,}', "not valid JSON"),
    (b'{"a": 1', "not valid JSON"),
    (b"[1, 2]", "JSON array, not an object"),
    (b'"text"', "JSON string, not an object"),
    (b"null", "JSON null, not an object"),
    (b"42", "JSON number, not an object"),
    (b'{"a": 1, "a": 2}', "key 'a' twice"),
    (b'{"a": NaN}', "contains NaN"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'{"hooks": []}', "'hooks' is a array"),
    (b'{"hooks": {"Stop": {}}}', "'hooks.Stop' is a object, not an array"),
    (b'{"hooks": {"Stop": [3]}}', "'hooks.Stop[0]' is a number"),
    (b'{"hooks": {"Stop": [{"hooks": {}}]}}', "'hooks.Stop[0].hooks' is a object"),
])
def test_malformed_settings_raise_one_line_error_naming_the_file(raw, words):
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw, "/h/.claude/settings.json")
    message = str(caught.value)
    assert words in message
    assert "/h/.claude/settings.json" in message
    assert "\n" not in message


def test_url_with_double_slash_inside_a_string_is_not_a_comment():
    raw = b'{"url": "http://x//y", "a": [1,]}'
    with pytest.raises(SettingsError, match="not valid JSON"):
        parse_settings(raw)


def test_missing_file_is_an_empty_document():
    assert parse_settings(None) == {}


def test_dump_uses_two_space_indent_and_a_trailing_newline_and_keeps_unicode():
    text = dump_settings({"b": 1, "a": {"x": "日本"}}).decode()
    assert text == '{\n  "b": 1,\n  "a": {\n    "x": "日本"\n  }\n}\n'


# ---- the marker ----

@pytest.mark.parametrize(("command", "ours"), [
    ("/usr/local/bin/tl-rebuild hook-stop --config /etc/t.toml", True),
    ("tl-rebuild hook-stop", True),
    ("'/opt/my tools/tl-rebuild' hook-stop", True),
    ("/venv/bin/tl-rebuild plan --transcript x", False),
    ("echo tl-rebuild-hook-stop", False),
    ("my-tl-rebuild hook-stop", False),
    ("unbalanced ' tl-rebuild hook-stop", True),
])
def test_our_handler_is_recognised_by_tl_rebuild_followed_by_hook_stop(command, ours):
    assert is_our_handler({"type": "command", "command": command}) is ours


# ---- merge: add, keep everything else, idempotent, upgrade in place ----

def test_merge_into_empty_document_adds_a_group_without_matcher():
    new, changed, message = merge_stop_hook({}, OURS)
    assert changed and message == "add the Stop hook"
    assert new == {"hooks": {"Stop": [{"hooks": [OURS]}]}}


def test_merge_keeps_every_foreign_key_group_matcher_hook_and_unknown_field_in_order():
    before = json.loads(json.dumps(RICH))
    new, changed, _ = merge_stop_hook(before, OURS)
    assert changed
    assert before == RICH  # the input document is not modified
    expected = json.loads(json.dumps(RICH))
    expected["hooks"]["Stop"].append({"hooks": [OURS]})
    assert new == expected
    # key order is kept at every level, including the untouched events
    assert list(new) == list(RICH)
    assert list(new["hooks"]) == list(RICH["hooks"])
    assert list(new["hooks"]["Stop"][0]) == ["matcher", "hooks", "x-group-field"]
    # and the serialised form round-trips to the same meaning
    assert parse_settings(dump_settings(new)) == expected


def test_merge_twice_is_a_no_op_that_returns_the_same_document():
    once, _, _ = merge_stop_hook(RICH, OURS)
    twice, changed, message = merge_stop_hook(once, OURS)
    assert not changed
    assert message == "Stop hook already present"
    assert twice == once
    assert dump_settings(twice) == dump_settings(once)


def test_old_entry_is_upgraded_in_place_keeping_its_position_and_extra_fields():
    old = {"type": "command", "command": "/old/venv/bin/tl-rebuild hook-stop",
           "statusMessage": "threadline", "timeout": 3}
    doc = {"hooks": {"Stop": [{"hooks": [FOREIGN_STOP, old, {"type": "command",
                                                              "command": "after"}]}]}}
    new, changed, message = merge_stop_hook(doc, OURS)
    assert changed
    assert message == "update the Stop hook in place (command, timeout)"
    handlers = new["hooks"]["Stop"][0]["hooks"]
    assert handlers[0] == FOREIGN_STOP
    assert handlers[1] == {"type": "command", "command": OURS["command"],
                           "statusMessage": "threadline", "timeout": 10}
    assert list(handlers[1]) == ["type", "command", "statusMessage", "timeout"]
    assert handlers[2] == {"type": "command", "command": "after"}
    assert len(new["hooks"]["Stop"]) == 1


def test_duplicate_entries_of_ours_are_removed_and_groups_they_empty_go_too():
    doc = {"hooks": {"Stop": [
        {"hooks": [OURS]},
        {"matcher": "", "hooks": [FOREIGN_STOP, dict(OURS, command="tl-rebuild hook-stop")]},
        {"hooks": [dict(OURS, timeout=99)]},
    ]}}
    new, changed, message = merge_stop_hook(doc, OURS)
    assert changed
    assert message == "remove 2 duplicate Stop hook(s)"
    assert new == {"hooks": {"Stop": [{"hooks": [OURS]},
                                      {"matcher": "", "hooks": [FOREIGN_STOP]}]}}


def test_merge_refuses_an_entry_without_the_marker():
    with pytest.raises(SettingsError, match="does not carry the marker"):
        merge_stop_hook({}, {"type": "command", "command": "something-else"})


def test_find_stop_hook_returns_our_handler_or_none():
    assert find_stop_hook(RICH) is None
    merged, _, _ = merge_stop_hook(RICH, OURS)
    assert find_stop_hook(merged) == OURS


# ---- remove (disable) ----

def test_remove_takes_only_our_entry_and_leaves_foreign_stop_hooks():
    merged, _, _ = merge_stop_hook(RICH, OURS)
    removed, changed, message = remove_stop_hook(merged)
    assert changed and message == "remove 1 Stop hook(s)"
    assert removed == RICH


def test_remove_drops_containers_only_when_our_removal_emptied_them():
    merged, _, _ = merge_stop_hook({"model": "opus"}, OURS)
    removed, changed, _ = remove_stop_hook(merged)
    assert changed and removed == {"model": "opus"}
    other = {"hooks": {"PreToolUse": [], "Stop": [{"hooks": [OURS]}]}}
    assert remove_stop_hook(other)[0] == {"hooks": {"PreToolUse": []}}


def test_remove_when_absent_is_a_no_op():
    doc, changed, message = remove_stop_hook(RICH)
    assert (doc, changed, message) == (RICH, False, "Stop hook not present")


# ---- diff ----

def test_diff_shows_only_the_stop_subtree():
    merged, _, _ = merge_stop_hook(RICH, OURS)
    text = stop_subtree_diff(RICH, merged, "/h/.claude/settings.json")
    assert text.startswith("--- before: /h/.claude/settings.json hooks.Stop\n")
    added = [line for line in text.splitlines() if line.startswith("+") and "\"command\":" in line]
    assert added == ['+        "command": "' + OURS["command"] + '",']
    assert "statusLine" not in text and "PreToolUse" not in text
    assert stop_subtree_diff(merged, merged, "p") == ""


# -- several companions share one claude user's settings.json (issue 10 §7) ------------------

def _companion(config: str, timeout: int = 10) -> dict:
    return {"type": "command", "command": f"/usr/local/bin/tl-rebuild hook-stop --config {config}",
            "timeout": timeout}


A, B = _companion("/etc/threadline/a.toml"), _companion("/etc/threadline/b.toml")


def test_a_second_companion_adds_its_own_stop_hook_next_to_the_first() -> None:
    with_a, _, _ = merge_stop_hook(RICH, A)
    both, changed, message = merge_stop_hook(with_a, B)

    assert changed and message == "add the Stop hook"
    handlers = [h for g in both["hooks"]["Stop"] for h in g["hooks"]]
    assert A in handlers and B in handlers
    assert find_stop_hook(both, config_path="/etc/threadline/a.toml") == A
    assert find_stop_hook(both, config_path="/etc/threadline/b.toml") == B


def test_updating_one_companions_hook_leaves_the_others_as_they_are() -> None:
    both, _, _ = merge_stop_hook(merge_stop_hook(RICH, A)[0], B)

    updated, changed, message = merge_stop_hook(both, _companion("/etc/threadline/a.toml", 30))

    assert changed and "update the Stop hook in place (timeout)" in message
    assert find_stop_hook(updated, config_path="/etc/threadline/b.toml") == B
    assert merge_stop_hook(updated, B) == (updated, False, "Stop hook already present")


def test_removing_one_companions_hook_keeps_the_other() -> None:
    both, _, _ = merge_stop_hook(merge_stop_hook(RICH, A)[0], B)

    removed, changed, message = remove_stop_hook(both, config_path="/etc/threadline/a.toml")

    assert changed and message == "remove 1 Stop hook(s)"
    assert find_stop_hook(removed, config_path="/etc/threadline/a.toml") is None
    assert find_stop_hook(removed, config_path="/etc/threadline/b.toml") == B


def test_a_moved_config_file_upgrades_the_companions_hook_in_place() -> None:
    with_a, _, _ = merge_stop_hook(RICH, A)
    moved = _companion("/srv/threadline/a.toml")

    new, changed, message = merge_stop_hook(with_a, moved, previous=("/etc/threadline/a.toml",))

    assert changed and "update the Stop hook in place (command)" in message
    handlers = [h for g in new["hooks"]["Stop"] for h in g["hooks"]]
    assert moved in handlers and A not in handlers


def test_an_old_hook_without_a_config_path_is_upgraded_by_the_first_companion() -> None:
    legacy = {"type": "command", "command": "tl-rebuild hook-stop", "timeout": 10}
    doc = {"hooks": {"Stop": [{"hooks": [legacy]}]}}

    new, changed, _ = merge_stop_hook(doc, A)

    assert changed and new["hooks"]["Stop"] == [{"hooks": [A]}]


def test_other_stop_hooks_names_the_other_companions_config_paths() -> None:
    both, _, _ = merge_stop_hook(merge_stop_hook(RICH, A)[0], B)
    assert other_stop_hooks(both, "/etc/threadline/a.toml") == ["/etc/threadline/b.toml"]
    assert is_our_handler(B, config_path="/etc/threadline/b.toml")
    assert not is_our_handler(B, config_path="/etc/threadline/a.toml")
    assert hook_config({"type": "command", "command": "tl-rebuild hook-stop --config=x/../c.toml"}
                       ) == "c.toml"


# -- issue 11 §13: a lone surrogate is kept, deep nesting is named ----------------------------
def test_a_lone_surrogate_in_settings_is_kept_as_its_escape_and_the_file_stays_utf8() -> None:
    raw = b'{"env": {"NOTE": "split emoji \\ud83d"}}\n'
    doc = parse_settings(raw, "/home/u/.claude/settings.json")
    written = dump_settings(doc)
    assert b"\\ud83d" in written and json.loads(written.decode("utf-8")) == doc


def test_a_deeply_nested_settings_file_is_refused_saying_what_is_wrong() -> None:
    raw = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(SettingsError, match=r"'/s\.json' is nested too deeply to read"):
        parse_settings(raw, "/s.json")
