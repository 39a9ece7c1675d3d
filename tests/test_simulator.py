"""The simulator: both replay modes by hand, agreement with the checker, waits, contention, rejections, files."""

import json
import math
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.simulator import chain_schedule, training_chain
from poetsim import optimiser
from poetsim.errors import ScheduleError, SimulationError, UserInputError
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.graphs.zoo import build_model
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.optimiser.baselines.simple import greedy_plan
from poetsim.optimiser.plans import plan as plans
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.costs import CostTable, node_costs
from poetsim.schedule.model import Budgets, Compute, Free, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import TRACE_COLUMNS, WAIT_CAUSES, Mode, simulate, write_trace
from poetsim.simulator.comparison import compare
from poetsim.simulator.device import DONE, Buffer, Device, Transfer
from poetsim.simulator.trace import PAGE_OUT, Trace

from optimiser_cases import HYBRID, PAGING_ONLY, cases

C, F, PI, PO = Compute, Free, PageIn, PageOut
BARRIER, FREE = Mode.BARRIER, Mode.FREE_RUNNING


def make_graph(deps, output_bytes, flops=None, name="g") -> TrainingGraph:
    """A graph from per-node dependency tuples, output sizes and (optionally) FLOPs."""
    flops = flops or [0.0] * len(deps)
    return TrainingGraph.create(
        name, [Node(i, f"n{i}", "op", False, tuple(d), b, flops=f) for i, (d, b, f) in enumerate(zip(deps, output_bytes, flops))]
    )


def make_costs(graph, compute_s, paging=None, static_power_w=0.0, dma_channels=1) -> CostTable:
    """Compute energy = 1 J per second of compute; `paging` maps node -> (out_s, out_j, in_s, in_j), else 1 s, 1 J."""
    n = len(graph)
    page = [(1.0, 1.0, 1.0, 1.0)] * n
    for node, figures in (paging or {}).items():
        page[node] = figures
    compute_s = tuple(float(x) for x in compute_s)
    return CostTable(
        output_bytes=graph.output_bytes,
        compute_s=compute_s,
        compute_j=compute_s,
        page_out_s=tuple(p[0] for p in page),
        page_out_j=tuple(p[1] for p in page),
        page_in_s=tuple(p[2] for p in page),
        page_in_j=tuple(p[3] for p in page),
        static_power_w=static_power_w,
        dma_channels=dma_channels,
    )


def schedule_of(graph, stages, timing=Timing.OVERLAP) -> Schedule:
    return Schedule(graph.name, len(graph), timing, tuple(tuple(s) for s in stages))


def make_platform(ram_bytes=10**6, latency_s=0.0, bytes_per_s=100.0, bus_bytes_per_s=200.0) -> Platform:
    """A toy platform: 1 FLOP/s, 1 W compute, storage at `bytes_per_s` after `latency_s`."""
    transfer = {"latency_s": latency_s, "bytes_per_s": bytes_per_s}
    data = {
        "name": "toy",
        "title": "toy",
        "ram_bytes": ram_bytes,
        "static_power_w": 0.0,
        "compute": {"flops_per_s": 1.0, "power_w": 1.0},
        "storage": {"kind": "toy", "page_in": transfer, "page_out": transfer, "power_w": 1.0},
        "dma_channels": 1,
        "memory_bus_bytes_per_s": bus_bytes_per_s,
    }
    paths = [
        "ram_bytes",
        "static_power_w",
        "compute.flops_per_s",
        "compute.power_w",
        "storage.power_w",
        "dma_channels",
        "memory_bus_bytes_per_s",
    ]
    paths += [f"storage.{d}.{f}" for d in ("page_in", "page_out") for f in ("latency_s", "bytes_per_s")]
    return Platform.model_validate({**data, "sources": {p: "test" for p in paths}})


def rows(result, kind=None, cause=None, columns=("time_s", "end_s", "resource", "node")) -> list[list]:
    """The trace rows of one kind (and cause), as lists of `columns`."""
    trace = result.trace
    if kind is not None:
        trace = trace[trace.kind == kind]
    if cause is not None:
        trace = trace[trace.cause == cause]
    return trace[list(columns)].values.tolist()


def flat(table: list[list]) -> list:
    return [value for row in table for value in row]


# --- the three-node case: a page-out that outlives its stage -------------------------------------

# a (1000 B) -> b (1000 B) -> c (2000 B), 1 s each; a is paged out in stage 1, taking 2 s.
# The stage model holds a's buffer to the end of stage 1, so stage 2 peaks at b + c = 3000 B.
# Without a barrier the old simulator started c at 2 s while a was still being written: 4000 B.
THREE_STAGES = [[C(0)], [PO(0), C(1), F(0)], [C(2), F(1), F(2)]]


