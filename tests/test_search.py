"""The steps of one optimise call that spend the time the MILP cannot use (`optimiser.search`)."""

from dataclasses import replace

import pytest

from poetsim.optimiser import milp_steps, steps
from poetsim.optimiser.baselines.simple import start_plan
from poetsim.optimiser.call import SolveSettings, Task
from poetsim.optimiser.clock import Clock, Reporter
from poetsim.optimiser.found import Found
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.milp_steps import milp_nonzeros_estimate
from poetsim.optimiser.optimise import optimise
from poetsim.optimiser.plans.plan import figures
from poetsim.optimiser.plans.rules import Mode, plan_from_decisions
from poetsim.optimiser.search import Search
from poetsim.optimiser.shares import SHARES
from poetsim.schedule.model import Budgets, Moves, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

from optimiser_cases import MOVES, cost_table, present, training_graph, two_skips


@pytest.mark.parametrize("model, batch_size", [("transformer", None), ("resnet18_cifar", 8)])
@pytest.mark.parametrize("moves", MOVES, ids=lambda moves: moves.label)
def test_the_estimate_that_skips_a_build_is_a_little_below_the_models_nonzeros(model, batch_size, moves):
    """Below, so that a build is never skipped that the time left could solve.

    Not far below, so that one no solve could follow is skipped (the measured ratios: 19.0 to 40.1
    per column).
    """
    problem = build_problem(model, "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP, batch_size=batch_size)
    form = formulate(problem.graph, problem.costs, problem.budgets, moves, Timing.OVERLAP)
    built = len(form.row_index)
    estimate = milp_nonzeros_estimate(problem.graph, moves)
    assert 0.8 * built <= estimate <= built
    lines = form.num_rows + form.num_columns
    assert 0.9 * lines <= milp_steps.LINES_PER_NONZERO * built <= 1.1 * lines


#: Graphs of 8 forward nodes on which no greedy plan fits the budgets: their forward outputs' bytes,
#: FLOPs and skips, the RAM budget in bytes, the runtime budget (x plain), and what the MILP finds.
NO_GREEDY_PLAN: dict[str, tuple[list[int], list[float], set[tuple[int, int]], int, float, str]] = {
    "a-schedule": (
        [28, 77, 39, 10, 94, 47, 98, 29],
        [46, 84, 74, 60, 11, 46, 97, 56],
        {(0, 6), (1, 4), (5, 7)},
        410,
        1.24,
        "optimal",
    ),
    "none": ([18, 57, 72, 39, 62, 63, 49, 29], [58, 43, 74, 94, 49, 27, 93, 26], set(), 262, 1.41, "infeasible"),
}


@pytest.mark.parametrize("case", NO_GREEDY_PLAN)
def test_with_no_schedule_found_a_small_graphs_milp_runs_on_less_than_a_milp_step_needs(case):
    """No greedy plan fits, and the effort is a quarter of `Shares.min_milp`: the MILP still runs.

    It is then the one step that can find a schedule (or prove there is none), and on a small graph
    its root costs a sliver of a unit. The answer is the one a large effort gives.
    """
    forward_bytes, flops, skips, ram_bytes, runtime_x, status = NO_GREEDY_PLAN[case]
    graph = training_graph(forward_bytes, flops, frozenset(skips))
    compute_s = [0.57, 1.61, 0.16, 1.62, 0.25, 1.28, 1.24, 1.05, 1.82, 1.81, 0.75, 1.86, 0.09, 1.73, 0.64, 0.88, 0.3]
    compute_j = [0.74, 0.15, 0.17, 1.94, 0.05, 0.4, 0.96, 1.58, 0.74, 1.23, 0.02, 0.46, 0.73, 0.21, 1.8, 1.21, 0.21]
    costs = cost_table(graph, compute_s, compute_j, [1.0] * len(graph), [1.0] * len(graph), static_power_w=0.3)
    budgets = Budgets(ram_bytes, runtime_x * costs.plain_runtime_s)
    recompute = Moves(recompute=True, page=False)
    assert start_plan(graph, costs, budgets, recompute, Timing.OVERLAP) is None
    assert SHARES.min_milp > 0.5
    short = optimise(graph, costs, budgets, recompute, Timing.OVERLAP, effort=0.5)
    long = optimise(graph, costs, budgets, recompute, Timing.OVERLAP, effort=20.0)
    assert (short.status, long.status) == (status, status)
    assert short.objective_j == long.objective_j
    if status == "optimal":
        assert short.found_by == "the restricted solve"


def test_where_no_milp_fits_a_greedy_cut_short_runs_again_and_gives_the_uncut_plan():
    moves = Moves(recompute=True, page=False)
    problem = build_problem("resnet18_cifar", "rpi4", parse_ram("35%"), 1.5, Timing.OVERLAP, batch_size=8)
    graph, costs, budgets = problem.graph, problem.costs, problem.budgets
    clock = Clock(600.0)
    task = Task(graph, costs, budgets, moves, Timing.OVERLAP)
    call = Search(task, SolveSettings("highs", 1e-4, 1), 600.0, clock, Reporter(None, clock)).call
    cut = steps._greedy(call, Found(), 0.0)  # nothing at all: every greedy stops before its first step
    assert cut.greedy_cut
    cut_j = call.standing.total_j
    again = steps.without_milp(call, cut)
    assert not again.greedy_cut
    uncut = start_plan(graph, costs, budgets, moves, Timing.OVERLAP)
    assert uncut is not None
    uncut_j = figures(uncut, graph, costs, Timing.OVERLAP).total_j
    assert call.standing.total_j is not None and call.standing.total_j <= uncut_j * (1 + 1e-12)
    assert cut_j is None or call.standing.total_j < cut_j


def test_the_greedy_rules_that_ran_to_their_end_are_not_run_again():
    moves = Moves(recompute=True, page=True)
    problem = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP, batch_size=8)
    graph, costs, budgets = problem.graph, problem.costs, problem.budgets
    finished: set[int] = set()
    first = start_plan(graph, costs, budgets, moves, Timing.OVERLAP, finished=finished)
    assert first is not None
    # keep-all, checkpoint-sqrt, three greedies keeping recomputed outputs, two dropping them
    assert finished == set(range(7))
    assert start_plan(graph, costs, budgets, moves, Timing.OVERLAP, finished=finished) is None


