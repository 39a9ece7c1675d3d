"""The optimiser on hand-checked cases, its golden LP file, and its answers to bad input."""

import importlib.util
import itertools
import os
import random
import shutil
from pathlib import Path

import pytest

from poetsim.errors import InfeasibleBudgetError, SolverUnavailableError, UserInputError
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.optimiser import optimise, require_feasible, write_lp
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.model import Budgets, Compute, PageIn, PageOut, Timing

from optimiser_cases import HYBRID, PAGING_ONLY, RECOMPUTE_ONLY, cost_table, gurobi_license, present, relu_or_conv, training_graph

GOLDEN = Path(__file__).parent / "golden"
needs_glpk = pytest.mark.skipif(shutil.which("glpsol") is None, reason="glpsol (glpk-utils) not installed")
needs_cbc = pytest.mark.skipif(shutil.which("cbc") is None, reason="cbc (coinor-cbc) not installed")
needs_scip = pytest.mark.skipif(importlib.util.find_spec("pyscipopt") is None, reason="pyscipopt not installed")
needs_gurobi = pytest.mark.skipif(gurobi_license() is None, reason="gurobipy not installed, or no Gurobi license")
SOLVERS = [
    "highs",
    pytest.param("scip", marks=needs_scip),
    pytest.param("gurobi", marks=needs_gurobi),
    pytest.param("glpk", marks=needs_glpk),
    pytest.param("cbc", marks=needs_cbc),
]


def solve_checked(graph, costs, budgets, strategy=HYBRID, timing=Timing.COMPUTE_ONLY, solver="highs"):
    """optimise, then hold the schedule against the checker: valid, in budget, same figures."""
    outcome = optimise(graph, costs, budgets, strategy, timing, solver=solver)
    assert outcome.status == "optimal", outcome.message
    checked = check_schedule(present(outcome.schedule, "the schedule"), graph, costs, timing, budgets)
    assert compare_figures(present(outcome.predicted, "the figures"), checked) == []
    return outcome, checked


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_cheap_relu_is_recomputed_rather_than_paged(solver):
    """relu_or_conv with r a ReLU (0.01 J), paging 0.05 J each way, RAM 201 B, compute-only.

    Keep-all peaks at 250 B in stage 3 (r + big + out), so r must be out of RAM when `out` is
    computed, yet gr reads it in stage 4. Recomputing r in stage 3 would place it before `out`
    (ascending order), so the choices are: recompute r in stage 4 from s, kept all along (1 B;
    stage 2 then holds s + r + big = 201 B, exactly the budget), for 0.01 J; or page r out in
    stage 2 and in during stage 3 (usable in 4), for 0.10 J. Optimum: keep-all + 0.01 J, one
    recomputation (r in stage 4), no paging.
    """
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome, checked = solve_checked(graph, costs, Budgets(201, 10.0), solver=solver)
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 0.01, rel=1e-9)
    assert (checked.recomputations, checked.page_ins, checked.page_outs) == (1, 0, 0)
    assert Compute(1) in outcome.schedule.stages[4]
    assert outcome.objective_j == pytest.approx(checked.total_j, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_costly_conv_is_paged_rather_than_recomputed(solver):
    """The same graph with r a convolution (1 J) and paging 0.05 J each way.

    Now paging r (out in stage 2, in during stage 3; under compute-only timing the page-in
    takes RAM only from stage 4, where r + out + gr = 151 B) costs 0.10 J against 1 J for the
    recomputation. Optimum: keep-all + 0.10 J, one page-out and one page-in, no recomputation.
    """
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    outcome, checked = solve_checked(graph, costs, Budgets(201, 10.0), solver=solver)
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 0.10, rel=1e-9)
    assert (checked.recomputations, checked.page_ins, checked.page_outs) == (0, 1, 1)
    assert PageOut(1) in outcome.schedule.stages[2] and PageIn(1) in outcome.schedule.stages[3]


