"""The eviction covers: hand-solved bounds, proofs of infeasibility, and the bound never above the MILP's optimum."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.inputs.scenario import parse_ram
from poetsim.optimiser import optimise
from poetsim.optimiser.allowance import effort
from poetsim.optimiser.bounds.cover import CoverBound, cover_bound, paging_floor_j, second_restore_bound
from poetsim.optimiser.bounds.cover_model import CoverModel, CoverShape
from poetsim.optimiser.bounds.cover_rows import cover_rows
from poetsim.optimiser.bounds.events import Event, EventKind
from poetsim.optimiser.bounds.timed_cover import relaxation_bound, timed_cover_bound
from poetsim.optimiser.plans.cover_plan import cover_plan, events_plan
from poetsim.optimiser.plans.plan import figures, to_schedule
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.model import Budgets, Timing
from poetsim.schedule.problem import build_problem

from optimiser_cases import (
    BOTH,
    HYBRID,
    INPUTS,
    MOVES,
    OWN,
    PAGING_ONLY,
    RECOMPUTE_ONLY,
    cascading_cases,
    cases,
    cost_table,
    crowding_cases,
    present,
    relu_or_conv,
    training_graph,
)

CO, OV = Timing.COMPUTE_ONLY, Timing.OVERLAP


def overhead(cover) -> float:
    return cover.bound_j - cover.keep_all_j


def test_keep_all_within_the_budget_leaves_nothing_to_cover():
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    cover = cover_bound(graph, costs, Budgets(graph.keep_all_peak_bytes, 10.0), HYBRID, CO)
    assert cover.rows == () and cover.bound_j == cover.keep_all_j and not cover.infeasible


def test_a_cheap_relu_is_bounded_by_one_recomputation():
    """relu_or_conv at 201 B (test_optimiser has the hand-solved optimum, keep-all + 0.01 J).

    Right after `out` (stage 3) RAM holds out (50 B), its input big (100 B) and r (100 B, read
    by gr at 4): 49 B too many, so r must be absent. Recomputing r needs its input s, past s's
    last reader: holding s costs 1 B (r still frees 99 B >= 49 B). Recomputing costs 0.01 J,
    paging 0.05 J each way: the cover's value is 0.01 J, the optimum.
    """
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    cover = cover_bound(graph, costs, Budgets(201, 10.0), HYBRID, CO)
    assert [(row.stage, row.excess_bytes) for row in cover.rows] == [(3, 49)]
    assert overhead(cover) == pytest.approx(0.01, rel=1e-9)
    assert cover.recomputed == {1} and cover.paged == frozenset()


def test_a_costly_conv_is_bounded_by_paging_it_out_and_in():
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    cover = cover_bound(graph, costs, Budgets(201, 10.0), HYBRID, CO)
    assert overhead(cover) == pytest.approx(0.10, rel=1e-9) and cover.paged == {1}


def test_under_overlap_a_page_in_cannot_make_room_the_stage_before_its_reader():
    """Under overlap r's page-in for gr (stage 4) holds RAM during stage 3 itself, so paging cannot empty stage 3.

    Hybrid must recompute (1 J), and paging-only is proven infeasible, as the MILP (without the
    cover) confirms.
    """
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    budgets = Budgets(201, 10.0)
    assert overhead(cover_bound(graph, costs, budgets, HYBRID, OV)) == pytest.approx(1.0, rel=1e-9)
    paging = cover_bound(graph, costs, budgets, PAGING_ONLY, OV)
    assert paging.infeasible and paging.bound_j is None and "only pages" in paging.message
    assert optimise(graph, costs, budgets, PAGING_ONLY, OV, warm_start=False).status == "infeasible"


def test_the_deadline_bars_recomputation_and_can_prove_infeasibility():
    """At 1.0x no recomputation fits the deadline: hybrid pages (0.10 J), recompute-only is infeasible."""
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    budgets = Budgets(201, costs.plain_runtime_s)
    assert overhead(cover_bound(graph, costs, budgets, HYBRID, CO)) == pytest.approx(0.10, rel=1e-9)
    recompute = cover_bound(graph, costs, budgets, RECOMPUTE_ONLY, CO)
    assert recompute.infeasible and "deadline" in recompute.message


def test_under_overlap_transfers_that_outlast_the_deadline_prove_paging_infeasible():
    """Output r (100 B) must be absent while `mid` is computed (stage 3), and gr reads it at stage 5.

    Paging can make room: out during stage 2, in during stage 4. Each transfer takes 4 s, the plain pass 6 s. Under
    overlap the runtime is at least the whole DMA time (8 s), so at a 6 s deadline no paging-only
    schedule fits, which the MILP confirms; at 12 s, or in the paper's compute-only model (transfers
    take no time), paging r is the bound, 0.10 J.
    """
    nodes = [
        Node(0, "s", "input", False, (), 1),
        Node(1, "r", "op", False, (0,), 100),
        Node(2, "big", "op", False, (1,), 100),
        Node(3, "mid", "op", False, (2,), 50),
        Node(4, "out", "op", False, (3,), 50),
        Node(5, "gr", "grad", True, (1, 4), 1),
    ]
    graph = TrainingGraph.create("slow_storage", nodes)
    costs = cost_table(graph, [1.0] * 6, [1.0] * 6, [4.0] * 6, [0.05] * 6)
    tight, loose = Budgets(201, 6.0), Budgets(201, 12.0)
    paging = cover_bound(graph, costs, tight, PAGING_ONLY, OV)
    assert paging.infeasible and "transfers" in paging.message
    assert optimise(graph, costs, tight, PAGING_ONLY, OV, warm_start=False).status == "infeasible"
    assert overhead(cover_bound(graph, costs, loose, PAGING_ONLY, OV)) == pytest.approx(0.10, rel=1e-9)
    assert overhead(cover_bound(graph, costs, tight, PAGING_ONLY, CO)) == pytest.approx(0.10, rel=1e-9)
    assert optimise(graph, costs, loose, PAGING_ONLY, OV).status == "optimal"


def test_under_overlap_a_recomputation_also_costs_static_power_for_its_time():
    """relu_or_conv's r takes 1 s to recompute; at 0.5 W of static power that adds 0.5 J."""
    graph, base = relu_or_conv(node_j=0.01, page_j=0.05)
    T = len(graph)
    costs = cost_table(graph, [1.0] * T, base.compute_j, [0.1] * T, base.page_in_j, static_power_w=0.5)
    cover = cover_bound(graph, costs, Budgets(201, 10.0), HYBRID, OV)
    assert cover.keep_all_j == pytest.approx(costs.plain_compute_j + 0.5 * costs.plain_runtime_s)
    assert overhead(cover) == pytest.approx(0.01 + 0.5 * 1.0, rel=1e-9)


