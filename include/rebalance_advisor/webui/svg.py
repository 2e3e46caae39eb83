"""Server-rendered SVG charts: no JavaScript library, no CDN, so the page works offline.

Every chart is plain SVG text with ``<title>`` tooltips and ``data-*`` attributes, which also lets
a browser test read the numbers back from the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

NOW_COLOUR = "#d9534f"
PLAN_COLOUR = "#2e86de"
LINE_COLOUR = "#6c5ce7"
THRESHOLD_COLOUR = "#e17055"


def _fmt(value: float) -> str:
    """Compact axis label: 160000 -> 160k, 1500000 -> 1.5M."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.3g}"


def _nice_max(value: float) -> float:
    """Round an axis maximum up to 1, 2 or 5 times a power of ten so the ticks read well."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def member_lag_bars(
    members: Sequence[str],
    now: Sequence[int],
    planned: Sequence[int] | None,
    *,
    width: int = 640,
    height: int = 280,
) -> str:
    """Grouped bars: each member's lag now and (when a plan exists) under the plan."""
    left, right, top, bottom = 64, 16, 28, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _nice_max(max([*now, *(planned or [])], default=0))
    series = [("now", now, NOW_COLOUR)] + ([("plan", planned, PLAN_COLOUR)] if planned is not None else [])
    slot = plot_w / max(len(members), 1)
    bar_w = min(48.0, slot * 0.8 / len(series))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart member-lag" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="member lag now versus under the plan">'
    ]
    for i in range(5):
        value = peak * i / 4
        y = top + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(value)}</text>'
        )
    for m, member in enumerate(members):
        x0 = left + slot * m + (slot - bar_w * len(series)) / 2
        for s, (name, values, colour) in enumerate(series):
            value = int(values[m])
            h = plot_h * value / peak
            x = x0 + s * bar_w
            y = top + plot_h - h
            label = escape(member)
            parts.append(
                f'<rect class="bar bar-{name}" data-member="{label}" data-series="{name}" '
                f'data-lag="{value}" x="{x:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{label} {name}: {value:,} messages</title></rect>'
            )
        parts.append(
            f'<text class="member-label" x="{left + slot * m + slot / 2:.1f}" y="{top + plot_h + 18}" '
            f'text-anchor="middle" font-size="12">{escape(member)}</text>'
        )
    legend_x = left
    for name, _values, colour in series:
        text = "lag now" if name == "now" else "lag under plan"
        parts.append(
            f'<rect x="{legend_x}" y="{height - 16}" width="12" height="12" fill="{colour}"/>'
            f'<text x="{legend_x + 16}" y="{height - 6}" font-size="12">{text}</text>'
        )
        legend_x += 130
    parts.append(f'<text x="{left}" y="16" font-size="12" fill="#555">member lag (messages)</text></svg>')
    return "".join(parts)


def imbalance_line(
    points: Sequence[tuple[str, float | None]],
    threshold: float,
    *,
    width: int = 640,
    height: int = 220,
) -> str:
    """Imbalance (max / mean member lag) per snapshot, oldest first, with the flag threshold dashed."""
    left, right, top, bottom = 48, 16, 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, v in points if v is not None]
    low = 1.0
    high = max([*values, threshold * 1.2, 1.5])
    high = low + _nice_max(high - low)

    def ypos(v: float) -> float:
        return top + plot_h - plot_h * (v - low) / (high - low)

    step = plot_w / max(len(points) - 1, 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart imbalance-line" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="imbalance over the last snapshots">'
    ]
    for i in range(5):
        value = low + (high - low) * i / 4
        y = ypos(value)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{value:.2f}</text>'
        )
    ty = ypos(threshold)
    parts.append(
        f'<line class="threshold" x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" '
        f'stroke="{THRESHOLD_COLOUR}" stroke-dasharray="6 4"><title>threshold {threshold:g}</title></line>'
    )
    coords = [(left + step * i, ypos(v), label, v) for i, (label, v) in enumerate(points) if v is not None]
    if len(coords) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in coords)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{LINE_COLOUR}" stroke-width="2"/>')
    for x, y, label, v in coords:
        parts.append(
            f'<circle class="point" data-snapshot="{escape(label)}" data-imbalance="{v:.4f}" '
            f'cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{LINE_COLOUR}">'
            f"<title>snapshot {escape(label)}: {v:.3f}</title></circle>"
        )
    for i, (label, _v) in enumerate(points):
        parts.append(
            f'<text x="{left + step * i:.1f}" y="{height - 20}" text-anchor="middle" font-size="11">'
            f"#{escape(label)}</text>"
        )
    if not coords:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">no data yet</text>'
        )
    parts.append(f'<text x="{left}" y="14" font-size="12" fill="#555">imbalance per snapshot</text></svg>')
    return "".join(parts)