@pytest.fixture
def three():
    graph = make_graph([(), (0,), (1,)], [1000, 1000, 2000], name="three")
    return graph, make_costs(graph, [1, 1, 1], paging={0: (2.0, 1.0, 1.0, 1.0)}), schedule_of(graph, THREE_STAGES)


def test_three_nodes_in_barrier_mode_run_as_the_stage_model(three):
    """Three nodes in barrier mode run as the stage model says.

    Stage 1 lasts the page-out's 2 s (the walker waits 2-3 s at the barrier), a is released at
    3 s, and c runs 3-4 s beside b alone: makespan 4 s, peak 3000 B, as the checker says.
    """
    graph, costs, schedule = three
    result = simulate(schedule, graph, costs, budgets=Budgets(3000, 4.0))
    assert result.mode == "barrier"
    assert (result.makespan_s, result.figures.peak_ram_bytes) == (4.0, 3000)
    assert (result.stage_model.runtime_s, result.stage_model.peak_ram_bytes) == (4.0, 3000)
    assert rows(result, "stall") == [[2.0, 3.0, "compute", 1]]
    assert rows(result, "free", columns=("time_s", "node")) == [[3.0, 0], [4.0, 1], [4.0, 2]]
    assert result.delta.total_s == 0.0 and not result.over_budget and not result.over_deadline


def test_three_nodes_free_running_wait_for_the_ram_the_page_out_holds(three):
    """Budget 3000 B: c cannot start at 2 s beside a's buffer, so it waits for the page-out (2-3 s).

    Makespan 4 s: the stage model's 1 s of DMA-bound stage 1 is overlapped (-1 s) and paid back
    as a 1 s wait for RAM (+1 s). The peak never passes the budget.
    """
    graph, costs, schedule = three
    result = simulate(schedule, graph, costs, mode=FREE, budgets=Budgets(3000, 4.0))
    assert result.mode == "free-running"
    assert (result.makespan_s, result.figures.peak_ram_bytes) == (4.0, 3000)
    assert rows(result, "stall", columns=("time_s", "end_s", "resource", "node", "bytes", "cause")) == [
        [2.0, 3.0, "ram", 2, 2000, "ram"]
    ]
    assert (result.delta.overlap_s, result.delta.ram_wait_s, result.delta.total_s) == (-1.0, 1.0, 0.0)
    assert result.stall_s == 1.0 and result.waits_s["ram"] == 1.0


def test_three_nodes_free_running_with_room_overlap_and_peak_at_4000_bytes(three):
    """Three nodes free-running with room: all overlap, and a peak of 4000 bytes.

    Budget 4000 B: c runs 2-3 s while a is still written out. Makespan 3 s (1 s under the stage
    model, all overlap) and a peak of 4000 B, of which a's 1000 B were freed but still held.
    """
    graph, costs, schedule = three
    result = simulate(schedule, graph, costs, mode=FREE, budgets=Budgets(4000, 4.0))
    assert (result.makespan_s, result.figures.peak_ram_bytes) == (3.0, 4000)
    assert result.pending_at_peak_bytes == 1000
    assert result.delta == replace(result.delta, overlap_s=-1.0) and result.delta.total_s == -1.0
    assert result.ram_curve.ram_bytes.max() == 4000


# --- the six-node case: paging that stalls compute -------------------------------------------------

