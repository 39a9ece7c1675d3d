"""The simulator: ideal machine = overlap prediction, stalls, bus contention, rejections, files."""

import json
import math
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poetsim import optimiser
from benchmarks.simulator import chain_schedule, training_chain
from poetsim.checker import check_schedule, compare_figures
from poetsim.costs import CostTable, node_costs
from poetsim.errors import SimulationError
from poetsim.graph import Node, TrainingGraph
from poetsim.profiles import Platform, load_platform
from poetsim.schedule import Budgets, Compute, Free, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import TRACE_COLUMNS, ideal_costs, simulate, write_trace
from poetsim.zoo import build_model

C, F, PI, PO = Compute, Free, PageIn, PageOut


def make_graph(deps, output_bytes, flops=None, name="g") -> TrainingGraph:
    """A graph from per-node dependency tuples, output sizes and (optionally) FLOPs."""
    flops = flops or [0.0] * len(deps)
    return TrainingGraph.create(
        name, [Node(i, f"n{i}", "op", False, tuple(d), b, flops=f) for i, (d, b, f) in enumerate(zip(deps, output_bytes, flops))]
    )


def make_costs(graph, compute_s, paging=None, static_power_w=0.0, dma_channels=1) -> CostTable:
    """Compute energy = 1 J per second of compute; `paging` maps node -> (out_s, out_j, in_s, in_j)."""
    n = len(graph)
    page = [(1.0, 1.0, 1.0, 1.0)] * n
    for node, figures in (paging or {}).items():
        page[node] = figures
    compute_s = tuple(float(x) for x in compute_s)
    return CostTable(
        output_bytes=graph.output_bytes, compute_s=compute_s, compute_j=compute_s,
        page_out_s=tuple(p[0] for p in page), page_out_j=tuple(p[1] for p in page),
        page_in_s=tuple(p[2] for p in page), page_in_j=tuple(p[3] for p in page),
        static_power_w=static_power_w, dma_channels=dma_channels,
    )


def schedule_of(graph, stages, timing=Timing.OVERLAP) -> Schedule:
    return Schedule(graph.name, len(graph), timing, tuple(tuple(s) for s in stages))


def make_platform(ram_bytes=10**6, latency_s=0.0, bytes_per_s=100.0, bus_bytes_per_s=200.0) -> Platform:
    """A toy platform: 1 FLOP/s, 1 W compute, storage at `bytes_per_s` after `latency_s`."""
    transfer = {"latency_s": latency_s, "bytes_per_s": bytes_per_s}
    data = {
        "name": "toy", "title": "toy", "ram_bytes": ram_bytes, "static_power_w": 0.0,
        "compute": {"flops_per_s": 1.0, "power_w": 1.0},
        "storage": {"kind": "toy", "page_in": transfer, "page_out": transfer, "power_w": 1.0},
        "dma_channels": 1, "memory_bus_bytes_per_s": bus_bytes_per_s,
    }
    paths = ["ram_bytes", "static_power_w", "compute.flops_per_s", "compute.power_w", "storage.power_w",
             "dma_channels", "memory_bus_bytes_per_s"]
    paths += [f"storage.{d}.{f}" for d in ("page_in", "page_out") for f in ("latency_s", "bytes_per_s")]
    return Platform.model_validate({**data, "sources": {p: "test" for p in paths}})


