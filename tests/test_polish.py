"""Polishing a plan: single changes that save energy within the budgets, and pairs of a change and an eviction.

Keep instead of recompute or page, page instead of recompute, rebuild instead of page, move a
stalling transfer; the schedules the optimiser returns admit none, nor (given the effort) a pair.
"""

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.graphs.io import load_graph
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser import optimise
from poetsim.optimiser.baselines.simple import rebuilt_plan
from poetsim.optimiser.bounds.cover import cover_bound
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import cover_plan
from poetsim.optimiser.plans.polish import (
    changes_of,
    evictions,
    evictions_of,
    hopeless_evictions,
    moved_transfers,
    paged_evictions,
    paged_recomputations,
    polish,
    swap,
)
from poetsim.optimiser.plans.rules import Mode, plan_from_decisions
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.costs import CostTable, node_costs
from poetsim.schedule.formats import load_schedule
from poetsim.schedule.model import Budgets, Compute, Free, Moves, PageIn, PageOut, Schedule, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

from optimiser_cases import HYBRID, MOVES, cascading_cases, cases, cost_table, far_reader, present, relu_or_conv, two_skips

RECOMPUTE = Moves(recompute=True, page=False)
PAGING = Moves(recompute=False, page=True)


def recomputations(plan, node: int) -> int:
    return sum(node in computed[:-1] for computed in plan.computed)


def test_the_cover_plan_of_resnet18_at_half_ram_keeps_conv1_between_two_readers():
    """rpi4, 50 % RAM, 1.5x, recompute-only: the cover's plan recomputes conv1 for stage 133 and again for stage 135.

    The polished plan keeps it in between, within the budget, for less.
    """
    graph = load_graph("resnet18_cifar", 8, None, None)
    costs = node_costs(graph, load_platform("rpi4"))
    budgets = Budgets(graph.keep_all_peak_bytes // 2, 1.5 * costs.plain_runtime_s)
    cover = cover_bound(graph, costs, budgets, RECOMPUTE, Timing.OVERLAP)
    before = present(cover_plan(graph, costs, budgets, Timing.OVERLAP, cover), "the cover's plan")
    after = polish(before, graph, costs, budgets, Timing.OVERLAP)
    checked = check_schedule(plans.to_schedule(after, graph, costs, Timing.OVERLAP), graph, costs, Timing.OVERLAP, budgets)
    assert compare_figures(plans.figures(after, graph, costs, Timing.OVERLAP), checked) == []
    saved_j = plans.figures(before, graph, costs, Timing.OVERLAP).total_j - checked.total_j
    assert saved_j > costs.compute_j[1]  # at least one conv1 fewer
    assert recomputations(after, 1) < recomputations(before, 1)


def test_the_hand_case_keeps_r_exactly_when_its_bytes_fit_beside_big():
    """relu_or_conv: recomputing r for its backward reader frees its 100 B while `big` peaks.

    Keeping it instead (keep-all) needs the keep-all peak: polished to that with the budget at that
    peak; one byte below, r is still recomputed (only s, its 1-byte input, is kept).
    """
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
    """Polishing a plan of random recomputations within a budget gives a plan the checker accepts, no dearer.

    From a plan that recomputes random outputs for each reader, polishing within a budget between
    that plan's peak and keep-all's gives a plan the checker accepts, no dearer.
    """
    graph, costs = case
    stretches = []
    for i, node in enumerate(graph.nodes):
        readers = sorted(graph.consumers[i])
        for a, b in zip([i, *readers], readers):
            if b - a >= 2 and node.deps:
                stretches.append((i, a, b))
    chosen = data.draw(st.lists(st.sampled_from(stretches), unique=True)) if stretches else []
    plan = plan_from_decisions(graph, {key: Mode.RECOMPUTE for key in chosen}, keep_recomputed=False)
    before = plans.figures(plan, graph, costs, timing)
    ram = before.peak_ram_bytes + int(room * max(graph.keep_all_peak_bytes - before.peak_ram_bytes, 0))
    budgets = Budgets(int(ram), before.runtime_s)
    after = polish(plan, graph, costs, budgets, timing)
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(after, graph, costs, timing), checked) == []
    assert checked.total_j <= before.total_j or math.isclose(checked.total_j, before.total_j)


def test_a_paged_output_that_fits_in_ram_is_kept_instead():
    """relu_or_conv, compute-only, r paged out and back in around `big`.

    With the budget at the keep-all peak, keeping r costs nothing more than keep-all, and polishing
    keeps it.
    """
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    paged = plan_from_decisions(graph, {(1, 2, 4): Mode.PAGE})
    assert plans.figures(paged, graph, costs, Timing.COMPUTE_ONLY).page_ins == 1
    budgets = Budgets(graph.keep_all_peak_bytes, 10 * costs.plain_runtime_s)
    after = polish(paged, graph, costs, budgets, Timing.COMPUTE_ONLY)
    fig = plans.figures(after, graph, costs, Timing.COMPUTE_ONLY)
    assert fig.page_ins == fig.page_outs == fig.recomputations == 0
    assert fig.total_j == pytest.approx(costs.plain_compute_j)


