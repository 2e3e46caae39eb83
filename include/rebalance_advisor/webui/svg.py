"""Server-rendered SVG charts: no JavaScript library, no CDN, so the page works offline.

Charts are built as :mod:`xml.etree.ElementTree` elements, so every id, label and tooltip is
escaped by the serializer (escaped by construction, like the Jinja2 templates that embed them),
and returned as :class:`markupsafe.Markup` for the templates. Each chart carries ``<title>``
tooltips and ``data-*`` attributes, which also lets a browser test read the numbers back.

Labels never overlap: member ids (often long ``client-id-<uuid>`` strings) sit one per row on
the left of horizontal bars, shortened with a middle ellipsis to the width of the label column
(the full id is the label's ``<title>``, shown on hover); axis labels are thinned to fit. Widths
are estimated from the widest common fallback font (DejaVu Sans), so real text is no wider.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from os.path import commonprefix
from xml.etree import ElementTree as ET

from markupsafe import Markup

NOW_COLOUR = "#d9534f"
PLAN_COLOUR = "#2e86de"
LINE_COLOUR = "#6c5ce7"
THRESHOLD_COLOUR = "#e17055"

LABEL_FONT = 12
AXIS_FONT = 11
_ELLIPSIS = "…"
_NARROW = frozenset("iljtfrI.,:;'|!()[]{} -")
_WIDE = frozenset("mwMW@%…")


@dataclass(frozen=True)
class LagCurve:
    """One predicted lag curve: ``points`` are (seconds from now, lag in messages), time ascending."""

    series: str  # css/data name: "current" or "plan"
    label: str  # legend text
    points: tuple[tuple[float, float], ...]


def text_width(text: str, font_size: float) -> float:
    """Upper estimate of rendered width in px (DejaVu Sans advance widths, rounded up per class)."""
    em = 0.0
    for c in text:
        if c in _NARROW:
            em += 0.42
        elif c in _WIDE:
            em += 1.0
        elif c.isupper():
            em += 0.8
        else:
            em += 0.65
    return em * font_size


def shorten(text: str, max_width: float, font_size: float = LABEL_FONT, tail_share: float = 0.6) -> str:
    """``text`` if it fits ``max_width`` px, else head + "…" + tail (the tail gets ``tail_share``):
    generated consumer ids differ mostly at the end (the UUID), client ids at the start."""
    if text_width(text, font_size) <= max_width:
        return text
    budget = max_width - text_width(_ELLIPSIS, font_size)
    keep = len(text)
    while keep > 0:
        tail = max(1, round(keep * tail_share)) if keep > 1 else keep
        head = keep - tail
        candidate = text[:head] + _ELLIPSIS + text[len(text) - tail :]
        if text_width(candidate, font_size) - text_width(_ELLIPSIS, font_size) <= budget:
            return candidate
        keep -= 1
    return _ELLIPSIS


def window(text: str, start: int, max_width: float, font_size: float = LABEL_FONT) -> str:
    """The widest slice of ``text`` from ``start`` that fits, with "…" where it was cut."""
    lead = _ELLIPSIS if start > 0 else ""
    for end in range(len(text), start, -1):
        candidate = lead + text[start:end] + (_ELLIPSIS if end < len(text) else "")
        if text_width(candidate, font_size) <= max_width:
            return candidate
    return _ELLIPSIS


def fit_labels(texts: Sequence[str], max_width: float, font_size: float = LABEL_FONT) -> list[str]:
    """Shortened labels (:func:`shorten`) that stay distinct. Ids that shorten alike (the same
    client id and UUID ends, numbered in the middle) show instead the stretch where they start
    to differ; if even that clashes, a position number goes first."""
    out = [shorten(t, max_width, font_size) for t in texts]
    clashing: dict[str, list[int]] = {}
    for i, label in enumerate(out):
        clashing.setdefault(label, []).append(i)
    for indexes in (ix for ix in clashing.values() if len(ix) > 1):
        ids = [texts[i] for i in indexes]
        common = len(commonprefix(ids))
        start = max(0, common - 6)
        for i in indexes:
            out[i] = window(texts[i], start, max_width, font_size)
    counts = Counter(out)
    if len(counts) < len(out):
        for i, label in enumerate(out):
            if counts[label] > 1:
                prefix = f"{i + 1}: "
                out[i] = prefix + shorten(
                    texts[i], max_width - text_width(prefix, font_size), font_size, 0.95
                )
    return out


def _fmt(value: float) -> str:
    """Compact axis label: 160000 -> 160k, 1500000 -> 1.5M."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.3g}"


