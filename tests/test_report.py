"""Charts and the HTML report: stage states by hand, offline files, findings computed from the data."""

import html
import json
import math
import re
import struct
from dataclasses import replace

import pandas as pd
import pytest
from chart_specs import encodings, layers_with_other_axes

from poetsim import strategies
from poetsim.errors import ScheduleError, UserInputError
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.inputs.profiles import load_platform
from poetsim.pipeline import Problem, Run
from poetsim.report import build_report, footer_text, save_chart, save_run_charts, schedule_chart, stage_states, timeline_chart
from poetsim.report.finding import sentences
from poetsim.report.overhead import overhead_chart
from poetsim.report.page import script_json
from poetsim.report.palette import platform_colours, strategy_colours
from poetsim.report.reach import reach_table, tightest
from poetsim.report.report import prepare, winners
from poetsim.report.sweep_charts import Draw, SweepChart, pareto_chart, prediction_chart, prediction_differences, runtime_chart
from poetsim.report.tables import headline_table
from poetsim.report.timeline import NEUTRAL_COLOURS, bus_lane, lanes
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import simulate
from poetsim.status import Status
from poetsim.units import RamSpec

C, F, PI, PO = Compute, Free, PageIn, PageOut
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CDN_SCRIPT = re.compile(r"<script[^>]*src=[\"']https?://", re.IGNORECASE)

# Seven nodes: a chain, with 5 reading 0 again and 6 reading 1 again, so 0 can be paged out and
# back in and 1 dropped and recomputed.
DEPS = [(), (0,), (1,), (2,), (3,), (4, 0), (5, 1)]
SIZES = [100, 200, 40, 10, 30, 50, 20]
MIXED: list[list[Instruction]] = [
    [C(0)],
    [C(1)],
    [PO(0), F(0), C(2), F(1)],
    [C(3), F(2)],
    [PI(0), C(4), F(3)],
    [C(5), F(4)],
    [C(1), F(0), C(6), F(1), F(5), F(6)],
]
N, R = "nothing", "in RAM"
EXPECTED_STATES = {  # node -> state in stages 0..6
    0: ["compute", R, "page-out", "on storage", "page-in", R, R],
    1: [N, "compute", R, N, N, N, "recompute"],
    2: [N, N, "compute", R, N, N, N],
    3: [N, N, N, "compute", R, N, N],
    4: [N, N, N, N, "compute", R, N],
    5: [N, N, N, N, N, "compute", R],
    6: [N, N, N, N, N, N, "compute"],
}


def make_graph(deps, sizes, name="g") -> TrainingGraph:
    return TrainingGraph.create(name, [Node(i, f"n{i}", "op", False, tuple(d), b) for i, (d, b) in enumerate(zip(deps, sizes))])


def make_costs(graph: TrainingGraph) -> CostTable:
    """1 s and 1 J per compute; every transfer 1.5 s and 0.5 J."""
    n = len(graph)
    return CostTable(
        output_bytes=graph.output_bytes,
        compute_s=(1.0,) * n,
        compute_j=(1.0,) * n,
        page_in_s=(1.5,) * n,
        page_in_j=(0.5,) * n,
        page_out_s=(1.5,) * n,
        page_out_j=(0.5,) * n,
        static_power_w=0.1,
        dma_channels=1,
    )


@pytest.fixture
def seven() -> TrainingGraph:
    return make_graph(DEPS, SIZES, "seven")


@pytest.fixture
def mixed(seven) -> Schedule:
    """A valid schedule with a page-out, a page-in and a recompute (the checker accepts it)."""
    schedule = Schedule("seven", 7, Timing.OVERLAP, tuple(tuple(s) for s in MIXED))
    check_schedule(schedule, seven, make_costs(seven), Timing.OVERLAP)
    return schedule


FOOTER = footer_text("unit-test scenario", ["overlap"])
HOSTILE = "<img src=x onerror=window.__pwned=1></script><script>window.__pwned=1</script>"


def assert_offline_html(path, footer=FOOTER):
    """The page loads no script from the network, carries the Vega bundle exactly once, and says what it assumes."""
    text = path.read_text(encoding="utf-8")
    assert not CDN_SCRIPT.search(text), f"{path} loads a script from the network"
    assert text.count("window.vegaEmbed=") == 1 and len(text) > 300_000  # the Vega bundle, inline, once
    assert re.search(r"<title>[^<]+</title>", text), f"{path} has no title"
    assert '"actions": false' in text  # no "Open in Vega Editor", which goes online
    assert html.escape(footer[:80]) in text or footer[:80] in text