# Six nodes shaped like training (the checker's fixture): 4 reads 0 again, so 0 can be kept,
# recomputed or paged between stage 1 and stage 4.
DEPS = [(), (0,), (1,), (2,), (3, 0), (4,)]
SIZES = [100, 200, 40, 10, 50, 20]
COMPUTE_S = [1, 2, 1, 1, 3, 1]
RECOMPUTE = [[C(0)], [C(1), F(0)], [C(2), F(1)], [C(3), F(2)], [C(0), C(4), F(0), F(3)], [C(5), F(4), F(5)]]
PAGING = [[C(0)], [C(1)], [PO(0), F(0), C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]
# Paging with the page-out issued in stage 1 and 0 freed at the end of that stage.
PAGING_EARLY = [[C(0)], [PO(0), C(1), F(0)], [C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]


@pytest.fixture
def six():
    return make_graph(DEPS, SIZES, name="six")


@pytest.fixture
def six_costs(six):
    """Node 0 pages out in 1.5 s for 0.3 J and back in in 2.5 s for 0.5 J; static 0.5 W."""
    return make_costs(six, COMPUTE_S, paging={0: (1.5, 0.3, 2.5, 0.5)}, static_power_w=0.5)


@pytest.mark.parametrize("stages", [RECOMPUTE, PAGING, PAGING_EARLY], ids=["recompute", "paging", "paging-early"])
def test_ideal_machine_reproduces_the_overlap_prediction(six, six_costs, stages):
    """Ideal DMA, no bus contention: peak, makespan and every energy equal the checker's overlap figures."""
    schedule, costs = schedule_of(six, stages), ideal_costs(six_costs)
    predicted = check_schedule(schedule, six, costs, Timing.OVERLAP)
    result = simulate(schedule, six, costs)
    assert compare_figures(predicted, result.figures, rtol=1e-9) == []
    assert result.figures.total_j == pytest.approx(predicted.total_j, rel=1e-9)
    assert result.makespan_s == pytest.approx(predicted.runtime_s, rel=1e-9)
    assert result.stall_s == 0.0


def test_recomputation_is_charged_as_recompute_energy(six, six_costs):
    """Hand-computed: node 0 runs twice, so 1 J of recompute, and the trace says which run is which."""
    result = simulate(schedule_of(six, RECOMPUTE), six, six_costs)
    assert (result.figures.compute_j, result.figures.recompute_j, result.figures.recomputations) == (9.0, 1.0, 1)
    runs = result.trace[result.trace.resource == "compute"]
    assert list(runs[runs.node == 0].kind) == ["compute", "recompute"]
    assert result.figures.peak_ram_bytes == 300 and result.makespan_s == 10.0
    assert result.figures.static_j == pytest.approx(5.0)


def keep_all_stages(graph):
    """Every node once; an output is freed right after its last reader (or its own step)."""
    return [
        [C(t)] + [F(i) for i in sorted({*graph.nodes[t].deps, t}) if graph.last_use[i] == t]
        for t in range(len(graph))
    ]


@st.composite
def random_graphs(draw):
    n = draw(st.integers(1, 20))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    sizes = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    seconds = draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n))
    graph = make_graph(deps, sizes, name="random")
    return graph, make_costs(graph, seconds, static_power_w=0.25)


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_keep_all_schedule_of_any_graph_simulates_as_predicted(case):
    """Invariant: keep-all of any DAG replays with the checker's peak, makespan and energy."""
    graph, costs = case
    schedule = schedule_of(graph, keep_all_stages(graph))
    result = simulate(schedule, graph, costs)
    assert compare_figures(check_schedule(schedule, graph, costs, Timing.OVERLAP), result.figures, rtol=1e-9) == []
    assert result.figures.peak_ram_bytes == graph.keep_all_peak_bytes


def test_page_in_stall_overruns_the_compute_only_deadline(six, six_costs):
    """Real DMA: the paper's timing says 9 s, but compute 4 waits 2 s for 0's page-in.

    Page-out of 0 runs 3-4.5 s (stage 2); the page-in issued at 4 s waits for it and runs
    4.5-7 s; compute 4 could start at 5 s, so it stalls until 7 s: makespan 11 s.
    """
    schedule = schedule_of(six, PAGING, Timing.COMPUTE_ONLY)
    paper = check_schedule(schedule, six, six_costs, Timing.COMPUTE_ONLY)
    result = simulate(schedule, six, six_costs, budgets=Budgets(ram_bytes=10**6, runtime_s=paper.runtime_s))
    assert paper.runtime_s == 9.0
    assert result.makespan_s == pytest.approx(11.0)
    assert result.makespan_s - paper.runtime_s == pytest.approx(2.0)
    assert result.stall_s == pytest.approx(2.0)
    assert result.over_deadline and not result.over_budget
    stalls = result.trace[result.trace.kind == "stall"]
    assert stalls[["time_s", "end_s", "resource", "node"]].values.tolist() == [[5.0, 7.0, "compute", 4]]
    page_in = result.trace[result.trace.kind == "page_in"].iloc[0]
    assert (page_in.time_s, page_in.end_s) == (4.5, 7.0)
    assert result.figures.static_j == pytest.approx(0.5 * 11.0)
    assert result.compute_busy == pytest.approx(9.0 / 11.0)
    assert result.dma_busy == pytest.approx(4.0 / 11.0)