# Six nodes shaped like training: 4 reads 0 again, so 0 can be kept, recomputed or paged.
DEPS = [(), (0,), (1,), (2,), (3, 0), (4,)]
SIZES = [100, 200, 40, 10, 50, 20]
COMPUTE_S = [1, 2, 1, 1, 3, 1]
RECOMPUTE = [[C(0)], [C(1), F(0)], [C(2), F(1)], [C(3), F(2)], [C(0), C(4), F(0), F(3)], [C(5), F(4), F(5)]]
PAGING = [[C(0)], [C(1)], [PO(0), F(0), C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]


@pytest.fixture
def six():
    return make_graph(DEPS, SIZES, name="six")


@pytest.fixture
def six_costs(six):
    """Node 0 pages out in 1.5 s for 0.3 J and back in in 2.5 s for 0.5 J; static 0.5 W."""
    return make_costs(six, COMPUTE_S, paging={0: (1.5, 0.3, 2.5, 0.5)}, static_power_w=0.5)


@pytest.mark.parametrize("stages", [RECOMPUTE, PAGING], ids=["recompute", "paging"])
def test_barrier_mode_reproduces_the_overlap_figures_with_real_transfer_times(six, six_costs, stages):
    """No bus contention, one channel: peak, makespan and every energy are the checker's `overlap` figures."""
    schedule = schedule_of(six, stages)
    result = simulate(schedule, six, six_costs)
    assert compare_figures(check_schedule(schedule, six, six_costs, Timing.OVERLAP), result.figures, rtol=1e-12) == []
    assert result.stall_s == 0.0 and result.delta.total_s == 0.0


def test_barrier_mode_paging_by_hand(six, six_costs):
    """Stage 2 lasts the 1.5 s page-out (3-4.5 s), stage 3 the 2.5 s page-in (4.5-7 s): makespan 11 s."""
    result = simulate(schedule_of(six, PAGING), six, six_costs)
    assert rows(result, "page_out", columns=("time_s", "end_s")) == [[3.0, 4.5]]
    assert rows(result, "page_in", columns=("time_s", "end_s")) == [[4.5, 7.0]]
    assert rows(result, "stall", columns=("time_s", "end_s", "node", "cause")) == [
        [4.0, 4.5, 2, "barrier"],
        [5.5, 7.0, 3, "barrier"],
    ]
    assert result.makespan_s == 11.0 and result.waits_s["barrier"] == 2.0
    assert result.figures.static_j == pytest.approx(0.5 * 11.0)


def test_recomputation_is_charged_as_recompute_energy(six, six_costs):
    """Node 0 runs twice, so 1 J of recompute, and the trace says which run is which."""
    result = simulate(schedule_of(six, RECOMPUTE), six, six_costs)
    assert (result.figures.compute_j, result.figures.recompute_j, result.figures.recomputations) == (9.0, 1.0, 1)
    assert rows(result, columns=("node", "kind"))[:2] == [[0, "alloc"], [0, "compute"]]
    assert [kind for node, kind in rows(result, columns=("node", "kind")) if node == 0 and kind.endswith("compute")] == [
        "compute",
        "recompute",
    ]
    assert result.figures.peak_ram_bytes == 300 and result.makespan_s == 10.0


@pytest.mark.parametrize("channels, cause, overlap_s", [(1, "channel", -2.0), (2, "source", -0.25)])
def test_free_running_page_in_waits_for_its_page_out_then_compute_waits_for_it(six, six_costs, channels, cause, overlap_s):
    """Free-running, a page-in waits for its page-out, then a compute waits for the page-in.

    The page-out runs 3-4.5 s; the page-in issued at 4 s starts at 4.5 s (behind it on one
    channel, or on a second channel waiting for its source) and lands at 7 s; compute 4, ready
    at 5 s, waits 5-7 s for its input: makespan 11 s. On one channel the stage model also says
    11 s: the -2 s of DMA-bound stages overlapped are paid back as a 2 s input wait. On two it
    says 9.25 s (DMA time / 2, even for a single transfer), so only 0.25 s of DMA-bound stage is
    overlapped.
    """
    costs = replace(six_costs, dma_channels=channels)
    result = simulate(schedule_of(six, PAGING), six, costs, mode=FREE)
    assert rows(result, "stall", columns=("time_s", "end_s", "resource", "node", "cause")) == [
        [4.0, 4.5, "dma-queue", 0, cause],
        [5.0, 7.0, "compute", 4, "input"],
    ]
    assert rows(result, "page_in", columns=("time_s", "end_s")) == [[4.5, 7.0]]
    assert result.makespan_s == 11.0
    assert (result.delta.overlap_s, result.delta.input_wait_s) == (overlap_s, 2.0)
    assert result.delta.total_s == result.makespan_s - result.stage_model.runtime_s == 2.0 + overlap_s
    assert result.stall_s == 2.0 and result.waits_s[cause] == 0.5


def test_free_running_allocation_waits_for_ram_a_page_out_holds(six, six_costs):
    """Budget 300 B: compute 2 needs 40 B while 0's freed buffer is still being written out (3-4.5 s).

    It waits for RAM, which shifts everything after it: page-in 5.5-8 s, compute 4 waits 6.5-8 s
    for it, makespan 12 s; the peak is exactly the budget.
    """
    result = simulate(schedule_of(six, PAGING), six, six_costs, mode=FREE, budgets=Budgets(300, 12.0))
    assert rows(result, "stall", columns=("time_s", "end_s", "resource", "node", "cause")) == [
        [3.0, 4.5, "ram", 2, "ram"],
        [6.5, 8.0, "compute", 4, "input"],
    ]
    assert result.makespan_s == 12.0 and result.stall_s == 3.0
    assert result.figures.peak_ram_bytes == 300 and result.ram_curve.ram_bytes.max() == 300
    assert result.delta.total_s == pytest.approx(result.makespan_s - result.stage_model.runtime_s)


def test_barrier_mode_stops_at_the_allocation_over_the_budget(six, six_costs):
    """Barrier mode stops at the allocation over the budget, and says why.

    Budget 300 B: the stage model needs 340 B in stage 2 (0 is held until the stage ends), so
    the replay stops there, naming the instruction, the bytes and why they are held.
    """
    with pytest.raises(
        SimulationError,
        match=r"stage 2, Compute\(2\) at 3 s: RAM overdraft: needs 40 bytes but only 0 "
        r"of 300 bytes are free \(100 bytes are outputs this stage pages out, "
        r"held until it ends\)",
    ):
        simulate(schedule_of(six, PAGING), six, six_costs, budgets=Budgets(300, 100.0))


@pytest.mark.parametrize("mode", list(Mode))
def test_a_page_in_holds_its_buffer_from_its_issue(six, six_costs, mode):
    """A page-in holds its buffer from its issue.

    Budget 345 B, which the paper's model says the schedule keeps (peak 300 B): paging 0 back in
    at stage 3 takes its 100 B at once beside 1's 200 B and 2's 40 B (that model counts them
    from stage 4), so computing 3 needs 10 B with 5 B free. The replay stops and says why.
    """
    stages = [[C(0)], [PO(0), C(1), F(0)], [C(2)], [PI(0), C(3), F(1), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]]
    schedule = schedule_of(six, stages, Timing.COMPUTE_ONLY)
    assert check_schedule(schedule, six, six_costs, Timing.COMPUTE_ONLY).peak_ram_bytes == 300
    with pytest.raises(
        SimulationError,
        match=r"stage 3, Compute\(3\) .*needs 10 bytes but only 5 of 345 bytes are free "
        r"\(100 bytes are this stage's page-ins, which hold their buffers",
    ):
        simulate(schedule, six, six_costs, mode=mode, budgets=Budgets(345, 100.0))


def test_a_stall_past_the_deadline_is_reported_with_its_causes(six, six_costs):
    """Deadline 11.5 s, budget 300 B: the free-running replay takes 12 s; the note names the waits."""
    result = simulate(schedule_of(six, PAGING), six, six_costs, mode=FREE, budgets=Budgets(300, 11.5))
    assert result.over_deadline and not result.over_budget
    assert result.deadline_note.startswith("makespan 12 s is 0.5 s over the deadline; against the stage model's 11 s:")
    assert "ram wait +1.5 s" in result.deadline_note and "input wait +1.5 s" in result.deadline_note


def test_the_device_keeps_a_page_out_for_page_ins_only_while_it_runs():
    """The device keeps a page-out for page-ins only while it runs.

    A page-out is the source a page-in of its node copies while it runs; once it has ended the
    device lets it go, so a long replay does not keep every transfer it ran.
    """
    device = Device(Trace((10,)), dma_channels=1, bus_bytes_per_s=math.inf, ram_capacity_bytes=100, waits_for_ram=True)
    page_out = Transfer(PAGE_OUT, 0, 0, Buffer(10, 0), 2.0, 0.0, 0.0, None)
    device.issue(page_out)
    device.advance_dma(1.0)
    assert device.storing == {0: page_out}
    device.advance_dma(2.0)
    assert page_out.phase == DONE and device.storing == {}


# --- the memory bus ------------------------------------------------------------------------------


def contention_case(latency_s):
    """Node 0 (100 B, 1 FLOP) then node 1 (300 B, 2 FLOP) reading it; 0 is paged out in stage 1.

    On the toy platform compute 1 moves 400 B in 2 s (200 B/s) while the page-out moves 100 B at
    100 B/s after its latency: 300 B/s of demand on a 200 B/s bus.
    """
    graph = make_graph([(), (0,)], [100, 300], flops=[1.0, 2.0], name="contention")
    platform = make_platform(latency_s=latency_s, bus_bytes_per_s=200.0)
    schedule = schedule_of(graph, [[C(0)], [PO(0), C(1), F(0), F(1)]])
    return schedule, graph, node_costs(graph, platform), platform


@pytest.mark.parametrize("mode", list(Mode))
def test_bus_contention_slows_both_activities_by_the_fluid_share(mode):
    """Bus contention slows both activities by the fluid share.

    Both run at 2/3 speed while they overlap: the page-out's 1 s ends at 2.5 s, compute 1 has
    1 s left and ends at 3.5 s. Both waits for the bus are in the trace; +0.5 s is contention.
    """
    schedule, graph, costs, platform = contention_case(latency_s=0.0)
    result = simulate(schedule, graph, costs, platform, mode=mode)
    assert rows(result, "page_out", columns=("time_s", "end_s")) == [[1.0, pytest.approx(2.5)]]
    assert result.makespan_s == pytest.approx(3.5)
    assert flat(rows(result, "stall", cause="bus", columns=("time_s", "end_s", "node"))) == pytest.approx(
        [2.0, 2.5, 0, 3.0, 3.5, 1]
    )
    assert set(result.trace[result.trace.cause == "bus"].resource) == {"contention"}  # a lane of its own
    assert result.delta.bus_contention_s == pytest.approx(0.5) and result.delta.total_s == pytest.approx(0.5)
    assert result.bus_busy == pytest.approx((100 + 100 + 400) / (200 * 3.5))
    # Energy is the cost table's: contention stretches time, not the per-operation energy.
    assert result.figures.compute_j == pytest.approx(3.0) and result.figures.page_out_j == pytest.approx(1.0)


def test_transfer_latency_does_not_use_the_bus():
    """A transfer's latency does not use the bus.

    With 0.5 s latency the page-out joins the bus at 1.5 s; compute 1 has done 0.5 s alone. Then
    both run at 2/3: the page-out's 1 s of bus work ends at 3.0 s, compute 1 at 3.5 s.
    """
    schedule, graph, costs, platform = contention_case(latency_s=0.5)
    result = simulate(schedule, graph, costs, platform)
    assert flat(rows(result, "page_out", columns=("time_s", "end_s"))) == pytest.approx([1.0, 3.0])
    assert result.makespan_s == pytest.approx(3.5)


@pytest.mark.parametrize("bus_bytes_per_s", [300.0, math.inf])
def test_no_slowdown_when_demand_fits_the_bus(bus_bytes_per_s):
    """A 300 B/s bus carries both at full speed: everything ends at its nominal time (3 s)."""
    schedule, graph, costs, platform = contention_case(latency_s=0.0)
    result = simulate(schedule, graph, costs, platform, bus_bytes_per_s=bus_bytes_per_s)
    assert result.makespan_s == 3.0 and result.waits_s["bus"] == 0.0


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 30), st.floats(1e6, 1e9), st.integers(1, 3), st.sampled_from(list(Mode)))
def test_narrow_bus_never_speeds_anything_up_nor_exceeds_its_bandwidth(forward_nodes, bus_bytes_per_s, channels, mode):
    """A narrow bus never speeds anything up, nor carries more than its bandwidth.

    Fluid-bus invariants under heavy contention: no operator or transfer ends before its nominal
    time, every stretch is a bus wait, and the bus never carries more than bandwidth x makespan.
    """
    graph, platform = training_chain(forward_nodes), load_platform("rpi4")
    platform = platform.model_copy(update={"memory_bus_bytes_per_s": bus_bytes_per_s})
    costs = replace(node_costs(graph, platform), dma_channels=channels)
    result = simulate(chain_schedule(graph), graph, costs, platform, mode=mode)
    nominal_s = {
        "compute": costs.compute_s,
        "recompute": costs.compute_s,
        "page_in": costs.page_in_s,
        "page_out": costs.page_out_s,
    }
    runs = result.trace[result.trace.kind.isin(list(nominal_s))]
    nominal = pd.Series([nominal_s[kind][node] for kind, node in zip(runs.kind, runs.node)], index=runs.index)
    assert (runs.duration_s >= nominal * (1 - 1e-9)).all()
    assert (runs.duration_s - nominal).sum() == pytest.approx(result.waits_s["bus"], rel=1e-6, abs=1e-9)
    assert result.bus_busy <= 1 + 1e-9