def searched(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    """The first match of `pattern` in `text`; the test fails, naming the pattern, where there is none."""
    found = re.search(pattern, text, flags)
    assert found is not None, f"no match for {pattern!r}"
    return found


def drawn(chart: SweepChart) -> Draw:
    """How to draw `chart`; the test fails, with the chart's note, where it is not drawn."""
    assert chart.draw is not None, chart.note
    return chart.draw


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


def svg_size(path) -> tuple[float, float]:
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<svg")
    width, height = searched(r'<svg[^>]*width="([\d.]+)"[^>]*height="([\d.]+)"', text).groups()
    return float(width), float(height)


def assert_images(directory, stem):
    """stem.png is drawn at twice the pixel density of stem.svg."""
    width, height = png_size(directory / f"{stem}.png")
    svg_width, svg_height = svg_size(directory / f"{stem}.svg")
    assert (width, height) == (round(2 * svg_width), round(2 * svg_height))
    assert width > 300


def embedded_rows(chart) -> int:
    return sum(len(rows) for rows in chart.to_dict()["datasets"].values())


def chart_rows(chart) -> list[dict]:
    return [row for rows in chart.to_dict()["datasets"].values() for row in rows]


def test_stage_states_follow_the_instruction_semantics(seven, mixed):
    """Compute, recompute, page-out, on storage, page-in, in RAM and nothing, cell by cell."""
    states = stage_states(mixed, seven)
    assert len(states) == 49 and list(states.columns) == ["stage", "node", "state"]
    grid = states.pivot(index="node", columns="stage", values="state").astype(str)
    for node, expected in EXPECTED_STATES.items():
        assert list(grid.loc[node]) == expected, f"node {node}"


def test_stage_states_rejects_a_schedule_for_another_graph(mixed):
    """A schedule drawn against the wrong graph would show nonsense: it is an error."""
    with pytest.raises(ScheduleError, match="7 nodes"):
        stage_states(mixed, make_graph([(), (0,)], [1, 1]))


def test_save_chart_writes_an_offline_page_a_2x_png_and_an_svg(seven, mixed, tmp_path):
    """stem.html opens without internet and carries the footer; the PNG is the SVG at twice the density."""
    chart = schedule_chart(mixed, seven, "seven: mixed", FOOTER)
    paths = save_chart(chart, tmp_path / "charts", "schedule", title="seven: mixed")
    assert [p.name for p in paths] == ["schedule.html", "schedule.png", "schedule.svg"]
    assert_offline_html(paths[0])
    assert "<title>seven: mixed</title>" in paths[0].read_text(encoding="utf-8")
    assert_images(tmp_path / "charts", "schedule")


def test_schedule_chart_names_layers_and_marks_the_loss_and_the_transfers():
    """Layer names on the axis, a rule where the backward pass begins, and a marker on every transfer."""
    # 0 input -> 1 fc -> 2 loss, then 3 fc_grad (reads 2 and 0) and 4 input_grad (reads 3 and 1).
    nodes = [
        Node(0, "input", "input", False, (), 40),
        Node(1, "fc", "linear", False, (0,), 20),
        Node(2, "loss", "loss", False, (1,), 4),
        Node(3, "fc_grad", "linear_grad", True, (2, 0), 20),
        Node(4, "input_grad", "linear_grad", True, (3, 1), 40),
    ]
    graph = TrainingGraph.create("tiny", nodes)
    stages: list[list[Instruction]] = [[C(0)], [C(1), PO(0), F(0)], [C(2)], [PI(0), C(3), F(2)], [C(4), F(0), F(1), F(3), F(4)]]
    schedule = Schedule("tiny", 5, Timing.OVERLAP, tuple(tuple(s) for s in stages))
    spec = schedule_chart(schedule, graph, "tiny", FOOTER).to_dict()
    text = json.dumps(spec)
    assert all(f"{i} {name}" in text for i, name in enumerate(["input", "fc", "loss", "fc_grad", "input_grad"]))
    rows = chart_rows(schedule_chart(schedule, graph, "tiny", FOOTER))
    assert [r["stage"] for r in rows if "text" in r] == [3]  # the divider after the loss (node 2)
    transfers = sorted((r["state"], r["node"]) for r in rows if "middle" in r)
    assert transfers == [("page-in", 0), ("page-out", 0)]
    assert "loss is node 2" in text


def test_schedule_chart_embeds_runs_not_cells():
    """A 300-node keep-all schedule (90,000 cells) embeds a few rows per node, not the grid."""
    n = 300
    graph = make_graph([()] + [(i,) for i in range(n - 1)], [1] * n, "chain")
    stages = [[C(t)] + ([F(t - 1)] if t else []) + ([F(t)] if t == n - 1 else []) for t in range(n)]
    schedule = Schedule("chain", n, Timing.OVERLAP, tuple(tuple(s) for s in stages))
    assert embedded_rows(schedule_chart(schedule, graph, "chain", FOOTER)) <= 4 * n


@pytest.fixture
def simulated(seven, mixed):
    """The mixed schedule on the simulated device.

    Page-out 2-3.5 s, page-in 4-5.5 s, a stall 5-5.5 s, a recompute 6.5-7.5 s; makespan 8.5 s;
    peak 350 bytes.
    """
    return simulate(mixed, seven, make_costs(seven), ram_capacity_bytes=10_000, mode="free-running")


def test_timeline_has_compute_dma_and_bus_lanes_with_every_kind(simulated, tmp_path):
    """Compute and DMA lanes with every kind present, a bus lane derived from them, and the RAM curve."""
    chart = timeline_chart(simulated, 360, "seven: timeline", FOOTER, deadline_s=10.0)
    rows = chart_rows(chart)
    kinds = {row["kind"] for row in rows if "kind" in row}
    assert {"compute", "recompute", "page-in", "page-out", "wait: input", "bus: compute", "bus: both", "bus: transfers"} <= kinds
    assert {row["resource"] for row in rows if "resource" in row} == {"compute", "dma", "bus"}
    curve = [row for row in rows if "ram_bytes" in row and "label" not in row]
    assert max(row["ram_bytes"] for row in curve) == simulated.figures.peak_ram_bytes == 350
    assert any(row.get("ram_bytes") == 360 and "label" in row for row in rows)  # the budget rule
    assert any("deadline 10 s" in str(row.get("label")) for row in rows)
    assert not any("past the deadline" in str(row.get("label")) or "over the budget" in str(row.get("label")) for row in rows)
    text = json.dumps(chart.to_dict())
    assert "RAM in use (KiB)" in text and "time (s)" in text
    save_chart(chart, tmp_path, "timeline")
    assert_images(tmp_path, "timeline")


def test_bus_lane_says_who_is_on_the_bus_when(simulated):
    """The bus lane says who is on the bus when, hand-checked against the trace.

    Compute alone, then both with the page-out, compute, both with the page-in, the page-in
    alone while compute stalls, then compute.
    """
    bus = bus_lane(lanes(simulated.trace[simulated.trace["resource"] != "bus"]).query("resource != 'bus'"))
    spans = [(row.time_s, row.end_s, row.kind) for row in bus.itertuples()]
    assert spans == [
        (0.0, 2.0, "bus: compute"),
        (2.0, 3.5, "bus: both"),
        (3.5, 4.0, "bus: compute"),
        (4.0, 5.0, "bus: both"),
        (5.0, 5.5, "bus: transfers"),
        (5.5, 8.5, "bus: compute"),
    ]


def test_timeline_names_each_wait_by_its_cause_and_its_subtitle_agrees(simulated):
    """The timeline names each wait by its cause, and its subtitle agrees.

    The 0.5 s wait for page-in of node 0 is drawn as "wait: input", and the subtitle counts it
    as a stall: no bar says "stall" while the text says 0.
    """
    spec = timeline_chart(simulated, None, "seven", FOOTER).to_dict()
    kinds = {row["kind"] for row in chart_rows(timeline_chart(simulated, None, "seven", FOOTER)) if "kind" in row}
    assert "stall" not in kinds and "wait: input" in kinds
    assert simulated.stall_s == pytest.approx(0.5)
    subtitle = " ".join(spec["vconcat"][0]["title"]["subtitle"])
    assert "stalls (waits for an input or for RAM, which the stage model lacks) 0.5 s" in subtitle


def test_timeline_highlights_overruns_and_keeps_short_events_visible(simulated):
    """Past a 6 s deadline and above a 300-byte budget is shaded; a stall in a long run is at least 3 px wide."""
    rows = chart_rows(timeline_chart(simulated, 300, "seven", FOOTER, deadline_s=6.0))
    assert any(row.get("label") == "2.5 s past the deadline" for row in rows)
    over = sorted(row["label"] for row in rows if "over the budget" in str(row.get("label")))
    assert over == ["40 bytes over the budget", "50 bytes over the budget"]  # 340 at 2-3 s, 350 at 6.5-7.5 s
    stall = next(row for row in rows if row.get("kind") == "wait: input")
    assert stall["end"] - stall["start"] == pytest.approx(0.5)
    trace = simulated.trace.copy()
    trace.loc[trace["kind"] == "stall", "end_s"] = 5.0 + 1e-6  # a 1 us stall in an 8.5 s run
    short = replace(simulated, trace=trace)
    stall = next(row for row in chart_rows(timeline_chart(short, None, "seven", FOOTER)) if row.get("kind") == "wait: input")
    assert (stall["end"] - stall["start"]) / 8.5 * 1000 >= 3 - 1e-9  # MIN_BAR_PX on a 1000 px axis
    assert stall["duration_s"] == pytest.approx(1e-6)  # the tooltip keeps the true duration


def test_timeline_draws_kinds_it_does_not_know_in_a_neutral_colour(simulated):
    """A newer simulator's kinds (a wait, say) are drawn and named, in grey, never dropped."""
    extra = pd.DataFrame(
        [
            {
                "time_s": 1.0,
                "end_s": 1.5,
                "duration_s": 0.5,
                "resource": "dma",
                "node": 0,
                "kind": "wait_dma",
                "bytes": 0,
                "stage": 1,
            }
        ]
    )
    trace = pd.concat([simulated.trace, extra], ignore_index=True)
    spec = timeline_chart(replace(simulated, trace=trace), None, "seven", FOOTER).to_dict()
    scale = next(c["scale"] for c in encodings(spec, "color") if "wait-dma" in c.get("scale", {}).get("domain", []))
    assert scale["range"][scale["domain"].index("wait-dma")] in NEUTRAL_COLOURS


def test_timeline_of_a_long_run_is_coarsened_but_keeps_the_peak():
    """4,000 back-to-back computes become a few bars; the RAM envelope keeps the peak."""
    n = 4000
    graph = make_graph([()] + [(i,) for i in range(n - 1)], [1 + i % 7 for i in range(n)], "long")
    stages = [[C(t)] + ([F(t - 1)] if t else []) + ([F(t)] if t == n - 1 else []) for t in range(n)]
    schedule = Schedule("long", n, Timing.OVERLAP, tuple(tuple(s) for s in stages))
    result = simulate(schedule, graph, make_costs(graph))
    assert len(result.ram_curve) > 2000
    chart = timeline_chart(result, None, "long", FOOTER)
    assert embedded_rows(chart) < 2500
    curve = [row["ram_bytes"] for row in chart_rows(chart) if "ram_bytes" in row]
    assert max(curve) == result.figures.peak_ram_bytes


def test_save_run_charts_writes_one_page_with_both_charts(seven, mixed, tmp_path):
    """A simulated run's charts: one run.html with both, and a PNG and an SVG of each.

    run.html is titled, has the Vega bundle once, both charts and the figures; a hostile graph
    name is escaped everywhere.
    """
    hostile = replace(seven, name=HOSTILE)
    costs = make_costs(seven)
    problem = Problem(
        hostile, load_platform("rpi4"), costs, Budgets(400, 20.0), RamSpec(400, None, "400"), 2.0, Timing.OVERLAP, 0
    )
    figures = check_schedule(mixed, seven, costs, Timing.OVERLAP)
    simulated = simulate(mixed, seven, costs, ram_capacity_bytes=10_000)
    run = Run(problem, "hybrid", Status.OPTIMAL, "", mixed, figures, figures, figures, simulated=simulated)
    paths = save_run_charts(run, tmp_path, "unit: hybrid")
    assert sorted(p.name for p in paths) == ["run.html", "schedule.png", "schedule.svg", "timeline.png", "timeline.svg"]
    assert_images(tmp_path, "schedule")
    assert_images(tmp_path, "timeline")
    page = tmp_path / "run.html"
    assert_offline_html(page, footer="Scenario: unit: hybrid")
    text = page.read_text(encoding="utf-8")
    assert "timing: overlap" in text and "id='chart-timeline'" in text and "id='chart-schedule'" in text
    assert "<title>poetsim run: unit: hybrid (&lt;img" in text
    assert_no_raw(text)
    with pytest.raises(UserInputError, match="no schedule"):
        save_run_charts(Run(problem, "hybrid", Status.INFEASIBLE, "too small"), tmp_path, "unit")


def assert_no_raw(text: str) -> None:
    """No hostile string reaches the page unescaped, in HTML or in a script."""
    assert "<img src=x" not in text
    assert "</script><script>window.__pwned" not in text
    assert "window.__pwned=1</script>" not in text


def test_script_json_cannot_end_its_script():
    """<, > and & are escaped inside the JSON, which still reads back the same; NaN becomes null."""
    text = script_json({"name": HOSTILE, "missing": float("nan"), "a&b": [1.5]})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"name": HOSTILE, "missing": None, "a&b": [1.5]}


