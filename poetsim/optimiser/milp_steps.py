"""The steps of one `optimise` call that run the stage MILP.

Its build, the run confined to a cover's choice, and the full run from the incumbent, each stopped
as soon as the incumbent is within the gap of the best bound.
"""

import math
from dataclasses import replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.call import Call
from poetsim.optimiser.found import Found
from poetsim.optimiser.milp.formulation import formulate, last_useful_stage
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.milp.solvers import Known, SolverResult, SolverSettings, Watch, solve
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import admits, restricted
from poetsim.optimiser.work import FORMULATE_UNITS_PER_NONZERO, root_units
from poetsim.schedule.model import Moves

#: Before the model is built, its nonzeros are taken as this many per S_ram column (one per output
#: and stage from its computation to its last useful stage), by (recompute, page): a little below
#: what the zoo's graphs measure (`tests/test_search.py`), so that a build the budget left could
#: not solve is skipped.
NONZEROS_PER_COLUMN = {(False, True): 18, (True, False): 19, (True, True): 36}
#: ... and its lines (rows and columns) as this many per nonzero: the zoo's graphs and the outside
#: set's measure 0.48-0.53.
LINES_PER_NONZERO = 0.5
#: With no schedule found yet, a MILP step also runs where what is left covers its presolve and
#: root priced at this many simplex iterations per line (`work.root_units`): the MILP is then the
#: one step that can still find a schedule or prove that none exists. Twice the dearest root
#: measured: the zoo's transformer, recompute-only on the Pi at 25 %, 27,548 iterations over
#: 60,429 lines (0.46; 20 units); a 93-node model with in-place slice updates, 0.35 (6.6 units,
#: then an infeasibility proof in 21 units of the 28.6 left, where the rules of `Shares` skip
#: it). A 22-node LSTM model's MILP reaches its optimum in 0.07 units.
NO_SCHEDULE_ROOT_ITERATIONS_PER_LINE = 1.0


def milp_nonzeros_estimate(graph: TrainingGraph, moves: Moves) -> int:
    """The stage MILP's nonzeros as `time_for_milp` takes them before it is built."""
    last = last_useful_stage(graph)
    columns = sum(max(last[i] - i, 0) for i in range(len(graph)))
    return NONZEROS_PER_COLUMN[moves.recompute, moves.page] * columns


def time_for_milp(call: Call, found: Found, nonzeros_per_unit: int | None = None) -> bool:
    """Whether enough is left for a MILP step: a short run finds nothing, and HiGHS overruns short limits.

    Nor does a run whose presolve alone would outlast what is left: at most `nonzeros_per_unit`
    (default `Shares.milp_nonzeros_per_unit`) nonzeros of the stage MILP per unit left (before the
    build, by `milp_nonzeros_estimate`, so that a build no solve could follow is skipped too).
    With no schedule found yet, it also runs wherever what is left covers its root, priced high
    (`NO_SCHEDULE_ROOT_ITERATIONS_PER_LINE`).
    """
    left = call.allowance.left()
    if left is None:
        return True
    form = found.form
    nonzeros = len(form.row_index) if form is not None else milp_nonzeros_estimate(call.task.graph, call.task.moves)
    per_unit = call.shares.milp_nonzeros_per_unit if nonzeros_per_unit is None else nonzeros_per_unit
    if left >= call.shares.min_milp and nonzeros <= per_unit * left:
        return True
    if call.standing.best is not None:
        return False
    lines = form.num_rows + form.num_columns if form is not None else int(LINES_PER_NONZERO * nonzeros)
    return left >= root_units(nonzeros, lines, NO_SCHEDULE_ROOT_ITERATIONS_PER_LINE)


def build(call: Call, found: Found) -> Found:
    """The stage MILP (`formulation`), built once for the runs after it."""
    if found.form is not None:
        return found
    task = call.task
    call.note("build")
    form = formulate(task.graph, task.costs, task.budgets, task.moves, task.timing)
    call.allowance.charge(FORMULATE_UNITS_PER_NONZERO * len(form.row_index))
    return replace(found, form=form, build_s=call.clock.elapsed_s())


def choice_solve(call: Call, found: Found) -> Found:
    """The MILP confined to the choice of the cover with page-in stalls priced: its placement.

    Where paging is slow against compute, that cover's choice is often the optimum's outputs (it
    prices each transfer's own stall), which the plain cover's placements miss; the confined MILP
    places it exactly: which stages page, what is kept, what a recomputation rebuilds with it. It
    runs where that choice differs from the plain cover's and the stage MILP is small enough for
    what is left (`Shares.choice_nonzeros_per_unit`: the confined program is small, but HiGHS
    reads the whole one), and its build serves the MILP steps after it.
    """
    choice, plain, task = found.page_in_cover, found.cover, call.task
    if choice is None or not choice.restores or call.standing.proven() or call.allowance.over():
        return found
    if plain is not None and (choice.recomputed, choice.paged) == (plain.recomputed, plain.paged):
        return found
    if not time_for_milp(call, found, call.shares.choice_nonzeros_per_unit):
        return found
    found = build(call, found)
    assert found.form is not None, "built above"
    narrow = restricted(found.form, task.graph, choice)
    result = _run(call, narrow, call.allowance.part(call.shares.choice_solve), "choice solve", bound_holds=False)
    if result.values is not None:
        call.standing.offer(plans.from_columns(narrow, result.values), "the MILP confined to the page-in-priced cover's choice")
    return _account(found, result)


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
    """One solver run of `form` within `allowance`, its work charged.

    The run starts from the incumbent where the model admits it, and stops as soon as the incumbent
    is within the gap of the best bound.

    A restricted model's bound is not a bound of the problem (`bound_holds` False): only its
    incumbents count then, and an infeasibility of it proves nothing.
    """
    call.note(phase)
    standing, guard = call.standing, call.clock
    scale = form.energy_scale_j
    known = Known(
        incumbent=math.inf if standing.total_j is None else (standing.total_j - form.keep_all_j) / scale,
        bound=-math.inf if standing.bound_j is None else (standing.bound_j - form.keep_all_j) / scale,
        bound_holds=bound_holds,
    )
    settings = SolverSettings(
        mip_rel_gap=call.settings.mip_rel_gap,
        mip_abs_gap=standing.abs_gap_j / scale,
        time_limit_s=guard.left_s(),
        threads=call.settings.threads,
        work=allowance.left(),
        known=known,
        ends_at=guard.ends_at(),
        confirm_infeasible=bound_holds,
    )
    result = solve(form, call.settings.solver, settings, _start(call, form), _watch(call, form, phase, bound_holds))
    call.allowance.charge(result.work)
    return result


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


def _watch(call: Call, form: Formulation, phase: str, bound_holds: bool) -> Watch:
    """The solver's progress, reported with the standing's figures (for the display only)."""
    standing = call.standing

    def seen(primal: float | None, dual: float | None) -> None:
        incumbent = None if primal is None else form.keep_all_j + primal * form.energy_scale_j
        bound = None if dual is None or not bound_holds else form.keep_all_j + max(dual, 0.0) * form.energy_scale_j
        call.report(phase, incumbent, bound if bound is None or standing.bound_j is None else max(bound, standing.bound_j))

    return seen