def test_under_overlap_timing_a_page_in_holds_ram_so_the_conv_is_recomputed():
    """The conv case under overlap timing (no static power, generous deadline).

    A page-in now holds its 100 B from the start of stage 3, the only stage that can page r
    in for stage 4: big + r + out = 250 B > 201 B. Paging no longer fits, so the optimum
    recomputes r in stage 4 for 1 J.
    """
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    _, checked = solve_checked(graph, costs, Budgets(201, 10.0), timing=Timing.OVERLAP)
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 1.0, rel=1e-9)
    assert (checked.recomputations, checked.page_ins) == (1, 0)


def test_the_deadline_can_forbid_recomputation():
    """The ReLU case at 1.0x runtime: a recomputation adds time, paging does not (compute-only)."""
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    _, checked = solve_checked(graph, costs, Budgets(201, costs.plain_runtime_s))
    assert (checked.recomputations, checked.page_ins) == (0, 1)
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 0.10, rel=1e-9)


def test_the_outcome_reports_the_solvers_account():
    """Bound, gaps, sizes and times come back filled in, in joules, for an optimal solve."""
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome, _ = solve_checked(graph, costs, Budgets(201, 10.0))
    assert outcome.bound_j <= outcome.objective_j * (1 + 1e-9)
    assert outcome.bound_j >= costs.plain_compute_j - 1e-9
    assert 0 <= outcome.gap_overhead <= 1e-4 and 0 <= outcome.gap_total <= outcome.gap_overhead
    assert outcome.num_variables > 0 and outcome.num_constraints > 0
    assert min(outcome.build_s, outcome.handoff_s, outcome.solve_s) >= 0


def test_a_mip_start_that_highs_misvalues_does_not_corrupt_the_answer():
    """A start HiGHS 1.16 misvalued in its presolved space still gives the true optimum.

    A case where HiGHS 1.16 valued the greedy start (page node 0 out and in, 0.9 units) at 0.45 in
    its presolved space and called that optimal: the answer must still be the true optimum, with the
    objective the schedule really costs.
    """
    deps = [(), (0,), (1,), (0, 2), (3,), (0, 2, 3, 4), (1, 2, 5), (0, 1, 6), (0, 5, 7)]
    sizes = [1, 1, 6, 1, 4, 1, 6, 1, 1]
    graph = TrainingGraph.create(
        "misvalued_start", [Node(i, f"n{i}", "op", i > 4, d, m) for i, (d, m) in enumerate(zip(deps, sizes))]
    )
    T = len(graph)
    costs = cost_table(graph, [1.0] * T, [2.0] + [1.0] * (T - 1), [1.0] * T, [0.5] + [1.0] * (T - 1))
    budgets = Budgets(graph.min_feasible_ram_bytes, 2 * costs.plain_runtime_s)
    cold = optimise(graph, costs, budgets, HYBRID, Timing.COMPUTE_ONLY, warm_start=False)
    warm, checked = solve_checked(graph, costs, budgets)
    assert warm.objective_j == pytest.approx(checked.total_j, rel=1e-9)
    assert warm.objective_j == pytest.approx(cold.objective_j, rel=1e-9) == costs.plain_compute_j + 1.0


def tiny_case():
    graph = training_graph([40, 30, 20], [10.0, 20.0, 5.0], frozenset({(0, 2)}), name="tiny")
    T = len(graph)
    costs = cost_table(graph, [0.5] * T, [0.25 * (k + 1) for k in range(T)], [0.125] * T, [0.0625] * T, 0.5, 1)
    return graph, costs


