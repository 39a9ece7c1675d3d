"""Hand a formulation to a MILP solver and read back what the solver itself reports.

HiGHS (the default) receives the rows as arrays through highspy: no Pyomo expression is built,
which on large graphs costs several times the solve. SCIP receives the same arrays through
PySCIPOpt, and Gurobi through gurobipy (`gurobi`), both in this process. GLPK and CBC go through the Pyomo
model (`pyomo_model`), whose LP file their binaries read. Status, objective, bound and solve
time are the solver's; nothing is assumed from the status alone.

A run's work is bounded by what its solver can count on any machine: HiGHS's and SCIP's nodes,
Gurobi's own work units; GLPK and CBC count nothing of the kind and are stopped by time. Each
run also stops as soon as it, with what is known from outside it (`Known`), closes the gap.
"""

import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter

from poetsim.errors import InternalError
from poetsim.inputs.solvers import check_available
from poetsim.optimiser.milp.rows import Formulation
from poetsim.status import Status


@dataclass(frozen=True)
class SolverResult:
    """What a solver reported: status, the solution's columns, objective and bound (model units)."""

    status: Status | None  # OPTIMAL, FEASIBLE, INFEASIBLE or NO_SOLUTION; None after a HiGHS solve error (internal)
    values: list[float] | None
    objective: float | None
    bound: float | None
    handoff_s: float
    solve_s: float
    work: float = 0.0  # the work units the run did (`optimiser.work`)


@dataclass(frozen=True)
class Known:
    """What is known of the objective from outside a run (model units).

    The cheapest schedule so far (inf: none) and a proven lower bound (-inf: none). A run's own dual
    bound joins the latter only where it `bound_holds` (not in a model restricted to a cover's
    choice).
    """

    incumbent: float = math.inf
    bound: float = -math.inf
    bound_holds: bool = True


@dataclass(frozen=True)
class SolverSettings:
    """Stopping rules of one solve: relative and absolute gap of the objective, the wall-clock guard, threads.

    The work it may do, and what is known from outside it.

    `time_limit_s` and `ends_at` (a perf_counter() time) are guards: a run that reaches either
    stops where it is. `work` (work units, `optimiser.work`; None: no limit) is what stops a run
    at the same point on any machine (HiGHS and SCIP: a node limit; Gurobi: its work limit;
    GLPK and CBC: taken as seconds). `known` stops it once the gap closes with it.
    """

    mip_rel_gap: float
    mip_abs_gap: float
    time_limit_s: float | None
    threads: int
    work: float | None = None
    known: Known | None = None
    ends_at: float | None = None
    #: Whether an infeasibility HiGHS reports is checked by a run without presolve (`_solve_highs`):
    #: off where the caller takes no proof from it (the MILP restricted to a cover's choice).
    confirm_infeasible: bool = True

    def limit_now_s(self) -> float | None:
        """The time limit to give the solver at this moment: the smaller of both rules, >= 0.01 s."""
        limits = [
            x for x in (self.time_limit_s, None if self.ends_at is None else self.ends_at - perf_counter()) if x is not None
        ]
        return max(min(limits), 0.01) if limits else None

    def gap_closed(self, primal: float | None, dual: float | None) -> bool:
        """Whether a run whose best solution is `primal` and dual bound `dual` may stop (`known`)."""
        from poetsim.optimiser.milp.program import gap_closed

        known = self.known
        if known is None:
            return False
        return gap_closed(primal, dual, known.incumbent, known.bound, known.bound_holds, self.mip_rel_gap, self.mip_abs_gap)


#: What a solve reports while it runs, for the display: (incumbent, bound) in model units, either
#: None when not known yet.
Watch = Callable[[float | None, float | None], object]


def solve(
    form: Formulation, solver: str, settings: SolverSettings, start: list[float] | None, watch: Watch | None = None
) -> SolverResult:
    """Solve `form` with `solver`, starting from `start` where the solver takes a start.

    `watch` is called while HiGHS or Gurobi works (SCIP is not watched; GLPK and CBC run as
    programs and are not either).
    """
    check_available(solver)
    if solver == "highs":
        return _solve_highs(form, settings, start, watch)
    if solver == "scip":
        return _solve_scip(form, settings, start)
    if solver == "gurobi":
        from poetsim.optimiser.milp.gurobi import solve_gurobi  # gurobipy's module loads only when it is asked for

        return solve_gurobi(form, settings, start, watch)
    return _solve_shell(form, solver, settings, start)


