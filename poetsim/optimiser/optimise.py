"""`optimise`: budgets in, a schedule, its predicted figures and the solver's own account out."""

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter

from poetsim.costs import CostTable
from poetsim.errors import InfeasibleBudgetError, PoetsimError, UserInputError
from poetsim.graph import TrainingGraph
from poetsim.optimiser import plan as plans
from poetsim.optimiser.baselines import PAGING, start_plan
from poetsim.optimiser.formulation import formulate
from poetsim.optimiser.rows import Formulation
from poetsim.optimiser.solvers import SolverSettings, check_available, solve
from poetsim.schedule import Budgets, Figures, Moves, Schedule, Timing
from poetsim.status import Status


@dataclass(frozen=True)
class SolveOutcome:
    """One solve: status, schedule, the MILP's predicted figures, and what the solver proved.

    Energies are joules of one iteration. `gap_overhead` relates the proven gap to the energy
    above keep-all, the only part a schedule can change: it is the figure to read (a 0.03 %
    gap on the total can be a 28 % gap on the overhead, POET.md).
    """

    moves: Moves
    timing: Timing
    solver: str
    status: Status                 # OPTIMAL, FEASIBLE (a schedule with a gap), INFEASIBLE or NO_SOLUTION
    schedule: Schedule | None
    predicted: Figures | None      # the MILP's own figures, read from the solved variables
    objective_j: float | None      # total energy of the returned schedule per the model (solver's objective)
    bound_j: float | None          # best proven lower bound on total energy (the solver's; keep-all if it has none)
    gap_total: float | None        # (objective - bound) / objective
    gap_overhead: float | None     # (objective - bound) / (objective - keep-all energy)
    build_s: float
    handoff_s: float
    solve_s: float
    num_variables: int
    num_constraints: int
    message: str


def optimise(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing = Timing.OVERLAP,
    solver: str = "highs", time_limit_s: float | None = None, mip_rel_gap: float = 1e-4, threads: int | None = None,
    warm_start: bool = True,
) -> SolveOutcome:
    """Find the least-energy schedule within `budgets` using `moves` (the MILP of POET, stage formulation).

    `mip_rel_gap` is relative to the overhead above keep-all (the objective the solver sees),
    so "optimal" means no schedule is cheaper by more than that share of the overhead. With
    `warm_start` a cheap feasible schedule (keep-all, checkpoint-sqrt or a greedy, whichever
    fits and costs least) is handed to solvers that take a start (HiGHS, CBC); a hybrid solve of
    PAGING_FIRST_NODES or more first spends a third of its time on the paging-only model and
    starts from that schedule when it is cheaper. A solver that stops early never returns a
    schedule worse than its start.
    """
    timing = _parse(Timing, timing)
    check_available(solver)
    began = perf_counter()
    obvious = _obviously_infeasible(graph, costs, budgets)
    if obvious:
        return _empty(moves, timing, solver, Status.INFEASIBLE, obvious, perf_counter() - began)
    form = formulate(graph, costs, budgets, moves, timing)
    start = start_plan(graph, costs, budgets, moves, timing) if warm_start else None
    start_values = plans.to_columns(form, start, graph, costs) if start is not None else None
    build_s = perf_counter() - began
    if start_values is not None and _zero_overhead_is_proven(form, start_values):
        return _keep_all_outcome(form, start, graph, costs, budgets, moves, timing, solver, build_s)
    settings = SolverSettings(
        mip_rel_gap=mip_rel_gap, mip_abs_gap=_abs_gap(form), time_limit_s=time_limit_s,
        threads=threads or os.cpu_count() or 1)
    presolve_s = 0.0
    if warm_start and moves.recompute and moves.page and solver in STARTING_SOLVERS and len(graph) >= PAGING_FIRST_NODES:
        began_pre = perf_counter()
        better = _paging_only_start(graph, costs, budgets, timing, solver, settings, start)
        presolve_s = perf_counter() - began_pre
        if better is not None:
            start_values = plans.to_columns(form, better, graph, costs)
        if time_limit_s is not None:
            settings = replace(settings, time_limit_s=max(time_limit_s - presolve_s, 0.1 * time_limit_s))
    result = solve(form, solver, settings, start_values)
    result = replace(result, solve_s=result.solve_s + presolve_s)
    if start_values is not None and result.status in (Status.FEASIBLE, Status.NO_SOLUTION):
        # A solver that stopped early may return worse than the start it was given (HiGHS drops a
        # start it misvalued, see solvers): the start is a schedule too, and its bound still holds.
        start_cost = form.objective(start_values)
        if result.values is None or result.objective > start_cost + _abs_gap(form):
            result = replace(result, status=Status.FEASIBLE, values=start_values, objective=start_cost)
    sizes = {"num_variables": form.num_columns, "num_constraints": form.num_rows}
    if result.values is None:
        message = _infeasible_message(graph, costs, budgets, moves) if result.status is Status.INFEASIBLE else (
            f"{solver} found no schedule within the time limit of {time_limit_s} s")
        return SolveOutcome(moves, timing, solver, result.status, None, None, None, None, None, None,
                            build_s, result.handoff_s, result.solve_s, message=message, **sizes)
    plan = plans.from_columns(form, result.values)
    schedule = plans.to_schedule(plan, graph, costs, timing, {
        "moves": moves.label, "solver": solver, "status": result.status.value,
        "ram_budget_bytes": str(budgets.ram_bytes), "runtime_budget_s": repr(budgets.runtime_s)})
    objective_j = _joules(form, result.objective)
    bound_j = _joules(form, _proven_bound(result.bound, form))
    gap_total = gap_overhead = None
    if bound_j is not None:
        proven = max(objective_j - bound_j, 0.0)
        gap_total = proven / objective_j if objective_j > 0 else 0.0
        overhead_j = objective_j - form.keep_all_j
        gap_overhead = proven / overhead_j if overhead_j > 0 else 0.0
    predicted = plans.figures(plan, graph, costs, timing)
    message = "" if result.status is Status.OPTIMAL else f"stopped with a gap of {_pct(gap_overhead)} of the overhead"
    if not budgets.fits(predicted):
        # Binaries are rounded and RAM recomputed exactly; a solver's feasibility tolerance can
        # leave a few bytes or nanoseconds over. Said here so that the checker's rejection is explained.
        message = (f"after rounding the solver's answer exceeds the budgets (peak {predicted.peak_ram_bytes:,.0f} bytes, "
                   f"runtime {predicted.runtime_s:.9g} s): solver tolerance")
    return SolveOutcome(
        moves, timing, solver, result.status, schedule, predicted, objective_j, bound_j, gap_total, gap_overhead,
        build_s, result.handoff_s, result.solve_s, message=message, **sizes)