# --- the sweep report --------------------------------------------------------------------------

KEEP_ALL_PEAK = 1_000_000
ENERGY_J = {"rpi4": 8.0, "mkr1000": 100.0}


def overheads(platform: str, runtime_x: float) -> dict:
    """Overhead (%) per strategy and RAM fraction; None = infeasible.

    On mkr1000, paging-only beats hybrid at 50 % (as when hybrid stops at a time limit with a
    gap).
    """
    return {
        "keep-all": {0.25: None, 0.5: None, 1.0: 0.0},
        "hybrid": {0.25: 2.0, 0.5: 1.5 if platform == "mkr1000" else 0.5, 1.0: 0.0},
        "recompute-only": {0.25: None if runtime_x == 1.2 else 4.0, 0.5: 3.0, 1.0: 0.0},
        "paging-only": {0.25: 5.0, 0.5: 1.0, 1.0: 0.0},
    }


def sweep_rows(simulated: bool = True) -> pd.DataFrame:
    """Result rows as a sweep writes them: 2 platforms x 2 runtimes x 4 strategies x 3 RAM budgets.

    Plus one point that failed before its budgets were resolved. Keep-all misses the smaller
    budgets (over-budget); hybrid on rpi4 at 25 % and 1.5x is feasible, not proven: its bound is
    0.5 %.
    """
    rows = []
    for platform, energy_j in ENERGY_J.items():
        for runtime_x in (1.2, 1.5):
            for strategy, by_ram in overheads(platform, runtime_x).items():
                for fraction, overhead in by_ram.items():
                    ok = overhead is not None
                    total_j = energy_j * (1 + overhead / 100) if ok else None
                    ram_bytes = int(fraction * KEEP_ALL_PEAK)
                    status = (
                        ("baseline" if strategy == "keep-all" else "optimal")
                        if ok
                        else ("over-budget" if strategy == "keep-all" else "infeasible")
                    )
                    row = {
                        "scenario": "unit",
                        "point_key": f"{platform}|{fraction}|{runtime_x}|{strategy}",
                        "model": "resnet18",
                        "model_name": "resnet18-cifar",
                        "platform": platform,
                        "ram": f"{fraction * 100:g}%",
                        "ram_budget_bytes": ram_bytes,
                        "runtime_x": runtime_x,
                        "deadline_s": runtime_x,
                        "timing": "overlap",
                        "strategy": strategy,
                        "status": status,
                        "message": "" if ok else f"no schedule fits {ram_bytes:,} bytes",
                        "keep_all_peak_bytes": KEEP_ALL_PEAK,
                        "keep_all_energy_j": energy_j,
                        "predicted_total_j": total_j,
                        "overhead_pct": overhead,
                        "bound_j": total_j,
                        "gap_overhead": 0.0 if ok else None,
                        "predicted_peak_ram_bytes": 0.97 * ram_bytes if ok else None,
                        "predicted_runtime_s": runtime_x if ok else None,
                    }
                    if (platform, runtime_x, strategy, fraction) == ("rpi4", 1.5, "hybrid", 0.25):
                        row.update(status="feasible", bound_j=energy_j * 1.005, gap_overhead=0.75)
                    if simulated:
                        row["simulated_total_j"] = total_j * 1.01 if total_j is not None else None
                        row["simulated_runtime_s"] = runtime_x * 1.02 if ok else None
                    rows.append(row)
    rows.append(
        {
            "scenario": "unit",
            "point_key": "failed",
            "model": "resnet18",
            "platform": "rpi4",
            "ram": "10%",
            "runtime_x": 1.2,
            "strategy": "hybrid",
            "status": "failed",
            "message": "internal error ZeroDivisionError: division by zero (model.py:1)",
        }
    )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    page = build_report(sweep_rows(), directory, "unit sweep")
    return page, page.read_text(encoding="utf-8")