def _duration(seconds: float) -> str:
    """Axis label for seconds from now: 0, 45 s, 5 min, 1.5 h."""
    if seconds == 0:
        return "0"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _nice_max(value: float) -> float:
    """Round an axis maximum up to 1, 2 or 5 times a power of ten so the ticks read well."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * magnitude * (1 + 1e-12):
            return float(step * magnitude)
    return float(10 * magnitude)


def _nice_time_step(span: float, ticks: int = 5) -> float:
    """A tick step in seconds that reads as time (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, ...)."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if span / step <= ticks:
            return float(step)
    return float(86400 * math.ceil(span / 86400 / ticks))


def _el(parent: ET.Element | None, tag: str, attrs: dict[str, object], text: str | None = None) -> ET.Element:
    """One SVG element; attribute values and text are escaped when serialized."""
    values = {k: (f"{v:.1f}" if isinstance(v, float) else str(v)) for k, v in attrs.items()}
    el = ET.Element(tag, values) if parent is None else ET.SubElement(parent, tag, values)
    if text is not None:
        el.text = text
    return el


def _svg(css_class: str, width: float, height: float, label: str) -> ET.Element:
    return _el(
        None,
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "class": f"chart {css_class}",
            "role": "img",
            "viewBox": f"0 0 {width:g} {height:g}",
            "width": f"{width:g}",
            "height": f"{height:g}",
            "aria-label": label,
        },
    )


def _text(parent: ET.Element, x: float, y: float, text: str, *, size: int = AXIS_FONT,
          anchor: str = "start", css: str = "", tooltip: str | None = None) -> ET.Element:  # fmt: skip
    attrs: dict[str, object] = {"x": x, "y": y, "font-size": size}
    if anchor != "start":
        attrs["text-anchor"] = anchor
    if css:
        attrs["class"] = css
    el = _el(parent, "text", attrs, text)
    if tooltip is not None:
        _el(el, "title", {}, tooltip)
    return el


def _legend(parent: ET.Element, right: float, y: float, items: Sequence[tuple[str, str, str]]) -> None:
    """Swatches and names laid out right to left ending at ``right`` (name, css series, colour)."""
    x = right
    for name, series, colour in reversed(items):
        x -= text_width(name, LABEL_FONT)
        _text(parent, x, y + 10, name, size=LABEL_FONT, css="legend")
        x -= 16
        _el(parent, "rect", {"class": f"swatch swatch-{series}", "x": x, "y": y, "width": 12,
                             "height": 12, "fill": colour})  # fmt: skip
        x -= 14


def _value_grid(svg: ET.Element, left: float, right: float, ticks: Sequence[tuple[float, str]]) -> None:
    """A line chart's value axis: a grid line across the plot at each (y, label), the label left of
    the plot."""
    for y, label in ticks:
        _el(svg, "line", {"class": "grid", "x1": left, "x2": right, "y1": y, "y2": y, "stroke": "#eee"})
        _text(svg, left - 6, y + 4, label, anchor="end", css="axis")


def _render(svg: ET.Element) -> Markup:
    return Markup(ET.tostring(svg, encoding="unicode", short_empty_elements=True))


