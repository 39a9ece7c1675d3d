"""Gurobi through gurobipy, in this process: the model built from the arrays, its run and its answer.

One column per column, one linear row per finite side of each row, the start (binaries rounded)
as its MIP start, Gurobi's own time limit as the guard and its own work limit (its work units,
about seconds) as the work. The MIP callback calls `watch` and stops the solve once the gap
closes with what is known (`SolverSettings.known`).

gurobipy from PyPI brings a size-limited license; a model above its limits is refused with
`SolverUnavailableError`, which names the model's size (docs/optimiser.md, section 5).
"""

from time import perf_counter

from poetsim.errors import SolverUnavailableError
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.milp.solvers import (
    SolverResult,
    SolverSettings,
    Watch,
    finite_or_none,
    one_line,
    status_of,
    stdout_silenced,
)
from poetsim.status import Status

#: Gurobi's statuses that end a solve early; with a solution it is `feasible`, else `no-solution`
#: (INTERRUPTED only when the gap closed with what is known: Ctrl-C is passed on).
GUROBI_STOPPED = {
    "TIME_LIMIT",
    "NODE_LIMIT",
    "SOLUTION_LIMIT",
    "ITERATION_LIMIT",
    "WORK_LIMIT",
    "MEM_LIMIT",
    "USER_OBJ_LIMIT",
    "SUBOPTIMAL",
    "NUMERIC",
    "INTERRUPTED",
}


def solve_gurobi(
    form: Formulation, settings: SolverSettings, start: list[float] | None, watch: Watch | None = None
) -> SolverResult:
    """Solve `form` with Gurobi within `settings`, from `start` where given (module docstring).

    A solution that breaks a bound, a row or integrality by more than ten times Gurobi's own
    tolerances is solved again without presolve; one that still breaks them is `no-solution`.
    """
    import gurobipy as gp

    began = perf_counter()
    limit_s = settings.limit_now_s()  # for the build and the solve together
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)  # before start(): no license banner on stdout
    try:
        env.start()
    except gp.GurobiError as exc:  # no license, or an expired one
        raise SolverUnavailableError(f"solver 'gurobi': {one_line(str(exc))}") from None
    model = gp.Model(env=env)
    try:
        columns = _build(model, form, settings, start)
        if limit_s is not None:
            model.setParam("TimeLimit", max(limit_s - (perf_counter() - began), 0.01))
        if settings.work is not None:
            model.setParam("WorkLimit", max(settings.work, 0.01))
        handoff_s = perf_counter() - began
        run = _GurobiRun(model, settings, watch)
        ran = perf_counter()
        name = run.run()
        if run.broken():
            # Gurobi 13.0.3's presolve returned an "optimal" solution 0.2 above a column's upper
            # bound (a 7-node case the agreement property drew); without presolve it solves it.
            model.reset()
            model.setParam("Presolve", 0)
            if limit_s is not None:
                model.setParam("TimeLimit", max(limit_s - (perf_counter() - began), 0.01))
            run.stopped.clear()
            name = run.run()
            if run.broken():
                return SolverResult(Status.NO_SOLUTION, None, None, None, handoff_s, perf_counter() - ran, model.Work)
        solve_s = perf_counter() - ran
        has_solution = model.SolCount > 0
        status = status_of("Gurobi", name, has_solution, "OPTIMAL", ("INFEASIBLE", "INF_OR_UNBD"), GUROBI_STOPPED)
        values = (
            [columns[col].X for col in range(len(form.col_cost))] if has_solution and status is not Status.INFEASIBLE else None
        )
        bound = finite_or_none(model.ObjBound) if status.has_schedule else None
        return SolverResult(status, values, model.ObjVal if values is not None else None, bound, handoff_s, solve_s, model.Work)
    finally:
        model.dispose()
        env.dispose()