# --- DMA channels --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, channels, makespan_s, second_start_s",
    [(BARRIER, 1, 7.0, 4.0), (BARRIER, 2, 5.0, 2.0), (FREE, 1, 6.0, 4.0), (FREE, 2, 4.0, 2.0)],
)
def test_transfers_queue_for_dma_channels(mode, channels, makespan_s, second_start_s):
    """Transfers queue for the DMA channels.

    Two 2 s page-outs issued at 2 s: one channel runs them back to back (the second waits for
    it), two in parallel. The barrier holds stage 2 until they end; free-running goes on.
    """
    graph = make_graph([(), (), (), ()], [10, 10, 10, 10], name="queue")
    costs = make_costs(graph, [1, 1, 1, 1], paging={0: (2.0, 1.0, 1.0, 1.0), 1: (2.0, 1.0, 1.0, 1.0)}, dma_channels=channels)
    stages = [[C(0)], [C(1)], [PO(0), PO(1), C(2), F(0), F(1)], [C(3), F(2), F(3)]]
    result = simulate(schedule_of(graph, stages), graph, costs, mode=mode)
    assert sorted(result.trace[result.trace.resource == "dma"].time_s) == [2.0, second_start_s]
    assert rows(result, "stall", cause="channel", columns=("time_s", "end_s")) == ([[2.0, 4.0]] if channels == 1 else [])
    assert result.makespan_s == makespan_s
    assert result.dma_busy == pytest.approx(4.0 / (channels * makespan_s))
    assert result.ram_curve.ram_bytes.iloc[-1] == 0


