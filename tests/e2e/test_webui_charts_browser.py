"""The charts at their worst, measured by headless Chromium: 40 members with 60-90 character ids
(wide capitals, ids that differ only in the middle), 60 snapshots with six-digit ids, a 7-hour
prediction. The page is the real stylesheet plus the charts, opened from a file (no server):
no two texts of a chart may overlap, member labels must end left of the bars, every text stays
inside its chart, and every label keeps its full id as its hover title."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import (  # noqa: F401
    browser,
    chart_geometry,
    chart_text_boxes,
    needs_chromium,
    overlapping,
)

pytestmark = [pytest.mark.browser]

MEMBERS = (
    [f"orders-service-consumer-{i}-{i:08x}-50c3-4572-9444-a3ccf20b930e" for i in range(14)]
    + [f"WWWMMM-WIDE-CAPITALS-CLIENT-{i}-{'W' * 30}-TAIL" for i in range(13)]
    + [f"same-prefix-{i:02d}-{'x' * 40}-same-suffix" for i in range(13)]
)


@needs_chromium
def test_no_chart_label_overlaps_at_scale(browser, tmp_path: Path) -> None:  # noqa: F811
    from rebalance_advisor.webui import rendering, svg

    lags = [(i * 7919) % 100_000 for i in range(len(MEMBERS))]
    planned = [40_000 + (i * 31) % 5_000 for i in range(len(MEMBERS))]
    hours = [(t * 600.0, max(0.0, 90_000 - t * 3_000.0)) for t in range(43)]
    charts = [
        svg.member_lag_bars(MEMBERS, lags, planned),
        svg.member_lag_bars(MEMBERS[:3], lags[:3], None),
        svg.imbalance_line([(str(100_000 + i), 1.1 + (i % 7) / 5) for i in range(60)], 1.5),
        svg.predicted_lag_lines(
            [
                svg.LagCurve("current", "current assignment", tuple((t, v * 1.5) for t, v in hours)),
                svg.LagCurve("plan", "under the plan", tuple(hours)),
            ]
        ),
    ]
    style = rendering.templates.env.get_template("style.css").render()
    page = tmp_path / "charts.html"
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><style>{style}</style></head>"
        f"<body><main>{''.join(charts)}</main></body></html>",
        encoding="utf-8",
    )
    browser.get(page.as_uri())
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(height + 200, 6000))
    browser.save_screenshot(str(tmp_path / "charts.png"))
    print(f"screenshot: {tmp_path / 'charts.png'}")

    boxes = chart_text_boxes(browser)
    labels = [b for b in boxes if b.css == "member-label"]
    assert len(labels) == len(MEMBERS) + 3
    assert [b.tooltip for b in labels] == MEMBERS + MEMBERS[:3]
    assert len({b.text for b in labels[: len(MEMBERS)]}) == len(MEMBERS)  # still tell members apart
    assert all(b.w > 0 and b.h > 0 for b in boxes)
    assert overlapping(boxes) == []
    for chart in chart_geometry(browser):
        mine = [b for b in boxes if b.chart == chart["chart"]]
        assert mine and all(b.x >= -0.5 and b.x + b.w <= chart["width"] + 0.5 for b in mine), chart
        if chart["bars_x"] is not None:
            assert all(b.x + b.w <= chart["bars_x"] for b in mine if b.css == "member-label"), chart
    x_labels = [b for b in boxes if b.css == "axis x-label" and b.chart.endswith("imbalance-line")]
    assert x_labels[-1].text == "#100059" and 5 <= len(x_labels) < 60