def specs_of(text: str) -> dict:
    return json.loads(searched(r"const specs = (\{.*?\});\n", text).group(1))


def test_report_is_one_offline_page_with_a_png_and_an_svg_per_chart(report):
    """report.html is one offline page with a PNG and an SVG per chart.

    It loads nothing from the network and states the assumptions once, at its foot; each chart
    has a 2x PNG and an SVG, which carry the footer themselves (they travel alone).

    Two runtime budgets make no curve (the table's tabs compare them), so three charts.
    """
    page, text = report
    assert page.name == "report.html"
    assert_offline_html(page, footer=footer_text("unit sweep", ["overlap"]))
    stems = ["overhead_ram", "pareto", "prediction"]
    assert sorted(p.stem for p in page.parent.glob("*.png")) == stems
    for stem in stems:
        assert_images(page.parent, stem)
        assert "Assumptions: activation RAM only" in (page.parent / f"{stem}.svg").read_text(encoding="utf-8")
    specs = specs_of(text)
    assert sorted(specs) == [f"chart-{stem}" for stem in stems]
    assert text.count("Assumptions: activation RAM only") == 1
    assert "<title>poetsim report: unit sweep</title>" in text


def test_report_opens_on_its_finding_and_shows_each_figure_once(report):
    """The report opens on its finding and shows each figure once.

    The finding comes before any table or chart; then the RAM chart and the headline; each chart
    once; every run folded at the end.
    """
    _, text = report
    body = text[text.index("<body>") :]
    order = [
        body.index(marker)
        for marker in (
            "id='finding'",
            "id='chart-overhead_ram'",
            "class='headline'",
            "id='reach'",
            "id='chart-pareto'",
            "id='chart-prediction'",
            "<summary>All runs (",
        )
    ]
    assert order == sorted(order)
    assert body.index("id='finding'") < body.index("<table")
    for chart in ("overhead_ram", "pareto", "prediction"):
        assert body.count(f"id='chart-{chart}'") == 1
    assert body.count("<details") == 1


def test_each_chart_comes_in_a_wide_and_a_narrow_layout(report):
    """A phone gets one panel per row; data the two layouts share is in the page once."""
    _, text = report
    specs = specs_of(text)
    main = specs["chart-overhead_ram"]
    assert set(main) == {"wide", "narrow", "wide_px", "data"}
    assert '"columns": 1' in json.dumps(main["narrow"]) and '"columns": 1' not in json.dumps(main["wide"])
    datasets = json.loads(searched(r"const datasets = (\{.*?\});\n", text).group(1))
    used = [name for entry in specs.values() for name in entry["data"]]
    assert set(used) == set(datasets)


def headline_cells(text: str, tab: int) -> dict:
    """{(platform, RAM): {strategy: (text, css class)}} of one tab of the headline table."""
    panel = searched(rf"<div class='tab-panel' id='headline-panel-{tab}'>(.*?)</table>", text, re.S).group(1)
    header = re.findall(r"<th[^>]*>([^<]*)</th>", panel)[2:]
    cells, platform = {}, None
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", panel.split("</thead>")[1], re.S):
        values = re.findall(r"<td class='([^']*)'[^>]*>([^<]*)</td>|<td>([^<]*)</td>", row)
        platform = values[0][1] or platform
        ram = values[1][2]
        cells[(platform, ram)] = {name: (v[1], v[0]) for name, v in zip(header, values[2:])}
    return cells


def test_headline_puts_strategies_side_by_side_per_platform_and_ram(report):
    """The first tab (runtime 1.2x): registry order, the lowest of a row in bold, a status word where no schedule."""
    _, text = report
    assert re.findall(r"<label for='headline-tab-\d'>([^<]*)</label>", text) == ["runtime 1.2x", "runtime 1.5x"]
    cells = headline_cells(text, 0)
    assert list(cells[("rpi4", "50 %")]) == ["keep-all", "hybrid", "paging-only", "recompute-only"]
    assert cells[("rpi4", "50 %")]["hybrid"] == ("0.500 %", "best")
    assert cells[("rpi4", "50 %")]["paging-only"] == ("1.000 %", "")
    assert cells[("rpi4", "50 %")]["keep-all"] == ("over-budget", "none")
    assert cells[("mkr1000", "25 %")]["recompute-only"] == ("infeasible", "none")
    assert cells[("rpi4", "10 %")]["hybrid"] == ("failed", "none")
    assert list(cells)[:3] == [("mkr1000", "100 %"), ("mkr1000", "50 %"), ("mkr1000", "25 %")]
    assert headline_cells(text, 1)[("rpi4", "25 %")]["hybrid"] == ("2.000 %*", "best")