def test_a_paged_output_dearer_to_page_than_to_rebuild_is_rebuilt_instead():
    """relu_or_conv with paging at 5 J each way and r at 0.5 J, one byte below the keep-all peak (r cannot stay).

    Rebuilding r for its gradient, with its 1-byte input kept, costs 0.5 J where paging cost 10 J;
    polishing finds it, and the checker agrees.
    """
    graph, costs = relu_or_conv(node_j=0.5, page_j=5.0)
    paged = plan_from_decisions(graph, {(1, 2, 4): Mode.PAGE})
    budgets = Budgets(graph.keep_all_peak_bytes - 1, 10 * costs.plain_runtime_s)
    assert budgets.fits(plans.figures(paged, graph, costs, Timing.COMPUTE_ONLY))
    after = polish(paged, graph, costs, budgets, Timing.COMPUTE_ONLY)
    checked = check_schedule(
        plans.to_schedule(after, graph, costs, Timing.COMPUTE_ONLY), graph, costs, Timing.COMPUTE_ONLY, budgets
    )
    assert checked.page_ins == checked.page_outs == 0 and recomputations(after, 1) == 1
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 0.5)
    assert polish(paged, graph, costs, budgets, Timing.COMPUTE_ONLY, moves=PAGING) == paged  # no rebuilding without recomputation


def test_a_page_in_that_another_page_in_follows_unread_is_dropped():
    """A chain whose output r is paged in at stage 3, dropped unread, and paged in again at stage 5 for its reader.

    Every single change of that plan is a schedule the checker accepts (rebuilding r for its reader
    must not leave the second page-in beside it), and polishing drops the unread page-in.
    """
    nodes = [
        Node(0, "s", "input", False, (), 1),
        Node(1, "r", "op", False, (0,), 100),
        *(Node(k, f"f{k}", "op", False, (k - 1,), 10) for k in range(2, 6)),
        Node(6, "g", "grad", True, (1, 5), 1),
    ]
    graph = TrainingGraph.create("unread_page_in", nodes)
    costs = cost_table(graph, [1.0] * 7, [1.0] * 7, [0.1] * 7, [0.5] * 7)
    stages = (
        (Compute(0),),
        (Compute(1),),
        (PageOut(1), Compute(2), Free(1)),
        (PageIn(1), Compute(3), Free(2)),
        (Compute(4), Free(3), Free(1)),
        (PageIn(1), Compute(5), Free(4)),
        (Compute(6), Free(0), Free(1), Free(5)),
    )
    timing = Timing.COMPUTE_ONLY
    schedule = Schedule(graph.name, len(graph), timing, stages)
    given = check_schedule(schedule, graph, costs, timing)
    assert given.page_ins == 2
    budgets = Budgets(int(given.peak_ram_bytes), 10 * costs.plain_runtime_s)
    plan = present(plans.from_schedule(schedule, graph), "the plan of the schedule")
    for change in changes_of(plan, graph, HYBRID):
        checked = check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert compare_figures(plans.figures(change, graph, costs, timing), checked) == []
    after = polish(plan, graph, costs, budgets, timing)
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.page_ins < 2


def stalling_chain() -> tuple[TrainingGraph, CostTable]:
    """A chain whose output r is read at stage 2, by a short stage, and next by g at stage 7.

        0 s   (1 B)    input               4 f4  (300 B)  0.01 s: the peak
        1 r   (100 B)  5 J to rebuild      5 f5  (10 B)   2 s
        2 f2  (10 B)   0.01 s, reads r     6 f6  (10 B)   2 s
        3 f3  (10 B)   2 s                 7 g   (1 B)    reads r and f6
    Paging r takes 1 s each way at 0.05 J, and static power is 1 W.
    """
    nodes = [
        Node(0, "s", "input", False, (), 1),
        Node(1, "r", "op", False, (0,), 100),
        Node(2, "f2", "op", False, (1,), 10),
        Node(3, "f3", "op", False, (2,), 10),
        Node(4, "f4", "op", False, (3,), 300),
        Node(5, "f5", "op", False, (4,), 10),
        Node(6, "f6", "op", False, (5,), 10),
        Node(7, "g", "grad", True, (1, 6), 1),
    ]
    graph = TrainingGraph.create("stalling_chain", nodes)
    seconds = [0.01, 0.01, 0.01, 2.0, 0.01, 2.0, 2.0, 0.01]
    joules = [0.01, 5.0, 0.01, 2.0, 0.01, 2.0, 2.0, 0.01]
    return graph, cost_table(graph, seconds, joules, [1.0] * 8, [0.05] * 8, static_power_w=1.0)