#: A HiGHS optimum of a model with at most this many nonzeros is confirmed without presolve (see _solve_highs).
CONFIRM_OPTIMUM_NONZEROS = 5_000
#: A retry without the start (see _solve_highs) is not tried with less work than this left.
RETRY_MIN_UNITS = 5.0


@contextmanager
def stdout_silenced():
    """Point fd 1 at /dev/null for a call into a solver library that prints there by itself.

    SCIP's SIGINT handler writes with printf, whatever its message settings.

    Only library code runs meanwhile: poetsim prints to stdout only after a solve, and its
    progress goes to stderr.
    """
    sys.stdout.flush()  # what Python holds for fd 1 goes out before it is pointed away
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solve_highs(
    form: Formulation, settings: SolverSettings, start: list[float] | None, watch: Watch | None = None
) -> SolverResult:
    """Solve with HiGHS; if it misvalues its own answer after a MIP start, solve again without.

    HiGHS 1.16 can carry a user solution into its presolved space with the wrong objective (a
    start costing 0.9 valued 0.45, then called optimal at 0.45): its incumbent then prunes on a
    false value. The objective it reports is checked against the cost of the columns it
    returns; on a mismatch the start is dropped and the model solved afresh.

    HiGHS 1.16's presolve has also called a small model optimal at a cost above its optimum (a
    7-node case whose keep-all schedule meets every row at no cost, called optimal at 1 J above
    keep-all; found by test_optimiser_properties): so a model of up to CONFIRM_OPTIMUM_NONZEROS
    nonzeros that it solved is solved again without presolve, whose answer stands where it is
    optimal or cheaper.

    HiGHS 1.16's presolve can also reduce a small model to nothing with a solution that breaks
    a row, and then end with "Solve error" (a 7-node case in test_cover's property found it):
    that model is solved again with presolve off. And it has called a feasible model infeasible
    (a 7-node recompute-only case whose keep-all schedule meets every row, found by another of
    test_cover's properties; SCIP, Gurobi and HiGHS without presolve solve it): so, unless
    `settings.confirm_infeasible` is off, an infeasibility is believed only from a run without
    presolve (`program.run_checked`), and where that run ends first nothing is proven.
    """
    result = _run_highs(form, settings, start, watch)
    if result.status is None:
        again = _run_highs(form, _less(settings, result), start, watch, presolve=False)
        if again.status is None:
            raise InternalError("HiGHS ended with a solve error on the POET model, with presolve on and off")
        result = _after(result, again)
    elif result.values is not None and len(form.row_index) <= CONFIRM_OPTIMUM_NONZEROS:
        again = _run_highs(form, _less(settings, result), start, watch, presolve=False)
        trusted = again.status is Status.OPTIMAL or _cheaper(again, result, settings)
        result = _after(result, again) if trusted else _after(again, result)
    if start is None or result.values is None or _objective_matches(form, result):
        return result
    # The retry gets what is left of the run's work, if enough; the first run's bound is not kept
    # (it may have pruned on the false value).
    settings = _less(settings, result)
    if settings.work is not None and settings.work < RETRY_MIN_UNITS:
        return SolverResult(Status.NO_SOLUTION, None, None, None, result.handoff_s, result.solve_s, result.work)
    return _after(result, _run_highs(form, settings, None, watch))


def _cheaper(again: SolverResult, first: SolverResult, settings: SolverSettings) -> bool:
    """Whether `again` found a solution cheaper than `first`'s beyond the gap."""
    if again.objective is None or again.values is None or first.objective is None:
        return False
    return again.objective < first.objective - max(settings.mip_abs_gap, settings.mip_rel_gap * abs(first.objective)) - 1e-9


def _less(settings: SolverSettings, spent: SolverResult) -> SolverSettings:
    """`settings` with the work of `spent` taken from its work, and its time from the guard."""
    work = None if settings.work is None else max(settings.work - spent.work, 0.0)
    limit_s = None if settings.time_limit_s is None else max(settings.time_limit_s - spent.solve_s, 0.0)
    return replace(settings, work=work, time_limit_s=limit_s)


def _after(first: SolverResult, then: SolverResult) -> SolverResult:
    """The answer of `then`, with the times and work of both runs."""
    return replace(
        then, handoff_s=first.handoff_s + then.handoff_s, solve_s=first.solve_s + then.solve_s, work=first.work + then.work
    )


