"""The report page rendered by a real browser: headless Chromium (Debian's `chromium`, which
.ci/run installs) over the DevTools protocol (tests/chromium.py).

`rlplan plan examples/grpo-qwen2.5-7b.yaml --html` is the issue's command: its page must show
every section, laid out and visible, at a laptop's width without sideways scrolling, log
nothing and request nothing (it opens offline), and print whole (no navigation, no config cut
off). The screenshot and the PDF are kept under pytest's temporary folder; their paths are
printed (`pytest -s` shows them). Without Chromium the tests skip, saying so.
"""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.report.plan_sections import SECTIONS
from tests import chromium
from tests.conftest import REPO, grpo_scenario

REQUIRED = os.environ.get("RLPLAN_REQUIRE_CHROMIUM") == "1"  # .ci/run: CI never skips these
pytestmark = pytest.mark.skipif(
    chromium.find() is None and not REQUIRED,
    reason="no Chromium installed (Debian: apt-get install chromium; .ci/run installs it): "
           "the report page is not checked in a browser here")

EXAMPLE = REPO / "examples" / "grpo-qwen2.5-7b.yaml"
LAPTOP, NARROW = 1280, 800  # CSS pixels: a laptop's screen, and a window half as wide as a big one

# What the page shows, measured by the browser: each section's state (missing, hidden or
# visible: laid out with a size, displayed, its heading too), how far the page scrolls sideways,
# each top-level picture's size, the timeline picture's text, preformatted boxes cut off, and
# whether the navigation is displayed.
CHECK = """(() => {
  const state = id => {
    const el = document.getElementById(id);
    if (!el) return "missing";
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    const head = el.querySelector("h2");
    const shown = box.width > 0 && box.height > 0 && style.display !== "none"
      && style.visibility !== "hidden" && Number(style.opacity) > 0
      && head && head.getBoundingClientRect().height > 0;
    return shown ? "visible" : "hidden";
  };
  const ids = [...document.querySelectorAll("main > section")].map(s => s.id);
  const pictures = [...document.querySelectorAll("svg")]
    .filter(s => !s.parentElement.closest("svg"));
  const timeline = document.querySelector("#timeline svg");
  return {
    sections: Object.fromEntries(ids.map(id => [id, state(id)])),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    pictures: pictures.map(s => {
      const r = s.getBoundingClientRect();
      return [r.width, r.height];
    }),
    timeline: timeline ? timeline.textContent : "",
    clipped: [...document.querySelectorAll("pre")]
      .filter(p => p.scrollHeight > p.clientHeight + 1).length,
    nav: getComputedStyle(document.querySelector("nav")).display,
    chosen: document.querySelectorAll("#sweep circle.chosen").length,
    chosen_rows: document.querySelectorAll("#sweep tr.chosen").length,
  };
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium.find()
    if binary is None:
        pytest.fail("RLPLAN_REQUIRE_CHROMIUM=1 but no Chromium on PATH (apt-get install "
                    "chromium)")
    b = chromium.Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def example_page(tmp_path_factory):
    """The issue's command, run once: the page and the plan JSON of the same run."""
    folder = tmp_path_factory.mktemp("report")
    result = CliRunner().invoke(app, ["plan", str(EXAMPLE), "--html", str(folder / "plan.html"),
                                      "--out", str(folder / "plan.json")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return folder / "plan.html"


def visible(ids) -> dict[str, str]:
    return dict.fromkeys(ids, "visible")


def test_the_example_plan_page_shows_every_section_in_chromium(browser, example_page):
    url = example_page.as_uri()
    page = browser.open(url, LAPTOP)
    try:
        seen = page.evaluate(CHECK)
        assert seen["sections"] == visible(SECTIONS)
        assert seen["overflow"] <= 0, "the page scrolls sideways at a laptop's width"
        assert len(seen["pictures"]) == 4  # timeline, memory, rollout, bounds
        assert all(w > 300 and h > 40 for w, h in seen["pictures"]), seen["pictures"]
        assert "running sequences" in seen["timeline"]  # the rollout's curve above the lanes
        assert page.problems(url) == []
        shot = page.screenshot(example_page.with_suffix(".png"))
        print(f"screenshot of the page at {LAPTOP} px: {shot}")
        assert shot.stat().st_size > 10_000
    finally:
        page.close()


def test_the_example_plan_page_fits_a_narrow_window(browser, example_page):
    page = browser.open(example_page.as_uri(), NARROW)
    try:
        seen = page.evaluate(CHECK)
        assert seen["sections"] == visible(SECTIONS)
        assert seen["overflow"] <= 0, "the page scrolls sideways in a narrow window"
    finally:
        page.close()


def test_the_example_plan_page_prints_whole(browser, example_page):
    """Printed: no navigation, every section, no config or scenario box cut off."""
    page = browser.open(example_page.as_uri(), LAPTOP)
    try:
        assert page.evaluate(CHECK)["clipped"] > 0  # on screen the long configs scroll
        page.print_media(True)
        printed = page.evaluate(CHECK)
        assert printed["nav"] == "none"
        assert printed["sections"] == visible(SECTIONS)
        assert printed["clipped"] == 0
        pdf = page.pdf(example_page.with_suffix(".pdf"))
        print(f"the page printed: {pdf}")
        assert pdf.read_bytes().startswith(b"%PDF")
        assert page.problems(example_page.as_uri()) == []
    finally:
        page.close()


def test_a_sweep_page_marks_the_chosen_point(browser, write, tmp_path):
    scenario = write("s.yaml", grpo_scenario())
    html = tmp_path / "sweep.html"
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--gpus", "1,2", "--jobs", "1",
                                      "--price", "2", "--target-tokens-per-s", "1",
                                      "--html", str(html)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    page = browser.open(html.as_uri(), LAPTOP)
    try:
        seen = page.evaluate(CHECK)
        assert seen["sections"] == visible(["sweep", *SECTIONS])  # the sweep, then its plan
        assert seen["chosen"] == 3  # ringed in each chart
        assert seen["chosen_rows"] == 1
        assert seen["overflow"] <= 0
        assert page.problems(html.as_uri()) == []
        print(f"screenshot of the sweep page: {page.screenshot(tmp_path / 'sweep.png')}")
    finally:
        page.close()


def test_the_check_fails_a_page_that_hides_a_section_or_fetches(browser, example_page,
                                                                 tmp_path):
    """The browser check is not blind: a hidden section and a fetch are both caught."""
    broken = tmp_path / "broken.html"
    text = example_page.read_text()
    broken.write_text(text.replace("</style>", "#memory{display:none}</style>", 1)
                      .replace("</main>", '<img src="https://example.invalid/x.png"></main>', 1))
    page = browser.open(broken.as_uri(), LAPTOP)
    try:
        seen = page.evaluate(CHECK)
        assert seen["sections"]["memory"] == "hidden"
        assert any("example.invalid" in p for p in page.problems(broken.as_uri()))
    finally:
        page.close()