#: Solvers that take a MIP start (GLPK's glpsol does not).
STARTING_SOLVERS = ("highs", "cbc")
#: From this many nodes, a hybrid solve first spends PAGING_FIRST_SHARE of its time limit on the
#: paging-only model, whose schedule then starts the hybrid one. Measured on ResNet-18 (CIFAR,
#: Raspberry Pi 4, 50 % RAM, 15 s): HiGHS brought paging-only to 0.027 % overhead but hybrid,
#: started from its own greedy plan, only to 0.147 %, although every paging-only schedule is a
#: hybrid one. Small graphs are solved to optimality directly.
PAGING_FIRST_NODES = 50
PAGING_FIRST_SHARE = 1 / 3
#: Without a time limit the paging-only pass still stops here (it is only a start).
PAGING_FIRST_LIMIT_S = 60.0


def _paging_only_start(graph, costs, budgets, timing, solver, settings, start: plans.Plan | None) -> plans.Plan | None:
    """A paging-only schedule, solved briefly, if it fits and costs less than `start`."""
    form = formulate(graph, costs, budgets, PAGING, timing)
    own = start_plan(graph, costs, budgets, PAGING, timing)
    limit = PAGING_FIRST_SHARE * settings.time_limit_s if settings.time_limit_s is not None else PAGING_FIRST_LIMIT_S
    result = solve(form, solver, replace(settings, time_limit_s=limit, mip_abs_gap=_abs_gap(form)),
                   plans.to_columns(form, own, graph, costs) if own is not None else None)
    if result.values is None:
        return None
    plan = plans.from_columns(form, result.values)
    fig = plans.figures(plan, graph, costs, timing)
    if not budgets.fits(fig):
        return None
    if start is not None and plans.figures(start, graph, costs, timing).total_j <= fig.total_j:
        return None
    return plan


def require_feasible(outcome: SolveOutcome) -> SolveOutcome:
    """The outcome if it holds a schedule; InfeasibleBudgetError (one line) if no schedule can exist.

    A time limit that ran out before any schedule was found is not proof of infeasibility: it
    raises a plain PoetsimError that says to allow more time.
    """
    if outcome.status is Status.INFEASIBLE:
        raise InfeasibleBudgetError(outcome.message)
    if outcome.schedule is None:
        raise PoetsimError(outcome.message or f"{outcome.solver} returned no schedule ({outcome.status})")
    return outcome