#: HiGHS's statuses that end a solve early ("killed": the HiGHS process did not answer in time).
_HIGHS_STOPPED = {"kTimeLimit", "kIterationLimit", "kInterrupt", "kSolutionLimit", "kMemoryLimit", "kUnknown", "killed"}


def status_of(solver: str, name: str, has_solution: bool, optimal: str, infeasible: tuple[str, ...], stopped: set[str]) -> Status:
    """A solver's own end status as poetsim's: a stop before the end is `feasible` with a solution, else `no-solution`.

    The objective is bounded below (non-negative costs, bounded columns), so "infeasible or
    unbounded" can only be infeasible; any other status is a bug.
    """
    if name == optimal:
        return Status.OPTIMAL
    if name in infeasible:
        return Status.INFEASIBLE
    if name in stopped:
        return Status.FEASIBLE if has_solution else Status.NO_SOLUTION
    raise InternalError(f"{solver} ended with status '{name}' on the POET model")


def _objective_matches(form: Formulation, result: SolverResult) -> bool:
    if result.objective is None or result.values is None:
        return False
    cost = form.objective(result.values)
    return abs(cost - result.objective) <= 1e-6 * max(1.0, abs(cost))


def _run_highs(
    form: Formulation, settings: SolverSettings, start: list[float] | None, watch: Watch | None = None, presolve: bool = True
) -> SolverResult:
    """One HiGHS run in the HiGHS process, within its work (a node limit).

    The process (`program.run_highs`) is killed if it has not answered shortly after the guard. The
    status is None after a solve error (see _solve_highs).
    """
    from poetsim.optimiser.milp.program import (
        INFEASIBLE,
        NO_UNCHECKED_WORK,
        HighsJob,
        model_arrays,
        run_checked,
        run_highs,
    )
    from poetsim.optimiser.work import highs_units, node_limit

    began = perf_counter()
    model = model_arrays(
        form.col_cost,
        form.col_lower,
        form.col_upper,
        form.row_lower,
        form.row_upper,
        form.row_start,
        form.row_index,
        form.row_value,
        form.col_binary,
    )
    options: dict[str, float | int | str] = {
        "mip_rel_gap": settings.mip_rel_gap,
        "mip_abs_gap": settings.mip_abs_gap,
        "threads": settings.threads,
        "random_seed": 0,
        **NO_UNCHECKED_WORK,
    }
    if not presolve:
        options["presolve"] = "off"
    nonzeros, lines = len(form.row_index), form.num_columns + form.num_rows
    if settings.work is not None:
        options["mip_max_nodes"] = node_limit(settings.work, nonzeros, lines)
    limit_s = settings.limit_now_s()
    if limit_s is not None:
        options["time_limit"] = float(limit_s)
    known = settings.known
    gap = None
    if known is not None:
        gap = (known.incumbent, known.bound, known.bound_holds, settings.mip_rel_gap, settings.mip_abs_gap)
    job = HighsJob(model=model, options=options, stop_s=limit_s, gap=gap, full_start=None if start is None else list(start))
    handoff_s = perf_counter() - began
    answer = (run_checked if settings.confirm_infeasible else run_highs)(job, limit_s, watch)
    work = highs_units(nonzeros, lines, answer.iterations, answer.nodes)
    if answer.rejected:
        raise InternalError(f"HiGHS rejected {answer.rejected} of the POET model")
    if answer.status == "kSolveError":
        return SolverResult(None, None, None, None, handoff_s, answer.run_s, work)
    has_solution = answer.values is not None
    status = status_of("HiGHS", answer.status, has_solution, "kOptimal", INFEASIBLE, _HIGHS_STOPPED)
    values = answer.values if has_solution and status is not Status.INFEASIBLE else None
    return SolverResult(
        status=status,
        values=values,
        objective=answer.objective if values is not None else None,
        bound=answer.dual_bound if status.has_schedule else None,
        handoff_s=handoff_s,
        solve_s=answer.run_s,
        work=work,
    )


#: SCIP's statuses that end a solve early; with a solution it is `feasible`, else `no-solution`.
_SCIP_STOPPED = {
    "timelimit",
    "nodelimit",
    "totalnodelimit",
    "stallnodelimit",
    "gaplimit",
    "sollimit",
    "bestsollimit",
    "restartlimit",
    "memlimit",
    "primallimit",
    "duallimit",
    "unknown",
}


