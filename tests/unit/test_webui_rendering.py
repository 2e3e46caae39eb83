"""The UI's rendering pieces without a server: SVG charts (escaped by construction, labels that
fit), timestamps, and the rate-aware partial. Expected values are worked out by hand below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser
from xml.etree import ElementTree as ET

import pytest
from rebalance_advisor.domain.timestamps import timestamp_text, utc_whole_seconds
from rebalance_advisor.webui import rendering, svg
from rebalance_advisor.webui.schemas import PlanAssignmentRow

HOSTILE = ['"><script>alert(1)</script>', "<img src=x onerror=alert(2)>&amp;", "m' onmouseover='x"]
UUID_IDS = [
    f"orders-consumer-{i}-{uuid}"
    for i, uuid in enumerate(
        [
            "5e016ee3-50c3-4572-9444-a3ccf20b930e",
            "1efa86cf-e6d8-4990-9b65-9a1bb4393ef9",
            "938047cc-78ab-4899-b0ed-f85571c9332c",
            "43af0287-de27-4e30-a1c8-55cee455da64",
        ]
    )
]
SVG = "{http://www.w3.org/2000/svg}"


def _parse(markup: str) -> ET.Element:
    """An independent reading of the chart: an XML parser (fails on anything not well-formed)."""
    return ET.fromstring(str(markup))


def test_member_chart_escapes_hostile_ids_by_construction() -> None:
    chart = svg.member_lag_bars(HOSTILE, [3, 2, 1], [1, 2, 3])
    root = _parse(chart)
    assert {el.tag.removeprefix(SVG) for el in root.iter()} <= {"svg", "g", "rect", "line", "text", "title"}
    assert "<script" not in chart and "<img" not in chart
    bars = root.findall(f".//{SVG}rect[@data-series]")
    assert [b.get("data-member") for b in bars] == [m for m in HOSTILE for _ in (0, 1)]
    tips = [t.text for t in root.findall(f".//{SVG}text/{SVG}title")]
    assert tips == HOSTILE  # the full id on hover


def test_long_ids_are_shortened_distinct_and_keep_head_and_tail() -> None:
    labels = svg.fit_labels(UUID_IDS, 160)
    assert len(set(labels)) == len(UUID_IDS)
    for full, short in zip(UUID_IDS, labels, strict=True):
        head, _, tail = short.partition("…")
        assert short != full and full.startswith(head) and full.endswith(tail) and len(tail) >= 6
    assert svg.fit_labels(["C0", "C1"], 160) == ["C0", "C1"]
    # ids that differ only in the middle still get distinct labels
    middle = [f"consumer-shared-prefix-{i:02d}-and-a-long-shared-suffix-0000" for i in range(12)]
    assert len(set(svg.fit_labels(middle, 120))) == 12


def test_imbalance_axis_labels_are_thinned_to_fit() -> None:
    points = [(str(1000 + i), 1.2 + i / 100) for i in range(40)]
    root = _parse(svg.imbalance_line(points, 1.5, width=720))
    labels = root.findall(f".//{SVG}text[@class='axis x-label']")
    xs = [float(t.get("x")) for t in labels]
    assert labels[-1].text == "#1039"  # the newest snapshot is always labelled
    # "#1039" in DejaVu Sans 11 px: '#' 0.838 em + 4 digits x 0.636 em = 37.2 px
    assert min(b - a for a, b in zip(xs, xs[1:], strict=False)) >= 37.2
    assert len(labels) < 40


def test_predicted_lag_chart_geometry_by_hand() -> None:
    current = svg.LagCurve("current", "current assignment", ((0, 1000), (60, 1500), (120, 2000)))
    plan = svg.LagCurve("plan", "under the plan", ((0, 1000), (60, 400), (100, 0)))
    root = _parse(svg.predicted_lag_lines([current, plan], width=720, height=240))
    lines = {p.get("data-series"): p.get("points").split() for p in root.findall(f".//{SVG}polyline")}
    # plot: x 56..696 (720 - 24) over 0..120 s (ticks every 30 s); y 36..200 over 0..2000 messages
    assert lines["current"] == ["56.0,118.0", "376.0,77.0", "696.0,36.0"]
    assert lines["plan"] == ["56.0,118.0", "376.0,167.2", "589.3,200.0"]
    ticks = [t.text for t in root.findall(f".//{SVG}text[@class='axis x-label']")]
    assert ticks == ["0", "30 s", "60 s", "90 s", "2 min"]


def test_timestamps_carry_their_zone_and_no_microseconds() -> None:
    naive = datetime(2025, 1, 2, 3, 4, 5, 678901)  # SQLite: naive, stored as UTC
    assert timestamp_text(naive) == "2025-01-02 03:04:05 UTC"
    berlin = datetime(2025, 1, 2, 3, 4, 5, 999, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp_text(berlin) == "2025-01-02 01:04:05 UTC"
    assert rendering.iso_timestamp("2025-06-30T23:59:59.5+00:00") == "2025-06-30T23:59:59+00:00"
    assert timestamp_text(None) == "—"


def test_key_range_column_only_when_a_row_has_one() -> None:
    whole = dict(member_id="m", member_label="m", topic="t", partition=0, lag=5)
    assert rendering.key_range(PlanAssignmentRow(**whole, key_hash_start=None, key_hash_end=None)) is None
    assert rendering.key_range(PlanAssignmentRow(**whole, key_hash_start=0, key_hash_end=32767)) == (0, 32767)
    assert rendering.key_range(PlanAssignmentRow(**whole, key_hash_start=5, key_hash_end=None)) is None


class _Collector(HTMLParser):
    """Tags, attributes and text as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data) -> None:
        self.text.append(data)