def write_lp(graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing, path) -> None:
    """Write the model of one solve as a CPLEX LP file (golden tests, debugging, other solvers)."""
    from poetsim.optimiser.pyomo_model import write_model_lp

    write_model_lp(formulate(graph, costs, budgets, moves, _parse(Timing, timing)), Path(path))


def _parse(kind, value):
    """A Timing from its value; UserInputError naming the choices otherwise."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise UserInputError(f"unknown {kind.__name__.lower()} '{value}' (choose from {choices})") from None


def _obviously_infeasible(graph: TrainingGraph, costs: CostTable, budgets: Budgets) -> str:
    """The reason no schedule of any strategy can meet the budgets, when it is cheap to know."""
    if budgets.ram_bytes < graph.min_feasible_ram_bytes:
        return (f"infeasible: RAM budget {budgets.ram_bytes:,} bytes is below the {graph.min_feasible_ram_bytes:,} bytes "
                "that the largest node and its inputs need at once")
    plain_s = costs.plain_runtime_s
    if not budgets.meets_deadline(plain_s):
        return (f"infeasible: runtime budget {budgets.runtime_s:.6g} s is below one plain pass of {plain_s:.6g} s "
                f"({budgets.runtime_s / plain_s:.3g}x); every schedule computes each node at least once")
    return ""


def _infeasible_message(graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves) -> str:
    """The solver proved infeasibility: say what is known to be feasible instead."""
    return (f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM within "
            f"{budgets.runtime_s:.6g} s ({budgets.runtime_s / costs.plain_runtime_s:.3g}x); keep-all fits "
            f"{graph.keep_all_peak_bytes:,} bytes at 1x, and no schedule fits below {graph.min_feasible_ram_bytes:,} bytes")


def _zero_overhead_is_proven(form: Formulation, start: list[float]) -> bool:
    """Whether the start costs nothing above keep-all in a model where nothing can cost less.

    When the objective's floor is 0 (`Formulation.objective_floor`), a start whose objective is
    0 is optimal, and no solver can improve or tighten it. This is what happens whenever
    keep-all fits the budgets.
    """
    return form.objective_floor == 0.0 and form.objective(start) <= 1e-12


def _keep_all_outcome(form, plan, graph, costs, budgets, moves, timing, solver, build_s) -> SolveOutcome:
    schedule = plans.to_schedule(plan, graph, costs, timing, {
        "moves": moves.label, "solver": "none (zero overhead is the proven minimum)", "status": Status.OPTIMAL.value,
        "ram_budget_bytes": str(budgets.ram_bytes), "runtime_budget_s": repr(budgets.runtime_s)})
    return SolveOutcome(
        moves, timing, solver, Status.OPTIMAL, schedule, plans.figures(plan, graph, costs, timing),
        form.keep_all_j, form.keep_all_j, 0.0, 0.0, build_s, 0.0, 0.0,
        num_variables=form.num_columns, num_constraints=form.num_rows,
        message="keep-all fits the budgets: its zero overhead is the proven minimum, no solver run")


def _empty(moves, timing, solver, status, message, build_s) -> SolveOutcome:
    return SolveOutcome(moves, timing, solver, status, None, None, None, None, None, None,
                        build_s, 0.0, 0.0, 0, 0, message)


def _abs_gap(form: Formulation) -> float:
    """A thousandth of the cheapest decision, in objective units: below it two schedules are one."""
    positive = [c for c in form.col_cost if c > 0]
    return 1e-3 * min(positive) if positive else 1e-9


def _proven_bound(bound: float | None, form: Formulation) -> float:
    """The solver's bound, or the objective's floor where it has none (HiGHS reports -inf when it
    stopped before its root LP ended) or where the floor is higher."""
    if bound is None or not math.isfinite(bound):
        return form.objective_floor
    return max(bound, form.objective_floor)


def _joules(form: Formulation, scaled: float | None) -> float | None:
    """Model units (overhead / energy_scale_j) back to the total energy in joules."""
    return None if scaled is None else form.keep_all_j + scaled * form.energy_scale_j


def _pct(share: float | None) -> str:
    return "unknown" if share is None else f"{100 * share:.3g} %"