def test_allocation_waits_for_ram_held_by_a_page_out(six, six_costs):
    """Capacity 300: compute 2 needs 40 bytes while 0's freed buffer is still being written out.

    It waits 3-4.5 s for the page-out to end (a RAM stall), which shifts everything after it:
    page-in 5.5-8 s, compute 4 stalls 6.5-8 s, makespan 12 s, peak exactly the capacity.
    """
    result = simulate(schedule_of(six, PAGING), six, six_costs, ram_capacity_bytes=300)
    stalls = result.trace[result.trace.kind == "stall"]
    assert stalls[["time_s", "end_s", "resource", "node"]].values.tolist() == [
        [3.0, 4.5, "ram", 2], [6.5, 8.0, "compute", 4]]
    assert result.stall_s == pytest.approx(3.0)
    assert result.makespan_s == pytest.approx(12.0)
    assert result.figures.peak_ram_bytes == 300
    assert result.ram_curve.ram_bytes.max() == 300


def test_peak_over_the_budget_is_a_flag_not_an_error(six, six_costs):
    """A peak of 340 bytes against a 320-byte budget sets over_budget and still returns a result."""
    result = simulate(schedule_of(six, PAGING), six, ideal_costs(six_costs), budgets=Budgets(320, 100.0))
    assert result.figures.peak_ram_bytes == 340
    assert result.over_budget and not result.over_deadline


def contention_case(latency_s):
    """Node 0 (100 B, 1 FLOP) then node 1 (300 B, 2 FLOP) reading it; 0 is paged out in stage 1.

    On the toy platform compute 1 moves 400 B in 2 s (200 B/s) while the page-out moves 100 B at
    100 B/s after its latency: 300 B/s of demand on a 200 B/s bus.
    """
    graph = make_graph([(), (0,)], [100, 300], flops=[1.0, 2.0], name="contention")
    platform = make_platform(latency_s=latency_s, bus_bytes_per_s=200.0)
    schedule = schedule_of(graph, [[C(0)], [PO(0), C(1), F(0), F(1)]])
    return schedule, graph, node_costs(graph, platform), platform


def test_bus_contention_slows_both_activities_by_the_fluid_share():
    """Demand 300 B/s on a 200 B/s bus: both run at 2/3 speed while they overlap.

    From 1 s: the page-out's 1 s of nominal work takes 1.5 s (ends 2.5 s); by then compute 1
    has done 1 s of its 2, and finishes the rest alone: 3.5 s instead of the nominal 3 s.
    """
    schedule, graph, costs, platform = contention_case(latency_s=0.0)
    result = simulate(schedule, graph, costs, platform)
    rows = result.trace.set_index("kind")
    assert rows.loc["page_out", "end_s"] == pytest.approx(2.5)
    assert rows.loc["compute"].set_index("node").loc[1, "end_s"] == pytest.approx(3.5)
    assert result.makespan_s == pytest.approx(3.5)
    assert result.bus_busy == pytest.approx((100 + 100 + 400) / (200 * 3.5))
    # Energy is the cost table's: contention stretches time, not the per-operation energy.
    assert result.figures.compute_j == pytest.approx(3.0) and result.figures.page_out_j == pytest.approx(1.0)


def test_transfer_latency_does_not_use_the_bus():
    """With 0.5 s latency the page-out joins the bus at 1.5 s; compute 1 has done 0.5 s alone.

    Then both run at 2/3: the page-out's 1 s of bus work ends at 3.0 s, compute 1 has 0.5 s
    left and ends at 3.5 s.
    """
    schedule, graph, costs, platform = contention_case(latency_s=0.5)
    result = simulate(schedule, graph, costs, platform)
    page_out = result.trace[result.trace.kind == "page_out"].iloc[0]
    assert (page_out.time_s, page_out.end_s) == pytest.approx((1.0, 3.0))
    assert result.makespan_s == pytest.approx(3.5)