def test_whole_transfers_on_two_channels_take_longer_than_the_stage_model_says():
    """Three 2 s page-outs on two channels take 4 s; the stage model counts 6 s / 2 = 3 s: +1 s of packing."""
    graph = make_graph([(), (), (), (), ()], [10] * 5, name="packing")
    costs = make_costs(graph, [1] * 5, paging={i: (2.0, 1.0, 1.0, 1.0) for i in range(3)}, dma_channels=2)
    stages = [[C(0)], [C(1)], [C(2)], [PO(0), PO(1), PO(2), C(3), F(0), F(1), F(2)], [C(4), F(3), F(4)]]
    result = simulate(schedule_of(graph, stages), graph, costs)
    assert (result.stage_model.runtime_s, result.makespan_s) == (7.0, 8.0)
    assert result.delta == replace(result.delta, dma_packing_s=1.0) and result.delta.total_s == 1.0


@pytest.mark.parametrize(
    "last_stage, makespan_s, free_at_s",
    [
        ([F(0), C(3), F(3)], 5.0, 5.0),  # freed while still landing: released when it lands
        ([PO(0), F(0), C(3), F(3)], 5.5, 5.5),  # paged out again: waits for the landing, then 0.5 s
    ],
    ids=["free", "page-out"],
)
def test_free_running_buffers_of_a_page_in_in_flight_wait_for_it(last_stage, makespan_s, free_at_s):
    """Page-in of 0 runs 2-5 s; stage 3 (from 3 s) frees or pages out 0 while it is still landing."""
    graph = make_graph([(), (), (), ()], [10, 10, 10, 10], name="landing")
    costs = make_costs(graph, [1, 1, 1, 1], paging={0: (0.5, 1.0, 3.0, 1.0)})
    stages = [[C(0)], [PO(0), C(1), F(0), F(1)], [PI(0), C(2), F(2)], last_stage]
    result = simulate(schedule_of(graph, stages), graph, costs, mode=FREE)
    assert [t for t, node in rows(result, "free", columns=("time_s", "node")) if node == 0] == [2.0, free_at_s]
    assert result.makespan_s == makespan_s
    assert result.ram_curve.ram_bytes.iloc[-1] == 0
    if last_stage[0] == PO(0):  # the landing page-in holds the one channel until 5 s
        assert rows(result, "stall", columns=("time_s", "end_s", "node", "cause")) == [[3.0, 5.0, 0, "channel"]]


