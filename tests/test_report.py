"""Charts and the HTML report: stage states by hand, offline files, findings computed from the data."""

import json
import re

import pandas as pd
import pytest

from poetsim.checker import check_schedule
from poetsim.costs import CostTable
from poetsim.errors import ScheduleError, UserInputError
from poetsim.graph import Node, TrainingGraph
from poetsim.pipeline import Problem, Run
from poetsim.profiles import load_platform
from poetsim.report import build_report, footer_text, save_chart, save_run_charts, schedule_chart, stage_states, timeline_chart
from poetsim.report.report import prepare, winners
from poetsim.schedule import Budgets, Compute, Free, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import simulate
from poetsim.units import RamSpec

C, F, PI, PO = Compute, Free, PageIn, PageOut
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CDN_SCRIPT = re.compile(r"<script[^>]*src=[\"']https?://", re.IGNORECASE)

# Seven nodes: a chain, with 5 reading 0 again and 6 reading 1 again, so 0 can be paged out and
# back in and 1 dropped and recomputed.
DEPS = [(), (0,), (1,), (2,), (3,), (4, 0), (5, 1)]
SIZES = [100, 200, 40, 10, 30, 50, 20]
MIXED = [
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
    return CostTable(output_bytes=graph.output_bytes, compute_s=(1.0,) * n, compute_j=(1.0,) * n,
                     page_in_s=(1.5,) * n, page_in_j=(0.5,) * n, page_out_s=(1.5,) * n, page_out_j=(0.5,) * n,
                     static_power_w=0.1, dma_channels=1)


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


def assert_offline_html(path, footer=FOOTER):
    text = path.read_text(encoding="utf-8")
    assert not CDN_SCRIPT.search(text), f"{path} loads a script from the network"
    assert "vegaEmbed" in text and len(text) > 300_000  # the Vega bundle is inline
    assert footer[:80] in text


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000


def embedded_rows(chart) -> int:
    return sum(len(rows) for rows in chart.to_dict()["datasets"].values())


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


def test_schedule_chart_saves_offline_html_and_png(seven, mixed, tmp_path):
    """stem.html opens without internet and carries the footer; stem.png is a real image."""
    chart = schedule_chart(mixed, seven, "seven: mixed", FOOTER)
    html, png = save_chart(chart, tmp_path / "charts", "schedule")
    assert (html.name, png.name) == ("schedule.html", "schedule.png")
    assert_offline_html(html)
    assert_png(png)


def test_schedule_chart_embeds_runs_not_cells():
    """A 300-node keep-all schedule (90,000 cells) embeds a few rows per node, not the grid."""
    n = 300
    graph = make_graph([()] + [(i,) for i in range(n - 1)], [1] * n, "chain")
    stages = [[C(t)] + ([F(t - 1)] if t else []) + ([F(t)] if t == n - 1 else []) for t in range(n)]
    schedule = Schedule("chain", n, Timing.OVERLAP, tuple(tuple(s) for s in stages))
    assert embedded_rows(schedule_chart(schedule, graph, "chain", FOOTER)) <= 4 * n


def test_timeline_chart_of_a_simulation_has_lanes_curve_and_budget(seven, mixed, tmp_path):
    """Compute and DMA lanes with every kind present, the RAM curve and the budget rule."""
    result = simulate(mixed, seven, make_costs(seven), ram_capacity_bytes=10_000)
    chart = timeline_chart(result, 360, "seven: timeline", FOOTER)
    rows = [row for rows in chart.to_dict()["datasets"].values() for row in rows]
    kinds = {row["kind"] for row in rows if "kind" in row}
    assert {"compute", "recompute", "page-in", "page-out"} <= kinds
    assert {row["resource"] for row in rows if "resource" in row} >= {"compute", "dma"}
    assert any(row.get("ram_bytes") == 360 and "label" in row for row in rows)
    assert max(row["ram_bytes"] for row in rows if "ram_bytes" in row and "label" not in row) == result.figures.peak_ram_bytes
    html, png = save_chart(chart, tmp_path, "timeline")
    assert_offline_html(html)
    assert_png(png)


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
    curve = [row["ram_bytes"] for rows in chart.to_dict()["datasets"].values() for row in rows if "ram_bytes" in row]
    assert max(curve) == result.figures.peak_ram_bytes


def test_save_run_charts_writes_schedule_and_timeline(seven, mixed, tmp_path):
    """A simulated run gets schedule.html/png and timeline.html/png with its timing in the footer."""
    costs = make_costs(seven)
    problem = Problem(seven, load_platform("rpi4"), costs, Budgets(400, 20.0), RamSpec(400, None, "400"), 2.0,
                      Timing.OVERLAP, 0)
    figures = check_schedule(mixed, seven, costs, Timing.OVERLAP)
    simulated = simulate(mixed, seven, costs, ram_capacity_bytes=10_000)
    run = Run(problem, "hybrid", "optimal", "", mixed, figures, figures, figures, simulated=simulated)
    paths = save_run_charts(run, tmp_path, "unit: hybrid")
    assert sorted(p.name for p in paths) == ["schedule.html", "schedule.png", "timeline.html", "timeline.png"]
    for path in paths:
        if path.suffix == ".png":
            assert_png(path)
        else:
            assert_offline_html(path, footer="Scenario: unit: hybrid")
            assert "timing: overlap" in path.read_text(encoding="utf-8")
    with pytest.raises(UserInputError, match="no schedule"):
        save_run_charts(Run(problem, "hybrid", "infeasible", "too small"), tmp_path, "unit")


# --- the sweep report --------------------------------------------------------------------------

KEEP_ALL_PEAK = 1_000_000
ENERGY_J = {"rpi4": 8.0, "mkr1000": 100.0}


def overheads(platform: str, runtime_x: float) -> dict:
    """Overhead (%) per strategy and RAM fraction; None = infeasible. On mkr1000, paging-only
    beats hybrid at 50 % (as when hybrid stops at a time limit with a gap)."""
    return {
        "keep-all": {0.25: None, 0.5: None, 1.0: 0.0},
        "hybrid": {0.25: 2.0, 0.5: 1.5 if platform == "mkr1000" else 0.5, 1.0: 0.0},
        "recompute-only": {0.25: None if runtime_x == 1.2 else 4.0, 0.5: 3.0, 1.0: 0.0},
        "paging-only": {0.25: 5.0, 0.5: 1.0, 1.0: 0.0},
    }


def sweep_rows(simulated: bool = True) -> pd.DataFrame:
    """Result rows as a sweep writes them: 2 platforms x 2 runtimes x 4 strategies x 3 RAM budgets,
    plus one point that failed before its budgets were resolved."""
    rows = []
    for platform, energy_j in ENERGY_J.items():
        for runtime_x in (1.2, 1.5):
            for strategy, by_ram in overheads(platform, runtime_x).items():
                for fraction, overhead in by_ram.items():
                    ok = overhead is not None
                    total_j = energy_j * (1 + overhead / 100) if ok else None
                    ram_bytes = int(fraction * KEEP_ALL_PEAK)
                    row = {
                        "scenario": "unit", "point_key": f"{platform}|{fraction}|{runtime_x}|{strategy}",
                        "model": "resnet18", "model_name": "resnet18-cifar", "platform": platform,
                        "ram": f"{fraction * 100:g}%", "ram_budget_bytes": ram_bytes, "runtime_x": runtime_x,
                        "deadline_s": runtime_x, "timing": "overlap", "strategy": strategy,
                        "status": ("baseline" if strategy == "keep-all" else "optimal") if ok else "infeasible",
                        "message": "" if ok else f"no schedule fits {ram_bytes:,} bytes",
                        "keep_all_peak_bytes": KEEP_ALL_PEAK, "keep_all_energy_j": energy_j,
                        "predicted_total_j": total_j, "overhead_pct": overhead,
                        "predicted_peak_ram_bytes": 0.97 * ram_bytes if ok else None,
                    }
                    if simulated:
                        row["simulated_total_j"] = total_j * 1.01 if ok else None
                    rows.append(row)
    rows.append({"scenario": "unit", "point_key": "failed", "model": "resnet18", "platform": "rpi4", "ram": "10%",
                 "runtime_x": 1.2, "strategy": "hybrid", "status": "failed",
                 "message": "internal error ZeroDivisionError: division by zero (model.py:1)"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    page = build_report(sweep_rows(), directory, "unit sweep")
    return page, page.read_text(encoding="utf-8")


def test_report_is_one_offline_page_with_a_png_per_chart(report):
    """report.html has no CDN script and carries the footer; each of the five charts has a PNG."""
    page, text = report
    assert page.name == "report.html"
    assert_offline_html(page, footer=footer_text("unit sweep", ["overlap"]))
    pngs = sorted(p.name for p in page.parent.glob("*.png"))
    assert pngs == ["overhead_platform.png", "overhead_ram.png", "overhead_runtime.png", "pareto.png", "prediction.png"]
    for name in pngs:
        assert_png(page.parent / name)
    specs = json.loads(re.search(r"const specs = (\{.*?\});\n", text).group(1).replace("<\\/", "</"))
    assert len(specs) == 5
    assert all("Assumptions: activation RAM only" in json.dumps(spec) for spec in specs.values())


def test_winners_are_computed_from_the_energies():
    """Lowest energy per budget point; equal energies are a tie, not a win."""
    table = winners(prepare(sweep_rows())).set_index(["platform_label", "runtime_x", "ram_fraction"])["winner"]
    assert table[("mkr1000", 1.2, 0.5)] == "paging-only"
    assert table[("rpi4", 1.2, 0.5)] == "hybrid"
    assert table[("rpi4", 1.5, 0.25)] == "hybrid"
    assert table[("rpi4", 1.2, 1.0)] == "hybrid = keep-all = paging-only = recompute-only"


def test_report_says_which_strategy_wins_where(report):
    """The text names the winner per platform and RAM budget, as computed from the energies."""
    _, text = report
    assert "resnet18-cifar on mkr1000, runtime budget 1.2x, overlap timing: lowest energy: hybrid at 25 %; paging-only at 50 %" in text
    assert "resnet18-cifar on rpi4, runtime budget 1.2x, overlap timing: lowest energy: hybrid at 25 % to 50 %" in text


def test_report_lists_infeasible_and_failed_points(report):
    """Runs without a schedule are listed with their reason and where the strategy stops."""
    _, text = report
    assert "no schedule fits 250,000 bytes" in text
    assert "division by zero" in text
    assert "recompute-only has no schedule (infeasible) at RAM budgets up to 25 % of keep-all" in text
    assert "keep-all has no schedule (infeasible) at RAM budgets up to 50 % of keep-all; its first schedule is at 100 %" in text


def test_report_without_simulation_skips_that_chart_and_says_so(tmp_path):
    """No simulated energy: no prediction chart, and the page explains why."""
    rows = sweep_rows(simulated=False)
    rows = rows[(rows["platform"] == "rpi4") & (rows["runtime_x"] == 1.2)]
    page = build_report(rows, tmp_path, "no sim")
    text = page.read_text(encoding="utf-8")
    assert "No simulated energy in the results" in text
    assert "Only one platform in the results" in text
    assert not (tmp_path / "prediction.png").exists()
    assert_png(tmp_path / "overhead_ram.png")


def test_empty_results_are_a_user_error(tmp_path):
    with pytest.raises(UserInputError, match="empty"):
        build_report(sweep_rows().iloc[0:0], tmp_path, "empty")


def test_pareto_front_keeps_only_non_dominated_schedules():
    """On mkr1000 at 1.2x: 25 % hybrid (102 J), 50 % paging-only (101 J), 100 % (100 J) form the front."""
    from poetsim.report.sweep_charts import pareto_chart

    rows = sweep_rows()
    frame = prepare(rows[(rows["platform"] == "mkr1000") & (rows["runtime_x"] == 1.2)])
    points = [row for rows in pareto_chart(frame, FOOTER).chart.to_dict()["datasets"].values() for row in rows]
    front = sorted((round(p["peak"], 4), round(p["energy_j"], 6)) for p in points if p["front"])
    assert front == [(0.2425, 102.0), (0.485, 101.0), (0.97, 100.0)]
