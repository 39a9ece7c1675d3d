"""The rule-based schedules: keep-all, checkpoint-sqrt and the greedy MIP start."""

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.graphs.zoo import build_model
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser import checkpoint_sqrt, keep_all
from poetsim.optimiser.baselines.simple import (
    RECOMPUTING,
    forward_cut_points,
    greedy_plan,
    held_input_plan,
    hidden_page_stages,
    rebuilt_plan,
    start_plan,
)
from poetsim.optimiser.bounds.cover import cover_bound
from poetsim.optimiser.optimise import optimise
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import _absence_windows, cover_plan
from poetsim.optimiser.plans.plan import figures, to_schedule
from poetsim.optimiser.plans.rules import Mode, held_plan, plan_from_decisions, uses
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.costs import node_costs
from poetsim.schedule.model import Budgets, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

from optimiser_cases import (
    HYBRID,
    MOVES,
    PAGING_ONLY,
    RECOMPUTE_ONLY,
    cascading_cases,
    cases,
    cost_table,
    present,
    training_graph,
)


def long_chain(forward: int = 16):
    """A plain chain of equal layers (no skips): the case checkpointing was made for."""
    graph = training_graph([1000] * forward, [50.0] * forward, name="chain")
    T = len(graph)
    return graph, cost_table(graph, [0.01] * T, [0.02] * T, [0.005] * T, [0.001] * T, 0.5, 1)


@settings(max_examples=30, deadline=None)
@given(case=cases(), timing=st.sampled_from(list(Timing)))
def test_keep_all_peaks_at_the_graphs_keep_all_peak_and_the_checker_agrees(case, timing):
    graph, costs = case
    schedule, figures = keep_all(graph, costs, timing)
    assert figures.peak_ram_bytes == graph.keep_all_peak_bytes
    assert compare_figures(figures, check_schedule(schedule, graph, costs, timing)) == []
    assert (figures.recomputations, figures.page_ins, figures.page_outs) == (0, 0, 0)
    assert figures.runtime_s == pytest.approx(costs.plain_runtime_s, rel=1e-12)


@pytest.mark.parametrize("timing", list(Timing))
def test_checkpoint_sqrt_trades_recomputation_for_ram_on_a_long_chain(timing):
    graph, costs = long_chain()
    schedule, figures = checkpoint_sqrt(graph, costs, timing)
    assert compare_figures(figures, check_schedule(schedule, graph, costs, timing)) == []
    assert figures.peak_ram_bytes < graph.keep_all_peak_bytes
    assert figures.recomputations > 0 and figures.page_ins == 0


def test_checkpoint_sqrt_recomputes_each_dropped_node_once_on_a_chain():
    """Chen et al.: a segment is recomputed once during the backward pass, not once per reader."""
    graph, costs = long_chain()
    _, figures = checkpoint_sqrt(graph, costs, Timing.COMPUTE_ONLY)
    layers, segments = 16, 4  # segment boundaries 3, 7, 11, 15 are kept; the loss is read at once
    assert figures.recomputations == layers - segments


def test_checkpoint_boundaries_of_a_residual_block_are_its_ends_not_its_inside():
    """A chain relu -> conv -> bn -> relu -> add(relu) -> relu: only nodes no skip jumps over are cuts."""
    graph = build_model("resnet18_cifar", batch_size=1)
    forward = [n.id for n in graph.nodes if not n.backward]
    cut_names = {graph.nodes[forward[p]].name for p in forward_cut_points(graph, forward)}
    assert {"layer1.0.relu2", "layer2.0.relu2", "layer4.1.relu2"} <= cut_names
    assert not cut_names & {"layer1.0.conv1", "layer1.0.relu1", "layer2.0.down.conv", "layer2.0.bn2"}


@pytest.mark.parametrize("model, most", [("resnet18_cifar", 0.5), ("resnet50", 0.4), ("bert_base", 0.2)])
def test_checkpoint_sqrt_lowers_the_peak_of_graphs_with_skip_connections(model, most):
    """Recomputation must stop at kept segment ends, not run back along the skips to the input."""
    graph = build_model(model, batch_size=1)
    costs = node_costs(graph, load_platform("rpi4"))
    schedule, figures = checkpoint_sqrt(graph, costs, Timing.OVERLAP)
    assert compare_figures(figures, check_schedule(schedule, graph, costs, Timing.OVERLAP)) == []
    assert figures.peak_ram_bytes < most * graph.keep_all_peak_bytes
    assert figures.recomputations < len(graph) / 2


