"""The steps of one `optimise` call that run the stage MILP: its build, the run confined to a cover's
choice, and the full run from the incumbent, each stopped as soon as the incumbent is within the
gap of the best bound.
"""

import math
from dataclasses import replace
from time import perf_counter

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.call import Call
from poetsim.optimiser.found import Found
from poetsim.optimiser.milp.formulation import formulate, last_useful_stage
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.milp.solvers import SolverResult, SolverSettings, Watch, solve
from poetsim.optimiser.outcome import within_gap
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import admits, restricted
from poetsim.schedule.model import Moves

#: Before the model is built, its nonzeros are taken as this many per S_ram column (one per output
#: and stage from its computation to its last useful stage), by (recompute, page): a little below
#: what the zoo's graphs measure (`tests/test_search.py`), so that a build the budget left could
#: not solve is skipped.
NONZEROS_PER_COLUMN = {(False, True): 18, (True, False): 19, (True, True): 36}


def milp_nonzeros_estimate(graph: TrainingGraph, moves: Moves) -> int:
    """The stage MILP's nonzeros as `time_for_milp` takes them before it is built."""
    last = last_useful_stage(graph)
    columns = sum(max(last[i] - i, 0) for i in range(len(graph)))
    return NONZEROS_PER_COLUMN[moves.recompute, moves.page] * columns


def time_for_milp(call: Call, found: Found) -> bool:
    """Whether enough is left for a MILP step: a short run finds nothing, and HiGHS overruns short
    limits; nor does a run whose presolve alone would outlast what is left (before the build, by
    `milp_nonzeros_estimate`, so that a build no solve could follow is skipped too)."""
    left = call.allowance.left()
    if left is None:
        return True
    form = found.form
    nonzeros = len(form.row_index) if form is not None else milp_nonzeros_estimate(call.task.graph, call.task.moves)
    return left >= call.shares.min_milp and nonzeros <= call.shares.milp_nonzeros_per_unit * left


def build(call: Call, found: Found) -> Found:
    """The stage MILP (`formulation`), built once for the runs after it."""
    task = call.task
    call.note("build")
    form = formulate(task.graph, task.costs, task.budgets, task.moves, task.timing)
    return replace(found, form=form, build_s=call.clock.elapsed_s())


def restricted_solve(call: Call, found: Found) -> Found:
    """The MILP confined to the covers' choice, for a share of what is left: a fast upper bound."""
    timed = found.timed_cover
    choice = timed if timed is not None and timed.events else found.cover
    form = found.form
    assert choice is not None and form is not None, "the cover and the build come first"
    if not choice.restores:
        return found
    narrow = restricted(form, call.task.graph, choice)
    allowance = call.allowance.part(call.shares.restricted, call.shares.restricted_cap)
    result = _run(call, narrow, allowance, "restricted solve", bound_holds=False)
    if result.values is not None:
        call.standing.offer(plans.from_columns(narrow, result.values), "the restricted solve")
    return _account(found, result)


def full_solve(call: Call, found: Found) -> Found:
    """The full MILP from the incumbent, until the gap closes or the budget is spent."""
    form = found.form
    assert form is not None, "the build comes first"
    result = _run(call, form, call.allowance, "solve", bound_holds=True)
    solver = call.settings.solver
    if result.values is not None:
        call.standing.offer(plans.from_columns(form, result.values), solver)
    if result.bound is not None and math.isfinite(result.bound) and result.status is not None and result.status.has_schedule:
        call.standing.raise_bound(form.keep_all_j + max(result.bound, 0.0) * form.energy_scale_j, f"the {solver} MILP")
    return replace(_account(found, result), solver_status=result.status)


def _account(found: Found, result: SolverResult) -> Found:
    return replace(found, handoff_s=found.handoff_s + result.handoff_s, solve_s=found.solve_s + result.solve_s)


def _run(call: Call, form: Formulation, allowance: Allowance, phase: str, bound_holds: bool) -> SolverResult:
    """One solver run of `form` within `allowance`, from the incumbent where the model admits it.

    A restricted model's bound is not a bound of the problem (`bound_holds` False): only its
    incumbents count then, and an infeasibility of it proves nothing.
    """
    call.note(phase)
    left = call.allowance.left()
    ends_at = None if left is None else perf_counter() + left
    settings = SolverSettings(
        mip_rel_gap=call.settings.mip_rel_gap,
        mip_abs_gap=call.standing.abs_gap_j / form.energy_scale_j,
        time_limit_s=allowance.left(),
        threads=call.settings.threads,
        ends_at=ends_at,
        confirm_infeasible=bound_holds,
    )
    return solve(form, call.settings.solver, settings, _start(call, form), _watch(call, form, phase, bound_holds, ends_at))


def _start(call: Call, form: Formulation) -> list[float] | None:
    """The incumbent as column values of `form`, if it lies within the model's windows and bounds."""
    best = call.standing.best
    if best is None:
        return None
    try:
        values = plans.to_columns(form, best.plan, call.task.graph, call.task.costs)
    except KeyError:
        return None
    return values if admits(form, values) else None


def _watch(call: Call, form: Formulation, phase: str, bound_holds: bool, ends_at: float | None) -> Watch:
    """The solver's watch: report progress, stop once the incumbent is within the gap of the bound."""
    standing = call.standing

    def seen(primal: float | None, dual: float | None) -> bool:
        if ends_at is not None and perf_counter() > ends_at:
            return True  # HiGHS's own limit is checked only now and then
        incumbent = None if primal is None else form.keep_all_j + primal * form.energy_scale_j
        bound = None if dual is None or not bound_holds else form.keep_all_j + max(dual, 0.0) * form.energy_scale_j
        call.report(phase, incumbent, bound if bound is None or standing.bound_j is None else max(bound, standing.bound_j))
        best = min(x for x in (incumbent, standing.total_j, math.inf) if x is not None)
        floor = max(x for x in (bound, standing.bound_j, -math.inf) if x is not None)
        return (
            best < math.inf
            and floor > -math.inf
            and within_gap(best, floor, standing.keep_all_j, standing.rel_gap, standing.abs_gap_j)
        )

    return seen