# --- invalid schedules are never run -------------------------------------------------------------


@pytest.mark.parametrize(
    "stages, message",
    [
        (
            [[C(0)], [C(1), F(0)], [C(2), F(1)], [C(3), F(2)], [C(4), F(3)], [C(5), F(4), F(5)]],
            r"stage 4, Compute\(4\): input 0 is not in RAM",
        ),
        (
            [[C(0)], [C(1), F(0)], [C(2), F(1)], [PI(0), C(3), F(2)], [C(4), F(0), F(3)], [C(5), F(4), F(5)]],
            r"stage 3, PageIn\(0\): node 0 is not on storage",
        ),
        (
            [[C(0)], [C(1)], [PO(0), F(0), C(2), F(1)], [C(3), F(2)], [PI(0), C(4), F(0), F(3)], [C(5), F(4), F(5)]],
            r"stage 4, Compute\(4\): input 0 is not in RAM \(it is being paged in during this stage",
        ),
    ],
    ids=["missing-input", "never-paged-out", "page-in-used-in-its-stage"],
)
@pytest.mark.parametrize("mode", list(Mode))
def test_invalid_schedules_are_rejected_by_the_checker_rules(six, six_costs, stages, message, mode):
    with pytest.raises(ScheduleError, match=message):
        simulate(schedule_of(six, stages), six, six_costs, mode=mode)


def test_the_platform_ram_caps_the_budget(six, six_costs):
    """A 250-byte device cannot hold a 1000-byte budget: computing 1 beside 0 overdraws it."""
    with pytest.raises(SimulationError, match=r"stage 1, Compute\(1\) .*needs 200 bytes but only 150 of 250 bytes"):
        simulate(schedule_of(six, RECOMPUTE), six, six_costs, make_platform(ram_bytes=250), budgets=Budgets(1000, 100.0))


# --- agreement with the checker, and the breakdown, on random graphs -----------------------------


@st.composite
def paging_schedules(draw):
    """(graph, costs, schedule): a random training graph and a paging plan for a random RAM budget.

    The plan is the greedy paging one (or keep-all), for a budget between the graph's least
    feasible RAM and its keep-all peak.
    """
    graph, costs = draw(cases(min_forward=2, max_forward=5))
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + draw(st.floats(0.0, 1.0)) * (high - low)), math.inf)
    plan = greedy_plan(graph, costs, budgets, draw(st.sampled_from([PAGING_ONLY, HYBRID])), Timing.OVERLAP)
    if plan is None:
        return graph, costs, optimiser.keep_all(graph, costs, Timing.OVERLAP)[0]
    return graph, costs, plans.to_schedule(plan, graph, costs, Timing.OVERLAP)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paging_schedules())