def test_a_page_out_that_stalls_a_short_stage_moves_to_the_long_stage_after_it():
    """stalling_chain under overlap, r paged out in stage 2 (0.01 s of compute, 1 s of transfer) and in at stage 6.

    Keeping r is over the budget (it would sit beside f4) and rebuilding it costs 5 J; moving the
    page-out to stage 3, whose 2 s of compute hide it, holds r one stage longer within the budget
    and saves the 0.99 s stall, 0.99 J of static energy. The checker agrees.
    """
    graph, costs = stalling_chain()
    timing = Timing.OVERLAP
    paged = plan_from_decisions(graph, {(1, 2, 7): Mode.PAGE})
    assert paged.paged_out[2] == {1} and paged.paged_in[6] == {1}
    before = plans.figures(paged, graph, costs, timing)
    budgets = Budgets(320, 10 * costs.plain_runtime_s)
    assert budgets.fits(before) and graph.keep_all_peak_bytes > 320
    after = polish(paged, graph, costs, budgets, timing)
    assert after.paged_out[3] == {1} and after.paged_in[6] == {1}
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(after, graph, costs, timing), checked) == []
    assert before.total_j - checked.total_j == pytest.approx(0.99)
    assert polish(paged, graph, costs, budgets, Timing.COMPUTE_ONLY) == paged  # without overlap nothing stalls


def stall_s(plan, graph, costs, timing) -> float:
    """How long the plan's stages outlast their compute, waiting for transfers."""
    acc = plans.account(plan, graph, costs, timing)
    return sum(max(0.0, d / costs.dma_channels - c) for c, d in zip(acc.compute_s, acc.dma_s))


def test_squeezenets_page_outs_move_from_stages_of_a_fraction_of_a_millisecond_to_stages_that_hide_them():
    """SqueezeNet 1.1 on the Pi at 50 % and 1.2x, the rebuilt greedy's plan with both moves.

    Its three page-outs sit right after their outputs, two of them in stages of 0.16 ms that the
    21 ms transfers stall by 53 ms in all. Polished, each is paged out in a later stage (9 in 15,
    16 in 30), the stall falls to 5 ms; one of its seven recomputations (33) is paged instead
    (out in 52, in in 91), and the schedule costs 29.2535 J instead of 29.3873 J, as the checker
    replays it.
    """
    p = build_problem("scenarios/graphs/outside/squeezenet1_1.json", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP)
    graph, costs, budgets, timing = p.graph, p.costs, p.budgets, p.timing
    rebuilt = present(rebuilt_plan(graph, costs, budgets, timing, moves=HYBRID), "the rebuilt plan")
    assert rebuilt.paged_out[10] == {9} and rebuilt.paged_out[17] == {16}
    assert stall_s(rebuilt, graph, costs, timing) == pytest.approx(0.0531, abs=1e-4)
    assert recomputations(rebuilt, 33) == 1
    after = polish(rebuilt, graph, costs, budgets, timing)
    assert after.paged_out[15] == {9} and after.paged_out[30] == {16}
    assert after.paged_out[52] == {33} and after.paged_in[91] == {33} and recomputations(after, 33) == 0
    assert stall_s(after, graph, costs, timing) == pytest.approx(0.0051, abs=1e-4)
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.total_j == pytest.approx(29.253514, rel=1e-6)


def test_a_page_in_is_never_moved_into_a_stage_where_its_output_is_still_resident():
    """A chain whose output r is paged out in stage 2 but still read in stage 3, and paged in during a short stage 5.

        1 r   (100 B)  read by f2 and f3, then by g      4 f4  (300 B)  0.01 s
        2 f2  (10 B)   2 s                               5 f5  (10 B)   0.01 s: the page-in stalls
        3 f3  (10 B)   2 s, reads r too                  6 f6  (10 B)   2 s
    Stage 3 has room for the page-in, but r is resident there (it is read there); every moved
    transfer is a schedule the checker accepts, and none pages r in before stage 4.
    """
    nodes = [
        Node(0, "s", "input", False, (), 1),
        Node(1, "r", "op", False, (0,), 100),
        Node(2, "f2", "op", False, (1,), 10),
        Node(3, "f3", "op", False, (1, 2), 10),
        Node(4, "f4", "op", False, (3,), 300),
        Node(5, "f5", "op", False, (4,), 10),
        Node(6, "f6", "op", False, (5,), 10),
        Node(7, "g", "grad", True, (1, 6), 1),
    ]
    graph = TrainingGraph.create("resident_reader", nodes)
    seconds = [0.01, 0.01, 2.0, 2.0, 0.01, 0.01, 2.0, 0.01]
    costs = cost_table(graph, seconds, [1.0] * 8, [1.0] * 8, [0.05] * 8, static_power_w=1.0)
    timing = Timing.OVERLAP
    paged = plan_from_decisions(graph, {(1, 3, 7): Mode.PAGE}, {(1, 3, 7): (2, 5)})
    assert paged.paged_out[2] == {1} and paged.paged_in[5] == {1} and 1 in paged.kept[2]
    moved = list(moved_transfers(paged, graph, costs, plans.account(paged, graph, costs, timing)))
    assert moved
    for change in moved:
        check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert not any(1 in change.paged_in[t] for t in range(4))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(min_forward=3, slow_paging=True), data=st.data())