def test_no_slowdown_when_demand_fits_the_bus():
    """A 300 B/s bus carries both at full speed: everything ends at its nominal time (3 s)."""
    schedule, graph, costs, platform = contention_case(latency_s=0.0)
    assert simulate(schedule, graph, costs, platform, bus_bytes_per_s=300.0).makespan_s == pytest.approx(3.0)
    assert simulate(schedule, graph, costs, platform, bus_bytes_per_s=math.inf).makespan_s == pytest.approx(3.0)


@pytest.mark.parametrize("channels, makespan_s, second_start_s", [(1, 6.0, 4.0), (2, 4.0, 2.0)])
def test_transfers_queue_for_dma_channels(channels, makespan_s, second_start_s):
    """Two 2 s page-outs issued at 2 s: one channel runs them back to back, two in parallel."""
    graph = make_graph([(), (), (), ()], [10, 10, 10, 10], name="queue")
    costs = make_costs(graph, [1, 1, 1, 1], paging={0: (2.0, 1.0, 1.0, 1.0), 1: (2.0, 1.0, 1.0, 1.0)},
                       dma_channels=channels)
    stages = [[C(0)], [C(1)], [PO(0), PO(1), C(2), F(0), F(1)], [C(3), F(2), F(3)]]
    result = simulate(schedule_of(graph, stages), graph, costs)
    starts = sorted(result.trace[result.trace.resource == "dma"].time_s)
    assert starts == [2.0, second_start_s]
    assert result.makespan_s == makespan_s
    assert result.dma_busy == pytest.approx(4.0 / (channels * makespan_s))
    assert result.ram_curve.ram_bytes.iloc[-1] == 0


def test_missing_input_is_rejected(six, six_costs):
    """Compute 4 reads 0, which was freed and neither recomputed nor paged in."""
    stages = [[C(0)], [C(1), F(0)], [C(2), F(1)], [C(3), F(2)], [C(4), F(3)], [C(5), F(4), F(5)]]
    with pytest.raises(SimulationError, match=r"stage 4, Compute\(4\) .*input 0 is missing"):
        simulate(schedule_of(six, stages), six, six_costs)