def test_table_of_all_runs_has_human_headers_units_and_sort_keys(report):
    """Every run is a row; headers say what and in which unit; numbers sort by their raw value."""
    _, text = report
    table = searched(r"<table class='sortable' id='all-runs'>(.*?)</table>", text, re.S).group(1)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert {
        "RAM budget (% of keep-all)",
        "RAM budget (KiB)",
        "energy (J)",
        "above keep-all (%)",
        "not proven (% of overhead)",
        "makespan (s)",
        "simulated energy (J)",
    } <= set(headers)
    assert not any("_" in h for h in headers)
    assert table.count("<tr>") == len(sweep_rows()) + 1
    assert "data-sort='102.0'" in table  # mkr1000's 2 % schedule, 102 J
    assert "class='filter'" in text and "data-table='all-runs'" in text


def overhead_data(frame: pd.DataFrame):
    chart, data, _, _ = overhead_chart(
        frame,
        x="ram_fraction",
        label=lambda v: f"{100 * v:g}%",
        x_title="RAM",
        colour="strategy",
        columns="platform_label",
        rows=["runtime_x"],
        width_px=640,
    )
    return chart.to_dict(), data


def test_overhead_chart_sets_tied_strategies_side_by_side_on_a_symlog_axis():
    """At 100 % all four strategies tie at 0 %: each has its own offset, in registry order; y is symmetric-log."""
    frame = prepare(sweep_rows())
    spec, data = overhead_data(frame)
    tie = data[(frame["platform_label"] == "rpi4") & (frame["runtime_x"] == 1.2) & (frame["ram_fraction"] == 1.0)]
    order = tie.sort_values("x")["group"].tolist()
    assert order == ["keep-all", "hybrid", "paging-only", "recompute-only"]
    assert tie["x"].nunique() == 4 and (tie["y"] == 0).all()
    constant = 10 ** math.floor(math.log10(0.5))  # the smallest positive overhead is 0.5 %
    point = data[
        (frame["platform_label"] == "mkr1000") & (frame["strategy"] == "recompute-only") & (frame["ram_fraction"] == 0.5)
    ]
    assert point["y"].iloc[0] == pytest.approx(math.log1p(3.0 / constant))
    axis = next(e["axis"] for e in encodings(spec, "x") if e.get("axis"))
    assert axis["values"] == [0, 1, 2, 3]  # 10 %, 25 %, 50 %, 100 %: a tick on every budget swept
    assert all(f'"{label}"' in axis["labelExpr"] for label in ("10%", "25%", "50%", "100%"))


def test_overhead_chart_tells_proven_from_unproven_and_puts_no_schedule_in_its_strip():
    """Proven points filled; the feasible one hollow with a bar down to its bound; each status its own strip row."""
    frame = prepare(sweep_rows())
    spec, data = overhead_data(frame)
    unproven = data[data["ok"] & ~data["proven"]]
    assert len(unproven) == 1 and unproven["bound_pct"].iloc[0] == pytest.approx(0.5)
    assert unproven["y_bound"].iloc[0] < unproven["y"].iloc[0]
    strip = data[~data["ok"]]
    assert set(strip["strip"]) == {"infeasible", "over-budget", "failed"}
    rows = {status: strip.loc[strip["strip"] == status, "y"].unique() for status in strip["strip"].unique()}
    assert all(len(y) == 1 for y in rows.values()) and len({float(y[0]) for y in rows.values()}) == 3
    assert min(float(y[0]) for y in rows.values()) > data.loc[data["ok"], "y"].max()
    marks = json.dumps(spec)
    for shape in ("cross", "square", "triangle-down"):
        assert f'"shape": "{shape}"' in marks
    assert '"filled": false' in marks and '"y2": {"field": "y_bound"' in marks


def test_lines_break_where_a_budget_has_no_schedule():
    """Hybrid on rpi4 at 1.2x with no schedule at 50 %: its 25 % and 100 % points are not joined."""
    rows = sweep_rows()
    gap = (rows["platform"] == "rpi4") & (rows["runtime_x"] == 1.2) & (rows["strategy"] == "hybrid") & (rows["ram"] == "50%")
    rows.loc[gap, ["status", "predicted_total_j", "overhead_pct"]] = ["infeasible", None, None]
    frame = prepare(rows)
    _, data = overhead_data(frame)
    hybrid = data[(frame["platform_label"] == "rpi4") & (frame["runtime_x"] == 1.2) & (frame["strategy"] == "hybrid")]
    on_lines = hybrid[hybrid["ok"]]
    assert len(on_lines) == 2 and on_lines["segment"].nunique() == 2
    paging = data[(frame["platform_label"] == "rpi4") & (frame["runtime_x"] == 1.2) & (frame["strategy"] == "paging-only")]
    assert paging.loc[paging["ok"], "segment"].nunique() == 1


def test_fewer_than_three_budgets_make_a_bar_chart(tmp_path):
    """With only 50 % and 100 % swept, no curve is drawn: bars."""
    rows = sweep_rows()
    rows = rows[rows["ram"].isin(["50%", "100%"])]
    frame = prepare(rows)
    spec, _ = overhead_data(frame)
    marks = {layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in _layers(spec)}
    assert "bar" in marks and "line" not in marks


@pytest.mark.parametrize("budgets", [("50%", "100%"), ("25%", "50%", "100%")], ids=["bars", "curves"])
def test_every_layer_of_an_overhead_chart_shares_its_axes(budgets):
    """Layers merge their axes: one at the defaults would let Vega drop every other decade's label."""
    rows = sweep_rows()
    spec, _ = overhead_data(prepare(rows[rows["ram"].isin(budgets)]))
    assert layers_with_other_axes(spec) == []


def _layers(spec) -> list[dict]:
    found = []
    if isinstance(spec, dict):
        if "mark" in spec:
            found.append(spec)
        for value in spec.values():
            found += _layers(value)
    elif isinstance(spec, list):
        for value in spec:
            found += _layers(value)
    return found