def test_every_moved_transfer_is_a_schedule_the_checker_values_as_the_model_does(case, data):
    """On random graphs with slow paging, a plan paging random stretches in random stages, under overlap.

    Each of its moved transfers is a schedule the checker accepts, with the figures of the model's
    accounting.
    """
    graph, costs = case
    stretches = []
    for i in range(len(graph)):
        readers = sorted(graph.consumers[i])
        stretches += [(i, a, b) for a, b in zip([i, *readers], readers) if b - a >= 3]
    assume(stretches)
    chosen = data.draw(st.lists(st.sampled_from(stretches), min_size=1, unique=True))
    stages = {(i, a, b): (data.draw(st.integers(i + 1, b - 3)), data.draw(st.integers(i + 3, b - 1))) for i, a, b in chosen}
    timing = Timing.OVERLAP
    plan = plan_from_decisions(graph, {key: Mode.PAGE for key in chosen}, stages)
    acc = plans.account(plan, graph, costs, timing)
    moved = list(moved_transfers(plan, graph, costs, acc))
    event("moves" if moved else "no move")
    for change in moved:
        checked = check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert compare_figures(plans.figures(change, graph, costs, timing), checked) == []


def test_a_recomputation_dearer_than_its_transfers_is_paged_in_instead():
    """stalling_chain under overlap, r recomputed with its input s at stage 7 for g (RAM does not allow keeping r beside f4).

    The two recomputations cost 5.01 J and 0.02 s; paging r instead costs 0.1 J: out in stage 3
    and in in stage 6, both hidden behind 2 s of compute, r absent over f4's peak. Polished, the
    plan pages r so and drops both recomputations, saving 5.01 J and 0.02 J of static energy
    less the 0.1 J of transfers: 4.93 J, as the checker replays it. Without paging among the
    moves, the polished plan pages nothing.
    """
    graph, costs = stalling_chain()
    timing = Timing.OVERLAP
    recomputing = plan_from_decisions(graph, {(1, 2, 7): Mode.RECOMPUTE})
    assert recomputing.computed[7] == (0, 1, 7)
    before = plans.figures(recomputing, graph, costs, timing)
    budgets = Budgets(320, 10 * costs.plain_runtime_s)
    assert budgets.fits(before) and graph.keep_all_peak_bytes > 320
    after = polish(recomputing, graph, costs, budgets, timing)
    assert after.computed[7] == (7,)
    assert after.paged_out[3] == {1} and after.paged_in[6] == {1}
    checked = check_schedule(plans.to_schedule(after, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(after, graph, costs, timing), checked) == []
    assert before.total_j - checked.total_j == pytest.approx(4.93)
    assert not polish(recomputing, graph, costs, budgets, timing, moves=RECOMPUTE).moves.page


def stretches_of(graph: TrainingGraph) -> list[tuple[int, int, int]]:
    """Every stretch of two stages or more between an output's uses, as `rules` keys them: (i, a, b)."""
    stretches = []
    for i in range(len(graph)):
        readers = sorted(graph.consumers[i])
        stretches += [(i, a, b) for a, b in zip([i, *readers], readers) if b - a >= 2]
    return stretches


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    timing=st.sampled_from(list(Timing)),
)
def test_every_paged_recomputation_is_a_schedule_the_checker_values_as_the_model_does(case, data, timing):
    """On random graphs, a plan recomputing random stretches, some of them paged too.

    Each of its recomputations paged instead is a schedule the checker accepts, with the figures
    of the model's accounting (also where a copy of the output is already on storage).
    """
    graph, costs = case
    stretches = stretches_of(graph)
    assume(stretches)
    chosen = data.draw(st.lists(st.sampled_from(stretches), min_size=1, unique=True))
    decisions = {key: data.draw(st.sampled_from([Mode.RECOMPUTE, Mode.RECOMPUTE, Mode.PAGE])) for key in chosen}
    plan = plan_from_decisions(graph, decisions)
    paged = list(paged_recomputations(plan, graph, costs, plans.account(plan, graph, costs, timing)))
    event("paged" if paged else "none")
    for change in paged:
        checked = check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert compare_figures(plans.figures(change, graph, costs, timing), checked) == []
        assert sum(len(c) for c in change.computed) < sum(len(c) for c in plan.computed)


