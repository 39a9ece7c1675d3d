"""Polishing a plan: keeping an output across a gap where RAM allows, instead of recomputing it."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poetsim.graphs.io import load_graph
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser.bounds.cover import cover_bound
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import cover_plan
from poetsim.optimiser.plans.polish import polish
from poetsim.optimiser.plans.rules import Mode, plan_from_decisions
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.costs import node_costs
from poetsim.schedule.model import Budgets, Moves, Timing

from optimiser_cases import cases, relu_or_conv

RECOMPUTE = Moves(recompute=True, page=False)


def recomputations(plan, node: int) -> int:
    return sum(node in computed[:-1] for computed in plan.computed)


def test_the_cover_plan_of_resnet18_at_half_ram_keeps_conv1_between_two_readers():
    """rpi4, 50 % RAM, 1.5x, recompute-only: the cover's plan recomputes conv1 for stage 133 and
    again for stage 135; the polished plan keeps it in between, within the budget, for less."""
    graph = load_graph("resnet18_cifar", 8, None, None)
    costs = node_costs(graph, load_platform("rpi4"))
    budgets = Budgets(graph.keep_all_peak_bytes // 2, 1.5 * costs.plain_runtime_s)
    cover = cover_bound(graph, costs, budgets, RECOMPUTE, Timing.OVERLAP)
    before = cover_plan(graph, costs, budgets, Timing.OVERLAP, cover)
    after = polish(before, graph, costs, budgets, Timing.OVERLAP)
    checked = check_schedule(plans.to_schedule(after, graph, costs, Timing.OVERLAP), graph, costs, Timing.OVERLAP, budgets)
    assert compare_figures(plans.figures(after, graph, costs, Timing.OVERLAP), checked) == []
    saved_j = plans.figures(before, graph, costs, Timing.OVERLAP).total_j - checked.total_j
    assert saved_j > costs.compute_j[1]  # at least one conv1 fewer
    assert recomputations(after, 1) < recomputations(before, 1)


def test_the_hand_case_keeps_r_exactly_when_its_bytes_fit_beside_big():
    """relu_or_conv: recomputing r for its backward reader frees its 100 B while `big` peaks.
    Keeping it instead (keep-all) needs the keep-all peak: polished to that with the budget at
    that peak; one byte below, r is still recomputed (only s, its 1-byte input, is kept)."""
    graph, costs = relu_or_conv(node_j=0.5, page_j=5.0)
    recompute_r = plan_from_decisions(graph, {(1, 2, 4): Mode.RECOMPUTE})
    assert recomputations(recompute_r, 1) == 1
    runtime_s = 10 * costs.plain_runtime_s
    roomy = polish(recompute_r, graph, costs, Budgets(graph.keep_all_peak_bytes, runtime_s), Timing.OVERLAP)
    assert recomputations(roomy, 1) == 0
    assert plans.figures(roomy, graph, costs, Timing.OVERLAP).peak_ram_bytes == graph.keep_all_peak_bytes
    tight = Budgets(graph.keep_all_peak_bytes - 1, runtime_s)
    kept_s = polish(recompute_r, graph, costs, tight, Timing.OVERLAP)
    assert recomputations(kept_s, 1) == 1 and recomputations(kept_s, 0) == 0 < recomputations(recompute_r, 0)
    assert tight.fits(plans.figures(kept_s, graph, costs, Timing.OVERLAP))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(min_forward=3), data=st.data(), room=st.floats(0.0, 1.0), timing=st.sampled_from(list(Timing)))
def test_polishing_never_costs_energy_and_its_plans_pass_the_checker(case, data, room, timing):
    """From a plan that recomputes random outputs for each reader, polishing within a budget
    between that plan's peak and keep-all's gives a plan the checker accepts, no dearer."""
    graph, costs = case
    stretches = []
    for i, node in enumerate(graph.nodes):
        readers = sorted(graph.consumers[i])
        for a, b in zip([i] + readers, readers):
            if b - a >= 2 and node.deps:
                stretches.append((i, a, b))
    chosen = data.draw(st.lists(st.sampled_from(stretches), unique=True)) if stretches else []
    plan = plan_from_decisions(graph, {key: Mode.RECOMPUTE for key in chosen}, keep_recomputed=False)
    before = plans.figures(plan, graph, costs, timing)
    ram = before.peak_ram_bytes + int(room * max(graph.keep_all_peak_bytes - before.peak_ram_bytes, 0))
    budgets = Budgets(ram, before.runtime_s)
    after = polish(plan, graph, costs, budgets, timing)
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(after, graph, costs, timing), checked) == []
    assert checked.total_j <= before.total_j or math.isclose(checked.total_j, before.total_j)