def _solve_scip(form: Formulation, settings: SolverSettings, start: list[float] | None) -> SolverResult:
    """Solve with SCIP (PySCIPOpt), in this process.

    The rows as linear constraints, the start (if any) offered as a solution, SCIP's own time limit.

    Without a start SCIP is told to look for a schedule first (its feasibility emphasis): where
    no heuristic finds a schedule, that is the setting that proves a program infeasible.
    """
    from pyscipopt import SCIP_PARAMEMPHASIS, Model, quicksum

    began = perf_counter()
    limit_s = settings.limit_now_s()  # for the build and the solve together
    model = Model()
    model.hideOutput()
    model.setParam("randomization/randomseedshift", 0)
    columns = [
        model.addVar(lb=lo, ub=up, obj=cost, vtype="B" if binary else "C")
        for lo, up, cost, binary in zip(form.col_lower, form.col_upper, form.col_cost, form.col_binary)
    ]
    starts, index, value = form.row_start, form.row_index, form.row_value
    for r, (lower, upper) in enumerate(zip(form.row_lower, form.row_upper)):
        expr = quicksum(value[k] * columns[index[k]] for k in range(starts[r], starts[r + 1]))
        model.addCons(
            expr >= lower
            if upper == float("inf")
            else expr <= upper
            if lower == -float("inf")
            else expr == upper
            if lower == upper
            else _ranged(expr, lower, upper)
        )
    model.setParam("limits/gap", settings.mip_rel_gap)
    model.setParam("limits/absgap", settings.mip_abs_gap)
    if start is not None:
        solution = model.createSol()
        for var, x, binary in zip(columns, start, form.col_binary):
            model.setSolVal(solution, var, round(x) if binary else x)
        model.addSol(solution, free=True)
    else:
        model.setEmphasis(SCIP_PARAMEMPHASIS.FEASIBILITY)
    if limit_s is not None:
        model.setParam("limits/time", max(limit_s - (perf_counter() - began), 0.01))
    if settings.work is not None:
        from poetsim.optimiser.work import node_limit

        model.setParam("limits/totalnodes", node_limit(settings.work, len(form.row_index), form.num_columns + form.num_rows))
    handoff_s = perf_counter() - began
    ran = perf_counter()
    with stdout_silenced():  # SCIP's own SIGINT handler prints "pressed CTRL-C ..." with printf
        model.optimize()
    solve_s = perf_counter() - ran
    scip_status = model.getStatus()
    if scip_status == "userinterrupt":
        # SCIP stops at once on SIGINT and returns; Ctrl-C then ends the call as it does with HiGHS.
        raise KeyboardInterrupt
    has_solution = model.getNSols() > 0
    status = status_of("SCIP", scip_status, has_solution, "optimal", ("infeasible", "inforunbd"), _SCIP_STOPPED)
    values = None
    if has_solution and status is not Status.INFEASIBLE:
        best = model.getBestSol()
        values = [model.getSolVal(best, var) for var in columns]
    dual = model.getDualbound()
    bound = float(dual) if status.has_schedule and abs(dual) < model.infinity() else None
    from poetsim.optimiser.work import highs_units

    work = highs_units(len(form.row_index), form.num_columns + form.num_rows, model.getNLPIterations(), model.getNNodes())
    objective = model.getSolObjVal(model.getBestSol()) if values is not None else None
    return SolverResult(status, values, objective, bound, handoff_s, solve_s, work)


def one_line(text: str) -> str:
    """`text` on one line, its runs of whitespace (newlines among them) each one space: for an error message."""
    return " ".join(text.split())


def _ranged(expr, lower: float, upper: float):
    """The row lower <= expr <= upper, as PySCIPOpt writes a ranged row."""
    return (lower <= expr) <= upper


