"""Headless Chromium for the UI tests (Debian's chromium + chromedriver), and what the charts
look like to it: every SVG text's box from ``getBBox()``, to prove no two labels overlap."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="chromium/chromedriver missing: make test installs them"
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'chrome'}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@dataclass(frozen=True)
class TextBox:
    chart: str  # the svg's class
    css: str  # the text's class
    text: str  # its own text (not its <title> tooltip)
    tooltip: str | None
    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: TextBox, slack: float = 0.5) -> bool:
        return (
            self.x < other.x + other.w - slack
            and other.x < self.x + self.w - slack
            and self.y < other.y + other.h - slack
            and other.y < self.y + self.h - slack
        )


_BOXES_JS = """
return [...document.querySelectorAll('svg.chart')].flatMap((svg, n) =>
  [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBBox(), tip = t.querySelector('title');
    return {chart: `${n}:${svg.getAttribute('class')}`, css: t.getAttribute('class') || '',
            text: t.firstChild ? t.firstChild.nodeValue : '', tooltip: tip ? tip.textContent : null,
            x: b.x, y: b.y, w: b.width, h: b.height};
  }));
"""


def chart_text_boxes(driver) -> list[TextBox]:
    """Every text of every chart on the page, with its box in its chart's coordinates."""
    return [TextBox(**box) for box in driver.execute_script(_BOXES_JS)]


def overlapping(boxes: list[TextBox]) -> list[tuple[str, str]]:
    """Pairs of texts in the same chart whose boxes intersect."""
    return [
        (a.text, b.text)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a.chart == b.chart and a.overlaps(b)
    ]


def chart_geometry(driver) -> list[dict]:
    """Per chart: its width and the left edge of its bars (where member labels must end)."""
    return driver.execute_script(
        """return [...document.querySelectorAll('svg.chart')].map((svg, n) => ({
             chart: `${n}:${svg.getAttribute('class')}`, width: svg.viewBox.baseVal.width,
             bars_x: svg.querySelector('rect.bar') ? Math.min(...[...svg.querySelectorAll('rect.bar')].map(
               r => r.x.baseVal.value)) : null}));"""
    )


def replaced(element):
    """A wait condition: ``element`` is no longer in the page. Selenium's ``staleness_of`` knows only
    StaleElementReferenceException; Chrome answers a node of a page being replaced with "Node with
    given id does not belong to the document" instead, which says the same."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def gone(_driver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in (error.msg or ""):
                return True
            raise
        return False

    return gone