def test_a_swap_keeps_the_dear_output_and_recomputes_the_cheap_one_where_only_one_fits():
    """two_skips, 410 B, recomputing a (5 J) and keeping b.

    Keeping a instead is the only single change that saves energy, and it needs 510 B: polish
    leaves the plan as it is. The swap keeps a and recomputes b (0.1 J) in its backward reader's
    stage; the checker agrees, 4.91 J less.
    """
    graph, costs = two_skips()
    timing = Timing.COMPUTE_ONLY
    dear = plan_from_decisions(graph, {(1, 2, 7): Mode.RECOMPUTE})
    budgets = Budgets(410, 10.0)
    before = plans.figures(dear, graph, costs, timing)
    assert budgets.fits(before) and graph.keep_all_peak_bytes == 510
    assert polish(dear, graph, costs, budgets, timing) == dear
    swapped = present(swap(dear, graph, costs, budgets, timing), "the swap")
    assert swapped.computed[6] == (2, 6) and swapped.computed[7] == (7,)
    checked = check_schedule(plans.to_schedule(swapped, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(swapped, graph, costs, timing), checked) == []
    assert before.total_j - checked.total_j == pytest.approx(4.91)
    assert swap(dear, graph, costs, budgets, timing, moves=PAGING) is None  # b cannot leave f4's stage by paging
    assert swap(swapped, graph, costs, budgets, timing) is None


@pytest.mark.parametrize("timing", list(Timing))
def test_a_swap_pages_the_cheap_output_out_over_the_peak_where_paging_it_costs_less_than_rebuilding_it(timing):
    """far_reader, 410 B, recomputing a (5 J) and keeping b.

    Keeping a is the only single change that saves energy, and it needs 510 B at f5. Recompute-only,
    the swap keeps a and rebuilds b (1 J) in g1's stage; with paging too, it keeps a and pages b
    out in f4's stage and back in in f7's (0.02 J): b is absent at f5 under either timing, and the
    checker agrees, 4.99 J less.
    """
    graph, costs = far_reader()
    dear = plan_from_decisions(graph, {(1, 2, 9): Mode.RECOMPUTE})
    budgets = Budgets(410, 10.0)
    before = plans.figures(dear, graph, costs, timing)
    assert budgets.fits(before) and polish(dear, graph, costs, budgets, timing) == dear
    rebuilt = present(swap(dear, graph, costs, budgets, timing, moves=Moves(recompute=True, page=False)), "the swap")
    assert rebuilt.computed[8] == (2, 8) and not any(rebuilt.paged_out)
    paged = present(swap(dear, graph, costs, budgets, timing, moves=HYBRID), "the swap")
    assert paged.computed == tuple((t,) for t in range(len(graph)))
    assert paged.paged_out[4] == {2} and paged.paged_in[7] == {2}
    checked = check_schedule(plans.to_schedule(paged, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(plans.figures(paged, graph, costs, timing), checked) == []
    assert before.total_j - checked.total_j == pytest.approx(4.99)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    timing=st.sampled_from(list(Timing)),
)
def test_every_eviction_is_a_schedule_the_checker_values_as_the_model_does(case, data, timing):
    """On random graphs, a plan recomputing or paging random stretches, at a random stage.

    Each of its evictions there, by recomputation and by paging, is a schedule the checker
    accepts, with the figures of the model's accounting, and holds fewer outputs at the start of
    that stage; one by paging neither holds the output at that stage nor transfers it there, and
    recomputes nothing more.
    """
    graph, costs = case
    stretches = stretches_of(graph)
    chosen = data.draw(st.lists(st.sampled_from(stretches), unique=True)) if stretches else []
    decisions = {key: data.draw(st.sampled_from([Mode.RECOMPUTE, Mode.PAGE])) for key in chosen}
    plan = plan_from_decisions(graph, decisions)
    stage = data.draw(st.integers(1, len(graph) - 1))
    acc = plans.account(plan, graph, costs, timing)
    paged = list(paged_evictions(plan, graph, costs, acc, stage))
    evicted = list(evictions_of(plan, graph, costs, acc, stage, HYBRID))
    assert evicted == [*evictions(plan, graph, stage), *paged]
    event("paged evictions" if paged else "evictions" if evicted else "none")
    for change in evicted:
        checked = check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert compare_figures(plans.figures(change, graph, costs, timing), checked) == []
        assert change.resident(stage) < plan.resident(stage)
    for change in paged:
        (gone,) = plan.resident(stage) - change.resident(stage)
        assert gone not in change.paged_in[stage] | change.paged_out[stage]
        assert change.computed == plan.computed


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    room=st.floats(0.0, 1.0),
    extra=st.floats(0.0, 1.5),
    timing=st.sampled_from(list(Timing)),
    moves=st.sampled_from([HYBRID, RECOMPUTE, PAGING]),
)
def test_the_evictions_a_swap_leaves_out_could_not_fit_below_the_best(case, data, room, extra, timing, moves):
    """On random graphs, at a random stage, budget and energy to beat.

    Every eviction of an output that `hopeless_evictions` names leaves that stage over the RAM
    budget or costs no less than the energy to beat.
    """
    graph, costs = case
    plan = _drawn_plan(graph, data)
    stage = data.draw(st.integers(1, len(graph) - 1))
    acc = plans.account(plan, graph, costs, timing)
    plan_j = plans.figures(plan, graph, costs, timing, acc).total_j
    resident = plan.resident(stage)
    assume(resident)
    # Budgets and energies near what one eviction there frees and adds, where the filters bite.
    ram = acc.stage_peak_bytes(stage) - int(room * max(costs.output_bytes[i] for i in resident))
    best_j = plan_j + extra * max(max(costs.compute_j[i], costs.page_in_j[i]) for i in resident)
    hopeless = hopeless_evictions(plan, costs, acc, stage, ram, plan_j, best_j, moves)
    left_out = 0
    for evicted in evictions_of(plan, graph, costs, acc, stage, moves):
        (gone,) = plan.resident(stage) - evicted.resident(stage)
        if gone in hopeless:
            left_out += 1
            evicted_acc = plans.account(evicted, graph, costs, timing)
            evicted_j = plans.figures(evicted, graph, costs, timing, evicted_acc).total_j
            assert evicted_acc.stage_peak_bytes(stage) > ram or evicted_j >= best_j
    event("left out" if left_out else "none left out")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    timing=st.sampled_from(list(Timing)),
)
def test_a_change_accounted_from_its_plans_accounting_has_the_same_figures_as_one_accounted_alone(case, data, timing):
    """On random graphs, each single change of a plan recomputing or paging random stretches, and each eviction after it.

    Accounted with the accounting of the plan it was made from lending its unchanged stages,
    every number equals that of the change accounted from scratch: frees, RAM at every point,
    stage times, figures.
    """
    graph, costs = case
    stretches = stretches_of(graph)
    chosen = data.draw(st.lists(st.sampled_from(stretches), unique=True)) if stretches else []
    decisions = {key: data.draw(st.sampled_from([Mode.RECOMPUTE, Mode.PAGE])) for key in chosen}
    plan = plan_from_decisions(graph, decisions)
    base = plans.account(plan, graph, costs, timing)
    stage = data.draw(st.integers(1, len(graph) - 1))
    lent = 0
    for change in changes_of(plan, graph, HYBRID, costs, timing):
        alone = plans.account(change, graph, costs, timing)
        from_base = plans.account(change, graph, costs, timing, base)
        assert from_base == alone
        assert plans.figures(change, graph, costs, timing, base=base) == plans.figures(change, graph, costs, timing)
        lent += sum(a is b for a, b in zip(from_base.after_bytes, base.after_bytes))
        for evicted in evictions_of(change, graph, costs, from_base, stage, HYBRID):
            assert plans.account(evicted, graph, costs, timing, from_base) == plans.account(evicted, graph, costs, timing)
    # One output held one stage longer: only the next stage's start changes, with none of its own sets.
    held = next((i for i in range(stage) if i not in plan.kept[stage - 1]), None)
    if held is not None:
        kept = tuple(k | {held} if s == stage - 1 else k for s, k in enumerate(plan.kept))
        longer = replace(plan, kept=kept)
        assert plans.account(longer, graph, costs, timing, base) == plans.account(longer, graph, costs, timing)
    event("stages lent" if lent else "nothing lent")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    timing=st.sampled_from(list(Timing)),
)
def test_a_changes_energy_from_the_stages_it_made_is_its_figures_energy(case, data, timing):
    """On random graphs, each single change of a plan recomputing or paging random stretches, and each eviction after it.

    Its energy from its plan's stage energies (`Energies.of`, which sums only the stages whose sets
    the change made) equals its figures' total to a thousandth of the screen's margin, so that
    `cannot_beat` never rules out a change its replay would take. (The two sum their terms in
    different orders: they differ by a few units in the last place, 1e-15 of 0.69 J seen.)
    """
    graph, costs = case
    plan = _drawn_plan(graph, data)
    stage = data.draw(st.integers(1, len(graph) - 1))
    own = plans.Energies(plan, costs, timing, plans.figures(plan, graph, costs, timing).total_j)
    tolerance = 1e-3 * plans.SCREEN_MARGIN
    for change in changes_of(plan, graph, HYBRID, costs, timing):
        acc = plans.account(change, graph, costs, timing)
        total_j = plans.figures(change, graph, costs, timing, acc).total_j
        assert own.of(change) == pytest.approx(total_j, rel=tolerance, abs=tolerance)
        assert not own.cannot_beat(change, total_j)
        made = plans.Energies(change, costs, timing, total_j)
        for evicted in evictions_of(change, graph, costs, acc, stage, HYBRID):
            evicted_j = plans.figures(evicted, graph, costs, timing).total_j
            assert made.of(evicted) == pytest.approx(evicted_j, rel=tolerance, abs=tolerance)