def test_barrier_mode_on_an_ideal_bus_equals_the_checker(case):
    """Barrier mode on an ideal bus gives the checker's figures.

    Invariant: energy, makespan and peak RAM equal the `overlap` figures (one channel), within
    the checker's peak as the RAM budget; with two channels only whole-transfer packing is
    added.
    """
    graph, costs, schedule = case
    costs = replace(costs, dma_channels=1)
    checked = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    budgets = Budgets(int(checked.peak_ram_bytes), checked.runtime_s)
    one = simulate(schedule, graph, costs, budgets=budgets, bus_bytes_per_s=math.inf)
    assert compare_figures(checked, one.figures, rtol=1e-9) == []
    assert one.stall_s == 0.0 and not one.over_budget and not one.over_deadline
    two = simulate(schedule, graph, replace(costs, dma_channels=2), bus_bytes_per_s=math.inf)
    assert two.figures.peak_ram_bytes == two.stage_model.peak_ram_bytes
    assert two.makespan_s - two.stage_model.runtime_s == pytest.approx(two.delta.dma_packing_s, abs=1e-9)
    assert two.delta.dma_packing_s >= -1e-12


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paging_schedules(), st.sampled_from(list(Mode)), st.floats(5.0, 500.0), st.sampled_from([1, 2]))
def test_the_breakdown_adds_up_and_the_peak_stays_within_the_budget(case, mode, bus_bytes_per_s, channels):
    """The breakdown adds up, and the peak stays within the budget.

    Invariants on a contended bus, both modes: the causes sum to the makespan difference, the
    peak never exceeds the RAM budget, and the waits in the trace add up to the waits reported.
    """
    graph, costs, schedule = case
    costs = replace(costs, dma_channels=channels)
    budget_bytes = int(check_schedule(schedule, graph, costs, Timing.OVERLAP).peak_ram_bytes)
    result = simulate(schedule, graph, costs, mode=mode, budgets=Budgets(budget_bytes, math.inf), bus_bytes_per_s=bus_bytes_per_s)
    difference_s = result.makespan_s - result.stage_model.runtime_s
    assert result.delta.total_s == pytest.approx(difference_s, rel=1e-9, abs=1e-9)
    assert result.figures.peak_ram_bytes <= budget_bytes
    assert result.ram_curve.ram_bytes.max() == result.figures.peak_ram_bytes
    stalls = result.trace[result.trace.kind == "stall"]
    for cause in WAIT_CAUSES:
        assert stalls[stalls.cause == cause].duration_s.sum() == pytest.approx(result.waits_s[cause], rel=1e-9, abs=1e-9)
    if mode is BARRIER:
        assert result.figures.peak_ram_bytes == budget_bytes


def test_long_synthetic_chain_matches_the_checker_in_barrier_mode():
    """The benchmark's chain (paging every even activation, recomputing every odd one) on the Pi 4."""
    graph, platform = training_chain(40), load_platform("rpi4")
    schedule, costs = chain_schedule(graph), node_costs(graph, platform)
    result = simulate(schedule, graph, costs, platform)
    assert compare_figures(check_schedule(schedule, graph, costs, Timing.OVERLAP), result.figures, rtol=1e-12) == []
    assert result.figures.page_ins == 20 and result.figures.recomputations == 19


@pytest.mark.parametrize("baseline", ["keep_all", "checkpoint_sqrt"])
def test_zoo_baselines_match_the_checker_on_the_device(baseline):
    """ResNet-18 on the Pi 4, its real bus included: baselines move nothing to storage, so nothing contends."""
    graph, platform = build_model("resnet18"), load_platform("rpi4")
    costs = node_costs(graph, platform)
    schedule, _ = getattr(optimiser, baseline)(graph, costs, Timing.OVERLAP)
    for mode in Mode:
        result = simulate(schedule, graph, costs, platform, mode=mode)
        assert compare_figures(check_schedule(schedule, graph, costs, Timing.OVERLAP), result.figures, rtol=1e-12) == []


def test_the_jetson_tx2_plain_pass_predicts_its_own_simulated_time():
    """The Jetson TX2's plain pass takes in simulation the time its cost table predicts.

    With roofline compute times, ResNet-18's keep-all pass on the TX2 (94 bus-bound nodes) takes
    in simulation what the cost table says, within 0.5 % (here exactly).
    """
    graph, tx2 = build_model("resnet18_cifar", batch_size=8), load_platform("jetson-tx2")
    costs = node_costs(graph, tx2)
    schedule, _ = optimiser.keep_all(graph, costs, Timing.OVERLAP)
    result = simulate(schedule, graph, costs, tx2)
    assert result.makespan_s == pytest.approx(costs.plain_runtime_s, rel=1e-12)
    assert result.waits_s["bus"] == 0.0