def test_page_in_of_something_never_paged_out_is_rejected(six, six_costs):
    stages = [[C(0)], [C(1), F(0)], [C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]
    with pytest.raises(SimulationError, match=r"stage 3, PageIn\(0\) .*node 0 was never paged out"):
        simulate(schedule_of(six, stages), six, six_costs)


def test_ram_overdraft_is_rejected_with_the_bytes_needed_and_free(six, six_costs):
    """Capacity 250: computing 1 (200 B) beside 0 (100 B) does not fit and nothing is pending."""
    with pytest.raises(SimulationError, match=r"stage 1, Compute\(1\) .*needs 200 bytes but only 150 of 250 bytes are free"):
        simulate(schedule_of(six, RECOMPUTE), six, six_costs, ram_capacity_bytes=250)


def test_platform_ram_is_the_default_capacity(six, six_costs):
    """Without an explicit capacity the platform's RAM (250 bytes here) is the limit."""
    with pytest.raises(SimulationError, match="RAM overdraft"):
        simulate(schedule_of(six, RECOMPUTE), six, six_costs, make_platform(ram_bytes=250))


def test_write_trace_writes_the_trace_and_the_summary(six, six_costs, tmp_path):
    result = simulate(schedule_of(six, PAGING), six, six_costs)
    write_trace(result, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    assert tuple(trace.columns) == TRACE_COLUMNS
    assert len(trace) == len(result.trace)
    assert set(trace.kind) == {"alloc", "compute", "free", "page_in", "page_out", "stall"}
    # The RAM curve is the running sum of allocations and frees.
    ram = trace[trace.resource == "ram"]
    running = (ram.bytes.where(ram.kind == "alloc", -ram.bytes)).cumsum()
    assert running.max() == result.figures.peak_ram_bytes and running.iloc[-1] == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["makespan_s"] == pytest.approx(11.0)
    assert summary["figures"]["total_j"] == pytest.approx(result.figures.total_j)
    assert summary["figures"]["peak_ram_bytes"] == 340


@pytest.mark.parametrize("last_stage, makespan_s, free_at_s", [
    ([F(0), C(3), F(3)], 5.0, 5.0),              # freed while still landing: released when it lands
    ([PO(0), F(0), C(3), F(3)], 5.5, 5.5),       # paged out again: waits for the landing, then 0.5 s
], ids=["free", "page-out"])
def test_buffers_of_a_page_in_in_flight_wait_for_it(last_stage, makespan_s, free_at_s):
    """Page-in of 0 runs 2-5 s; stage 3 (from 3 s) frees or pages out 0 while it is still landing."""
    graph = make_graph([(), (), (), ()], [10, 10, 10, 10], name="landing")
    costs = make_costs(graph, [1, 1, 1, 1], paging={0: (0.5, 1.0, 3.0, 1.0)})
    stages = [[C(0)], [PO(0), C(1), F(0), F(1)], [PI(0), C(2), F(2)], last_stage]
    schedule = schedule_of(graph, stages)
    check_schedule(schedule, graph, costs, Timing.OVERLAP)  # valid under the stage semantics
    result = simulate(schedule, graph, costs)
    frees = result.trace[(result.trace.kind == "free") & (result.trace.node == 0)]
    assert list(frees.time_s) == [2.0, free_at_s]
    assert result.makespan_s == makespan_s
    assert result.ram_curve.ram_bytes.iloc[-1] == 0


def test_long_synthetic_chain_matches_the_prediction_on_an_ideal_machine():
    """The benchmark's chain (paging every even activation, recomputing every odd one)."""
    graph = training_chain(40)
    schedule = chain_schedule(graph)
    costs = ideal_costs(make_costs(graph, [0.5 + (i % 7) / 10 for i in range(len(graph))], static_power_w=1.0))
    result = simulate(schedule, graph, costs)
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    assert compare_figures(predicted, result.figures, rtol=1e-9) == []
    assert result.figures.page_ins == 20 and result.figures.recomputations == 19


@pytest.mark.parametrize("baseline", ["keep_all", "checkpoint_sqrt"])
def test_zoo_baselines_match_the_prediction_on_an_ideal_machine(baseline):
    """ResNet-18 on the rpi4 profile: the optimiser's baselines replay exactly as checked."""
    graph, platform = build_model("resnet18"), load_platform("rpi4")
    costs = ideal_costs(node_costs(graph, platform))
    schedule, _ = getattr(optimiser, baseline)(graph, costs, Timing.OVERLAP)
    result = simulate(schedule, graph, costs, platform, bus_bytes_per_s=math.inf)
    assert compare_figures(check_schedule(schedule, graph, costs, Timing.OVERLAP), result.figures, rtol=1e-9) == []


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 30), st.floats(1e6, 1e9), st.integers(1, 3))
def test_narrow_bus_never_speeds_anything_up_nor_exceeds_its_bandwidth(forward_nodes, bus_bytes_per_s, channels):
    """Fluid-bus invariants under heavy contention: no operator or transfer ends before its nominal time,
    and the bus never carries more than bandwidth x makespan."""
    graph, platform = training_chain(forward_nodes), load_platform("rpi4")
    schedule = chain_schedule(graph)
    costs = replace(node_costs(graph, platform), dma_channels=channels)
    narrow = simulate(schedule, graph, costs, platform, bus_bytes_per_s=bus_bytes_per_s)
    nominal_s = {"compute": costs.compute_s, "recompute": costs.compute_s, "page_in": costs.page_in_s, "page_out": costs.page_out_s}
    runs = narrow.trace[narrow.trace.kind.isin(list(nominal_s))]
    nominal = [nominal_s[kind][node] for kind, node in zip(runs.kind, runs.node)]
    assert (runs.duration_s >= pd.Series(nominal, index=runs.index) * (1 - 1e-9)).all()
    assert narrow.bus_busy <= 1 + 1e-9