def _rpi4_hybrid_call(model: str, ram: str, batch_size: int | None = None):
    problem = build_problem(model, "rpi4", parse_ram(ram), 1.2, Timing.OVERLAP, batch_size=batch_size)
    clock = Clock(600.0)
    task = Task(problem.graph, problem.costs, problem.budgets, Moves(recompute=True, page=True), Timing.OVERLAP)
    return Search(task, SolveSettings("highs", 1e-4, 1), 60.0, clock, Reporter(None, clock)).call


def test_the_milp_confined_to_the_page_in_priced_choice_pages_only_that_choice_and_keeps_its_build():
    """ResNet-18 (CIFAR, batch 8) on the Pi at 50 %: the confined MILP's schedule moves only the chosen outputs.

    There the page-in-priced cover pages outputs 1 and 52 where the plain cover pages 10 and 61.
    """
    call = _rpi4_hybrid_call("resnet18_cifar", "50%", batch_size=8)
    found = steps.cover(call)
    priced = steps.stall_priced(call, call.allowance.part(0.9), page_in_stalls=True)
    assert priced is not None and found.cover is not None
    assert (priced.recomputed, priced.paged) != (found.cover.recomputed, found.cover.paged)
    after = milp_steps.choice_solve(call, replace(found, page_in_cover=priced))
    best = call.standing.best
    assert best is not None and best.source == "the MILP confined to the page-in-priced cover's choice"
    assert {i for computed in best.plan.computed for i in computed[:-1]} <= priced.recomputed
    assert set().union(*best.plan.paged_out) <= priced.paged
    assert after.form is not None, "the build serves the MILP steps after it"
    assert milp_steps.build(call, after) is after


def test_a_page_in_priced_choice_that_is_the_plain_covers_is_not_solved_again():
    call = _rpi4_hybrid_call("resnet18_cifar", "50%", batch_size=8)
    found = steps.cover(call)
    before = call.allowance.meter.done
    assert milp_steps.choice_solve(call, replace(found, page_in_cover=found.cover)) == replace(found, page_in_cover=found.cover)
    assert call.allowance.meter.done == before and call.standing.best is None


@pytest.mark.parametrize(("effort", "spent", "swapped"), [(1.0, 0.0, True), (1.0, 1.5, True), (0.0, 0.0, False)])
def test_the_last_step_swaps_an_unproven_incumbent_within_as_much_work_as_the_effort_however_much_is_left(effort, spent, swapped):
    """two_skips at 410 B, the incumbent recomputing a (5 J) and keeping b; no bound known.

    Polish cannot keep a (510 B); `settle` swaps: a kept, b recomputed, 4.91 J less, also where
    the steps before it (`spent` units) used the whole effort. With an effort of nothing it
    polishes only, and the incumbent stays.
    """
    graph, costs = two_skips()
    clock = Clock(600.0)
    task = Task(graph, costs, Budgets(410, 10.0), Moves(recompute=True, page=True), Timing.COMPUTE_ONLY)
    call = Search(task, SolveSettings("highs", 1e-4, 1), effort, clock, Reporter(None, clock)).call
    call.allowance.charge(spent)
    dear = plan_from_decisions(graph, {(1, 2, 7): Mode.RECOMPUTE})
    assert call.standing.offer(dear, "a start")
    before_j = present(call.standing.total_j, "the start's energy")
    steps.settle(call, Found())
    best = present(call.standing.best, "the incumbent")
    if swapped:
        assert best.source == "a start, swapped"
        assert before_j - best.total_j == pytest.approx(4.91)
    else:
        assert best.source == "a start" and best.total_j == before_j