#: a plan's stored load model (the metrics JSON's shape), numbers chosen to work out by hand:
#: now C0 has 6,000 behind at 100 in / 150 out (120 s), C1 1,000 at 50 / 150 (10 s), and a third
#: member (hostile id) gets 30 in with capacity 20: overloaded, its catch-up stored as null (never).
#: The plan gives C0 and C1 3,500 each at 75 in (46.7 s) and the hostile member nothing.
METRICS = {
    "members_before": {"member_ids": ["C0", "C1", HOSTILE[0]], "inflow": [100.0, 50.0, 30.0],
                       "backlog": [6000, 1000, 0], "capacity": [150.0, 150.0, 20.0],
                       "catch_up_s": [120.0, 10.0, None]},
    "members_after": {"member_ids": ["C0", "C1", HOSTILE[0]], "inflow": [75.0, 75.0, 30.0],
                      "backlog": [3500, 3500, 0], "capacity": [150.0, 150.0, 40.0],
                      "catch_up_s": [140 / 3, 140 / 3, 0.0]},
    "load_before": {"max_catch_up_s": None, "overloaded": 1},
    "candidates": [{"strategy": "range", "load": {"max_catch_up_s": 1.0}},
                   {"strategy": "rate_aware", "load": {"max_catch_up_s": 140 / 3}}],
}  # fmt: skip


def test_group_load_from_a_plans_metrics() -> None:
    load = rendering.group_load("rate_aware", None, METRICS, horizon_s=600)
    assert load is not None and load.capacities_known
    assert load.produce_rate == 180.0
    assert (load.catch_up_now_s, load.catch_up_plan_s) == (None, pytest.approx(46.667, abs=1e-3))
    assert [(m.label, m.overloaded) for m in load.members] == [
        ("C0", False),
        ("C1", False),
        (HOSTILE[0], True),
    ]
    current, plan = load.curves
    # one never catches up, so the curves span the horizon: 61 points, 10 s apart
    assert len(current.points) == 61 and current.points[-1][0] == 600
    # t = 10 s: C0 6,000 - 50 x 10, C1 1,000 - 100 x 10 = 0, third 0 + (30 - 20) x 10
    assert current.points[1] == (10.0, 5500.0 + 0 + 100)
    # t = 20 s under the plan: 3,500 - 75 x 20 twice, the third member keeps up
    assert plan.points[2] == (20.0, 4000.0)
    assert rendering.group_load("x", None, {"before": {}}, 600) is None  # a plan from before the model


def test_load_partial_shows_catch_up_overload_and_curves() -> None:
    load = rendering.group_load("rate_aware", 117.25, METRICS, horizon_s=600)
    html = rendering.templates.env.get_template("load.html").render(
        load=load, load_chart=svg.predicted_lag_lines(load.curves)
    )
    seen = _Collector()
    seen.feed(html)
    text = " ".join(" ".join(seen.text).split())
    assert "never at these rates" in text and "47 s" in text and "180" in text
    assert "time lag 117.2 s" in text or "time lag 117.3 s" in text
    assert text.count("overloaded") == 1 and HOSTILE[0] in text
    assert "script" not in seen.tags and seen.tags.count("polyline") == 2


@pytest.mark.parametrize("name", ["groups.html", "group.html", "error.html", "plan.html", "load.html"])
def test_every_template_autoescapes(name: str) -> None:
    env = rendering.templates.env
    assert env.autoescape is True or env.autoescape(name)


def test_naive_means_utc_not_local() -> None:
    assert utc_whole_seconds(datetime(2025, 1, 1)) == datetime(2025, 1, 1, tzinfo=UTC)
