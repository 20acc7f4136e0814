"""The session over time as inline SVGs: stacked bars of noise by category per bucket, and
beside it the bytes of the carried conversation per bucket (on the same buckets).

The bucket width is chosen from the session's span so the chart holds at most ``MAX_BARS``
bars. Every noise segment carries ``data-category`` and ``data-bytes``: the bytes of all
segments of one category sum to that category's total (a reader of the page can check the
chart against the ledger); every conversation bar carries ``data-conversation-bytes``, which
sum to the UTF-8 bytes of the utterances the page shows. Each has a ``<title>`` a browser
shows on hover. No script, no font, no link: the SVG is text inside the page.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from html import escape

from runtime.engine.dirty_time import UNDATED

MAX_BARS = 60
BUCKETS = (  # (seconds, label)
    (60, "1-minute"), (300, "5-minute"), (900, "15-minute"), (3600, "1-hour"),
    (6 * 3600, "6-hour"), (86400, "1-day"), (7 * 86400, "1-week"), (30 * 86400, "30-day"),
)
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295")
CONVERSATION_COLOUR = "#59a14f"
NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 960, 320, 72, 48, 12


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def bucket_seconds(first: datetime, last: datetime) -> tuple[int, str]:
    """The narrowest bucket that covers ``first``..``last`` in at most ``MAX_BARS`` bars."""
    span = (last - first).total_seconds()
    for seconds, label in BUCKETS:
        if span // seconds + 2 <= MAX_BARS:  # + 1: the first bar starts on a boundary
            return seconds, label
    seconds = int(span // (MAX_BARS - 1)) + 1
    return seconds, f"{seconds // 86400}-day"


def bucketed(minutes: dict[str, dict[str, int]]
             ) -> tuple[list[tuple[datetime, dict[str, int]]], int, str]:
    """``minutes`` (``YYYY-MM-DDTHH:MM`` -> category -> bytes) as consecutive buckets."""
    if not minutes:
        return [], 60, "1-minute"
    if UNDATED in minutes:  # no line of the file has a usable timestamp: one bar
        return [(NO_TIME, dict(minutes[UNDATED]))], 60, "undated"
    stamps = {m: datetime.strptime(m, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC) for m in minutes}
    first, last = min(stamps.values()), max(stamps.values())
    seconds, label = bucket_seconds(first, last)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)  # bars start on whole hours, days, weeks (UTC)
    first = epoch + timedelta(seconds=(first - epoch).total_seconds() // seconds * seconds)
    count = int((last - first).total_seconds() // seconds) + 1
    bars: list[tuple[datetime, dict[str, int]]] = [
        (first + timedelta(seconds=i * seconds), {}) for i in range(count)]
    for minute, moment in stamps.items():
        bar = bars[int((moment - first).total_seconds() // seconds)][1]
        for name, nbytes in minutes[minute].items():
            bar[name] = bar.get(name, 0) + nbytes
    return bars, seconds, label


def svg(bars: list[tuple[datetime, dict[str, int]]], order: list[str],
        size: Callable[[float], str], conversation: bool = False) -> str:
    """The stacked-bar chart; ``order`` names the categories bottom-up (their colour index),
    ``size`` formats a byte count for the axis and the tooltips. ``conversation``: the one
    series of the carried conversation (``data-conversation-bytes``, not a noise category)."""
    if not bars:
        return '<p class="empty">no noise recorded: nothing to chart</p>'
    fmt = size
    peak = max((sum(bar.get(n, 0) for n in order) for _, bar in bars), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    step = plot_w / len(bars)
    width = max(step * 0.8, 1.0)
    what = "carried conversation" if conversation else "noise by category"
    attr = "data-conversation-bytes" if conversation else "data-bytes"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'role="img" aria-label="{what} over time" class="chart" '
             f'id="{"conversation" if conversation else "noise"}-chart">']
    for tick in range(5):
        value = peak * tick / 4
        y = TOP + plot_h - plot_h * tick / 4
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'class="grid"/><text x="{LEFT - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{escape(fmt(value))}</text>')
    every = max(1, len(bars) // 8)
    for index, (start, bar) in enumerate(bars):
        x = LEFT + index * step + (step - width) / 2
        y = TOP + plot_h
        for name in order:
            nbytes = bar.get(name, 0)
            if not nbytes:
                continue
            h = plot_h * nbytes / peak
            y -= h
            when = "no timestamps" if start == NO_TIME else f"from {start:%Y-%m-%d %H:%M} UTC"
            tip = f"{name}: {fmt(nbytes)} {when}"
            data = "" if conversation else f'data-category="{escape(name)}" '
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{max(h, 0.5):.1f}" '
                f'fill="{CONVERSATION_COLOUR if conversation else colour(order.index(name))}" '
                f'{data}{attr}="{nbytes}"><title>{escape(tip)}</title></rect>')
        if index % every == 0:
            parts.append(f'<text x="{x + width / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                         f'text-anchor="middle">{_label(start)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def shared(noise: dict[str, dict[str, int]], conversation: dict[str, int], key: str
           ) -> dict[str, dict[str, int]]:
    """The noise minutes with the conversation's bytes under ``key`` in the same minutes, so
    both charts are bucketed on one grid (``conversation``: minute -> bytes)."""
    merged = {minute: dict(bar) for minute, bar in noise.items()}
    for minute, nbytes in conversation.items():
        merged.setdefault(minute, {})[key] = nbytes
    if UNDATED in merged and len(merged) > 1:  # dated and undated: one undated bar
        everything: dict[str, int] = {}
        for bar in merged.values():
            for name, nbytes in bar.items():
                everything[name] = everything.get(name, 0) + nbytes
        return {UNDATED: everything}
    return dict(sorted(merged.items()))


def legend(order: list[str]) -> str:
    """The categories with their colours, as HTML."""
    items = "".join(f'<li><span class="swatch" style="background:{colour(i)}"></span>'
                    f"{escape(name)}</li>" for i, name in enumerate(order))
    return f'<ul class="legend">{items}</ul>'


def _label(start: datetime) -> str:
    return "no timestamps" if start == NO_TIME else f"{start:%m-%d %H:%M}"