def stalling_transfer_case(stalls: str = "page-out"):
    """The chain s (1 B) -> a (100 B) -> b (100 B) -> c (100 B) -> d (1 B); gr reads a and d. Budget 250 B.

    Only stage 3 (c) is over: c + b + a = 300 B, so a must be absent there. Under `overlap`
    paging makes a absent at 3 only by a page-out in stage 2 (b) and a page-in in stage 4 (d).
    The transfer takes 3 s each way. With `stalls` "page-out", b takes 1 s and d 4 s, so stage 2
    lasts 3 s: 2 s beyond its compute, at 0.5 W of static power 1 J, on top of 0.2 J each way;
    with "page-in", b takes 4 s and d 1 s, and stage 4 stalls the same. Recomputing a costs 5 J.
    Optimum 1.4 J above keep-all; the cover that does not price the stall says 0.4 J.
    """
    nodes = [
        Node(0, "s", "op", False, (), 1),
        Node(1, "a", "op", False, (0,), 100),
        Node(2, "b", "op", False, (1,), 100),
        Node(3, "c", "op", False, (2,), 100),
        Node(4, "d", "op", False, (3,), 1),
        Node(5, "gr", "grad", True, (1, 4), 1),
    ]
    graph = TrainingGraph.create(f"stalling_{stalls}", nodes)
    b_s, d_s = (1.0, 4.0) if stalls == "page-out" else (4.0, 1.0)
    costs = cost_table(
        graph, [1.0, 1.0, b_s, 1.0, d_s, 1.0], [1.0, 5.0, 1.0, 1.0, 1.0, 1.0], [3.0] * 6, [0.2] * 6, static_power_w=0.5
    )
    return graph, costs, Budgets(250, 100.0)


@pytest.mark.parametrize("stalls", ["page-out", "page-in"])
@pytest.mark.parametrize("moves", [PAGING_ONLY, HYBRID], ids=lambda m: m.label)
def test_a_transfer_that_cannot_hide_in_any_stage_is_priced_at_its_stall(moves, stalls):
    graph, costs, budgets = stalling_transfer_case(stalls)
    plain = cover_bound(graph, costs, budgets, moves, OV)
    priced = cover_bound(graph, costs, budgets, moves, OV, stalls=True)
    assert overhead(plain) == pytest.approx(0.4, rel=1e-9)
    assert overhead(priced) == pytest.approx(1.4, rel=1e-9)
    assert priced.paged == {1} and not priced.recomputed
    status, optimum = milp_optimum(graph, costs, budgets, moves, OV)
    assert status == "optimal" and optimum - priced.keep_all_j == pytest.approx(1.4, rel=1e-7)
    outcome = optimise(graph, costs, budgets, moves, OV, effort=30.0)
    assert outcome.status == "optimal" and outcome.objective_j == pytest.approx(optimum, rel=1e-9)


