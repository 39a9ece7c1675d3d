"""The pages poetsim writes, opened in a real browser: Debian's chromium, headless, driven by Playwright.

A small sweep (the MCU scenario cut down, on a graph and a platform whose names are HTML and
script) gives a report, its schedule page and the page of one run; the shipped ResNet-18 results
give the report the README quotes, and the shipped paper_* results the paper page. Each page is
opened at a desktop's 1400x900 and a phone's 390x844 and must load nothing but itself, log no
error, have its title, show its finding on the first screen, use no type under 11 px, scroll no
page sideways, and run no script smuggled in through a name. Screenshots go to build/screenshots/
for a person to look at.

Skipped, saying why, only when chromium is not installed (`apt-get install -y chromium`).
"""

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest
import yaml

from poetsim.analysis import paper
from poetsim.analysis.results import load_results
from poetsim.graphs import zoo
from poetsim.graphs.io import save_graph
from poetsim.inputs.scenario import load_scenario
from poetsim.pipeline import load_run, problem_for_point
from poetsim.report import build_report, save_run_charts
from poetsim.report.paper_page import write_paper_page
from poetsim.status import Status
from poetsim.sweeps.runner import point_slug, run_sweep

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, ConsoleMessage, Dialog, FloatRect, ViewportSize

sync_playwright = pytest.importorskip("playwright.sync_api", reason="needs the [browser] extra").sync_playwright

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed: apt-get update && apt-get install -y chromium"
)
#: Flags for a browser that must not go online by itself: no QUIC, no background fetches,
#: no component updates, no sync, no first-run pages.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: "ViewportSize" = {"width": 1400, "height": 900}
PHONE: "ViewportSize" = {"width": 390, "height": 844}
SIZES = {"desktop": VIEWPORT, "phone": PHONE}
PAPER_STUDIES = ("paper_fig3", "paper_fig3_mcu", "paper_fig4", "paper_fig5", "paper_table3")
HOSTILE_GRAPH = "<img src=x onerror=window.__pwned=1>"
HOSTILE_PLATFORM = "</script><script>window.__pwned=1</script>"
HOSTILE_SCENARIO = "<svg onload=window.__pwned=1>mcu"
MIN_FONT_PX = 11


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, Path]:
    """The pages to open: a small sweep's report and run page, and the shipped ResNet-18 report.

    The small sweep has hostile names; the shipped report is built into tmp, never over
    results/.
    """
    root = tmp_path_factory.mktemp("site")
    graph = zoo.build_model("mlp", batch_size=2)
    save_graph(replace(graph, name=HOSTILE_GRAPH), root / "mlp.json")
    profile = yaml.safe_load((ROOT / "poetsim" / "inputs" / "platforms" / "nrf52840.yaml").read_text())
    profile["name"] = HOSTILE_PLATFORM
    (root / "board.yaml").write_text(yaml.safe_dump(profile))
    scenario_text = (
        (ROOT / "scenarios" / "mcu.yaml")
        .read_text()
        .replace("model: mlp", f"model: {root / 'mlp.json'}")
        .replace("platform: [mkr1000, nrf52840]", f"platform: [nrf52840, {root / 'board.yaml'}]")
        .replace("ram: [100%, 85%, 70%, 60%]", "ram: [100%, 85%, 70%]")
        .replace(
            "strategies: [hybrid, recompute-only, paging-only]", "strategies: [hybrid, recompute-only, paging-only, keep-all]"
        )
    )
    (root / "small.yaml").write_text(scenario_text)
    scenario = load_scenario(root / "small.yaml")
    sweep = root / "sweep"
    run_sweep(scenario, sweep, jobs=2)
    report = build_report(load_results(sweep), root / "report", HOSTILE_SCENARIO, sweep_dir=sweep)
    point = next(
        p
        for p in scenario.points()
        if p.strategy == "hybrid" and p.ram.text == "70%" and str(p.platform).endswith("board.yaml") and p.runtime_x == 1.5
    )
    run = load_run(problem_for_point(scenario, point), sweep / "points" / point_slug(point) / "schedule.json")
    run = replace(run, strategy="hybrid", status=Status.OPTIMAL, message="")  # as `poetsim simulate` would have it
    run_page = save_run_charts(run, root / "run", f"{HOSTILE_SCENARIO}: hybrid")[0]
    shipped = ROOT / "results" / "resnet18"
    resnet = build_report(load_results(shipped), root / "resnet18", "resnet18", sweep_dir=shipped)
    studies = {name: ROOT / "results" / name for name in PAPER_STUDIES}
    found = paper.comparisons({name: load_results(folder) for name, folder in studies.items()})
    paper_page = write_paper_page(found, root / "paper.html", studies)
    return {
        "report": report,
        "schedules": report.parent / "schedules.html",
        "run": run_page,
        "resnet18": resnet,
        "paper": paper_page,
    }