def test_the_lp_file_matches_the_golden_one(tmp_path):
    """write_lp of a tiny hybrid/overlap model equals tests/golden/tiny_hybrid.lp.

    Regenerate after an intended change of the model with POETSIM_REGEN_GOLDEN=1.
    """
    graph, costs = tiny_case()
    budgets = Budgets(int(0.7 * graph.keep_all_peak_bytes), 1.25 * costs.plain_runtime_s)
    golden = GOLDEN / "tiny_hybrid.lp"
    written = tmp_path / "tiny_hybrid.lp"
    write_lp(graph, costs, budgets, HYBRID, Timing.OVERLAP, written)
    if os.environ.get("POETSIM_REGEN_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        shutil.copy(written, golden)
    assert written.read_text() == golden.read_text()


def test_ram_below_the_largest_working_set_is_infeasible_with_a_one_line_reason():
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome = optimise(graph, costs, Budgets(199, 10.0), HYBRID)
    assert outcome.status == "infeasible" and outcome.schedule is None
    with pytest.raises(InfeasibleBudgetError) as error:
        require_feasible(outcome)
    assert "\n" not in str(error.value) and "200 bytes" in str(error.value)


def test_runtime_below_one_pass_is_infeasible():
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome = optimise(graph, costs, Budgets(1000, 0.9 * costs.plain_runtime_s), HYBRID)
    with pytest.raises(InfeasibleBudgetError, match="below one plain pass"):
        require_feasible(outcome)


def test_a_proven_infeasibility_is_reported_as_such():
    """Recompute-only at 1.0x runtime and 201 B: r must be recomputed, which takes time."""
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome = optimise(graph, costs, Budgets(201, costs.plain_runtime_s), RECOMPUTE_ONLY, Timing.COMPUTE_ONLY)
    assert outcome.status == "infeasible"
    with pytest.raises(InfeasibleBudgetError) as error:
        require_feasible(outcome)
    assert "\n" not in str(error.value) and "only recomputes" in str(error.value)


def test_require_feasible_passes_a_solved_outcome_through():
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome = optimise(graph, costs, Budgets(201, 10.0), HYBRID)
    assert require_feasible(outcome) is outcome


@pytest.mark.parametrize("field, value", [("timing", "instant"), ("solver", "cplex")])
def test_unknown_choices_are_user_input_errors(field, value):
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    args = {"moves": HYBRID, "timing": Timing.OVERLAP, "solver": "highs", field: value}
    with pytest.raises(UserInputError, match=value):
        optimise(graph, costs, Budgets(201, 10.0), **args)


def test_a_missing_solver_binary_names_its_debian_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    with pytest.raises(SolverUnavailableError, match="glpk-utils"):
        optimise(graph, costs, Budgets(201, 10.0), HYBRID, solver="glpk")
    with pytest.raises(SolverUnavailableError, match="coinor-cbc"):
        optimise(graph, costs, Budgets(201, 10.0), HYBRID, solver="cbc")


def test_when_keep_all_fits_it_is_returned_as_proven_optimal_without_a_solver_run():
    graph, costs = relu_or_conv(node_j=0.01, page_j=0.05)
    outcome = optimise(graph, costs, Budgets(graph.keep_all_peak_bytes, 2 * costs.plain_runtime_s), HYBRID)
    assert outcome.status == "optimal" and outcome.solve_s == 0.0
    assert outcome.gap_overhead == 0.0 and outcome.objective_j == outcome.bound_j
    predicted = present(outcome.predicted, "the figures")
    assert predicted.recomputations == predicted.page_ins == 0
    assert "no solver run" in outcome.message


def test_hybrid_started_from_a_paging_only_schedule_is_never_worse_than_it():
    """Every paging-only schedule is a hybrid one.

    Handed in as a start, hybrid returns one at least as cheap, even with no effort to do anything
    else.
    """
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    budgets = Budgets(201, 10.0)
    paging = optimise(graph, costs, budgets, PAGING_ONLY, Timing.COMPUTE_ONLY)
    hybrid = optimise(
        graph, costs, budgets, HYBRID, Timing.COMPUTE_ONLY, effort=0.0, starts=[present(paging.schedule, "the paging schedule")]
    )
    assert hybrid.schedule is not None
    assert present(hybrid.objective_j, "hybrid's objective") <= present(paging.objective_j, "paging's objective") * (1 + 1e-12)
    check_schedule(hybrid.schedule, graph, costs, Timing.COMPUTE_ONLY, budgets)


def test_a_start_with_moves_the_strategy_lacks_is_not_used():
    """A paging schedule cannot start recompute-only: the answer recomputes, it never pages."""
    graph, costs = relu_or_conv(node_j=1.0, page_j=0.05)
    budgets = Budgets(201, 10.0)
    paging = optimise(graph, costs, budgets, PAGING_ONLY, Timing.COMPUTE_ONLY)
    outcome = optimise(
        graph, costs, budgets, RECOMPUTE_ONLY, Timing.COMPUTE_ONLY, starts=[present(paging.schedule, "the paging schedule")]
    )
    assert outcome.status == "optimal" and outcome.found_by != "a start"
    predicted = present(outcome.predicted, "the figures")
    assert predicted.page_ins == 0 and predicted.recomputations == 1


def test_when_the_effort_is_spent_the_best_schedule_so_far_comes_with_its_gap():
    """The transformer at 35 % RAM under overlap with 0.5 units of effort.

    No proof in that much work, but a schedule within the budgets, and a proven gap.
    """
    from poetsim.schedule.problem import build_problem
    from poetsim.units import parse_ram

    p = build_problem("transformer", "rpi4", parse_ram("35%"), 1.2, Timing.OVERLAP)
    outcome = optimise(p.graph, p.costs, p.budgets, HYBRID, Timing.OVERLAP, effort=0.5)
    assert outcome.status in ("optimal", "feasible") and outcome.schedule is not None
    gap = present(outcome.gap_overhead, "the gap")
    assert 0.0 <= gap <= 1.0 and present(outcome.bound_j, "the bound") <= present(outcome.objective_j, "the objective")
    assert (outcome.status == "optimal") == (gap <= 1e-4)
    checked = check_schedule(outcome.schedule, p.graph, p.costs, Timing.OVERLAP, p.budgets)
    assert compare_figures(present(outcome.predicted, "the figures"), checked) == []


def test_progress_is_reported_at_most_about_once_a_second_with_the_best_figures():
    from poetsim.schedule.problem import build_problem
    from poetsim.units import parse_ram

    p = build_problem("transformer", "rpi4", parse_ram("35%"), 1.2, Timing.OVERLAP)
    seen = []
    outcome = optimise(
        p.graph,
        p.costs,
        p.budgets,
        HYBRID,
        Timing.OVERLAP,
        time_limit_s=3.0,
        threads=1,
        on_progress=lambda *report: seen.append(report),
    )
    assert seen, "no progress was reported"
    times = [elapsed for elapsed, *_ in seen]
    assert all(later - earlier >= 0.99 for earlier, later in itertools.pairwise(times))
    for _, incumbent, bound, phase in seen:
        assert isinstance(phase, str) and phase
        if incumbent is not None and bound is not None:
            assert bound <= incumbent * (1 + 1e-12)
    last_incumbent = [incumbent for _, incumbent, _, _ in seen if incumbent is not None]
    assert not last_incumbent or last_incumbent[-1] >= present(outcome.objective_j, "the objective") * (1 - 1e-12)


@pytest.mark.parametrize("other", [pytest.param("scip", marks=needs_scip), pytest.param("gurobi", marks=needs_gurobi)])
@pytest.mark.parametrize(
    "node_j, moves, runtime_s, expected",
    [(0.01, HYBRID, 10.0, 0.01), (1.0, HYBRID, 10.0, 0.10), (1.0, RECOMPUTE_ONLY, 5.0, None)],
)
def test_scip_and_gurobi_solve_the_bare_milp_as_highs_does(other, node_j, moves, runtime_s, expected):
    """The stage MILP alone (no cover, no plans, no start), so the solver itself decides.

    The two hand cases above (the ReLU recomputed for 0.01 J, the convolution paged for 0.10 J), and
    recompute-only with a deadline of one plain pass (5 s), which leaves no time for the
    recomputation that 201 bytes need: infeasible, and only the solver says so here.
    """
    graph, costs = relu_or_conv(node_j=node_j, page_j=0.05)
    budgets = Budgets(201, runtime_s)
    for solver in ("highs", other):
        outcome = optimise(graph, costs, budgets, moves, Timing.COMPUTE_ONLY, solver=solver, warm_start=False)
        if expected is None:
            assert outcome.status == "infeasible", (solver, outcome.message)
            assert "no schedule that only recomputes" in outcome.message
            continue
        assert outcome.status == "optimal", (solver, outcome.message)
        assert outcome.found_by == solver
        checked = check_schedule(present(outcome.schedule, "the schedule"), graph, costs, Timing.COMPUTE_ONLY, budgets)
        assert checked.total_j == pytest.approx(costs.plain_compute_j + expected, rel=1e-9)
        assert outcome.bound_j == pytest.approx(checked.total_j, rel=1e-9)


def three_layer_case(size: int, compute_s: tuple[float, ...]):
    """A small training graph of three layers, the loss and three gradients, with unit costs.

    Three layers, the loss and three gradients as `training_graph` makes them, each output `size`
    bytes but the layers' middle two and gradients (1/7 of it, at least 1) and the loss (4 bytes);
    every compute 1 J (2 J a gradient), every transfer 1 s and 1 J. Hypothesis drew both cases below
    in this shape.
    """
    small = max(size // 7, 1)
    graph = training_graph([size, small, small], [1.0, 1.0, 1.0], grad_reads=None)
    sizes = (size, small, small, 4, small, small, size)
    nodes = [Node(n.id, n.name, n.op, n.backward, n.deps, sizes[n.id], flops=n.flops) for n in graph.nodes]
    graph = TrainingGraph.create("case", nodes)
    return graph, cost_table(graph, compute_s, [1.0] * 7, [1.0] * 7, [1.0] * 7)


def test_an_infeasibility_from_highs_presolve_is_checked_by_a_run_without_it():
    """A model HiGHS 1.16's presolve calls infeasible: the bare MILP still proves keep-all optimal.

    HiGHS 1.16's presolve calls this model infeasible (recompute-only, the RAM budget at the
    keep-all peak of 30 bytes, 1.375x), although keep-all meets every row and SCIP, Gurobi and HiGHS
    without presolve solve it (test_cover's property found it). The bare MILP must give keep-all's 7
    J, proven, as it does with both moves.
    """
    graph, costs = three_layer_case(14, (1.0, 1.0, 1.0, 0.5, 1.0, 2.0, 1.0))
    budgets = Budgets(graph.keep_all_peak_bytes, 1.375 * costs.plain_runtime_s)
    for moves in (RECOMPUTE_ONLY, HYBRID):
        outcome = optimise(graph, costs, budgets, moves, Timing.COMPUTE_ONLY, warm_start=False, mip_rel_gap=1e-9)
        assert outcome.status == "optimal", outcome.message
        assert outcome.objective_j == pytest.approx(costs.plain_compute_j, rel=1e-12)


@needs_gurobi
def test_a_gurobi_solution_that_breaks_a_bound_is_solved_again_without_presolve():
    """A model whose Gurobi presolve breaks the RAM budget: the bare MILP gives HiGHS's proven optimum.

    Gurobi 13.0.3's presolve returns an "optimal" keep-all solution for this model (hybrid, RAM one
    byte below keep-all's 12, 1.125x) with a RAM column 0.2 above its upper bound; the plan read
    from it breaks the budget. The bare MILP must give the optimum HiGHS proves (one recomputation,
    8 J), not a broken solution and not `no-solution`.
    """
    graph, costs = three_layer_case(5, (0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0))
    budgets = Budgets(graph.keep_all_peak_bytes - 1, 1.125 * costs.plain_runtime_s)
    outcome = optimise(graph, costs, budgets, HYBRID, Timing.COMPUTE_ONLY, solver="gurobi", warm_start=False, mip_rel_gap=1e-9)
    assert outcome.status == "optimal", outcome.message
    checked = check_schedule(present(outcome.schedule, "the schedule"), graph, costs, Timing.COMPUTE_ONLY, budgets)
    assert checked.total_j == pytest.approx(costs.plain_compute_j + 1.0, rel=1e-12)


@pytest.mark.skipif(gurobi_license() != "size-limited", reason="needs gurobipy's size-limited license")
def test_a_size_limited_gurobi_license_is_a_one_line_solver_error_naming_the_milp_size():
    """The gurobipy from PyPI refuses models of over 2,000 columns or rows.

    The solve says so in one line with the model's size (ResNet-18, CIFAR, at 50 % RAM: about 40,000
    columns).
    """
    from poetsim.optimiser.milp.formulation import formulate
    from poetsim.optimiser.milp.solvers import SolverSettings, solve
    from poetsim.schedule.problem import build_problem
    from poetsim.units import parse_ram

    problem = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP, batch_size=8)
    form = formulate(problem.graph, problem.costs, problem.budgets, RECOMPUTE_ONLY, problem.timing)
    with pytest.raises(SolverUnavailableError, match="size-limited") as raised:
        solve(form, "gurobi", SolverSettings(1e-4, 0.0, 30.0, 1), None)
    message = str(raised.value)
    assert f"{len(form.col_cost):,} columns" in message and "\n" not in message


def skip_graph_case(seed: int, ram_share: float | None = None):
    """A nine-layer graph with skips, random sizes and costs from `seed`, and its budgets.

    A nine-layer graph with skips (1, 4) and (4, 7), random sizes and costs from `seed`, and its
    budgets (RAM a random share of keep-all from 0.5 to 0.9, 1.3x): small enough for gurobipy's
    size-limited license, large enough that some seeds need the MILP after the covers.
    """
    rng = random.Random(seed)
    sizes, flops = [rng.randint(50, 200) for _ in range(9)], [rng.uniform(1, 10) for _ in range(9)]
    graph = training_graph(sizes, flops, frozenset({(1, 4), (4, 7)}))
    n = len(graph)
    costs = cost_table(
        graph,
        [node.flops * 0.01 for node in graph.nodes],
        [node.flops * 0.1 for node in graph.nodes],
        [0.05] * n,
        [rng.uniform(0.1, 2) for _ in range(n)],
    )
    share = rng.uniform(0.5, 0.9) if ram_share is None else ram_share
    return graph, costs, Budgets(int(graph.keep_all_peak_bytes * share), 1.3 * costs.plain_runtime_s)


@pytest.mark.parametrize("solver", ["highs", pytest.param("gurobi", marks=needs_gurobi)])
def test_a_solve_stops_at_its_first_report_once_what_is_known_closes_the_gap(solver):
    """A solve stops once the incumbent meets the known bound, at the same point on any machine.

    The optimiser stops a solve once the incumbent is within the gap of the covers' bound
    (`SolverSettings.known`), inside HiGHS's process or Gurobi's MIP callback: a rule the run's own
    progress decides, so it stops at the same point on any machine. `skip_graph_case(3)` at 75 %
    RAM, hybrid, is not solved before the first report, so a known incumbent that meets a known
    bound leaves the solve unfinished: never `optimal`.
    """
    from poetsim.optimiser.milp.formulation import formulate
    from poetsim.optimiser.milp.solvers import Known, SolverSettings, solve

    graph, costs, budgets = skip_graph_case(3, ram_share=0.75)
    form = formulate(graph, costs, budgets, HYBRID, Timing.OVERLAP)
    met = Known(incumbent=1e9, bound=1e9)
    stopped = solve(form, solver, SolverSettings(1e-9, 0.0, 60.0, 1, known=met), None)
    assert stopped.status in ("feasible", "no-solution")
    finished = solve(form, solver, SolverSettings(1e-9, 0.0, 60.0, 1), None)
    assert finished.status == "optimal"


@needs_gurobi
@pytest.mark.parametrize("seed", [7, 11, 22, 24])
def test_the_whole_search_with_gurobi_gives_the_answer_it_gives_with_highs(seed):
    """Covers, plans, the restricted solve and the full MILP from the incumbent.

    On these seeds the full MILP finds the schedule, so Gurobi's handling of starts is what is
    held to HiGHS's.
    """
    graph, costs, budgets = skip_graph_case(seed)
    highs = optimise(graph, costs, budgets, HYBRID, Timing.OVERLAP, solver="highs")
    gurobi = optimise(graph, costs, budgets, HYBRID, Timing.OVERLAP, solver="gurobi")
    assert highs.status == gurobi.status == "optimal"
    assert gurobi.found_by in ("gurobi", "the restricted solve")
    checked = check_schedule(present(gurobi.schedule, "Gurobi's schedule"), graph, costs, Timing.OVERLAP, budgets)
    assert checked.total_j == pytest.approx(highs.objective_j, rel=1e-9)


def until_interrupted(setup: str, solve_call: str) -> str:
    """A script that builds a model (`setup`, which sets `form`), says "solving" on stderr and runs `solve_call`.

    On KeyboardInterrupt it says "interrupted" and exits 130.
    """
    return (
        f"import sys, time\n{setup}\nprint('solving', file=sys.stderr, flush=True)\ntry:\n    {solve_call}\n"
        "except KeyboardInterrupt:\n    print('interrupted', file=sys.stderr)\n    sys.exit(130)\n"
        "print('finished', file=sys.stderr)\n"
    )


GUROBI_UNTIL_INTERRUPTED = until_interrupted(
    """
sys.path.insert(0, sys.argv[1])
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.milp.solvers import SolverSettings, solve
from poetsim.schedule.model import Timing
from test_optimiser import HYBRID, skip_graph_case

graph, costs, budgets = skip_graph_case(3, ram_share=0.75)
form = formulate(graph, costs, budgets, HYBRID, Timing.OVERLAP)""",
    'solve(form, "gurobi", SolverSettings(1e-9, 0.0, 300.0, 1), None, lambda *_: time.sleep(0.5))',
)


@needs_gurobi
def test_ctrl_c_during_a_gurobi_solve_ends_it_and_prints_nothing_to_stdout():
    """Gurobi catches SIGINT itself, stops the solve and prints a line of its own.

    The solve raises KeyboardInterrupt (as a HiGHS solve ends on Ctrl-C) and stdout stays empty. No
    model within gurobipy's size-limited license runs for seconds, so a watch that sleeps half a
    second at each report keeps this one at work when the signal comes.
    """
    assert_ctrl_c_ends_it_quietly(GUROBI_UNTIL_INTERRUPTED, 3.0, str(Path(__file__).parent))


SCIP_UNTIL_INTERRUPTED = until_interrupted(
    """
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.milp.solvers import SolverSettings, solve
from poetsim.schedule.problem import build_problem
from poetsim.schedule.model import Moves, Timing
from poetsim.units import parse_ram

problem = build_problem("resnet18_cifar", "rpi4", parse_ram("50%"), 1.2, Timing.OVERLAP, batch_size=8)
form = formulate(problem.graph, problem.costs, problem.budgets, Moves(recompute=True, page=False), problem.timing)""",
    'solve(form, "scip", SolverSettings(1e-4, 0.0, 300.0, 1), None)',
)


@needs_scip
def test_ctrl_c_during_a_scip_solve_ends_it_at_once_and_prints_nothing_to_stdout():
    """SCIP catches SIGINT itself, stops, and prints a line of its own with printf.

    The solve raises KeyboardInterrupt (as a HiGHS solve ends on Ctrl-C) and stdout stays empty.

    The stage MILP of ResNet-18 (CIFAR) at 50 % RAM, recompute-only, is nowhere near solved
    within minutes (docs/optimiser.md, section 9), so 4 s after its build began SCIP is at work.
    """
    assert_ctrl_c_ends_it_quietly(SCIP_UNTIL_INTERRUPTED, 4.0)


def assert_ctrl_c_ends_it_quietly(script: str, after_s: float, *args: str) -> None:
    """Run `script` (which says "solving" on stderr, then solves with a 300 s limit), send SIGINT `after_s` later.

    It must say "interrupted", exit 130, print nothing to stdout, and end well before its limit
    (stopped by the signal).
    """
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert present(proc.stderr, "the script's stderr pipe").readline().strip() == "solving"
    time.sleep(after_s)
    began = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted"
    assert out == ""
    assert time.perf_counter() - began < 30