def assert_no_single_change_improves(outcome, graph, costs, budgets, timing, moves) -> int:
    """Check that no single change of the returned schedule is cheaper within the budgets; return how many there were.

    Every single change of the returned schedule (`changes_of`) is a schedule the checker accepts
    and values as the model does, and none within the budgets is cheaper; how many changes there
    were.
    """
    schedule = present(outcome.schedule, "the returned schedule")
    plan = present(plans.from_schedule(schedule, graph), "the plan of the returned schedule")
    returned = check_schedule(schedule, graph, costs, timing, budgets)
    tolerance = 1e-9 * returned.total_j
    count = 0
    for change in changes_of(plan, graph, moves, costs, timing):
        count += 1
        checked = check_schedule(plans.to_schedule(change, graph, costs, timing), graph, costs, timing)
        assert compare_figures(plans.figures(change, graph, costs, timing), checked) == []
        assert not (budgets.fits(checked) and checked.total_j < returned.total_j - tolerance), "a single change improves it"
    return count


def _drawn_plan(graph, data):
    """A plan recomputing or paging random stretches of `graph`, recomputed outputs dropped again."""
    stretches = stretches_of(graph)
    chosen = data.draw(st.lists(st.sampled_from(stretches), unique=True)) if stretches else []
    decisions = {key: data.draw(st.sampled_from([Mode.RECOMPUTE, Mode.PAGE])) for key in chosen}
    return plan_from_decisions(graph, decisions, keep_recomputed=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    data=st.data(),
    room=st.floats(0.0, 1.0),
    timing=st.sampled_from(list(Timing)),
)
def test_the_filtered_changes_are_exactly_those_that_could_fit_at_less_energy(case, data, room, timing):
    """On random graphs, every change that `changes_of`'s filters leave out would be rejected by its figures.

    With `hopeful`, what is left out costs no less energy than the plan; with `ram_bytes`, what is
    left out (and not by `hopeful`) breaks the RAM budget. What they keep is the rest, in order.
    """
    graph, costs = case
    plan = _drawn_plan(graph, data)
    fig = plans.figures(plan, graph, costs, timing)
    ram = int(fig.peak_ram_bytes) + int(room * max(graph.keep_all_peak_bytes - fig.peak_ram_bytes, 0))
    every = list(changes_of(plan, graph, HYBRID, costs, timing))
    hopeful = list(changes_of(plan, graph, HYBRID, costs, timing, hopeful=True))
    both = list(changes_of(plan, graph, HYBRID, costs, timing, hopeful=True, ram_bytes=ram))
    assert [c for c in every if c in hopeful] == hopeful and [c for c in hopeful if c in both] == both
    for change in every:
        changed = plans.figures(change, graph, costs, timing)
        if change not in hopeful:
            assert changed.total_j >= fig.total_j
        elif change not in both:
            assert changed.peak_ram_bytes > ram
    event("left out" if len(both) < len(every) else "none left out")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3), cascading_cases()),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 2.0),
    timing=st.sampled_from(list(Timing)),
    moves=st.sampled_from(MOVES),
    effort=st.sampled_from([0.0, 0.02, None]),
)
def test_no_returned_schedule_is_improved_by_a_single_change(case, ram_share, runtime_x, timing, moves, effort):
    """On random graphs, whatever stops the search, the schedule it returns is a local optimum.

    On random graphs, whatever stops the search (no effort at all, a little, or a proof), the
    schedule it returns is a local optimum: no keep-instead-of-recompute, page-instead-of-recompute,
    keep-instead-of-page, recompute-instead-of-page or moved-transfer change of it fits the
    budgets at less energy.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    outcome = optimise(graph, costs, budgets, moves, timing, effort=effort)
    event(f"{outcome.status}")
    assume(outcome.schedule is not None)
    changes = assert_no_single_change_improves(outcome, graph, costs, budgets, timing, moves)
    event("changes to try" if changes else "no change to try")


@pytest.mark.parametrize(
    ("platform", "ram"),
    [
        ("rpi4", "50%"),
        ("jetson-tx2", "50%"),
        ("jetson-tx2", "35%"),
        # Its settling polish takes the longest of the four: in `make test-slow`.
        pytest.param("rpi4", "35%", marks=pytest.mark.slow),
    ],
)
def test_mobilenet_v2s_unproven_schedules_are_improved_by_no_single_change(platform, ram):
    """MobileNetV2 (96x96, batch 1; depthwise separable convolutions, inverted residuals), hybrid, 1.2x, 4 units of effort.

    The returned schedule is a local optimum for polish's changes.
    """
    p = build_problem("mobilenet_v2", platform, parse_ram(ram), 1.2, Timing.OVERLAP, input_size=96)
    # A guard far beyond the effort: the search ends on its work, whatever else the machine runs.
    outcome = optimise(p.graph, p.costs, p.budgets, HYBRID, Timing.OVERLAP, effort=4.0, time_limit_s=600.0)
    assert outcome.schedule is not None, outcome.message
    assert_no_single_change_improves(outcome, p.graph, p.costs, p.budgets, Timing.OVERLAP, HYBRID)


@pytest.mark.parametrize(
    ("graph_file", "platform", "ram"),
    [
        ("mobilenet_v1", "rpi4", "50%"),
        # The two largest graphs, a minute each: in `make test-slow`.
        pytest.param("shufflenet_v2", "rpi4", "35%", marks=pytest.mark.slow),
        pytest.param("efficientnet_b0", "rpi4", "35%", marks=pytest.mark.slow),
    ],
)
def test_unproven_schedules_of_the_outside_architectures_are_improved_by_no_single_change(graph_file, platform, ram):
    """Architectures the optimiser was not tuned on: its schedules are still local optima.

    Hybrid, 1.2x, 4 units of effort: each returned schedule is improved by no keep-instead-of-
    recompute, page-instead-of-recompute, keep-instead-of-page, recompute-instead-of-page or
    moved-transfer change within the budgets.
    """
    p = build_problem(f"scenarios/graphs/outside/{graph_file}.json", platform, parse_ram(ram), 1.2, Timing.OVERLAP)
    # A guard far beyond the effort: the search ends on its work, whatever else the machine runs.
    outcome = optimise(p.graph, p.costs, p.budgets, HYBRID, Timing.OVERLAP, effort=4.0, time_limit_s=600.0)
    assert outcome.schedule is not None, outcome.message
    assert assert_no_single_change_improves(outcome, p.graph, p.costs, p.budgets, Timing.OVERLAP, HYBRID) > 0


def test_a_page_that_keeps_the_deadline_only_with_moved_transfers_is_taken():
    """ViT of the outside set at 35 % on the Pi, 1.2x, from a schedule that recomputes three attention blocks.

    Paging the first block's 3.49 MB output instead of recomputing it (1.74 J) misses the
    deadline (or the RAM budget) wherever its 142 ms page-out goes, unless the stage it goes to sheds its other
    page-outs (docs/optimiser.md, section 9): no single change that pages it fits. Polish takes
    the page with the moved transfers that keep the deadline.
    """
    p = build_problem("scenarios/graphs/outside/vit_tiny.json", "rpi4", parse_ram("35%"), 1.2, Timing.OVERLAP)
    schedule = load_schedule(Path(__file__).parent / "schedules" / "vit_tiny_rpi4_35.json")
    before = present(plans.from_schedule(schedule, p.graph), "the schedule's plan")
    before_j = check_schedule(schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets).total_j
    attention = next(n.id for n in p.graph.nodes if n.name == "encoder.layers.0.self_attn")
    assert recomputations(before, attention) == 1
    acc = plans.account(before, p.graph, p.costs, Timing.OVERLAP)
    pages = [c for c in paged_recomputations(before, p.graph, p.costs, acc) if recomputations(c, attention) == 0]
    assert pages
    figs = [plans.figures(change, p.graph, p.costs, Timing.OVERLAP) for change in pages]
    assert not any(p.budgets.fits(fig) for fig in figs)
    assert any(fig.total_j < before_j - 1.0 and fig.peak_ram_bytes <= p.budgets.ram_bytes for fig in figs)  # past the deadline
    after = polish(before, p.graph, p.costs, p.budgets, Timing.OVERLAP)
    returned = plans.to_schedule(after, p.graph, p.costs, Timing.OVERLAP)
    checked = check_schedule(returned, p.graph, p.costs, Timing.OVERLAP, p.budgets)
    assert recomputations(after, attention) == 0
    assert before_j - checked.total_j > 1.0  # the block's recomputation less its transfers and stall