@pytest.fixture(scope="module")
def browser():
    """Chromium with a fresh profile, its flags keeping it offline."""
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport=VIEWPORT
        )
        yield context
        context.close()


class Visit:
    """One page opened in the browser at a window size, with what it logged and asked the network for.

    The page at `path` opens in the browser `context`, in a window of `size` (VIEWPORT by default),
    and counts as loaded once the `ready` selector matches.
    """

    def __init__(self, context: "BrowserContext", path: Path, ready: str, size: "ViewportSize | None" = None):
        self.viewport = size or VIEWPORT
        self.url = path.resolve().as_uri()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = context.new_page()
        self.page.set_viewport_size(self.viewport)

        def on_console(message: "ConsoleMessage") -> None:
            if message.type == "error":
                self.errors.append(message.text)

        def on_dialog(dialog: "Dialog") -> None:
            self.errors.append(f"dialog: {dialog.message}")
            dialog.dismiss()

        self.page.on("console", on_console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("dialog", on_dialog)
        self.page.goto(self.url)
        self.page.wait_for_selector(ready, timeout=30_000)
        self.page.wait_for_load_state("load")

    def box(self, selector: str) -> "FloatRect":
        """The bounding box of the first element `selector` matches; the test fails where none is drawn."""
        found = self.page.locator(selector).first.bounding_box()
        assert found is not None, f"{selector} is not on the page"
        return found

    def shoot(self, name: str) -> None:
        """Save a screenshot of the window and one of the whole page as `name`.png and `name`-full.png."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}-full.png"), full_page=True)

    def assert_clean(self) -> None:
        """No error logged, nothing fetched but the page itself, no smuggled script run."""
        assert self.errors == []
        assert {r.split("#")[0] for r in self.requests} == {self.url}
        assert self.page.evaluate("window.__pwned") is None
        assert self.page.locator("img").count() == 0

    def assert_legible(self) -> None:
        """Every piece of text, HTML or chart, is at least 11 px, and the page is no wider than the window."""
        assert self.page.evaluate("document.documentElement.scrollWidth") <= self.viewport["width"]
        sizes = self.page.evaluate("""() => {
            const small = [];
            for (const el of document.querySelectorAll('body *')) {
                if (['SCRIPT', 'STYLE'].includes(el.tagName)) continue;
                const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
                if (!own) continue;
                const px = parseFloat(getComputedStyle(el).fontSize);
                if (px < 11) small.push(el.tagName + ' ' + px + ' ' + el.textContent.trim().slice(0, 40));
            }
            return small;
        }""")
        assert sizes == []

    def assert_above_fold(self, selector: str) -> None:
        """The element is wholly on the first screen."""
        box = self.box(selector)
        assert box["y"] >= 0 and box["y"] + box["height"] <= self.viewport["height"], f"{selector} is not above the fold: {box}"
        self.assert_within_width(selector)

    def assert_starts_above_fold(self, selector: str) -> None:
        """The element begins on the first screen (a tall chart may run on below it)."""
        box = self.box(selector)
        assert 0 <= box["y"] < self.viewport["height"] - 100, f"{selector} starts below the fold: {box}"
        self.assert_within_width(selector)

    def assert_within_width(self, selector: str) -> None:
        """The element lies between the window's left and right edges."""
        box = self.box(selector)
        assert box["x"] >= 0 and box["x"] + box["width"] <= self.viewport["width"], f"{selector} is wider than the window: {box}"


@pytest.mark.parametrize("size", SIZES)
def test_report_opens_on_its_finding(browser, site, size):
    """The report opens on its title and finding, every chart drawn and legible, offline.

    The title and the finding are on the first screen (the main chart too, on a desktop), every
    chart drawn in the layout that fits, nothing wider than the window, no script from a name.
    """
    visit = Visit(browser, site["report"], "#chart-overhead_ram svg", SIZES[size])
    visit.shoot(f"report-{size}")
    assert visit.page.title() == f"poetsim report: {HOSTILE_SCENARIO}"
    visit.assert_above_fold("#finding")
    assert "has the lowest energy at" in visit.page.locator("#finding").inner_text()
    if size == "desktop":
        visit.assert_starts_above_fold("#chart-overhead_ram svg")
    assert visit.page.locator(".chart").count() == visit.page.locator(".chart svg").count() >= 2
    for chart in visit.page.locator(".chart svg").all():
        box = chart.bounding_box()
        assert box is not None and box["width"] <= SIZES[size]["width"]
    visit.assert_legible()
    visit.assert_clean()
    assert HOSTILE_GRAPH in visit.page.locator("body").inner_text()  # shown as text, not run


def test_report_tables_switch_sort_and_filter_offline(browser, site):
    """The runtime tabs switch the headline; the table of every run filters and sorts without a network."""
    visit = Visit(browser, site["report"], "#chart-overhead_ram svg")
    panels = visit.page.locator(".tab-panel")
    opened = [i for i in range(panels.count()) if panels.nth(i).is_visible()]
    assert len(opened) == 1 and panels.count() == 2
    other = 1 - opened[0]
    visit.page.click(f"label[for='headline-tab-{other}']")
    assert visit.page.locator(f"#headline-panel-{other}").is_visible()
    assert visit.page.locator(f"#headline-panel-{opened[0]}").is_hidden()
    runs = pd.read_csv(site["report"].parent.parent / "sweep" / "runs.csv")
    visit.page.click("summary:has-text('All runs')")
    visit.page.fill("input[data-table='all-runs']", "infeasible")
    shown = visit.page.locator("#all-runs tbody tr:visible")
    assert shown.count() == int((runs["status"] == "infeasible").sum()) > 0
    visit.page.fill("input[data-table='all-runs']", "feasible")  # starts a word: not "infeasible"
    assert shown.count() == int((runs["status"] == "feasible").sum())
    visit.page.fill("input[data-table='all-runs']", "")
    visit.page.locator("#all-runs").get_by_role("columnheader", name="energy (J)", exact=True).click()
    energy_column = _column_index(visit, "energy (J)") + 1
    column = [c.get_attribute("data-sort") for c in visit.page.locator(f"#all-runs tbody tr td:nth-child({energy_column})").all()]
    numbers = [float(v) for v in column if v]
    assert numbers == sorted(numbers) and len(numbers) == int(runs["predicted_total_j"].notna().sum())
    visit.assert_clean()


def _column_index(visit: Visit, header: str) -> int:
    headers = visit.page.locator("#all-runs thead th").all_inner_texts()
    return [re.sub(r"\s*[\u25b2\u25bc]$", "", h).strip() for h in headers].index(header)


def test_a_schedule_is_one_click_from_the_report(browser, site):
    """A cell of the tightest-budget table opens schedules.html at that point, its timeline and grid drawn."""
    visit = Visit(browser, site["report"], "#chart-overhead_ram svg")
    link = visit.page.locator("#reach table.reach a").first
    href = link.get_attribute("href")
    assert href is not None
    anchor = href.split("#")[1]
    link.click()
    visit.page.wait_for_selector(f"section#{anchor}:not([hidden]) svg", timeout=30_000)
    assert visit.page.url.endswith(f"schedules.html#{anchor}")
    assert visit.page.locator("section.point:not([hidden])").count() == 1
    assert visit.page.locator(f"section#{anchor} .chart svg").count() == 2  # the timeline and the grid
    assert visit.errors == []
    folder = site["report"].parent.resolve().as_uri()
    assert all(r.startswith(folder) for r in visit.requests)


@pytest.mark.parametrize("size", SIZES)
def test_schedule_page_shows_one_point_at_a_time_with_its_timeline_and_grid(browser, site, size):
    """The page opens on its first point; another point's link shows that one instead, drawn then."""
    visit = Visit(browser, site["schedules"], "section.point:not([hidden]) svg", SIZES[size])
    visit.shoot(f"schedules-{size}")
    assert visit.page.title() == f"poetsim schedules: {HOSTILE_SCENARIO}"
    shown = visit.page.locator("section.point:not([hidden])")
    assert shown.count() == 1 and shown.locator(".chart svg").count() == 2
    links = visit.page.locator("nav table.reach a")
    assert links.count() == visit.page.locator("section.point").count() >= 2
    target = links.nth(1).get_attribute("href")
    links.nth(1).click()
    visit.page.wait_for_selector(f"section{target}:not([hidden]) svg", timeout=30_000)
    assert visit.page.locator("section.point:not([hidden])").count() == 1
    text = visit.page.locator(f"section{target}").inner_text()
    assert "stall" not in text.split("stalls")[0]  # waits are named by cause; "stalls" only in the figures
    visit.assert_legible()
    visit.assert_clean()


@pytest.mark.parametrize("size", SIZES)
def test_run_page_shows_figures_timeline_and_schedule(browser, site, size):
    """The run page: its title, its figures and the timeline at once, both charts fitted to a phone.

    The figures are above the fold and the timeline on the first screen; legible, offline.
    """
    visit = Visit(browser, site["run"], "#chart-schedule svg", SIZES[size])
    visit.shoot(f"run-{size}")
    assert visit.page.title().startswith(f"poetsim run: {HOSTILE_SCENARIO}: hybrid ({HOSTILE_GRAPH} on {HOSTILE_PLATFORM}")
    visit.assert_above_fold("div.scroll")  # the figures, in a box of their own that scrolls on a phone
    assert visit.box("#chart-timeline svg")["y"] < SIZES[size]["height"] * (0.5 if size == "desktop" else 0.9)
    for chart in ("timeline", "schedule"):
        assert visit.box(f"#chart-{chart} svg")["width"] <= SIZES[size]["width"]
    visit.assert_legible()
    visit.assert_clean()


@pytest.mark.parametrize("size", SIZES)
def test_resnet18_report_opens_on_its_finding_at_either_size(browser, site, size):
    """The shipped ResNet-18 study: its finding on the first screen, nothing wider than the window."""
    visit = Visit(browser, site["resnet18"], "#chart-overhead_ram svg", SIZES[size])
    visit.shoot(f"resnet18-report-{size}")
    visit.assert_above_fold("#finding")
    assert re.search(r"hybrid has the lowest energy at \d+ of the \d+ budget points", visit.page.locator("#finding").inner_text())
    visit.assert_legible()
    visit.assert_clean()


def test_resnet18_report_shows_the_readme_headline(browser, site):
    """The shipped ResNet-18 report shows the README's headline.

    At 1400x900 the main chart starts on the first screen, and every cell of the README's
    headline (RAM 50 %, runtime 1.2x) is in its place in the table's 1.2x tab.
    """
    visit = Visit(browser, site["resnet18"], "#chart-overhead_ram svg")
    visit.assert_starts_above_fold("#chart-overhead_ram svg")
    visit.assert_starts_above_fold(".tab-panel:visible table.headline")
    visit.page.click("label[for='headline-tab-0']")
    assert visit.page.locator("label[for='headline-tab-0']").inner_text() == "runtime 1.2x"
    table = visit.page.locator("#headline-panel-0 table.headline")
    headers = table.locator("thead th").all_inner_texts()
    rows = [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]
    platform, at_half = None, {}
    for cells in rows:
        platform = cells[0] or platform
        if cells[1] == "50 %":
            at_half[platform] = dict(zip(headers[2:], cells[2:]))
    readme = readme_headline()
    assert readme, "the README's headline table was not found"
    for (platform, strategy), text in readme.items():
        assert at_half[platform][strategy] == text, (platform, strategy)
    visit.assert_clean()


@pytest.mark.parametrize("size", SIZES)
def test_paper_page_opens_on_its_verdicts_with_a_chart_per_exhibit(browser, site, size):
    """The paper page opens on its count of verdicts, with a drawn chart per exhibit.

    A coloured verdict on every claim, the raw tables folded, nothing wider than the window,
    offline.
    """
    visit = Visit(browser, site["paper"], "#chart-fig5 svg", SIZES[size])
    visit.shoot(f"paper-{size}")
    visit.assert_above_fold("#summary")
    assert re.match(r"\d+ of \d+ claims hold under poetsim's cost model", visit.page.locator("#summary").inner_text())
    assert visit.page.locator(".chart svg").count() == 4 == visit.page.locator(".chart").count()
    claims = visit.page.locator("div.claim")
    assert claims.count() >= 8 and claims.locator(".verdict").count() == claims.count()
    assert visit.page.locator("details[open]").count() == 0
    visit.assert_legible()
    visit.assert_clean()


def readme_headline() -> dict[tuple[str, str], str]:
    """The README's ResNet-18 tables at 50 % RAM: {(platform, strategy): cell}.

    Each table's header names the platform, then the RAM budgets; each row is a strategy.
    """
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## The ResNet-18 study") :]
    section = section[: section.index("\n## ", 1)]
    found: dict[tuple[str, str], str] = {}
    table: list[list[str]] = []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if table:
            header, body = table[0], table[2:]
            column = header.index("50%")
            found.update({(header[0], row[0]): row[column] for row in body})
            table = []
    return found


SHIPPED = {
    "results/resnet18/report.html": "#finding",
    "results/mcu/report.html": "#finding",
    "results/checkmate_vgg16/report.html": "#finding",
    "results/resnet18/schedules.html": "section.point:not([hidden]) svg",
    "results/paper.html": "#summary",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("shipped", SHIPPED)
def test_shipped_pages_fit_the_window_and_open_on_their_finding(browser, shipped, size):
    """The pages committed under results/ fit the window and open on their finding.

    They are regenerated by `poetsim report` and `poetsim paper`: no error, nothing fetched,
    nothing scrolling sideways, every chart drawn, the finding on the first screen.
    """
    visit = Visit(browser, ROOT / shipped, ".chart svg", SIZES[size])
    first = SHIPPED[shipped]
    if first.startswith("#"):
        visit.assert_above_fold(first)
    charts = visit.page.locator(".chart:visible")
    assert charts.count() == visit.page.locator(".chart:visible svg").count() >= 1
    assert visit.page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]
    if size == "desktop":  # the headline table fits its box beside the chart (a long platform name wraps)
        boxes = visit.page.locator(".headline-box .scroll:visible")
        assert all(box.evaluate("e => e.scrollWidth <= e.clientWidth") for box in boxes.all())
    visit.assert_clean()
