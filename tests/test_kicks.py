"""Kicks out of a local optimum of polish and swap.

A kick takes a change that saves energy but breaks the RAM budget and evicts until the plan fits
(`optimiser.plans.kicks`); the search kicks its incumbent while effort is left (`steps.settle`).
"""

import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_polish import _drawn_plan, assert_no_single_change_improves

from poetsim.optimiser import optimise
from poetsim.optimiser.baselines.simple import checkpoint_decisions
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.kicks import kicked, kicks
from poetsim.optimiser.plans.polish import polish
from poetsim.optimiser.plans.rules import plan_from_decisions
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.model import Budgets, Moves, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

from optimiser_cases import cascading_cases, cases


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    room=st.floats(0.0, 0.7),
    timing=st.sampled_from(list(Timing)),
    seed=st.integers(0, 3),
)
def test_every_kick_fits_the_budgets_and_is_a_schedule_the_checker_values_as_the_model_does(case, data, room, timing, seed):
    """On random graphs, from a polished plan under a budget below keep-all's peak.

    Each change `kicks` offers saves energy, keeps the deadline and breaks the RAM budget; each
    kicked plan fits both budgets, and the checker accepts its schedule with the model's figures.
    The same plan, change and seed give the same kicked plan.
    """
    graph, costs = case
    start = _drawn_plan(graph, data)
    fig = plans.figures(start, graph, costs, timing)
    ram = int(fig.peak_ram_bytes) + int(room * max(graph.keep_all_peak_bytes - fig.peak_ram_bytes, 0))
    budgets = Budgets(ram, fig.runtime_s * 1.2)
    plan = polish(start, graph, costs, budgets, timing)
    own = plans.figures(plan, graph, costs, timing)
    offered = kicks(plan, graph, costs, budgets, timing)
    event(f"{min(len(offered), 3)} kicks")
    for change in offered:
        changed = plans.figures(change, graph, costs, timing)
        assert changed.total_j < own.total_j and changed.peak_ram_bytes > ram
        assert budgets.meets_deadline(changed.runtime_s)
        out = kicked(plan, change, graph, costs, budgets, timing, random.Random(seed))
        if out is None:
            continue
        checked = check_schedule(plans.to_schedule(out, graph, costs, timing), graph, costs, timing, budgets)
        assert compare_figures(plans.figures(out, graph, costs, timing), checked) == []
        assert kicked(plan, change, graph, costs, budgets, timing, random.Random(seed)) == out


def test_kicks_evict_only_by_the_moves_allowed():
    """ResNet-18's checkpoint-sqrt plan polished within its own peak: keeping a recomputed output would break it.

    Those changes are kicks; recompute-only, every kick is brought back within the budget by
    evictions that recompute, and the kicked plan pages nothing.
    """
    p = build_problem("resnet18_cifar", "jetson-tx2", parse_ram("100%"), 1.5, Timing.OVERLAP)
    start = plan_from_decisions(p.graph, checkpoint_decisions(p.graph))
    fig = plans.figures(start, p.graph, p.costs, Timing.OVERLAP)
    budgets = Budgets(int(fig.peak_ram_bytes), p.budgets.runtime_s)
    recompute_only = Moves(recompute=True, page=False)
    plan = polish(start, p.graph, p.costs, budgets, Timing.OVERLAP, moves=recompute_only)
    changes = kicks(plan, p.graph, p.costs, budgets, Timing.OVERLAP, moves=recompute_only)
    kicked_plans = [
        kicked(plan, change, p.graph, p.costs, budgets, Timing.OVERLAP, random.Random(0), moves=recompute_only)
        for change in changes
    ]
    assert changes and all(kicked_plans)
    assert not any(out.paged_out[t] or out.paged_in[t] for out in kicked_plans if out is not None for t in range(len(p.graph)))


def test_resnet18_recompute_only_on_the_tx2_at_35_percent_ends_on_a_kick():
    """ResNet-18 (CIFAR, batch 8), recompute-only, TX2, 35 %, 1.2x, 30 units of effort.

    The search settles with effort left, and a kick, polished, reaches a cheaper local optimum:
    the returned schedule comes from a kick (an incumbent only ever gets cheaper), its whole effort
    used, and no single change improves it.
    """
    p = build_problem("resnet18_cifar", "jetson-tx2", parse_ram("35%"), 1.2, Timing.OVERLAP)
    moves = Moves(recompute=True, page=False)
    # A guard far beyond the effort: the search ends on its work, whatever else the machine runs.
    outcome = optimise(p.graph, p.costs, p.budgets, moves, Timing.OVERLAP, effort=30.0, time_limit_s=600.0)
    assert outcome.found_by is not None and outcome.found_by.endswith("kicked"), outcome.message
    assert outcome.work >= 30.0
    assert_no_single_change_improves(outcome, p.graph, p.costs, p.budgets, Timing.OVERLAP, moves)