def test_prediction_differences_are_per_run_and_figure():
    """Energy 1 % and makespan 2 % above the prediction for every simulated run."""
    frame = prepare(sweep_rows())
    differences = prediction_differences(frame)
    assert set(differences["figure"]) == {"energy", "makespan"}
    assert (differences.loc[differences["figure"] == "energy", "difference_pct"].round(9) == 1.0).all()
    assert (differences.loc[differences["figure"] == "makespan", "difference_pct"].round(9) == 2.0).all()
    assert len(differences) == 2 * int(frame["ok"].sum())


def test_the_prediction_chart_draws_its_zero_line_on_the_points_axis():
    """The zero rule and the points share one x axis (layers merge their axes)."""
    chart = prediction_chart(prepare(sweep_rows()))
    assert chart.draw is not None
    assert layers_with_other_axes(chart.draw("", 1280).to_dict()) == []


def test_platforms_keep_one_colour_and_strategies_their_registry_colour():
    """Colours are fixed by name, not by the order a chart meets them in."""
    assert platform_colours(["rpi4", "jetson-tx2"]) == platform_colours(["jetson-tx2", "rpi4", "rpi4"])
    domain, colours = platform_colours(["rpi4", "rpi4-nocache", "jetson-tx2"])
    assert len(set(colours)) == 3
    domain, colours = strategy_colours(["paging-only", "hybrid"])
    assert domain == ["hybrid", "paging-only"] and colours == [strategies.colour("hybrid"), strategies.colour("paging-only")]


def test_hostile_names_are_escaped_in_the_report(tmp_path):
    """A model, platform, scenario or message made of HTML and script reaches the page only escaped."""
    rows = sweep_rows()
    rows = rows[rows["runtime_x"] == 1.2].copy()
    rows["model_name"] = HOSTILE
    rows.loc[rows["platform"] == "rpi4", "platform"] = HOSTILE
    rows["message"] = HOSTILE
    text = build_report(rows, tmp_path, HOSTILE).read_text(encoding="utf-8")
    assert_no_raw(text)
    assert "&lt;img src=x onerror=window.__pwned=1&gt;" in text
    specs_of(text)  # still valid JSON


def test_winners_are_computed_from_the_energies():
    """Lowest energy per budget point; equal energies are a tie, not a win."""
    table = winners(prepare(sweep_rows())).set_index(["platform_label", "runtime_x", "ram_fraction"])["winner"]
    assert table[("mkr1000", 1.2, 0.5)] == "paging-only"
    assert table[("rpi4", 1.2, 0.5)] == "hybrid"
    assert table[("rpi4", 1.5, 0.25)] == "hybrid"
    assert table[("rpi4", 1.2, 1.0)] == "hybrid = keep-all = paging-only = recompute-only"


def test_finding_says_where_hybrid_wins_by_how_much_and_what_is_proven():
    """The finding says where hybrid wins, by how much, and what is proven.

    Hybrid is cheapest at 10 of the 12 budget points with a schedule (paging-only beats it on
    mkr1000 at 50 %); it saves up to 3 points against paging-only and 2.5 against
    recompute-only.
    """
    said = sentences(prepare(sweep_rows()))
    assert said[0].startswith("hybrid has the lowest energy at 10 of the 12 budget points where any strategy has a schedule")
    assert "another strategy is cheaper at 2 (0 of these hybrid schedules are not proven optimal" in said[0]
    assert "up to 3 % of keep-all energy against paging-only (2 % above keep-all against 5 % at" in said[1]
    assert "up to 2.5 % of keep-all energy against recompute-only (0.5 % above keep-all against 3 % at rpi4, 50 % RAM" in said[1]
    assert "it ties keep-all wherever they have one" in said[1]
    assert said[2].startswith("Proven: 33 of the 34 solver schedules are optimal, and 2 budgets are proven infeasible")
    assert "1 feasible" in said[2] and "1 failed" in said[2]


def test_a_finding_where_hybrid_alone_has_schedules_says_nothing_of_ties():
    """At every point with a schedule, only hybrid has one: no sentence about the points it shares with others."""
    rows = prepare(sweep_rows())
    alone = rows[(rows["strategy"] == "hybrid") | ~rows["ok"]]
    said = sentences(alone)
    assert said[0].endswith("and at 12 of them it is the only strategy with one.")
    assert not any("ties" in sentence or "Where" in sentence for sentence in said)


def test_report_opens_on_the_finding(report):
    _, text = report
    finding = searched(r"<div class='finding' id='finding'>(.*?)</div>", text, re.S).group(1)
    assert "hybrid has the lowest energy at 10 of the 12 budget points" in finding


def test_reach_table_gives_the_tightest_budget_each_strategy_meets():
    """Keep-all only at 100 %; recompute-only down to 50 % at 1.2x and 25 % at 1.5x; a cell links to its schedule."""
    frame = prepare(sweep_rows())
    best = tightest(frame).set_index(["platform_label", "runtime_x", "strategy"])["ram_label"]
    assert best[("rpi4", 1.2, "keep-all")] == "100 %"
    assert best[("rpi4", 1.2, "recompute-only")] == "50 %"
    assert best[("rpi4", 1.5, "recompute-only")] == "25 %"
    key = "rpi4|0.25|1.5|hybrid"
    html_table = reach_table(frame, {key: "schedules.html#p1"})
    # A figure and its unit stay together where a phone wraps the cell.
    assert "<a href='schedules.html#p1'>25\u00a0% · 2.000\u00a0%*</a>" in html_table
    assert html_table.count("<a href") == 1


def test_report_lists_failed_points_with_their_reasons(report):
    """Runs without a schedule are in the table of every run, with their reason."""
    _, text = report
    assert "no schedule fits 250,000 bytes" in text
    assert "division by zero" in text


def test_report_without_simulation_or_schedules_says_so(tmp_path):
    """No simulated energy: no prediction chart, and the page says why; no sweep folder: no schedule view."""
    rows = sweep_rows(simulated=False)
    rows = rows[(rows["platform"] == "rpi4") & (rows["runtime_x"] == 1.2)]
    page = build_report(rows, tmp_path, "no sim")
    text = page.read_text(encoding="utf-8")
    assert "No simulated energy in the results" in text
    assert "The results folder keeps no scenario.yaml, so the schedules cannot be replayed here." in text
    assert not (tmp_path / "prediction.png").exists() and not (tmp_path / "schedules.html").exists()
    assert_images(tmp_path, "overhead_ram")


