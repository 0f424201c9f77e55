"""Tiny inline-SVG bar charts for the report page: no scripts, no fonts, no network.

Every function returns one ``<svg>`` element as a string; all text is escaped. Charts scale to
their container (``viewBox`` + ``width="100%"``) and carry a ``<title>`` for screen readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["PALETTE", "color_for", "grouped_bars", "stacked_bars"]

PALETTE: dict[str, str] = {
    # conflict types
    "CPC": "#3b6fb6",
    "BOC": "#e08a2c",
    "SCC": "#b8405e",
    "NONE": "#7d8793",
    "all": "#2f3b4c",
    # dimensions
    "D1": "#3b6fb6",
    "D2": "#5a9e6f",
    "D3": "#e08a2c",
    "D4": "#8a5fb0",
    "D5": "#b8405e",
    # actions
    "commit": "#c9483b",
    "conditionalize": "#3b6fb6",
    "clarify": "#3f9a5b",
    "verify": "#8a5fb0",
    "defer": "#7d8793",
    "reversible_trial": "#1f9aa0",
    "error": "#222222",
    # observability
    "FULL": "#3f9a5b",
    "PARTIAL": "#e0a72c",
    # safety
    "safe": "#3f9a5b",
    "partial": "#e0a72c",
    "unsafe": "#c9483b",
}
"""Fixed colours, so one category has the same colour in every chart and every report."""

_CYCLE = ("#3b6fb6", "#e08a2c", "#5a9e6f", "#b8405e", "#8a5fb0", "#1f9aa0", "#a0772c", "#5b6b7d")
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif"'


def color_for(key: str, index: int = 0) -> str:
    """The palette colour of ``key`` (``NONE`` observability shares the conflict-type grey)."""
    if key == "NONE_level":
        return "#c9483b"
    return PALETTE.get(key, _CYCLE[index % len(_CYCLE)])


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _open(width: int, height: int, title: str) -> str:
    # Never drawn larger than its viewBox, so text keeps its size on wide pages.
    return (
        f'<svg viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" '
        f'role="img" {_FONT}><title>{escape(title)}</title>'
    )


def _legend(names: Sequence[str], colors: Sequence[str], x: float, y: float) -> list[str]:
    out = []
    cx = x
    for name, color in zip(names, colors, strict=True):
        out.append(f'<rect x="{cx:.1f}" y="{y - 9:.1f}" width="11" height="11" fill="{color}"/>')
        out.append(f'<text x="{cx + 15:.1f}" y="{y:.1f}" font-size="12">{escape(name)}</text>')
        cx += 26 + 7.2 * len(name)
    return out


def _empty(title: str, width: int, height: int) -> str:
    return (
        _open(width, height, title)
        + f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f6f7f9"/>'
        f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" font-size="14" '
        f'fill="#7d8793">no data</text></svg>'
    )


def grouped_bars(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    max_value: float,
    title: str,
    colors: Sequence[str] | None = None,
    category_colors: Sequence[str] | None = None,
    width: int = 640,
    height: int = 280,
    ticks: int = 4,
) -> str:
    """Vertical bars: one group per category, one bar per series, values printed on top.

    Args:
        categories: Group labels along the x axis.
        series: ``(name, values)`` pairs; ``values`` aligned with ``categories``.
        max_value: Top of the y axis (4 for a dimension, 20 for a total).
        title: Accessible title of the chart.
        colors: One colour per series; defaults to :func:`color_for` of each name.
        category_colors: With a single series, one colour per category instead.
        width: ViewBox width.
        height: ViewBox height.
        ticks: Number of horizontal grid intervals.
    """
    if not categories or not series or max_value <= 0:
        return _empty(title, width, 120)
    cols = list(colors) if colors else [color_for(n, i) for i, (n, _) in enumerate(series)]
    left, right, top, bottom = 36, 10, 30, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    group_w = plot_w / len(categories)
    bar_w = min(38.0, group_w * 0.8 / len(series))
    parts = [_open(width, height, title)]
    for t in range(ticks + 1):
        v = max_value * t / ticks
        y = top + plot_h - plot_h * t / ticks
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
            f'stroke="#e3e6ea" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#5b6b7d">{_fmt(v)}</text>'
        )
    for ci, cat in enumerate(categories):
        gx = left + ci * group_w + (group_w - bar_w * len(series)) / 2
        for si, (name, values) in enumerate(series):
            v = float(values[ci]) if ci < len(values) else 0.0
            h = plot_h * max(0.0, min(v, max_value)) / max_value
            x = gx + si * bar_w
            y = top + plot_h - h
            fill = cols[si]
            if category_colors and len(series) == 1 and ci < len(category_colors):
                fill = category_colors[ci]
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                f'fill="{fill}"><title>{escape(f"{name} / {cat}: {_fmt(v)}")}</title></rect>'
            )
            if bar_w >= 24:  # narrower bars keep their value in the tooltip only
                parts.append(
                    f'<text x="{x + (bar_w - 2) / 2:.1f}" y="{y - 3:.1f}" font-size="11" '
                    f'text-anchor="middle" fill="#2f3b4c">{_fmt(v)}</text>'
                )
        parts.append(
            f'<text x="{left + ci * group_w + group_w / 2:.1f}" y="{height - bottom + 16}" '
            f'font-size="12" text-anchor="middle" fill="#2f3b4c">{escape(cat)}</text>'
        )
    if len(series) > 1:
        parts.extend(_legend([n for n, _ in series], cols, left, 16))
    parts.append("</svg>")
    return "".join(parts)


def stacked_bars(
    rows: Sequence[str],
    segments: Sequence[str],
    counts: Sequence[Sequence[float]],
    *,
    title: str,
    colors: Sequence[str] | None = None,
    width: int = 640,
    row_height: int = 30,
) -> str:
    """Horizontal 100 % stacked bars: one row per label, segments sized by share of the row.

    Args:
        rows: Row labels (e.g. conflict types).
        segments: Segment names (e.g. actions), in stacking order.
        counts: ``counts[row][segment]``.
        title: Accessible title of the chart.
        colors: One colour per segment; defaults to :func:`color_for` of each name.
        width: ViewBox width.
        row_height: Height of one bar.
    """
    if not rows or not segments or not any(sum(r) for r in counts):
        return _empty(title, width, 120)
    cols = list(colors) if colors else [color_for(s, i) for i, s in enumerate(segments)]
    label_w = max(60.0, 7.4 * max(len(r) for r in rows) + 12)
    left, right, top = label_w, 46, 30
    plot_w = width - left - right
    gap = 10
    height = int(top + len(rows) * (row_height + gap) + 8)
    parts = [_open(width, height, title)]
    parts.extend(_legend(list(segments), cols, 4, 16))
    for ri, (row, values) in enumerate(zip(rows, counts, strict=True)):
        y = top + ri * (row_height + gap)
        total = float(sum(values))
        parts.append(
            f'<text x="{left - 8:.1f}" y="{y + row_height / 2 + 4:.1f}" font-size="12" '
            f'text-anchor="end" fill="#2f3b4c">{escape(row)}</text>'
        )
        parts.append(
            f'<rect x="{left:.1f}" y="{y}" width="{plot_w:.1f}" height="{row_height}" '
            f'fill="#f1f3f5"/>'
        )
        x = left
        for si, seg in enumerate(segments):
            v = float(values[si]) if si < len(values) else 0.0
            if v <= 0 or total <= 0:
                continue
            w = plot_w * v / total
            tip = f"{row} / {seg}: {_fmt(v)} of {_fmt(total)} ({100 * v / total:.0f}%)"
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_height}" '
                f'fill="{cols[si]}"><title>{escape(tip)}</title></rect>'
            )
            if w >= 22:
                parts.append(
                    f'<text x="{x + w / 2:.1f}" y="{y + row_height / 2 + 4:.1f}" font-size="11" '
                    f'text-anchor="middle" fill="#ffffff">{_fmt(v)}</text>'
                )
            x += w
        parts.append(
            f'<text x="{width - right + 6:.1f}" y="{y + row_height / 2 + 4:.1f}" font-size="11" '
            f'fill="#5b6b7d">n={_fmt(total)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