@settings(max_examples=80, deadline=None)
@given(
    case=cases(min_forward=3),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 2.0),
    timing=st.sampled_from(list(Timing)),
    strategy=st.sampled_from(list(MOVES)),
)
def test_the_mip_start_meets_the_budgets_it_was_made_for(case, ram_share, runtime_x, timing, strategy):
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    plan = start_plan(graph, costs, budgets, strategy, timing)
    event("no rule-made plan fits" if plan is None else "a rule-made plan fits")
    assume(plan is not None)
    plan = present(plan, "the rule-made plan")
    figures = plans.figures(plan, graph, costs, timing)
    checked = check_schedule(plans.to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(figures, checked) == []
    if strategy == PAGING_ONLY:
        assert figures.recomputations == 0
    if strategy == RECOMPUTE_ONLY:
        assert figures.page_ins == figures.page_outs == 0


def resnet18_study_point(ram: str, runtime: str):
    """A recompute-only point of the shipped ResNet-18 study (scenarios/resnet18.yaml) on rpi4."""
    from poetsim import api

    problem = api.choose("scenarios/resnet18.yaml", platform="rpi4", ram=ram, runtime=runtime, strategy="recompute-only").problem
    return problem.graph, problem.costs, problem.budgets, problem.timing


def test_the_greedy_that_drops_recomputed_cascades_fits_where_keeping_them_cannot():
    graph, costs, budgets, timing = resnet18_study_point("35%", "1.5x")
    assert greedy_plan(graph, costs, budgets, RECOMPUTING, timing) is None
    plan = greedy_plan(graph, costs, budgets, RECOMPUTING, timing, keep_recomputed=False)
    assert plan is not None
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.peak_ram_bytes <= budgets.ram_bytes and budgets.meets_deadline(checked.runtime_s)


def test_a_greedy_plan_reached_only_past_the_deadline_is_found_when_it_ends_within_it():
    graph, costs, budgets, timing = resnet18_study_point("35%", "1.2x")
    # Under the deadline every greedy stops short of the RAM budget: each step it needs breaks the
    # deadline on its own, although the plan it ends with does not.
    assert greedy_plan(graph, costs, budgets, RECOMPUTING, timing, keep_recomputed=False) is None
    lifted = greedy_plan(graph, costs, replace(budgets, runtime_s=float("inf")), RECOMPUTING, timing, keep_recomputed=False)
    assert lifted is not None
    assert start_plan(graph, costs, budgets, RECOMPUTING, timing) is None  # a search with a schedule
    plan = start_plan(graph, costs, budgets, RECOMPUTING, timing, first_fit=True)  # one without
    assert plan is not None
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.peak_ram_bytes <= budgets.ram_bytes and budgets.meets_deadline(checked.runtime_s)


def test_the_rebuilt_greedy_undoes_early_changes_that_later_ones_made_costly():
    """ResNet-18 study, Pi, 35 % RAM, 1.2x.

    The greedy (deadline lifted) ends 113.82 J above keep-all, and the study shipped 97.76 J (that
    plan, polished); taking the greedy's changes out one at a time and filling the budget again
    without each gives 72.999 J.
    """
    graph, costs, budgets, timing = resnet18_study_point("35%", "1.2x")
    keep_all_j = costs.keep_all_energy_j(timing)
    lifted = greedy_plan(graph, costs, replace(budgets, runtime_s=float("inf")), RECOMPUTING, timing, keep_recomputed=False)
    assert figures(present(lifted, "the greedy plan"), graph, costs, timing).total_j - keep_all_j == pytest.approx(
        113.822141, rel=1e-6
    )
    plan = rebuilt_plan(graph, costs, budgets, timing)
    assert plan is not None and not plan.moves.page
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(figures(plan, graph, costs, timing), checked) == []
    assert checked.total_j - keep_all_j == pytest.approx(72.999324, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    case=cases(min_forward=3), ram_share=st.floats(0.0, 1.0), runtime_x=st.floats(1.0, 2.0), timing=st.sampled_from(list(Timing))
)
def test_the_rebuilt_greedy_recomputes_only_and_meets_both_budgets(case, ram_share, runtime_x, timing):
    """On random graphs the rebuilt plan pages nothing, fits both budgets and is no dearer than the greedy.

    On random graphs the rebuilt plan, when there is one, pages nothing, passes the checker within
    both budgets, and is never dearer than the greedy it starts from when that fits.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    plan = rebuilt_plan(graph, costs, budgets, timing)
    start = greedy_plan(graph, costs, replace(budgets, runtime_s=float("inf")), RECOMPUTING, timing, keep_recomputed=False)
    start_fits = start is not None and budgets.fits(figures(start, graph, costs, timing))
    if plan is None:
        assert not start_fits
        return
    assert not plan.moves.page
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert compare_figures(figures(plan, graph, costs, timing), checked) == []
    if start is not None and start_fits:
        assert checked.total_j <= figures(start, graph, costs, timing).total_j * (1 + 1e-9)


def test_the_covers_plan_keeps_recomputed_outputs_where_ram_allows():
    from poetsim.optimiser.plans.rules import Mode, plan_from_decisions

    graph, costs, budgets, timing = resnet18_study_point("50%", "1.2x")
    cover = cover_bound(graph, costs, budgets, RECOMPUTING, timing)
    plan = cover_plan(graph, costs, budgets, timing, cover)
    assert plan is not None
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.peak_ram_bytes <= budgets.ram_bytes
    # Neither extreme does as well: keeping every recomputed cascade breaks the budget, dropping
    # every one again recomputes ResNet-18's first stage for each backward reader.
    decisions = {key: Mode.RECOMPUTE for key in _absence_windows(graph, cover)}
    kept = figures(plan_from_decisions(graph, decisions, keep_recomputed=True), graph, costs, timing)
    dropped = figures(plan_from_decisions(graph, decisions, keep_recomputed=False), graph, costs, timing)
    assert kept.peak_ram_bytes > budgets.ram_bytes
    bound_j = present(cover.bound_j, "the cover's bound")
    assert checked.total_j < dropped.total_j - 0.2 * (dropped.total_j - bound_j)


@settings(max_examples=40, deadline=None)
@given(
    case=cases(min_forward=3),
    ram_share=st.floats(0.0, 1.0),
    runtime_x=st.floats(1.0, 2.0),
    hide_page_outs=st.booleans(),
)
def test_the_rebuilt_greedy_with_hidden_transfers_meets_both_budgets_as_the_checker_replays_it(
    case, ram_share, runtime_x, hide_page_outs
):
    """On random graphs under overlap, the rebuilt greedy with both moves passes the checker within both budgets.

    The checker's figures are the model's own, whether it pages, recomputes or both.
    """
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    budgets = Budgets(int(low + ram_share * (high - low)), runtime_x * costs.plain_runtime_s)
    plan = rebuilt_plan(graph, costs, budgets, Timing.OVERLAP, moves=HYBRID, hide_page_outs=hide_page_outs)
    if plan is None:
        event("no plan")
        return
    event("pages" if plan.moves.page else "recomputes only")
    checked = check_schedule(to_schedule(plan, graph, costs, Timing.OVERLAP), graph, costs, Timing.OVERLAP, budgets)
    assert compare_figures(figures(plan, graph, costs, Timing.OVERLAP), checked) == []


def test_a_hidden_page_in_goes_to_the_latest_stage_that_hides_it_else_to_the_longest():
    """SqueezeNet 1.1 on the Pi, every stretch between two reads of an output paged.

    Each page-in lies in its stretch, at least two stages after its page-out; it is the latest
    stage whose own compute lasts the page-in, or, where none does, one that computes longest.
    """
    p = build_problem("scenarios/graphs/outside/squeezenet1_1.json", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP)
    graph, costs = p.graph, p.costs
    decisions: dict[tuple[int, int, int], Mode] = {}
    for i in range(len(graph)):
        reads = uses(graph, i)
        decisions |= {(i, a, b): Mode.PAGE for a, b in pairwise(reads) if b > a + 2}
    seconds = costs.compute_s
    hidden = hidden_page_stages(costs, decisions)
    assert hidden.keys() == decisions.keys()
    stalled = 0
    for (i, a, b), (out, page_in) in hidden.items():
        assert out == a and a + 2 <= page_in < b
        later = range(page_in + 1, b)
        if seconds[page_in] >= costs.page_in_s[i]:
            assert all(seconds[t] < costs.page_in_s[i] for t in later)
        else:
            stalled += 1
            assert seconds[page_in] == max(seconds[t] for t in range(a + 2, b))
    assert 0 < stalled < len(hidden)  # both kinds occur


def test_the_rebuilt_greedy_with_hidden_transfers_pages_where_the_pi_hides_it():
    """SqueezeNet 1.1 on the Pi at 50 % and 1.2x: hidden transfers let the rebuilt greedy page.

    The Pi's SD card pages a 2 MB output in 86 ms against stages of at most 38 ms. Paged in right
    before its reader, the greedy's swaps stall past the deadline, and with its page-ins where
    compute hides them the rebuilt greedy with both moves pages and fits (29.3873 J, as the checker
    replays it), below the recompute-only rebuilt greedy (30.1901 J) and every rule-made plan
    (`start_plan`, 32.3730 J).
    """
    p = build_problem("scenarios/graphs/outside/squeezenet1_1.json", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP)
    graph, costs, budgets, timing = p.graph, p.costs, p.budgets, p.timing
    plan = present(rebuilt_plan(graph, costs, budgets, timing, moves=HYBRID), "the rebuilt plan")
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert plan.moves.page and checked.page_ins > 0
    assert checked.total_j == pytest.approx(29.387311, rel=1e-6)
    recomputing = present(rebuilt_plan(graph, costs, budgets, timing), "the recompute-only rebuilt plan")
    assert figures(recomputing, graph, costs, timing).total_j == pytest.approx(30.190059, rel=1e-6)
    start = present(start_plan(graph, costs, budgets, HYBRID, timing), "the rule-made plan")
    assert figures(start, graph, costs, timing).total_j == pytest.approx(32.372998, rel=1e-6)


def dense_block() -> tuple[TrainingGraph, list[float]]:
    """Two convolutions joined by a concatenation, normalised, then a wide layer; and each node's seconds.

        0 x    (1 B)   input              6 loss
        1 a    (10 B)  conv, 1 s          7 g_wide (reads n)
        2 b    (10 B)  conv of a, 1 s     8 g_n    (reads cat, as a normalisation does)
        3 cat  (20 B)  cat(a, b), 0.01 s  9 g_b    (reads a)
        4 n    (20 B)  norm, 0.01 s      10 g_a    (reads x)
        5 wide (60 B)  the peak
    b's last reader is cat: recomputing cat for g_n needs b again.
    """
    nodes = [
        Node(0, "x", "input", False, (), 1),
        Node(1, "a", "conv", False, (0,), 10),
        Node(2, "b", "conv", False, (1,), 10),
        Node(3, "cat", "cat", False, (1, 2), 20),
        Node(4, "n", "batchnorm", False, (3,), 20),
        Node(5, "wide", "conv", False, (4,), 60),
        Node(6, "loss", "loss", False, (5,), 1),
        Node(7, "g_wide", "grad", True, (4, 6), 20),
        Node(8, "g_n", "grad", True, (3, 7), 20),
        Node(9, "g_b", "grad", True, (1, 8), 10),
        Node(10, "g_a", "grad", True, (0, 9), 10),
    ]
    seconds = [0.0, 1.0, 1.0, 0.01, 0.01, 1.0, 0.01, 1.0, 0.01, 1.0, 1.0]
    return TrainingGraph.create("dense_block", nodes), seconds


def test_a_held_input_is_kept_for_a_late_recomputation_instead_of_recomputed():
    graph, seconds = dense_block()
    costs = cost_table(graph, seconds, seconds, [1.0] * len(graph), [1.0] * len(graph))
    decisions = {(3, 4, 8): Mode.RECOMPUTE}  # cat dropped after n, recomputed for g_n
    cascaded = plan_from_decisions(graph, decisions)
    assert 2 in cascaded.computed[8]  # b recomputed with cat
    held, replays = held_plan(graph, decisions, None, True, frozenset({1, 2}))
    assert held.computed[8] == (3, 8) and replays == 2
    assert 2 in held.kept[7]  # b held from its last reader to the recomputation
    for plan in (cascaded, held):
        checked = check_schedule(to_schedule(plan, graph, costs, Timing.OVERLAP), graph, costs, Timing.OVERLAP)
        assert compare_figures(figures(plan, graph, costs, Timing.OVERLAP), checked) == []
    assert figures(held, graph, costs, Timing.OVERLAP).runtime_s == pytest.approx(
        figures(cascaded, graph, costs, Timing.OVERLAP).runtime_s - 1.0
    )


def test_the_held_input_plan_recomputes_the_cheap_outputs_within_a_deadline_the_cascade_breaks():
    graph, seconds = dense_block()
    costs = cost_table(graph, seconds, seconds, [1.0] * len(graph), [1.0] * len(graph))
    budgets = Budgets(graph.keep_all_peak_bytes - 10, costs.plain_runtime_s + 0.5)
    cascaded = plan_from_decisions(graph, {(3, 4, 8): Mode.RECOMPUTE})
    assert not budgets.meets_deadline(figures(cascaded, graph, costs, Timing.OVERLAP).runtime_s)
    plan = present(held_input_plan(graph, costs, budgets, Timing.OVERLAP), "the held-input plan")
    checked = check_schedule(to_schedule(plan, graph, costs, Timing.OVERLAP), graph, costs, Timing.OVERLAP, budgets)
    assert checked.peak_ram_bytes <= budgets.ram_bytes and budgets.meets_deadline(checked.runtime_s)
    recomputed = {k for t, computed in enumerate(plan.computed) for k in computed if k != t}
    assert recomputed and not recomputed & {1, 2}  # no convolution again


def test_the_search_starts_from_the_held_input_plan_where_a_greedy_fits_but_costs_more():
    graph, seconds = dense_block()
    costs = cost_table(graph, seconds, seconds, [1.0] * len(graph), [1.0] * len(graph))
    budgets = Budgets(graph.keep_all_peak_bytes - 10, costs.plain_runtime_s + 1.5)
    timing = Timing.OVERLAP
    greedy = present(start_plan(graph, costs, budgets, RECOMPUTE_ONLY, timing, first_fit=True), "the greedy plan")
    held_j = figures(present(held_input_plan(graph, costs, budgets, timing), "the held-input plan"), graph, costs, timing).total_j
    assert held_j < figures(greedy, graph, costs, timing).total_j
    outcome = optimise(graph, costs, budgets, RECOMPUTE_ONLY, timing, effort=0.001)  # the rule plans, then polish
    assert outcome.found_by.startswith("the cheap outputs recomputed, the dear held")
    assert outcome.objective_j is not None and outcome.objective_j <= held_j


@settings(max_examples=100, deadline=None)
@given(case=cascading_cases(), data=st.data(), keep=st.booleans())
def test_held_plans_hold_their_inputs_past_the_last_reader_and_the_checker_agrees(case, data, keep):
    graph, costs = case
    forward = [n.id for n in graph.nodes if not n.backward]
    dropped = data.draw(st.lists(st.sampled_from(forward), unique=True, min_size=1))
    holdable = frozenset(data.draw(st.lists(st.sampled_from(forward), unique=True)))
    decisions = {(i, a, b): Mode.RECOMPUTE for i in dropped for a, b in pairwise(uses(graph, i)) if b > a + 1}
    plan, replays = held_plan(graph, decisions, None, keep, holdable)
    assert replays >= 1
    late = {k for t, computed in enumerate(plan.computed) for k in computed if k != t and t > graph.last_use[k]}
    assert not late & holdable
    for timing in Timing:
        checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing)
        assert compare_figures(figures(plan, graph, costs, timing), checked) == []


def test_the_held_input_plan_of_densenet_bc_recomputes_no_convolution_and_fits():
    from poetsim import api

    problem = api.choose(
        "scenarios/outside.yaml",
        model="scenarios/graphs/outside/densenet_bc.json",
        platform="jetson-tx2",
        ram="35%",
        runtime="1.2x",
        strategy="hybrid",
    ).problem
    graph, costs, budgets, timing = problem.graph, problem.costs, problem.budgets, problem.timing
    plan = present(held_input_plan(graph, costs, budgets, timing), "the held-input plan")
    checked = check_schedule(to_schedule(plan, graph, costs, timing), graph, costs, timing, budgets)
    assert checked.peak_ram_bytes <= budgets.ram_bytes and budgets.meets_deadline(checked.runtime_s)
    recomputed = {graph.nodes[k].op for t, computed in enumerate(plan.computed) for k in computed if k != t}
    assert recomputed and "conv" not in recomputed