def test_three_runtime_budgets_make_a_runtime_chart_and_one_makes_a_single_tab():
    """From 3 runtime budgets on, the runtime chart is drawn; with one, the headline has one (checked) tab."""
    rows = sweep_rows()
    third = rows[rows["runtime_x"] == 1.5].assign(runtime_x=2.0)
    third["point_key"] = third["point_key"] + "|2x"
    frame = prepare(pd.concat([rows, third], ignore_index=True))
    chart = runtime_chart(frame)
    assert chart.draw is not None and '"1.2x"' in json.dumps(chart.draw(FOOTER, 1240).to_dict())
    single = prepare(rows[rows["runtime_x"] == 1.2])
    assert runtime_chart(single).draw is None
    headline, style = headline_table(single)
    assert "id='headline-tab-0' checked" in headline and "headline-tab-1" not in headline
    assert "#headline-tab-0:checked ~ .tab-panels #headline-panel-0" in style


def test_empty_results_are_a_user_error(tmp_path):
    with pytest.raises(UserInputError, match="empty"):
        build_report(sweep_rows().iloc[0:0], tmp_path, "empty")


def test_pareto_front_keeps_only_non_dominated_schedules():
    """On mkr1000 at 1.2x: 25 % hybrid (102 J), 50 % paging-only (101 J), 100 % (100 J) form the front."""
    rows = sweep_rows()
    frame = prepare(rows[(rows["platform"] == "mkr1000") & (rows["runtime_x"] == 1.2)])
    points = [row for rows in drawn(pareto_chart(frame))(FOOTER, 1240).to_dict()["datasets"].values() for row in rows]
    front = sorted((round(p["peak"], 4), round(p["energy_j"], 6)) for p in points if p.get("front"))
    assert front == [(0.2425, 102.0), (0.485, 101.0), (0.97, 100.0)]


def test_a_prediction_within_rounding_is_a_sentence_not_a_chart():
    """Simulated figures within 1e-6 of the prediction: no chart, a sentence with the largest difference."""
    rows = sweep_rows()
    rows["simulated_total_j"] = rows["predicted_total_j"] * (1 + 2e-8)
    rows["simulated_runtime_s"] = rows["predicted_runtime_s"]
    chart = prediction_chart(prepare(rows))
    assert chart.draw is None
    assert chart.note.startswith("The simulator replays all 38 simulated schedules within rounding of the prediction")
    assert "energy +2e-06 %" in chart.note


def test_pareto_draws_ties_as_concentric_rings_not_translucent_marks():
    """The Pareto chart draws ties as concentric rings, not translucent marks.

    Hybrid is a filled dot drawn last; every other strategy a ring of its own size; nothing
    translucent; energies share one scale (above each panel's keep-all) and every panel has its
    axes.
    """
    rows = sweep_rows()
    spec = drawn(pareto_chart(prepare(rows)))(FOOTER, 1240).to_dict()
    marks = [layer for layer in _layers(spec) if isinstance(layer.get("mark"), dict) and layer["mark"]["type"] == "point"]
    points = [m for m in marks if "size" in m.get("encoding", {}) or m["mark"].get("filled")]
    assert all(m["mark"].get("opacity", 1) == 1 for m in marks)
    assert points[-1]["mark"]["filled"] is True and "hybrid" in json.dumps(points[-1]["transform"])
    sizes = {r["group"]: r["size"] for r in chart_rows(drawn(pareto_chart(prepare(rows)))(FOOTER, 1240)) if "size" in r}
    assert len({sizes[g] for g in ("keep-all", "paging-only", "recompute-only")}) == 3
    text = json.dumps(spec)
    assert '"resolve": {"axis": {"x": "independent", "y": "independent"}}' in text
    assert "keep-all 8 J" in text and "keep-all 100 J" in text  # each panel names its keep-all energy


def test_a_narrow_overhead_chart_stacks_one_panel_per_row_and_every_panel_has_an_x_axis():
    frame = prepare(sweep_rows())
    chart, data, _, _ = overhead_chart(
        frame,
        x="ram_fraction",
        label=lambda v: f"{100 * v:g}%",
        x_title="RAM",
        colour="strategy",
        columns="platform_label",
        rows=["runtime_x"],
        width_px=350,
    )
    spec = chart.to_dict()
    assert spec["columns"] == 1 and spec["resolve"] == {"axis": {"x": "independent"}}
    assert set(data["column"]) == {
        "mkr1000 · runtime 1.2x",
        "mkr1000 · runtime 1.5x",
        "rpi4 · runtime 1.2x",
        "rpi4 · runtime 1.5x",
    }


def test_rows_of_panels_whose_budgets_differ_each_get_a_budget_axis_of_their_own():
    """Byte budgets are different shares of each model's peak: a row of panels draws only its own budgets.

    Here the 1.5x row's budgets (25, 50 and 100 %) are made 0.9 times as large, as a second
    model's would be; the 1.2x row has 10, 25, 50 and 100 %.
    """
    frame = prepare(sweep_rows())
    frame.loc[frame["runtime_x"] == 1.5, "ram_fraction"] *= 0.9
    spec, data = overhead_data(frame)
    shelves = spec["vconcat"]
    first, second = ("10%", "25%", "50%", "100%"), ("22.5%", "45%", "90%")
    for shelf, labels, others in ((shelves[0], first, second), (shelves[1], second, first)):
        axis = next(e["axis"] for e in encodings(shelf, "x") if e.get("axis"))
        assert axis["values"] == list(range(len(labels)))
        assert all(f'"{label}"' in axis["labelExpr"] for label in labels)
        assert not any(f'"{label}"' in axis["labelExpr"] for label in others)
        assert {str(e["scale"]["domain"]) for e in encodings(shelf, "x") if "scale" in e} == {str([-0.5, len(labels) - 0.5])}
    assert len(shelves) == 2 and set(data["x"].round()) == {0, 1, 2, 3}  # every row's positions start at 0
    assert shelves[1]["facet"]["column"]["header"] == {"labels": False}  # platforms named above the first row only


def test_rows_of_panels_share_the_budget_axis_where_one_has_every_budget_of_the_others():
    """The 1.5x row lacks the 10 % budget of the 1.2x row: one axis, each budget at one position in both."""
    spec, _ = overhead_data(prepare(sweep_rows()))
    assert "vconcat" not in spec and spec["facet"]["row"]["field"] == "row"