def _solve_shell(form: Formulation, solver: str, settings: SolverSettings, start: list[float] | None) -> SolverResult:
    """GLPK or CBC through Pyomo: build the model, let Pyomo write the LP and run the binary."""
    import pyomo.environ as pyo
    from pyomo.opt import SolutionStatus

    from poetsim.optimiser.milp.pyomo_model import build_model

    began = perf_counter()
    model = build_model(form)
    columns = [var for fam in form.variables for var in (getattr(model, fam.name)[key] for key in fam.keys)]
    opt = pyo.SolverFactory(solver)
    kwargs = {}
    if solver == "glpk":
        # glpsol has a relative gap only (--mipgap), and no threads; its --tmlim is in whole seconds.
        opt.options["mipgap"] = settings.mip_rel_gap
        limit_s = _shell_limit_s(settings)
        if limit_s is not None:
            opt.options["tmlim"] = max(1, int(limit_s))
    else:
        opt.options.update({"ratioGap": settings.mip_rel_gap, "allowableGap": settings.mip_abs_gap, "threads": settings.threads})
        limit_s = _shell_limit_s(settings)
        if limit_s is not None:
            opt.options["sec"] = limit_s
        if start is not None:
            for var, value in zip(columns, start):
                var.set_value(round(value) if var.is_binary() else value, skip_validation=True)
            kwargs["warmstart"] = True
    with tempfile.TemporaryDirectory(prefix="poetsim-") as tmp:
        log = Path(tmp) / f"{solver}.log"
        handoff_s = perf_counter() - began
        ran = perf_counter()
        results = opt.solve(model, load_solutions=False, logfile=str(log), **kwargs)
        wall_s = perf_counter() - ran
        log_text = log.read_text() if log.exists() else ""
    term = results.solver.termination_condition
    solutions = [
        s
        for s in results.solution
        if s.status in (SolutionStatus.optimal, SolutionStatus.feasible, SolutionStatus.stoppedByLimit, SolutionStatus.other)
    ]
    values = None
    if solutions:
        model.solutions.load_from(results)
        values = [var.value if var.value is not None else 0.0 for var in columns]
    objective = _reported_objective(solutions[0]) if solutions else None
    if objective is None and values is not None:
        objective = pyo.value(model.overhead)
    bound = _glpk_bound(log_text, objective) if solver == "glpk" else finite_or_none(results.problem.lower_bound)
    status = _shell_status(term, values is not None, solver, log_text)
    solve_s = _solver_time_s(log_text, solver) or wall_s
    return SolverResult(status, values, objective, bound, handoff_s, solve_s, solve_s)


def _shell_status(term, has_solution: bool, solver: str, log_text: str) -> Status:
    """GLPK's or CBC's end as poetsim's status, from Pyomo's termination condition and the solver's log.

    glpsol ends a run stopped by its relative gap with "GAP TOLERANCE REACHED" in its log, which
    is as optimal as poetsim asks; any other stop with a solution is `feasible`.
    """
    from pyomo.opt import TerminationCondition

    if term in (TerminationCondition.infeasible, TerminationCondition.infeasibleOrUnbounded):
        return Status.INFEASIBLE
    if not has_solution:
        return Status.NO_SOLUTION
    if term == TerminationCondition.optimal or (solver == "glpk" and "GAP TOLERANCE REACHED" in log_text):
        return Status.OPTIMAL
    return Status.FEASIBLE


def _shell_limit_s(settings: SolverSettings) -> float | None:
    """GLPK's and CBC's time limit: they count no work of their own, so the run's work is taken as seconds, within the guard."""
    limits = [x for x in (settings.work, settings.limit_now_s()) if x is not None]
    return min(limits) if limits else None


def _reported_objective(solution) -> float | None:
    """The objective value the solver wrote with its solution, if it wrote one."""
    for entry in solution.objective.values():
        value = entry.get("Value") if hasattr(entry, "get") else getattr(entry, "value", None)
        if value is not None:
            return float(value)
    return None


def _glpk_bound(log_text: str, objective: float | None) -> float | None:
    """The last bound glpsol logged ('mip = obj >= bound'); the objective when the tree is empty."""
    bound = None
    for line in log_text.splitlines():
        found = re.search(r"mip =\s*(\S+)\s*>=\s*(\S+)", line)
        if found:
            bound = objective if found.group(2) == "tree" else _number(found.group(2))
    return bound


def _solver_time_s(log_text: str, solver: str) -> float | None:
    """The run time the solver logged, if it logged one."""
    pattern = r"Time used:\s*([0-9.]+)\s*secs" if solver == "glpk" else r"(?:Total time|Time) \(CPU seconds\):\s*([0-9.]+)"
    found = re.findall(pattern, log_text)
    return float(found[-1]) if found else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def finite_or_none(value) -> float | None:
    """`value` as a float, or None where it is None or infinite (a solver's way of saying "no bound")."""
    return float(value) if value is not None and abs(float(value)) != float("inf") else None
