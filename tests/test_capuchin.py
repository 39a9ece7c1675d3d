"""Capuchin's policy, step by step on a hand-solved chain, and its schedules on real graphs."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poetsim.optimiser.baselines.capuchin import capuchin_schedule
from poetsim.optimiser.plans.rules import Mode
from poetsim.pipeline import baseline_starts, run_strategy
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.model import Timing
from poetsim.schedule.problem import build_problem
from poetsim.status import Status
from poetsim.units import parse_ram

from optimiser_cases import cases, cost_table, training_graph


def five_layers(compute_f2_s: float, page_f1_s: float):
    """Layers f0..f4 (nodes 0-4, 10 bytes each), loss (5, 4 bytes), gradients g4..g0 (6-10).

    Every node computes in 1 s except f2 (`compute_f2_s`); paging f0 takes 1 s each way, f1
    `page_f1_s`, every other node 3 s; one DMA channel, overlap timing, no static power.
    Accesses (stages): f0 0, 1, 9, 10; f1 1, 2, 8, 9; f2 2, 3, 7, 8. Keep-all peaks at stage 6
    (g4): f0..f4, the loss and g4 = 64 bytes.
    """
    graph = training_graph([10] * 5, [1.0] * 5)
    T = len(graph)
    compute = [1.0] * T
    compute[2] = compute_f2_s
    page = [3.0] * T
    page[0], page[1] = 1.0, page_f1_s
    return graph, cost_table(graph, compute, compute, page, page, 0.0, 1)


def test_capuchin_swaps_the_longest_gap_where_it_hides_then_recomputes_by_memory_saved_per_second():
    """Budget 50 bytes. Measured stage times are all 1 s, so stage t starts at t seconds.

    Step 1, peak 64 at stage 6: resident there and not read are f0 (gap from the end of stage 1
    to the start of stage 9: 7 s), f1 (5 s) and f2 (3 s). f0 is first; paging it out in stage 1
    and in during stage 8 takes 1 s, no more than those stages' 1 s of compute: the swap hides.
    Stage 6 loses 10 bytes: peak 54, still at stage 6.
    Step 2: f1 and f2 are left. Their 3 s transfers hide nowhere, so no swap hides. Recomputing
    f1 at stage 8 also recomputes f0 (paged in during stage 8, usable only from stage 9): 2 s for
    10 bytes, 5 bytes/s. Recomputing f2 at stage 7 from the resident f1: 1 s, 10 bytes/s, the
    best; its swap would add 2 s at each end, 2.5 bytes/s. f2 is recomputed. Stage 6 drops to
    44; stages 7 and 8 peak at 50: the budget is met.
    """
    graph, costs = five_layers(compute_f2_s=1.0, page_f1_s=3.0)
    result = capuchin_schedule(graph, costs, 50, Timing.OVERLAP)
    steps = [(e.node, e.after_stage, e.before_stage, e.mode, e.hidden) for e in result.evictions]
    assert steps == [(0, 1, 9, Mode.PAGE, True), (2, 3, 7, Mode.RECOMPUTE, False)]
    assert [e.gap_s for e in result.evictions] == [7.0, 3.0]
    assert [e.added_s for e in result.evictions] == [0.0, 1.0]
    assert [(e.peak_before_bytes, e.peak_after_bytes) for e in result.evictions] == [(64, 54), (54, 50)]
    assert result.fits and result.figures.runtime_s == 12.0
    checked = check_schedule(result.schedule, graph, costs, Timing.OVERLAP)
    assert (checked.recomputations, checked.page_ins, checked.page_outs, checked.peak_ram_bytes) == (1, 1, 1, 50)


def test_capuchin_swaps_the_chosen_tensor_when_that_saves_more_per_second_than_recomputing():
    """As above, but f2 computes in 4 s and f1 pages in 2 s.

    Step 1 is the same hidden swap of f0. Step 2: recomputing f1 (with f0) adds 2 s, 5 bytes/s;
    recomputing f2 adds 4 s, 2.5 bytes/s; f1 is the candidate. Its swap pages out during stage
    2, whose 4 s of compute hide the 2 s transfer, and in during stage 7, which it stretches
    from 1 s to 2 s: 1 s for 10 bytes, 10 bytes/s, better than recomputing it. f1 is swapped.
    """
    graph, costs = five_layers(compute_f2_s=4.0, page_f1_s=2.0)
    result = capuchin_schedule(graph, costs, 50, Timing.OVERLAP)
    steps = [(e.node, e.after_stage, e.before_stage, e.mode, e.hidden, e.added_s) for e in result.evictions]
    assert steps == [(0, 1, 9, Mode.PAGE, True, 0.0), (1, 2, 8, Mode.PAGE, False, 1.0)]
    assert result.fits and result.figures.peak_ram_bytes == 50
    assert result.figures.runtime_s == costs.plain_runtime_s + 1.0


def test_under_the_papers_timing_every_swap_hides():
    """Compute-only timing counts no transfer time, so Capuchin never recomputes."""
    graph, costs = five_layers(compute_f2_s=1.0, page_f1_s=3.0)
    result = capuchin_schedule(graph, costs, 50, Timing.COMPUTE_ONLY)
    assert result.fits and {e.mode for e in result.evictions} == {Mode.PAGE}
    assert all(e.hidden for e in result.evictions)


@settings(max_examples=40, deadline=None)
@given(case=cases(min_forward=3), share=st.floats(0.0, 1.0), timing=st.sampled_from(list(Timing)))
def test_capuchin_schedules_pass_the_checker_and_fit_when_it_says_so(case, share, timing):
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    ram = int(low + share * (high - low))
    result = capuchin_schedule(graph, costs, ram, timing)
    checked = check_schedule(result.schedule, graph, costs, timing)
    assert compare_figures(result.figures, checked) == []
    assert result.fits == (checked.peak_ram_bytes <= ram)
    peaks = [e.peak_after_bytes for e in result.evictions]
    assert all(e.mode in (Mode.PAGE, Mode.RECOMPUTE) for e in result.evictions)
    assert not peaks or peaks[-1] == checked.peak_ram_bytes


@pytest.mark.parametrize("platform", ["rpi4", "jetson-tx2"])
def test_capuchin_on_resnet18_is_a_checked_baseline_within_the_ram_budget(platform):
    problem = build_problem("resnet18_cifar", platform, parse_ram("50%"), 2.0, batch_size=2)
    run = run_strategy(problem, "capuchin", simulate=False)
    assert run.status is Status.BASELINE
    assert run.checked is not None and run.checked.peak_ram_bytes <= problem.budgets.ram_bytes


def test_capuchin_below_what_eviction_can_reach_is_reported_over_budget():
    problem = build_problem("resnet18_cifar", "rpi4", parse_ram("10%"), 2.0, batch_size=2)
    run = run_strategy(problem, "capuchin", simulate=False)
    assert run.status is Status.OVER_BUDGET and "over the budget" in run.message


def test_solve_starts_from_every_baseline_its_moves_allow():
    problem = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 2.0, batch_size=2)
    capuchin = run_strategy(problem, "capuchin", simulate=False).schedule
    hybrid_starts = baseline_starts(problem, "hybrid")
    assert capuchin in hybrid_starts
    recompute_starts = baseline_starts(problem, "recompute-only")
    assert capuchin not in recompute_starts  # Capuchin pages, which recompute-only may not
    assert recompute_starts and all(s.counts()["page_out"] == 0 for s in recompute_starts)
    assert baseline_starts(problem, "capuchin") == ()  # a baseline is built, not started


OUTSIDE = sorted(p.name for p in Path("scenarios/graphs/outside").glob("*.json"))


@pytest.mark.parametrize("ram", ["50%", "35%"])
@pytest.mark.parametrize("graph_file", OUTSIDE)
def test_capuchin_schedules_of_the_outside_architectures_pass_the_checker(graph_file, ram):
    """A later eviction of a tensor may move where the rules page it: its swap stays valid.

    On ResNeXt-29 at 35 % a recomputation in the stage of an earlier swap's page-out made that
    page-out read a tensor not yet computed.
    """
    problem = build_problem(f"scenarios/graphs/outside/{graph_file}", "rpi4", parse_ram(ram), 1.2)
    result = capuchin_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, Timing.OVERLAP)
    checked = check_schedule(result.schedule, problem.graph, problem.costs, Timing.OVERLAP)
    assert compare_figures(result.figures, checked) == []