# --- the trace and its files ---------------------------------------------------------------------


def test_write_trace_writes_the_trace_and_the_summary(six, six_costs, tmp_path):
    result = simulate(schedule_of(six, PAGING), six, six_costs, mode=FREE)
    write_trace(result, tmp_path / "run")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv", keep_default_na=False)
    assert tuple(trace.columns) == TRACE_COLUMNS
    assert len(trace) == len(result.trace) == len(result.events)
    assert set(trace.kind) == {"alloc", "compute", "free", "page_in", "page_out", "stall"}
    assert set(trace.cause) == {"", "channel", "input"}
    # The RAM curve is the running sum of allocations and frees.
    ram = trace[trace.resource == "ram"]
    running = (ram.bytes.where(ram.kind == "alloc", -ram.bytes)).cumsum()
    assert running.max() == result.figures.peak_ram_bytes == 340 and running.iloc[-1] == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["mode"] == "free-running" and summary["makespan_s"] == 11.0
    assert summary["figures"]["total_j"] == pytest.approx(result.figures.total_j)
    assert summary["stage_model"]["runtime_s"] == 11.0
    assert summary["makespan_delta_s"] == {
        "dma_packing_s": 0.0,
        "bus_contention_s": 0.0,
        "overlap_s": -2.0,
        "input_wait_s": 2.0,
        "ram_wait_s": 0.0,
        "tail_s": 0.0,
        "total_s": 0.0,
    }
    assert set(summary["waits_s"]) == set(WAIT_CAUSES)


def test_comparison_splits_the_difference_from_the_prediction_by_cause(three):
    """Three nodes free-running with room: 1 s faster than predicted (all overlap), a peak 1000 B above it."""
    graph, costs, schedule = three
    budgets = Budgets(4000, 4.0)
    result = simulate(schedule, graph, costs, mode=FREE, budgets=budgets)
    comparison = compare(check_schedule(schedule, graph, costs, Timing.OVERLAP), Timing.OVERLAP, result, budgets)
    data = comparison.to_dict()
    assert (data["mode"], data["timing"]) == ("free-running", "overlap")
    assert data["predicted"] == {"makespan_s": 4.0, "peak_ram_bytes": 3000, "energy_j": 4.0}
    assert data["simulated"] == {"makespan_s": 3.0, "peak_ram_bytes": 4000, "energy_j": 4.0}
    assert data["makespan_causes_s"]["overlap_s"] == -1.0 and data["makespan_causes_s"]["total_s"] == -1.0
    assert data["flags"] == [
        "simulated makespan -25.000 % against the prediction: overlap -1 s",
        "simulated peak RAM 4,000 bytes is above the predicted 3,000 bytes (1,000 bytes of it freed buffers "
        "still held by transfers)",
    ]
    json.dumps(data)


def test_comparison_with_the_papers_timing_names_what_it_leaves_out(six, six_costs):
    """The comparison with the paper's timing names what that timing leaves out.

    Against compute-only timing (9 s, no static energy) the barrier replay's 11 s is the stage
    model's transfer time (+2 s), and the energy difference is only the 5.5 J of static energy.
    """
    schedule = schedule_of(six, PAGING, Timing.COMPUTE_ONLY)
    budgets = Budgets(1000, 9.0)
    result = simulate(schedule, six, six_costs, budgets=budgets)
    predicted = check_schedule(schedule, six, six_costs, Timing.COMPUTE_ONLY)
    data = compare(predicted, Timing.COMPUTE_ONLY, result, budgets).to_dict()
    assert data["makespan_causes_s"] == {
        "timing_model_s": 2.0,
        "dma_packing_s": 0.0,
        "bus_contention_s": 0.0,
        "overlap_s": 0.0,
        "input_wait_s": 0.0,
        "ram_wait_s": 0.0,
        "tail_s": 0.0,
        "total_s": 2.0,
    }
    assert data["energy_difference_j"] == {
        "compute_j": 0.0,
        "recompute_j": 0.0,
        "page_in_j": 0.0,
        "page_out_j": 0.0,
        "static_j": 5.5,
    }
    assert data["flags"][0] == "simulated makespan 11 s is over the deadline of 9 s (+22.22 %)"


def test_mode_names_are_the_summary_names(three):
    assert [m.value for m in Mode] == ["barrier", "free-running"]
    assert Mode("free-running") is FREE
    graph, costs, schedule = three
    with pytest.raises(UserInputError, match="unknown replay mode 'freerunning' \\(use barrier or free-running\\)"):
        simulate(schedule, graph, costs, mode="freerunning")