def test_the_headline_opens_on_the_runtime_budget_with_the_most_schedules():
    """At 1.5x recompute-only has a schedule at 25 % too, so the 1.5x tab opens."""
    headline, _ = headline_table(prepare(sweep_rows()))
    assert "id='headline-tab-1' checked" in headline and "id='headline-tab-0' checked" not in headline


def test_measured_on_device_columns_join_the_table_of_runs_when_present(tmp_path):
    """A runs.csv with `device_*` columns (figures measured on an emulator) shows them, in words and units."""
    rows = sweep_rows()
    rows["device_energy_j"] = rows["predicted_total_j"] * 1.05
    rows["device_board"] = "qemu"
    text = build_report(rows, tmp_path, "device").read_text(encoding="utf-8")
    table = searched(r"<table class='sortable' id='all-runs'>(.*?)</table>", text, re.S).group(1)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert "device energy (J)" in headers and "device board" in headers
    assert ">107.1</td>" in table  # mkr1000's 102 J schedule, measured 5 % higher


def test_one_ram_budget_puts_the_runtime_chart_in_the_main_place(tmp_path):
    """With one RAM budget, the runtime chart takes the main place.

    With one RAM budget and three runtime budgets the RAM chart would be a column of bars: the
    runtime chart stands beside the table instead, and the RAM chart's old files go.
    """
    rows = sweep_rows()
    third = rows[rows["runtime_x"] == 1.5].assign(runtime_x=2.0)
    third["point_key"] = third["point_key"] + "|2x"
    rows = pd.concat([rows, third], ignore_index=True)
    rows = rows[rows["ram"] == "50%"]
    (tmp_path / "overhead_ram.png").write_bytes(PNG_MAGIC)
    text = build_report(rows, tmp_path, "one budget").read_text(encoding="utf-8")
    row = text[text.index("<div class='row'>") : text.index("id='reach'")]
    assert "id='chart-overhead_runtime'" in row and "chart-overhead_ram" not in text
    assert "RAM budget 50 % of keep-all&#x27;s peak" in text
    assert not (tmp_path / "overhead_ram.png").exists() and (tmp_path / "overhead_runtime.png").exists()


def test_budgets_that_read_the_same_share_one_position_on_the_x_axis():
    """A 35 % budget resolved to whole bytes is 34.9957 % of one model's peak and 35 % of another's: one tick, one place."""
    from poetsim.report.overhead import Axis

    axis = Axis.of(pd.Series([0.35, 0.349957, 0.5, 0.700022, 0.7, 1.0]), lambda v: f"{100 * v:.3g}%")
    assert axis.labels == ("35%", "50%", "70%", "100%")
    assert [axis.index(v) for v in (0.349957, 0.35, 0.700022, 0.7, 1.0)] == [0, 0, 2, 2, 3]


def test_budget_labels_lie_flat_where_they_fit_and_stand_upright_a_line_apart_where_not():
    """Four budgets in 400 px read flat; twenty in 200 px stand upright, every other one labelled, never closer than a line."""
    from poetsim.report.overhead import LABEL_LINE_PX, Axis

    label = lambda v: f"{100 * v:.3g}%"  # noqa: E731
    few = Axis.of(pd.Series([0.35, 0.5, 0.7, 1.0]), label).shown(400)
    assert few["values"] == [0, 1, 2, 3] and "labelAngle" not in few
    many = Axis.of(pd.Series([0.05 * k for k in range(1, 21)]), label)
    shown = many.shown(200)
    assert shown["labelAngle"] == -90 and shown["values"] == list(range(0, 20, 2))
    assert LABEL_LINE_PX > 200 / 20  # one position apart, upright labels would touch
    assert '"5%"' in shown["labelExpr"] and '"15%"' in shown["labelExpr"] and '"10%"' not in shown["labelExpr"]


def test_the_device_verdict_stands_on_a_line_of_its_own_in_the_headline_cell(tmp_path):
    """On one line `[device ok]` doubles a column's width; the headline puts it under the figure."""
    rows = sweep_rows()
    rows["device_ok"] = True
    rows["device_compute_s"] = rows["device_predicted_compute_s"] = 1.0
    text = build_report(rows, tmp_path, "device").read_text(encoding="utf-8")
    headline = text[text.index("<table class='headline'>") : text.index("</table>", text.index("<table class='headline'>"))]
    assert "<br><span class='mark'>device ok</span></td>" in headline and "[device ok]" not in headline


def test_the_table_of_every_run_leaves_out_columns_no_run_has_a_value_in(tmp_path):
    """Device columns that are empty in every run (a sweep run on no device) take no room; filled ones stay."""
    rows = sweep_rows()
    rows["device_energy_j"] = None
    rows["device_board"] = ""
    text = build_report(rows, tmp_path, "no device").read_text(encoding="utf-8")
    table = searched(r"<table class='sortable' id='all-runs'>(.*?)</table>", text, re.S).group(1)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert "energy (J)" in headers and not any(h.startswith("device") for h in headers)
    rows.loc[rows.index[0], "device_board"] = "qemu"
    text = build_report(rows, tmp_path, "one device run").read_text(encoding="utf-8")
    table = searched(r"<table class='sortable' id='all-runs'>(.*?)</table>", text, re.S).group(1)
    assert "device board" in re.findall(r"<th[^>]*>([^<]*)</th>", table)


def test_a_key_entry_wider_than_the_key_wraps_its_words_within_it():
    """On a phone an entry longer than the key is wide goes on under its mark, so the key never widens the chart."""
    from poetsim.report.key import Entry, key_chart

    text = "not proven optimal: the bar marks the proven lower bound"
    spec = key_chart([Entry("hybrid"), Entry(text)], width_px=200).to_dict()
    assert spec["width"] == 200
    data = next(iter(spec["datasets"].values()))
    lines = [row["text"] for row in data]
    assert lines[0] == "hybrid" and " ".join(lines[1:]) == text and len(lines) >= 4
    assert all(row["text_x"] + 6.2 * len(row["text"]) <= 200 for row in data)


def test_pareto_with_one_strategy_draws_no_empty_ring_layer():
    """Only hybrid has schedules: no layer of rings without data (the browser warns of an infinite extent)."""
    rows = sweep_rows()
    rows = rows[rows["strategy"] == "hybrid"]
    spec = drawn(pareto_chart(prepare(rows)))(FOOTER, 1240).to_dict()
    marks = [layer for layer in _layers(spec) if isinstance(layer.get("mark"), dict) and layer["mark"]["type"] == "point"]
    by_group = [m for m in marks if "datum.group" in json.dumps(m.get("transform", []))]
    assert len(by_group) == 1 and by_group[0]["mark"]["filled"] is True
