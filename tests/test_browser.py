"""The pages poetsim writes, opened in a real browser: Debian's chromium, headless, driven by Playwright.

A small sweep (the MCU scenario cut down, on a graph and a platform whose names are HTML and
script) gives a report and the page of one run; the shipped ResNet-18 results give the report the
README quotes. Each page is opened at 1400x900 and must load nothing but itself, log no error,
have its title, show its finding above the fold, use no type under 11 px, fit 1400 px, and run
no script smuggled in through a name. Screenshots go to build/screenshots/ for a person to look at.

Skipped, saying why, only when chromium is not installed (`apt-get install -y chromium`).
"""

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml

from poetsim.analysis.results import load_results
from poetsim.graphs import zoo
from poetsim.graphs.io import save_graph
from poetsim.inputs.scenario import load_scenario
from poetsim.pipeline import load_run, problem_for_point
from poetsim.report import build_report, save_run_charts
from poetsim.status import Status
from poetsim.sweeps.runner import point_slug, run_sweep

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
VIEWPORT = {"width": 1400, "height": 900}
HOSTILE_GRAPH = "<img src=x onerror=window.__pwned=1>"
HOSTILE_PLATFORM = "</script><script>window.__pwned=1</script>"
HOSTILE_SCENARIO = "<svg onload=window.__pwned=1>mcu"
MIN_FONT_PX = 11


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, Path]:
    """The pages to open: a report and a run page of a small sweep with hostile names, and the
    report of the shipped ResNet-18 results (built into tmp, never over results/)."""
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
    report = build_report(load_results(sweep), root / "report", HOSTILE_SCENARIO)
    point = next(
        p
        for p in scenario.points()
        if p.strategy == "hybrid" and p.ram.text == "70%" and str(p.platform).endswith("board.yaml") and p.runtime_x == 1.5
    )
    run = load_run(problem_for_point(scenario, point), sweep / "points" / point_slug(point) / "schedule.json")
    run = replace(run, strategy="hybrid", status=Status.OPTIMAL, message="")  # as `poetsim simulate` would have it
    run_page = save_run_charts(run, root / "run", f"{HOSTILE_SCENARIO}: hybrid")[0]
    resnet = build_report(load_results(ROOT / "results" / "resnet18"), root / "resnet18", "resnet18")
    return {"report": report, "run": run_page, "resnet18": resnet}


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
    """One page opened in the browser, with what it logged and asked the network for."""

    def __init__(self, context, path: Path, ready: str):
        self.url = path.resolve().as_uri()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("dialog", lambda dialog: (self.errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
        self.page.goto(self.url)
        self.page.wait_for_selector(ready, timeout=30_000)
        self.page.wait_for_load_state("load")

    def box(self, selector: str) -> dict:
        return self.page.locator(selector).first.bounding_box()

    def shoot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}-full.png"), full_page=True)

    def assert_clean(self) -> None:
        """No error logged, nothing fetched but the page itself, no smuggled script run."""
        assert self.errors == []
        assert set(self.requests) == {self.url}
        assert self.page.evaluate("window.__pwned") is None
        assert self.page.locator("img").count() == 0

    def assert_legible(self) -> None:
        """Every piece of text, HTML or chart, is at least 11 px, and the page is no wider than the window."""
        assert self.page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
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
        box = self.box(selector)
        assert box is not None, f"{selector} is not on the page"
        assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], f"{selector} is not above the fold: {box}"
        assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"], f"{selector} is wider than the window: {box}"


def test_report_opens_on_its_finding(browser, site):
    """Title, the headline table and the main chart within 1400x900, legible, offline, no script from a name."""
    visit = Visit(browser, site["report"], "#chart-overhead_ram svg")
    visit.shoot("report")
    assert visit.page.title() == f"poetsim report: {HOSTILE_SCENARIO}"
    visit.assert_above_fold("#headline-panel-0 table.headline")
    visit.assert_above_fold("#chart-overhead_ram svg")
    for chart in ("overhead_platform", "pareto", "prediction"):
        assert visit.page.locator(f"#chart-{chart} svg").count() == 1
    visit.assert_legible()
    visit.assert_clean()
    assert HOSTILE_GRAPH in visit.page.locator("body").inner_text()  # shown as text, not run


def test_report_tables_switch_sort_and_filter_offline(browser, site):
    """The runtime tabs switch the headline; the table of every run filters and sorts without a network."""
    visit = Visit(browser, site["report"], "#chart-overhead_ram svg")
    assert visit.page.locator("#headline-panel-1").is_hidden()
    visit.page.click("label[for='headline-tab-1']")
    assert visit.page.locator("#headline-panel-1").is_visible() and visit.page.locator("#headline-panel-0").is_hidden()
    runs = pd.read_csv(site["report"].parent.parent / "sweep" / "runs.csv")
    visit.page.click("summary:has-text('All runs')")
    visit.page.fill("input[data-table='all-runs']", "infeasible")
    shown = visit.page.locator("#all-runs tbody tr:visible")
    assert shown.count() == int((runs["status"] == "infeasible").sum()) > 0
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


def test_run_page_shows_figures_timeline_and_schedule(browser, site):
    """The run page: its title, the figures and the timeline above the fold, legible, offline."""
    visit = Visit(browser, site["run"], "#chart-schedule svg")
    visit.shoot("run")
    assert visit.page.title().startswith(f"poetsim run: {HOSTILE_SCENARIO}: hybrid ({HOSTILE_GRAPH} on {HOSTILE_PLATFORM}")
    visit.assert_above_fold("table")
    assert visit.box("#chart-timeline svg")["y"] < VIEWPORT["height"] / 2
    visit.assert_legible()
    visit.assert_clean()


def test_resnet18_report_shows_the_readme_headline_without_scrolling(browser, site):
    """The shipped ResNet-18 study at 1400x900: headline table and overhead chart above the fold, and
    every cell of the README's headline (RAM 50 %, runtime 1.2x) in its place in the table."""
    visit = Visit(browser, site["resnet18"], "#chart-overhead_ram svg")
    visit.shoot("resnet18-report")
    visit.assert_above_fold("#headline-panel-0 table.headline")
    visit.assert_above_fold("#chart-overhead_ram svg")
    visit.assert_legible()
    visit.assert_clean()
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


def readme_headline() -> dict[tuple[str, str], str]:
    """The README's headline table: {(platform, strategy): cell} (the platform is the cell's first word)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text[text.index("**Headline**") :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, body = table[0], table[2:]
    return {(row[0].split()[0], strategy): cell for row in body for strategy, cell in zip(header[1:], row[1:])}