def crowding_case():
    """The chain s -> a (100 B) -> b (100 B) -> c (1 B) -> d (200 B) -> e -> f -> g; gr reads a, b and g. 250 B.

    Stage 4 (d) holds d + c + a + b = 401 B: a and b must both be absent there, and paging is the
    only cheap way (recomputing either costs 5 J). a's page-out runs in stage 2 or 3, b's in stage
    3; each takes 1 s and stage 3 lasts 1 s, so each hides alone, but stage 2 lasts 0.2 s: both
    take 2 s in 1.2 s of compute, 0.8 s beyond it, at 0.5 W of static power 0.4 J on top of 0.2 J
    per transfer. Optimum 1.2 J above keep-all; the cover pricing each page-out's own stall says
    0.8 J.
    """
    sizes = [1, 100, 100, 1, 200, 1, 1, 1]
    nodes = [Node(k, name, "op", False, (k - 1,) if k else (), m) for k, (name, m) in enumerate(zip("sabcdefg", sizes))]
    nodes.append(Node(8, "gr", "grad", True, (1, 2, 7), 1))
    graph = TrainingGraph.create("crowding", nodes)
    compute_s = [1.0, 1.0, 0.2, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    costs = cost_table(graph, compute_s, [1.0, 5.0, 5.0] + [1.0] * 6, [1.0] * 9, [0.2] * 9, static_power_w=0.5)
    return graph, costs, Budgets(250, 100.0)


@pytest.mark.parametrize("moves", [PAGING_ONLY, HYBRID], ids=lambda m: m.label)
def test_page_outs_that_crowd_the_stages_before_a_row_are_priced_together(moves):
    graph, costs, budgets = crowding_case()
    alone = cover_bound(graph, costs, budgets, moves, OV, stalls=True, page_out_windows=False)
    together = cover_bound(graph, costs, budgets, moves, OV, stalls=True)
    assert overhead(alone) == pytest.approx(0.8, rel=1e-9)
    assert overhead(together) == pytest.approx(1.2, rel=1e-9)
    assert together.paged == {1, 2} and not together.recomputed
    status, optimum = milp_optimum(graph, costs, budgets, moves, OV)
    assert status == "optimal" and optimum - together.keep_all_j == pytest.approx(1.2, rel=1e-7)
    outcome = optimise(graph, costs, budgets, moves, OV, effort=30.0)
    assert outcome.status == "optimal" and outcome.objective_j == pytest.approx(optimum, rel=1e-9)


@pytest.mark.parametrize("stalls", ["page-out", "page-in"])
def test_under_compute_only_no_stall_is_priced(stalls):
    graph, costs, budgets = stalling_transfer_case(stalls)
    plain = cover_bound(graph, costs, budgets, PAGING_ONLY, CO)
    priced = cover_bound(graph, costs, budgets, PAGING_ONLY, CO, stalls=True)
    assert overhead(priced) == pytest.approx(overhead(plain), rel=1e-12) == pytest.approx(0.4, rel=1e-9)


def dead_input_case():
    """The chain a (120 B) -> b = f(a) (100 B) -> big (150 B) -> out (1 B); grad reads b and out. 250 B.

    Stage 3 (out) holds out + big + b = 251 B: b must be absent. Recomputing b in stage 4 needs
    a, whose last reader was b in stage 1: holding a through stage 3 frees only 100 - 120 < 1 B,
    so a must be recomputed too (stage 4 then peaks at out + a + b = 221 B). Costs: a 0.5 J,
    b 0.01 J, paging b 1 J each way. Optimum: recompute a and b, 0.51 J; a cover blind to the
    cascade would say 0.01 J.
    """
    nodes = [
        Node(0, "a", "op", False, (), 120),
        Node(1, "b", "op", False, (0,), 100),
        Node(2, "big", "op", False, (1,), 150),
        Node(3, "out", "op", False, (2,), 1),
        Node(4, "grad", "grad", True, (1, 3), 1),
    ]
    graph = TrainingGraph.create("dead_input", nodes)
    costs = cost_table(graph, [1.0] * 5, [0.5, 0.01, 1.0, 1.0, 1.0], [0.1] * 5, [1.0] * 5)
    return graph, costs, Budgets(250, 10.0)


def test_a_recomputation_that_needs_a_dead_input_pays_for_restoring_it():
    graph, costs, budgets = dead_input_case()
    blind = cover_bound(graph, costs, budgets, HYBRID, CO, cascades=False)
    cover = cover_bound(graph, costs, budgets, HYBRID, CO)
    assert overhead(blind) == pytest.approx(0.01, rel=1e-9)
    assert overhead(cover) == pytest.approx(0.51, rel=1e-9) and cover.recomputed == {0, 1}
    milp = optimise(graph, costs, budgets, HYBRID, CO, warm_start=False, mip_rel_gap=1e-9)
    assert milp.status == "optimal" and milp.objective_j == pytest.approx(cover.bound_j, rel=1e-9)


def recomputed_then_paged_case():
    """An output that the optimum recomputes for one absence and pages for the next. 150 B.

        x (1 B) -> d (10 B) -> i = f(d) (100 B); b (100 B) -> b2 (1 B) -> c = f(i, b2) (1 B)
        -> h -> e (145 B) -> f -> f2 (1 B each) -> g = f(i, f2)
    Right after b and b2 (stages 3, 4) i must be absent, and only recomputation can make it
    absent at stage 3 (its first stage after its own): holding d (10 B) there, i is recomputed
    in stage 5 for c. Right after e and f (stages 7, 8) i must be absent again, and d, past its
    last reader, cannot be held there (145 + 1 + 10 > 150): recomputing i again would need d
    recomputed (10 J), but paging i out in stage 6 and in during stage 9 costs 2 x 0.5 J. The
    optimum is 1 + 1 = 2 J above keep-all. A cover that let an output be either recomputed or
    paged, never both, charged d's recomputation: 11 J, above the optimum.
    """
    names = ["x", "d", "i", "b", "b2", "c", "h", "e", "f", "f2", "g"]
    sizes = [1, 10, 100, 100, 1, 1, 1, 145, 1, 1, 1]
    deps = [(), (0,), (1,), (0,), (3,), (2, 4), (5,), (6,), (7,), (8,), (2, 9)]
    graph = TrainingGraph.create(
        "recomputed_then_paged",
        [Node(k, name, "input" if k == 0 else "op", False, deps[k], sizes[k]) for k, name in enumerate(names)],
    )
    n = len(names)
    compute_j = [0.0, 10.0] + [1.0] * (n - 2)
    page_j = [10.0] * n
    page_j[2] = 0.5
    return graph, cost_table(graph, [0.01] * n, compute_j, [0.001] * n, page_j), Budgets(150, 100.0)


@pytest.mark.parametrize("timing", list(Timing))
def test_an_output_may_be_recomputed_for_one_absence_and_paged_for_another(timing):
    graph, costs, budgets = recomputed_then_paged_case()
    cover = cover_bound(graph, costs, budgets, HYBRID, timing)
    assert overhead(cover) == pytest.approx(2.0, rel=1e-9)
    milp = optimise(graph, costs, budgets, HYBRID, timing, warm_start=False, mip_rel_gap=1e-9)
    assert milp.status == "optimal" and milp.objective_j == pytest.approx(cover.bound_j, rel=1e-9)


def second_restore_case():
    """Four forward nodes of 40, 10, 20 and 50 bytes, every node 1 s and 1 J, within 105 bytes.

    The ReLU-like f2 and f3 keep their own outputs for their gradients, f0 and f1 their inputs.

    Right after g3 (stage 5) RAM holds g3, f3 and the loss (104 bytes), so f0 (read again by g1)
    and f2 (read by g2) are both out, and f1, read by nothing after f2, is dead. Rebuilding f2
    for g2 rebuilds f1 from f0; right after g2 (stage 6) g2, f2 and g3 take 90 bytes, so f0 is
    out again, and rebuilt once more for g1. The optimum, 4 J above one pass, recomputes f0
    twice; the cascade cover pays each of f0, f1, f2 once: 3 J.
    """
    graph = training_graph([40, 10, 20, 50], [1.0] * 4, grad_reads=[INPUTS, INPUTS, OWN, OWN])
    T = len(graph)
    costs = cost_table(graph, [1.0] * T, [1.0] * T, [1.0] * T, [1.0] * T)
    return graph, costs, Budgets(105, 1.5 * costs.plain_runtime_s)


@pytest.mark.parametrize("timing", list(Timing))
def test_an_output_rebuilt_for_a_cascade_and_absent_again_is_recomputed_twice(timing):
    """`second_restore_case`: the cascade cover is 1 J below the MILP's optimum.

    With second restores (item 7) it is the optimum, and `optimise` proves its schedule optimal with
    it; with no room for their rows (`nonzero_cap`), the cascade cover's 1 J below again.
    """
    graph, costs, budgets = second_restore_case()
    status, optimum = milp_optimum(graph, costs, budgets, RECOMPUTE_ONLY, timing)
    assert status == "optimal" and optimum - costs.plain_compute_j == pytest.approx(4.0)
    assert overhead(cover_bound(graph, costs, budgets, RECOMPUTE_ONLY, timing)) == pytest.approx(3.0)
    assert second_restore_bound(graph, costs, budgets, timing).bound_j == pytest.approx(optimum, rel=1e-9)
    # Capped at no nonzeros (what a time limit too short for them gives), no second restore is added.
    rows = cover_rows(graph, budgets, RECOMPUTE_ONLY, timing)
    shape = CoverShape(cascades=True, second_restores=True, nonzero_cap=0)
    capped = CoverModel(graph, costs, budgets, RECOMPUTE_ONLY, timing, rows, shape).solve(None)
    assert capped is not None and capped.overhead_j == pytest.approx(3.0)
    outcome = optimise(graph, costs, budgets, RECOMPUTE_ONLY, timing)
    assert outcome.status == "optimal" and outcome.objective_j == pytest.approx(optimum, rel=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    case=st.one_of(cascading_cases(), cascading_cases(min_forward=6, max_forward=9), cases(min_forward=4)),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    timing=st.sampled_from(list(Timing)),
)
def test_no_second_restore_bound_exceeds_the_milps_optimum(case, ram_share, runtime_x, timing):
    """On random graphs, recompute-only.

    The cover with second restores (item 7) is never below the cascade cover nor above the MILP's
    optimum, and proves infeasible only what the MILP cannot solve. (Outside the suite, 2,000 cases:
    114 raised, 52 of the 69 with a proven optimum to exactly it, none above; 23 proofs of
    infeasibility, all the MILP's. With the second recomputation priced three times over, 17 of 25
    were above the optimum; counting absences from three stages before the reader instead of from
    it, 167 of 169.)
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    plain = cover_bound(graph, costs, budgets, RECOMPUTE_ONLY, timing)
    event("recompute-only infeasible by the plain cover" if plain.infeasible else "recompute-only coverable")
    assume(not plain.infeasible)
    twice = second_restore_bound(graph, costs, budgets, timing)
    cascade = twice.bound_j is not None or twice.infeasible  # else no cascade: nothing to count twice
    event("a cascade to count twice" if cascade else "no cascade")
    assume(cascade)
    assert_a_raised_bound_holds(plain, twice, graph, costs, budgets, RECOMPUTE_ONLY, timing, "second restores")


@pytest.mark.parametrize("timing", list(Timing))
def test_where_paging_costs_more_than_the_bound_hybrid_takes_the_recompute_only_bound(timing):
    """`second_restore_case` with a page-out or page-in of any output costing 5 J.

    The hybrid cover (3 J above one pass) does not see the second restore, but every schedule that
    pages costs at least 10 J more than one pass (`paging_floor_j`), so the bound is the lesser of
    that and the recompute-only bound, 4 J, which the cover's schedule meets: optimal, no solver
    run.
    """
    graph, costs, budgets = second_restore_case()
    T = len(graph)
    costs = cost_table(graph, [1.0] * T, [1.0] * T, [1.0] * T, [5.0] * T)
    assert overhead(cover_bound(graph, costs, budgets, HYBRID, timing)) == pytest.approx(3.0)
    assert paging_floor_j(costs, timing) - costs.plain_compute_j == pytest.approx(10.0)
    outcome = optimise(graph, costs, budgets, HYBRID, timing)
    assert outcome.status == "optimal"
    assert present(outcome.objective_j, "the objective") - costs.plain_compute_j == pytest.approx(4.0)
    assert "no solver run" in outcome.message
    assert outcome.message.endswith("meets the lower bound from the recompute-only cover with second restores")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    case=st.one_of(cases(min_forward=3), cascading_cases()),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    timing=st.sampled_from(list(Timing)),
)
def test_no_schedule_with_both_moves_costs_less_than_the_paging_floor_or_recompute_only(case, ram_share, runtime_x, timing):
    """On random graphs the hybrid optimum is at least the lesser of the recompute-only optimum and the paging floor.

    On random graphs: the hybrid optimum is at least the lesser of the recompute-only optimum and
    `paging_floor_j` (a schedule that pages pays a page-out and a page-in). (Outside the suite, 600
    drawn, 582 with an optimum: in 208 the hybrid optimum pages and beats recompute-only, and none
    is below; with the page-out and page-in counted three times over, 73 are.)
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    status, hybrid = milp_optimum(graph, costs, budgets, HYBRID, timing)
    event(f"hybrid: {status}")
    assume(status == "optimal")
    status, recompute = milp_optimum(graph, costs, budgets, RECOMPUTE_ONLY, timing)
    floor = paging_floor_j(costs, timing)
    below = min(floor, recompute) if status == "optimal" else floor
    assert hybrid >= below - (1e-7 * costs.plain_compute_j + 1e-9)


def test_the_cover_without_cascades_of_resnet50_is_solved_to_its_optimum():
    """A cover on which HiGHS 1.16 hung with a MIP feasibility tolerance of 1e-9 is solved to its optimum.

    HiGHS 1.16 hung on this 242-column cover with a MIP feasibility tolerance of 1e-9 (no answer in
    100 s; killed at its limit, the cover had no bound at all); with 1e-8 it takes about a second.
    The optimum, 0.303 J above keep-all, was found by HiGHS with its default tolerances too.
    """
    p = build_problem("resnet50", "rpi4", parse_ram("50%"), 1.2, OV)
    rows = cover_rows(p.graph, p.budgets, HYBRID, OV)
    solved = CoverModel(p.graph, p.costs, p.budgets, HYBRID, OV, rows, CoverShape(cascades=False)).solve(effort(30.0, 30.0))
    assert solved is not None
    assert solved.exact and solved.overhead_j == pytest.approx(0.3031865, rel=1e-4)


@pytest.mark.parametrize("timing", list(Timing))
def test_the_plan_of_the_covers_choice_meets_the_bound_and_passes_the_checker(timing):
    graph, costs, budgets = dead_input_case()
    cover = cover_bound(graph, costs, budgets, HYBRID, timing)
    plan = cover_plan(graph, costs, budgets, timing, cover)
    assert plan is not None
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.total_j == pytest.approx(cover.bound_j, rel=1e-9)
    assert checked.total_j == pytest.approx(figures(plan, graph, costs, timing).total_j, rel=1e-9)


def test_a_paged_output_that_a_recomputation_needs_is_paged_in_before_it_not_recomputed():
    """A convolution (100 B, 1 J), bn and relu (100 B, 0.01 J each), big (150 B), the loss; relu.grad reads relu, bn.grad conv.

    The choice pages conv and recomputes relu; relu's recomputation for big.grad (stage 5) needs
    bn, and bn needs conv, whose own reader is bn.grad at stage 7. Paged in for stage 7, conv is
    not resident at stage 5 and the replay recomputes it: 7.14 J. Paged in during stage 4, before
    the recomputation that needs it, it costs 6.24 J within the 310 B budget.
    """
    nodes = [
        Node(0, "conv", "op", False, (), 100),
        Node(1, "bn", "op", False, (0,), 100),
        Node(2, "relu", "op", False, (1,), 100),
        Node(3, "big", "op", False, (2,), 150),
        Node(4, "loss", "loss", False, (3,), 1),
        Node(5, "big.grad", "grad", True, (2, 4), 1),
        Node(6, "relu.grad", "grad", True, (2, 5), 1),
        Node(7, "bn.grad", "grad", True, (0, 6), 1),
    ]
    graph = TrainingGraph.create("paged_input", nodes)
    costs = cost_table(graph, [1.0] * 8, [1.0, 0.01, 0.01, 1.0, 1.0, 1.0, 1.0, 1.0], [0.5] * 8, [0.1] * 8)
    budgets = Budgets(310, 100.0)
    rows = cover_rows(graph, budgets, HYBRID, OV)
    choice = CoverBound(HYBRID, OV, costs.keep_all_energy_j(OV), None, frozenset({2}), frozenset({0}), False, False, rows, "")
    plan = present(cover_plan(graph, costs, budgets, OV, choice), "the choice's plan")
    assert 0 in plan.paged_in[4] and 0 not in plan.computed[5]
    checked = check_schedule(to_schedule(plan, graph, costs, OV), graph, costs, OV, budgets)
    assert checked.total_j == pytest.approx(6.24, rel=1e-9)


def test_the_timed_covers_events_make_a_schedule_at_its_bound():
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    budgets = Budgets(201, 10.0)
    timed = timed_cover_bound(graph, costs, budgets, HYBRID, CO)
    assert Event(EventKind.PAGE_OUT, 1, 2) in timed.events and Event(EventKind.PAGE_IN, 1, 3) in timed.events
    plan = present(events_plan(graph, costs, budgets, CO, timed), "the events' plan")
    checked = check_schedule(to_schedule(plan, graph, costs, CO), graph, costs, CO, budgets)
    assert checked.total_j == pytest.approx(timed.bound_j, rel=1e-9)


def milp_optimum(graph, costs, budgets, moves, timing):
    """The bare MILP (no cover anywhere): its status and proven optimal total energy."""
    outcome = optimise(graph, costs, budgets, moves, timing, warm_start=False, mip_rel_gap=1e-9)
    assert outcome.status in ("optimal", "infeasible"), outcome.message
    return outcome.status, outcome.objective_j


def assert_a_raised_bound_holds(lower, raised, graph, costs, budgets, moves, timing, what: str) -> None:
    """`raised`, a cover with rows `lower` lacks, is never below it.

    Where it is higher, or proves infeasibility, the bare MILP agrees: at most its optimum, or no
    schedule.
    """
    tolerance = 1e-7 * costs.plain_compute_j + 1e-9
    if not raised.infeasible and raised.bound_j <= lower.bound_j + tolerance:
        assert raised.bound_j >= lower.bound_j - tolerance
        return
    outcome = optimise(graph, costs, budgets, moves, timing, warm_start=False, mip_rel_gap=1e-9)
    if raised.infeasible:
        assert outcome.status in ("infeasible", "no-solution"), f"{what} proved infeasible a case the MILP solves"
    elif outcome.status == "optimal":
        assert raised.bound_j <= outcome.objective_j + tolerance, f"{what}: the bound is above the optimum"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(min_forward=3),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 1.6),
    timing=st.sampled_from(list(Timing)),
    moves=st.sampled_from(MOVES),
)
def test_no_cover_bound_exceeds_the_milps_proven_optimum(case, ram_share, runtime_x, timing, moves):
    """On random graphs both covers' bounds are at most the MILP's optimum, and their infeasibility proofs hold.

    On random graphs: both covers' bounds are at most the MILP's optimum, and a cover's proof of
    infeasibility is one the MILP agrees with.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    status, optimum = milp_optimum(graph, costs, budgets, moves, timing)
    tolerance = 1e-7 * costs.plain_compute_j + 1e-9
    covers = {
        "plain cover": cover_bound(graph, costs, budgets, moves, timing),
        "timed cover": timed_cover_bound(graph, costs, budgets, moves, timing),
    }
    for kind, cover in covers.items():
        if cover.infeasible:
            assert status == "infeasible", f"the {kind} proved infeasible a case the MILP solves"
        elif status == "optimal":
            assert cover.bound_j is not None, f"the feasible {kind} has a bound"
            assert cover.bound_j <= optimum + tolerance, f"the {kind}'s bound is above the optimum"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(min_forward=3, max_forward=5, slow_paging=True),
    ram_share=st.floats(0.5, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    moves=st.sampled_from([HYBRID, PAGING_ONLY]),
)
def test_no_stall_priced_cover_bound_exceeds_the_milps_proven_optimum(case, ram_share, runtime_x, moves):
    """On random graphs whose transfers outlast their compute, under `overlap`, with paging.

    The cover with each page-out's and page-in's own stall priced is never above the MILP's optimum,
    nor below the plain cover, and proves infeasible only what the MILP cannot solve either. (About
    one case in twelve has a bound above the plain cover's; with the page-out stalls tripled, about
    one in twenty is above the optimum. Page-in stalls lift 19 of 400 cases above the page-out-only
    bound, each to the MILP's optimum; tripled, 3 of 300 are above it.)
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    status, optimum = milp_optimum(graph, costs, budgets, moves, OV)
    priced = cover_bound(graph, costs, budgets, moves, OV, stalls=True)
    plain = cover_bound(graph, costs, budgets, moves, OV)
    tolerance = 1e-7 * costs.plain_compute_j + 1e-9
    event("stall-priced cover infeasible" if priced.infeasible else "stall-priced cover feasible")
    if priced.infeasible:
        assert status == "infeasible", "the stall-priced cover proved infeasible a case the MILP solves"
        return
    assert not plain.infeasible and priced.bound_j >= plain.bound_j - tolerance
    if status == "optimal":
        assert priced.bound_j <= optimum + tolerance, "the stall-priced cover's bound is above the optimum"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=crowding_cases(),
    ram_share=st.floats(0.2, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    moves=st.sampled_from([HYBRID, PAGING_ONLY]),
)
def test_pricing_the_page_outs_that_crowd_a_row_never_passes_the_milps_optimum(case, ram_share, runtime_x, moves):
    """On random chains whose page-outs may share the stages before a large one (`crowding_cases`), under `overlap`.

    The page-out windows (item 6) never lower the stall-priced cover, and where they raise it or
    prove infeasibility, the MILP agrees. (Measured with this generator outside the suite, 1,500
    cases: 44 raised, 8 of them to exactly the MILP's optimum, none above; 2 proofs of
    infeasibility, both the MILP's. With the page-out times in the windows doubled, 197 of 600
    were above the optimum and 12 proofs of infeasibility wrong.)
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    alone = cover_bound(graph, costs, budgets, moves, OV, stalls=True, page_out_windows=False)
    together = cover_bound(graph, costs, budgets, moves, OV, stalls=True)
    event("infeasible without the windows" if alone.infeasible else "feasible without the windows")
    if alone.infeasible:
        assert together.infeasible
        return
    assert_a_raised_bound_holds(alone, together, graph, costs, budgets, moves, OV, "the page-out windows")


def split_transfer_case():
    """The chain s -> a (100 B) -> b -> c -> d (200 B) -> e -> f; gr reads a and f. 201 B.

    Stages 4 and 5 hold a beside d: a must be absent there, all of it (the relaxation cannot make
    half of it absent), paged (recomputing it costs 5 J). Its
    page-out takes 1 s and runs in stage 2 or 3, each of 0.5 s: 0.5 s beyond the stage's compute,
    at 0.5 W of static power 0.25 J, on top of 0.2 J each way. Its page-in hides in f's 1 s.
    Optimum 0.65 J above keep-all; half the page-out in each of stages 2 and 3 would hide it all.
    """
    sizes = [1, 100, 1, 1, 200, 1, 1]
    nodes = [Node(k, name, "op", False, (k - 1,) if k else (), m) for k, (name, m) in enumerate(zip("sabcdef", sizes))]
    nodes.append(Node(7, "gr", "grad", True, (1, 6), 1))
    graph = TrainingGraph.create("split_transfer", nodes)
    compute_s = [1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0]
    costs = cost_table(graph, compute_s, [1.0, 5.0] + [1.0] * 6, [1.0] * 8, [0.2] * 8, static_power_w=0.5)
    return graph, costs, Budgets(201, 100.0)


@pytest.mark.parametrize("moves", [PAGING_ONLY, HYBRID], ids=lambda m: m.label)
def test_the_timed_covers_relaxation_prices_a_transfer_no_stage_hides_whole(moves):
    graph, costs, budgets = split_transfer_case()
    relaxed = relaxation_bound(graph, costs, budgets, moves, OV)
    keep_all_j = costs.keep_all_energy_j(OV)
    assert relaxed - keep_all_j == pytest.approx(0.65, rel=1e-7)
    status, optimum = milp_optimum(graph, costs, budgets, moves, OV)
    assert status == "optimal" and optimum - keep_all_j == pytest.approx(0.65, rel=1e-7)


def test_the_timed_covers_relaxation_runs_its_first_round_within_its_own_allowance():
    """A first round the rounds' allowance cannot pay for runs within the first round's, on the same meter."""
    graph, costs, budgets = split_transfer_case()
    whole = effort(100.0)
    rounds = whole.part(1e-6)
    assert relaxation_bound(graph, costs, budgets, HYBRID, OV, rounds) is None
    relaxed = relaxation_bound(graph, costs, budgets, HYBRID, OV, rounds, first_allowance=whole)
    assert relaxed - costs.keep_all_energy_j(OV) == pytest.approx(0.65, rel=1e-7)
    assert 0 < whole.meter.done < 100.0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(crowding_cases(), cases(min_forward=3, max_forward=5, slow_paging=True)),
    ram_share=st.floats(0.2, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    moves=st.sampled_from([HYBRID, PAGING_ONLY]),
)
def test_the_timed_covers_relaxation_is_never_above_the_timed_cover_or_the_milps_optimum(case, ram_share, runtime_x, moves):
    """On random graphs whose transfers can crowd or outlast their stages, under `overlap`, with paging.

    The linear relaxation of the timed cover over the stage rows it grows is at most the timed
    cover's proven optimum and the MILP's; where the timed cover proves that nothing fits, the
    relaxation gives no bound above the MILP's either.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    relaxed = relaxation_bound(graph, costs, budgets, moves, OV)
    timed = timed_cover_bound(graph, costs, budgets, moves, OV)
    tolerance = 1e-7 * costs.plain_compute_j + 1e-9
    event("relaxation: no bound" if relaxed is None else "relaxation: a bound")
    if relaxed is None:
        return
    assert relaxed >= costs.keep_all_energy_j(OV) - tolerance, "the relaxation is below keep-all"
    if not timed.infeasible and timed.exact:
        assert relaxed <= timed.bound_j + tolerance, "the relaxation is above the timed cover's optimum"
    status, optimum = milp_optimum(graph, costs, budgets, moves, OV)
    if status == "optimal":
        assert relaxed <= optimum + tolerance, "the relaxation is above the MILP's optimum"


def cascade_page_in_case():
    """An 11-node graph whose optimum recomputes from inputs it pages back in and pays their stalls.

    A graph of 11 nodes (5 forward, `cascading_cases`' kind) whose cheapest schedule within 386
    bytes and 3.26 s, hybrid, under overlap, recomputes outputs from inputs that it pages back in
    and pays their page-ins' stalls: found by that property's generator, its optimum proven by the
    MILP.
    """
    graph = training_graph(
        [100, 70, 18, 91, 46], [1.0] * 5, frozenset({(1, 3), (0, 4)}), grad_reads=[INPUTS, BOTH, BOTH, INPUTS, BOTH]
    )
    assert [node.deps for node in graph.nodes] == [
        (),
        (0,),
        (1,),
        (1, 2),
        (0, 3),
        (4,),
        (0, 3, 4, 5),
        (1, 2, 6),
        (1, 2, 7),
        (0, 1, 7, 8),
        (6, 9),
    ]
    compute_s = (0.5, 0.01, 0.01, 0.5, 0.05, 0.01, 0.01, 0.02, 0.02, 1.0, 0.5)
    compute_j = (0.36597, 1.05899, 1.88342, 1.87023, 1.41876, 0.30750, 0.17280, 1.81927, 0.94662, 1.43402, 0.22228)
    page_s = (0.7, 0.80071, 0.67692, 0.32083, 1.13507, 1.38109, 1.49902, 0.72457, 0.45598, 0.81699, 0.38734)
    page_j = (0.15424, 0.01, 0.86771, 0.99999, 0.43091, 0.33333, 0.39084, 0.99999, 0.96497, 0.66327, 0.68656)
    costs = cost_table(graph, compute_s, compute_j, page_s, page_j, static_power_w=3.0, dma_channels=1)
    return graph, costs, Budgets(386, 3.26333)


def test_the_page_ins_that_recomputations_need_are_priced_at_their_stalls():
    """`cascade_page_in_case`: without the cascades' and live inputs' page-ins (item 6) the cover is 2.08 J below the optimum.

    With them it is the optimum, which `optimise` then proves.
    """
    graph, costs, budgets = cascade_page_in_case()
    status, optimum = milp_optimum(graph, costs, budgets, HYBRID, OV)
    assert status == "optimal"
    without = cover_bound(graph, costs, budgets, HYBRID, OV, stalls=True, cascade_page_ins=False)
    priced = cover_bound(graph, costs, budgets, HYBRID, OV, stalls=True)
    assert optimum - without.bound_j == pytest.approx(2.08, abs=0.01)
    assert priced.bound_j == pytest.approx(optimum, rel=1e-7)
    assert optimise(graph, costs, budgets, HYBRID, OV).status == "optimal"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cascading_cases(),
    ram_share=st.floats(0.3, 1.0),
    runtime_x=st.floats(1.0, 3.0),
    moves=st.sampled_from([HYBRID, HYBRID, PAGING_ONLY]),
)
def test_pricing_the_page_ins_that_recomputations_need_never_passes_the_milps_optimum(case, ram_share, runtime_x, moves):
    """On random graphs whose early outputs die (`cascading_cases`), under `overlap`.

    Pricing the page-ins that recomputations need (item 6) never lowers the stall-priced cover, and
    where it raises it or proves infeasibility, the MILP agrees (at most its optimum; infeasible).
    (Measured with this generator outside the suite, 4,500 cases: 90 raised, 72 of them with a
    proven optimum, 46 to exactly it, none above; 13 proofs of infeasibility, all the MILP's. With
    those page-ins' times doubled, 3 of 36 were above the optimum; tripled, 1 of 37.)
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    without = cover_bound(graph, costs, budgets, moves, OV, stalls=True, cascade_page_ins=False)
    priced = cover_bound(graph, costs, budgets, moves, OV, stalls=True)
    event("infeasible without the page-ins" if without.infeasible else "feasible without the page-ins")
    if without.infeasible:
        # Not always kept by the priced cover: a fresh clone's run found a 15-node case (hybrid,
        # 37.5 % of the RAM range, 1.27x) that it solves at 21.97 J. The search solves both
        # covers and keeps either's proof (`steps.page_in_bound`), so the proof must be the MILP's.
        if not priced.infeasible:
            assert milp_optimum(graph, costs, budgets, moves, OV)[0] == "infeasible"
        return
    assert_a_raised_bound_holds(without, priced, graph, costs, budgets, moves, OV, "priced page-ins")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3, slow_paging=True), cascading_cases()),
    ram_share=st.floats(0.2, 1.0),
    runtime_x=st.floats(1.0, 2.0),
)
def test_a_cover_whose_optimum_pages_nothing_has_the_optimum_of_every_cover_that_prices_paging_more(case, ram_share, runtime_x):
    """What lets `Search` skip the stall-priced covers (`CoverBound.pages_nothing`).

    When a hybrid cover's exact choice pages nothing, each cover that prices paging further
    (page-outs' stalls, page-ins' stalls, the page-ins recomputations need) has the same optimum.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    chain = [
        cover_bound(graph, costs, budgets, HYBRID, OV),
        cover_bound(graph, costs, budgets, HYBRID, OV, stalls=True, page_in_stalls=False),
        cover_bound(graph, costs, budgets, HYBRID, OV, stalls=True, cascade_page_ins=False),
        cover_bound(graph, costs, budgets, HYBRID, OV, stalls=True),
    ]
    tolerance = 1e-7 * costs.plain_compute_j + 1e-9
    for n, cover in enumerate(chain):
        if cover.infeasible or not cover.exact or cover.paged:
            continue
        for finer in chain[n + 1 :]:
            assert not finer.infeasible
            assert finer.bound_j == pytest.approx(cover.bound_j, abs=tolerance)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(cases(min_forward=3), cases(min_forward=3, slow_paging=True), cascading_cases()),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 1.6),
    timing=st.sampled_from(list(Timing)),
    moves=st.sampled_from(MOVES),
    stalls=st.booleans(),
)
def test_a_cover_grown_row_by_row_has_the_optimum_of_the_whole(case, ram_share, runtime_x, timing, moves, stalls):
    """On random graphs row generation from the one row of largest excess ends at the full cover's optimum.

    On random graphs: the cover solved from its one row of largest excess, taking each row its
    solution breaks, ends with the optimum (or the infeasibility) of the cover with every row, with
    and without stalls priced.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    grown = cover_bound(graph, costs, budgets, moves, timing, first_rows=1, stalls=stalls)
    whole = cover_bound(graph, costs, budgets, moves, timing, first_rows=None, stalls=stalls)
    assert grown.infeasible == whole.infeasible
    if not whole.infeasible:
        assert grown.exact and whole.exact
        assert grown.bound_j == pytest.approx(whole.bound_j, rel=1e-9, abs=1e-12)


@pytest.mark.slow  # the cover over all 111 rows takes a minute
def test_the_cascade_cover_of_poets_main_case_needs_few_of_its_rows():
    """POET's ResNet-18 (CIFAR) case, hybrid, overlap.

    111 stage rows; from the 5 of largest excess the cover ends at the optimum of all 111 (0.180285
    J above keep-all, section 8 of docs/optimiser.md), and its choice pages the same number of
    outputs.
    """
    p = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, OV, batch_size=8)
    rows = cover_rows(p.graph, p.budgets, HYBRID, OV)
    assert len(rows) == 111
    grown = cover_bound(p.graph, p.costs, p.budgets, HYBRID, OV)
    whole = cover_bound(p.graph, p.costs, p.budgets, HYBRID, OV, first_rows=None)
    assert grown.exact and whole.exact
    assert overhead(grown) == pytest.approx(0.180285, abs=1e-6)
    assert grown.bound_j == pytest.approx(whole.bound_j, rel=1e-9)
    assert len(grown.paged) == len(whole.paged) and not grown.recomputed


def test_balancing_moves_transfers_out_of_stalling_stages_as_the_exact_placement_does():
    """POET's main case under overlap.

    One of the cover's choices at its bound (10 paged outputs, the last node 62) placed by the
    windows' greedy alone stalls early stages, 1.470938 J above keep-all; balanced, its plan costs
    0.224153 J, what the exact placement (the timed cover confined to the choice) proves is least
    for this choice. The plan passes the checker at that energy.
    """
    from poetsim.optimiser.bounds.timed_cover import placement
    from poetsim.optimiser.plans import cover_plan as plans
    from poetsim.optimiser.plans.rules import Mode, plan_from_decisions

    p = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, OV, batch_size=8)
    graph, costs, budgets = p.graph, p.costs, p.budgets
    found = cover_bound(graph, costs, budgets, HYBRID, OV)
    cover = replace(found, paged=frozenset({1, 4, 6, 7, 10, 11, 13, 14, 17, 62}), recomputed=frozenset())
    assert sum(costs.page_out_j[i] + costs.page_in_j[i] for i in cover.paged) == pytest.approx(found.overhead_j, rel=1e-9)
    windows = plans._absence_windows(graph, cover)
    decisions = {key: Mode.PAGE for key in windows}
    greedy = plans._hidden_transfers(graph, costs, windows, decisions)
    balanced = plans._balanced_transfers(graph, costs, cover, decisions, greedy)
    keep_all_j = cover.keep_all_j

    def overhead_of(stages):
        return figures(plan_from_decisions(graph, decisions, stages), graph, costs, OV).total_j - keep_all_j

    assert overhead_of(greedy) == pytest.approx(1.470938, abs=1e-6)
    assert overhead_of(balanced) == pytest.approx(0.224153, abs=1e-6)
    exact = placement(graph, costs, budgets, OV, cover)
    assert exact.exact and present(exact.bound_j, "the placement's bound") - keep_all_j == pytest.approx(0.224153, abs=1e-6)
    plan = present(cover_plan(graph, costs, budgets, OV, cover), "the cover's plan")
    checked = check_schedule(to_schedule(plan, graph, costs, OV), graph, costs, OV, budgets)
    assert checked.total_j - keep_all_j == pytest.approx(0.224153, abs=1e-6)
    assert plans.plan_stalled(plan, costs)


def test_the_quick_placement_rounds_prove_poets_main_case_under_overlap():
    """The balanced plan of the first choice stalls.

    Avoiding the outputs it stalls, the cover's third choice places with none, at the bound:
    optimal, 0.180285 J above keep-all, found by the placement search's quick rounds (the exact
    rounds never run).
    """
    p = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, OV, batch_size=8)
    found = optimise(p.graph, p.costs, p.budgets, HYBRID, OV, effort=60.0)
    assert found.status.value == "optimal" and found.found_by == "the placement search"
    objective_j, bound_j = present(found.objective_j, "the objective"), present(found.bound_j, "the bound")
    assert objective_j - bound_j <= 1e-9 * objective_j
    keep_all_j = p.costs.plain_compute_j + p.costs.static_power_w * p.costs.plain_runtime_s
    assert objective_j - keep_all_j == pytest.approx(0.180285, abs=1e-6)