def _build(model, form: Formulation, settings: SolverSettings, start: list[float] | None):
    """Give `model` the settings, the columns, the rows and the start; the columns (gurobipy's tupledict).

    A row whose sides are equal is one equality; otherwise each finite side is one inequality.
    """
    import gurobipy as gp
    from gurobipy import GRB

    model.setParam("Seed", 0)
    model.setParam("MIPGap", settings.mip_rel_gap)
    model.setParam("MIPGapAbs", settings.mip_abs_gap)
    model.setParam("Threads", settings.threads)
    columns = model.addVars(
        range(len(form.col_cost)),
        lb=list(form.col_lower),
        ub=list(form.col_upper),
        obj=list(form.col_cost),
        vtype=[GRB.BINARY if binary else GRB.CONTINUOUS for binary in form.col_binary],
    )
    starts, index, value = form.row_start, form.row_index, form.row_value
    for r, (lower, upper) in enumerate(zip(form.row_lower, form.row_upper)):
        span = range(starts[r], starts[r + 1])
        expr = gp.LinExpr([value[k] for k in span], [columns[index[k]] for k in span])
        if lower == upper:
            model.addLConstr(expr, GRB.EQUAL, upper)
            continue
        if lower != -float("inf"):
            model.addLConstr(expr, GRB.GREATER_EQUAL, lower)
        if upper != float("inf"):
            model.addLConstr(expr, GRB.LESS_EQUAL, upper)
    if start is not None:
        for col, (x, binary) in enumerate(zip(start, form.col_binary)):
            columns[col].Start = round(x) if binary else x
    return columns


class _GurobiRun:
    """One `model.optimize` of a built model with its MIP callback; `stopped` says the callback ended it.

    The callback ends the solve once the gap closes with what is known; an INTERRUPTED status
    without that is Ctrl-C, which Gurobi catches, and is raised again as KeyboardInterrupt so
    that it ends the call as it does with HiGHS.
    """

    def __init__(self, model, settings: SolverSettings, watch: Watch | None) -> None:
        self.model, self.settings, self.watch = model, settings, watch
        self.stopped: list[bool] = []

    def on_event(self, m, where) -> None:
        """The MIP callback: report progress to `watch`, and terminate once the gap is closed."""
        from gurobipy import GRB

        if where != GRB.Callback.MIP or self.stopped:
            return
        best, bound = m.cbGet(GRB.Callback.MIP_OBJBST), m.cbGet(GRB.Callback.MIP_OBJBND)
        primal, dual = best if best < GRB.INFINITY else None, bound if abs(bound) < GRB.INFINITY else None
        if self.watch is not None:
            self.watch(primal, dual)
        if self.settings.gap_closed(primal, dual):
            self.stopped.append(True)
            m.terminate()

    def run(self) -> str:
        """Optimise; Gurobi's end status by name."""
        import gurobipy as gp
        from gurobipy import GRB

        model = self.model
        try:
            with stdout_silenced():  # Gurobi's SIGINT handler prints "Interrupt request received"
                model.optimize(self.on_event)
        except gp.GurobiError as exc:
            if exc.errno == GRB.Error.SIZE_LIMIT_EXCEEDED:
                raise SolverUnavailableError(
                    f"solver 'gurobi': its license is size-limited and refuses this MILP ({model.NumVars:,} "
                    f"columns, {model.NumConstrs:,} rows); give Gurobi a full license or use --solver highs"
                ) from None
            raise
        names = {getattr(GRB.Status, n): n for n in dir(GRB.Status) if n.isupper()}
        name = names.get(model.Status, str(model.Status))
        if name == "INTERRUPTED" and not self.stopped:
            raise KeyboardInterrupt  # Gurobi catches SIGINT and returns; Ctrl-C ends the call, as with HiGHS
        return name

    def broken(self) -> bool:
        """Whether the solution breaks a bound, a row or integrality by more than ten times Gurobi's own tolerances."""
        model = self.model
        return model.SolCount > 0 and (
            max(model.BoundVio, model.ConstrVio) > 10 * model.Params.FeasibilityTol or model.IntVio > 10 * model.Params.IntFeasTol
        )