def member_lag_bars(
    members: Sequence[str],
    now: Sequence[int],
    planned: Sequence[int] | None,
    *,
    width: int = 720,
    label_width: int = 210,
) -> Markup:
    """Horizontal grouped bars, one row per member: its lag now and (with a plan) under the plan.

    Member ids are shortened to fit ``label_width`` px (full id on hover; the column is narrower
    when every id is short); rows grow with the member count instead of squeezing labels together.
    """
    series = [("now", now, NOW_COLOUR)] + ([("plan", planned, PLAN_COLOUR)] if planned is not None else [])
    right, top, bottom, bar_h, gap = 24, 36, 30, 11, 9
    band = bar_h * len(series) + gap
    labels = fit_labels(list(members), label_width - 14)
    left = min(label_width, max(64, 14 + max((text_width(t, LABEL_FONT) for t in labels), default=0)))
    plot_w = width - left - right
    height = top + band * max(len(members), 1) + bottom
    plot_bottom = top + band * max(len(members), 1)
    peak = _nice_max(max([*now, *(planned or [])], default=0))
    svg = _svg("member-lag", width, height, "member lag now versus under the plan")
    _text(svg, 4, 14, "member lag (messages)", size=LABEL_FONT, css="chart-title")
    _legend(svg, width - right, 4, [
        ("lag now" if planned is not None else "lag", "now", NOW_COLOUR),
        *([("lag under plan", "plan", PLAN_COLOUR)] if planned is not None else []),
    ])  # fmt: skip
    for i in range(5):
        value = peak * i / 4
        x = left + plot_w * i / 4
        _el(
            svg,
            "line",
            {"class": "grid", "x1": x, "x2": x, "y1": top - 4, "y2": plot_bottom, "stroke": "#ddd"},
        )
        _text(svg, x, height - 10, _fmt(value), anchor="middle", css="axis")
    for m, member in enumerate(members):
        row = _el(svg, "g", {"class": "member", "data-member": member})
        bars = [(name, int(values[m]), colour) for name, values, colour in series]
        _member_bars(row, member, labels[m], bars, left, top + band * m + gap / 2, (plot_w, peak), bar_h)
    if not members:
        _text(svg, left + plot_w / 2, top + band / 2 + 4, "no members", anchor="middle", css="empty")
    return _render(svg)


def _member_bars(
    row: ET.Element, member: str, label: str, bars: Sequence[tuple[str, int, str]], left: float, y0: float,
    scale: tuple[float, float], bar_h: int,
) -> None:  # fmt: skip
    """One member's row: its label, then one bar per (series, lag, colour); ``scale`` (plot width,
    axis maximum) sets a bar's length."""
    _text(row, left - 8, y0 + bar_h * len(bars) / 2 + 4, label, size=LABEL_FONT,
          anchor="end", css="member-label", tooltip=member)  # fmt: skip
    for s, (name, value, colour) in enumerate(bars):
        bar = _el(row, "rect", {
            "class": f"bar bar-{name}", "data-member": member, "data-series": name, "data-lag": value,
            "x": float(left), "y": y0 + s * bar_h, "width": scale[0] * value / scale[1],
            "height": float(bar_h - 1), "fill": colour,
        })  # fmt: skip
        _el(bar, "title", {}, f"{member} {name}: {value:,} messages")


def _thinned(count: int, spacing: float, widest: float) -> set[int]:
    """Indexes of x labels to draw so neighbours keep 8 px apart; the newest (last) always shown."""
    stride = max(1, math.ceil((widest + 8) / max(spacing, 1e-9)))
    return {i for i in range(count) if (count - 1 - i) % stride == 0}


