"""``tl-rebuild plan --show``: the conversation as the rebuild carries it, for a person.

Item by item — who speaks, when, the text verbatim (wrapped to the terminal's width on a
terminal, never on a pipe) — with what is dropped between two carried items in one dim line
(``… 3 tool calls (1.2 KiB), 3 tool results (412.0 KiB) dropped``). On a terminal the output
goes through ``$PAGER`` (default ``less -R``; ``LESS=FRX`` unless set); colour only on a
terminal without ``NO_COLOR``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import Any

# category → (singular, plural) of what one dropped line of it is
NOUNS: dict[str, tuple[str, str]] = {
    "tool_use": ("tool call", "tool calls"),
    "tool_result": ("tool result", "tool results"),
    "thinking": ("thinking block", "thinking blocks"),
    "image": ("image", "images"),
    "injected_block": ("injected block", "injected blocks"),
    "meta_injection": ("meta injection", "meta injections"),
    "attachment": ("attachment", "attachments"),
    "sidechain": ("subagent line", "subagent lines"),
    "system": ("system line", "system lines"),
    "other": ("other line", "other lines"),
    "malformed": ("malformed line", "malformed lines"),
    # Codex rollouts (runtime.engine.codex.rules.NOISE_CATEGORIES)
    "reasoning": ("reasoning item", "reasoning items"),
    "function_call": ("function call", "function calls"),
    "function_call_output": ("function output", "function outputs"),
    "custom_tool_call": ("custom tool call", "custom tool calls"),
    "custom_tool_call_output": ("custom tool output", "custom tool outputs"),
    "local_shell_call": ("shell call", "shell calls"),
    "web_search_call": ("web search", "web searches"),
    "world_state": ("world state", "world states"),
    "turn_context": ("turn context", "turn contexts"),
    "token_records": ("token record", "token records"),
    "harness_message": ("harness message", "harness messages"),
    "compaction": ("compaction", "compactions"),
    "ui_copy": ("UI copy", "UI copies"),
}
WHO = {"startup_snapshot": "start-up snapshot", "compact_summary": "compaction summary"}
# C0 controls but tab and newline, DEL and the C1 controls (U+0080..U+009F: U+009B is a CSI
# to a terminal that reads 8-bit controls): shown as symbols on a terminal, never executed
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
INDENT = "  "


def run(args: Any, config: Any, source: Any, progress: Any) -> int:
    """Build, render and print (paged on a terminal) the carried conversation of ``source``."""
    from runtime.cli import render
    from runtime.engine.show import view

    shown = view(source, config, args.agent, progress)
    out = sys.stdout
    tty = bool(out.isatty())
    colour = render.use_colour(out)
    width = shutil.get_terminal_size().columns if tty else None
    lines = show_lines(shown, config, colour=colour, width=width, terminal=tty)
    if tty:
        page(lines)
    else:
        render.write(lines)
    return 0


def show_lines(shown: Any, config: Any, *, colour: bool = False, width: int | None = None,
               terminal: bool = False) -> list[str]:
    """The summary line, the carried items with the dim gap lines between them, the next step.

    ``width`` wraps the text (None: one output line per text line); ``terminal`` shows control
    characters as symbols."""
    from runtime.cli.engine import plan_next, plan_summary

    report = _report(shown.build, config)
    lines = [plan_summary(report), ""]
    turn: Any = None
    for index, said in enumerate(shown.items):
        lines += _gap(shown.gaps[index], colour)
        if said.turn is not None and said.turn != turn:
            turn = said.turn
            lines.append(_paint(f"── turn {turn + 1} ──", "bold", colour))
        lines.append(_paint(_header(said), "bold", colour))
        if said.lead is not None:
            lines.append(_paint(f"{INDENT}(Threadline adds: {said.lead})", "dim", colour))
        lines += _text(said.text, width, terminal)
    lines += _gap(shown.gaps[len(shown.items)], colour)
    if not shown.items:
        lines.append("(nothing is carried)")
    lines += ["", plan_next(report)]
    return lines


def gap_line(gap: Any) -> str | None:
    """``… 3 tool calls (1.2 KiB), 1 image (88.0 KiB) dropped, 2 utterances not carried``."""
    from runtime.cli import render

    parts = []
    for category, (count, nbytes) in sorted(gap.noise.items(), key=lambda kv: -kv[1][1]):
        one, many = NOUNS.get(category, (f"{category} line", f"{category} lines"))
        parts.append(f"{count} {one if count == 1 else many} ({render.size(nbytes)})")
    text = f"… {', '.join(parts)} dropped" if parts else "…"
    if gap.not_carried:
        n = gap.not_carried
        text += f"{',' if parts else ''} {n} utterance{'' if n == 1 else 's'} not carried"
    return None if gap.empty else text


def page(lines: list[str]) -> None:
    """Show ``lines`` through ``$PAGER`` (default ``less -R``); without one, print them."""
    data = "".join(line + "\n" for line in lines).encode("utf-8", "backslashreplace")
    argv = shlex.split(os.environ.get("PAGER") or "less -R")
    # as git does: a bare `less` keeps the colour (-R), quits on one screen (-F), keeps the text
    env = {**os.environ, "LESS": os.environ.get("LESS") or "FRX"}
    try:
        pager = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    except OSError:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    assert pager.stdin is not None
    try:
        pager.stdin.write(data)
        pager.stdin.close()
    except BrokenPipeError:
        pass  # the reader quit the pager before the end
    pager.wait()


def wrap(line: str, width: int) -> list[str]:
    """``line`` cut into pieces of at most ``width`` characters, after a space where there is
    one; nothing is dropped (the pieces join back into ``line``)."""
    pieces = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width) + 1 or width
        pieces.append(line[:cut])
        line = line[cut:]
    return [*pieces, line]


def _report(built: Any, config: Any) -> dict[str, Any]:
    """The fields of ``plan``'s report the summary and the next step read, from the build."""
    knobs = config.rebuild
    return {**built.stats(), "dirty": built.ledger.report(knobs.dirty_budget_bytes,
                                                          knobs.rebuild_on_image)}


def _header(said: Any) -> str:
    from runtime.cli import render

    moment = render.when(said.timestamp) if said.timestamp else None
    stamp = moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "(no time)"
    who = WHO.get(said.kind) or ("human" if said.role == "user" else "assistant")
    detail = said.kind if said.kind not in WHO and said.kind != "assistant_text" else ""
    origin = said.origin if type(said.origin) is dict else {}
    if type(origin.get("server")) is str:
        detail += f" from {origin['server']}"
    return f"{stamp}  {who}" + (f" ({detail})" if detail else "")


def _text(text: str, width: int | None, terminal: bool) -> list[str]:
    if terminal:
        text = CONTROLS.sub(_symbol, text)
    room = max(20, width - len(INDENT)) if width else None
    lines = []
    for line in text.split("\n"):
        for piece in wrap(line, room) if room else [line]:
            lines.append(INDENT + piece if piece else "")
    return lines


def _symbol(control: re.Match[str]) -> str:
    """A C0 control's picture (U+2400 + code), DEL's (U+2421), a C1 control as ``\\x9b``."""
    code = ord(control[0])
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else f"\\x{code:02x}"


def _gap(gap: Any, colour: bool) -> list[str]:
    text = gap_line(gap)
    return [] if text is None else [_paint(text, "dim", colour)]


def _paint(text: str, colour_name: str, colour: bool) -> str:
    from runtime.cli.render import COLOURS

    return f"\033[{COLOURS[colour_name]}m{text}\033[0m" if colour else text