def imbalance_line(
    points: Sequence[tuple[str, float | None]],
    threshold: float,
    *,
    width: int = 720,
    height: int = 220,
) -> Markup:
    """Imbalance (max / mean member lag) per snapshot, oldest first, with the flag threshold dashed."""
    texts = [f"#{label}" for label, _ in points]
    widest = max((text_width(t, AXIS_FONT) for t in texts), default=0)
    # x labels are centred on their points: the margins make room for half the widest one
    left, right, top, bottom = max(48, widest / 2 + 2), max(16, widest / 2 + 2), 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, v in points if v is not None]
    low = 1.0
    high = low + _nice_max(max([*values, threshold * 1.2, 1.5]) - low)

    def ypos(v: float) -> float:
        return top + plot_h - plot_h * (v - low) / (high - low)

    step = plot_w / max(len(points) - 1, 1)
    svg = _svg("imbalance-line", width, height, "imbalance over the last snapshots")
    _text(svg, left, 14, "imbalance per snapshot", size=LABEL_FONT, css="chart-title")
    _value_grid(
        svg,
        left,
        width - right,
        [(ypos(v), f"{v:.2f}") for v in (low + (high - low) * i / 4 for i in range(5))],
    )
    ty = ypos(threshold)
    line = _el(svg, "line", {"class": "threshold", "x1": left, "x2": width - right, "y1": ty, "y2": ty,
                             "stroke": THRESHOLD_COLOUR, "stroke-dasharray": "6 4"})  # fmt: skip
    _el(line, "title", {}, f"threshold {threshold:g}")
    _text(svg, width - right, ty - 5, f"threshold {threshold:g}", anchor="end", css="threshold-label")
    coords = [(left + step * i, ypos(v), label, v) for i, (label, v) in enumerate(points) if v is not None]
    if len(coords) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in coords)
        _el(svg, "polyline", {"class": "series", "points": path, "fill": "none", "stroke": LINE_COLOUR,
                              "stroke-width": 2})  # fmt: skip
    for x, y, label, v in coords:
        dot = _el(svg, "circle", {"class": "point", "data-snapshot": label, "data-imbalance": f"{v:.4f}",
                                  "cx": x, "cy": y, "r": 4, "fill": LINE_COLOUR})  # fmt: skip
        _el(dot, "title", {}, f"snapshot #{label}: {v:.3f}")
    shown = _thinned(len(points), step, widest)
    for i, text in enumerate(texts):
        if i in shown:
            _text(svg, left + step * i, height - 20, text, anchor="middle", css="axis x-label")
    if not coords:
        _text(svg, width / 2, top + plot_h / 2, "no data yet", size=LABEL_FONT, anchor="middle", css="empty")
    return _render(svg)


def predicted_lag_lines(curves: Sequence[LagCurve], *, width: int = 720, height: int = 240) -> Markup:
    """Predicted lag over time (seconds from the snapshot), one line per curve (current vs plan).

    A curve that reaches zero shows where that assignment has caught up; the x axis spans the
    longest curve.
    """
    left, right, top, bottom = 56, 24, 36, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [t for c in curves for t, _ in c.points]
    ys = [v for c in curves for _, v in c.points]
    span = max(xs, default=0.0) or 1.0
    t_step = _nice_time_step(span)
    t_max = t_step * math.ceil(span / t_step)
    peak = _nice_max(max(ys, default=0.0))
    svg = _svg("predicted-lag", width, height, "predicted lag over time, current assignment versus plan")
    _text(svg, 4, 14, "predicted lag (messages)", size=LABEL_FONT, css="chart-title")
    colours = {"current": NOW_COLOUR, "plan": PLAN_COLOUR}
    _legend(svg, width - right, 4, [(c.label, c.series, colours.get(c.series, LINE_COLOUR)) for c in curves])

    def pos(t: float, v: float) -> tuple[float, float]:
        return left + plot_w * t / t_max, top + plot_h - plot_h * v / peak

    _value_grid(
        svg, left, width - right, [(top + plot_h - plot_h * i / 4, _fmt(peak * i / 4)) for i in range(5)]
    )
    ticks = [t_step * k for k in range(int(round(t_max / t_step)) + 1)]
    spacing = plot_w * t_step / t_max
    shown = _thinned(len(ticks), spacing, max(text_width(_duration(t), AXIS_FONT) for t in ticks))
    for k, t in enumerate(ticks):
        if k in shown:
            _text(svg, pos(t, 0)[0], height - 20, _duration(t), anchor="middle", css="axis x-label")
    for curve in curves:
        colour = colours.get(curve.series, LINE_COLOUR)
        path = " ".join("{:.1f},{:.1f}".format(*pos(t, v)) for t, v in curve.points)
        line = _el(svg, "polyline", {"class": f"series series-{curve.series}", "data-series": curve.series,
                                     "points": path, "fill": "none", "stroke": colour,
                                     "stroke-width": 2})  # fmt: skip
        _el(line, "title", {}, curve.label)
    _text(svg, left + plot_w / 2, height - 4, "time from the snapshot", anchor="middle", css="axis-title")
    if not curves:
        _text(svg, left + plot_w / 2, top + plot_h / 2, "no prediction", anchor="middle", css="empty")
    return _render(svg)
