"""A small mixed 0-1 program built row by row and solved by HiGHS.

The covers' common engine; and the process every HiGHS run of the optimiser runs in (`run_highs`).

The eviction covers (`cover`, `timed_cover`) are small next to the stage MILP, so they are built
with keyed columns and solved to a tight gap; what they need back is the proven bound, the
status, and the values of the best solution by key.

HiGHS runs in a process of its own. A run is bounded by its work (a node limit, `work`) and
stopped by its own progress (`gap_closed`, `enough`), so it stops at the same point on any
machine; the process is killed only if it has not answered by the call's wall-clock guard,
because HiGHS checks its clock only here and there, and its presolve not everywhere. While it
works the process sends back each better solution and its dual bound (HiGHS's MIP callbacks),
so a run killed at the guard still yields what it had proven and found. The process is started
once and kept for the next run.
"""

import atexit
import math
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (this file also runs as the HiGHS process, which imports no poetsim module)
    from poetsim.optimiser.allowance import Allowance

#: The covers are solved to this relative gap, with no absolute gap: the bound they report is the
#: solver's dual bound, and a tight gap keeps it next to the best solution.
REL_GAP = 1e-9
#: Feasibility tolerances far below HiGHS's defaults: a covering row scaled to 1 then misses its
#: excess by a fraction of a byte at most, and the LP bound of an integral root is the solution's.
FEASIBILITY_TOLERANCE = 1e-9
#: ... except for the covers without cascades, where HiGHS 1.16 can stall on a MIP feasibility
#: tolerance of 1e-9 (tests/test_cover.py has such a cover of ResNet-50); the cascade covers keep
#: 1e-9, where 1e-8 made their proofs slower.
LOOSER_FEASIBILITY_TOLERANCE = 1e-8
#: HiGHS's presolve of a large program can take longer than its allowance, and checks no limit
#: while it runs. A program with more nonzeros than this many per unit of its allowance is not
#: solved at all, and yields no bound.
PRESOLVE_NONZEROS_PER_UNIT = 30_000
#: HiGHS's symmetry detection is off: on the larger cascade covers it made presolve several times
#: slower, for no gain.
DETECT_SYMMETRY = False
#: HiGHS runs with none of the heuristics that solve sub-MIPs (RENS, RINS, root reduced-cost
#: fixing) and without restarts: HiGHS 1.16 checks no limit in those sub-MIPs nor in a restart's
#: presolve, and on covers of MobileNetV2 each ran for minutes past every limit (a stall-priced
#: cover of 853 columns that never returned from its second restart solves in 4.6 s without).
#: Without them a run keeps to its node limit, so its work is the same on every machine.
NO_UNCHECKED_WORK = {
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_root_reduced_cost": False,
    "mip_allow_restart": False,
}
#: How long past the guard a solve may take to send its answer before its process is killed.
#: HiGHS stops within milliseconds of the interrupt its callback raises at the guard.
KILL_GRACE_S = 0.05
#: The dual bound is sent back at most this often while HiGHS works (each better solution at once).
BOUND_EVERY_S = 0.05


#: HiGHS's statuses for "no solution exists" (the costs are bounded below, so both mean infeasible).
INFEASIBLE = ("kInfeasible", "kUnboundedOrInfeasible")


@dataclass(frozen=True)
class Solved:
    """What the solver proved: infeasible, or a dual bound (model units) and the best solution."""

    infeasible: bool
    exact: bool  # the best solution is proven optimal within REL_GAP
    bound: float  # dual bound, >= 0 (the costs are non-negative)
    values: dict[tuple, float] | None  # the best solution by key, None if none was found


class Program:
    """Columns by key (made on first use, with a cost), rows of (column, coefficient) terms."""

    def __init__(self):
        self.columns: dict[tuple, int] = {}
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.starts, self.index, self.value, self.row_lower, self.row_upper = [0], [], [], [], []
        prestart()  # the solver's process starts while the rows are built

    def column(self, key: tuple, cost: float = 0.0, upper: float = 1.0, integer: bool = True) -> int:
        """The column of `key`; made with `cost`, bounds [0, upper] and integrality on first use."""
        col = self.columns.get(key)
        if col is None:
            col = self.columns[key] = len(self.cost)
            self.cost.append(cost)
            self.upper.append(upper)
            self.integer.append(integer)
        return col

    def row(self, terms, lower: float, upper: float) -> None:
        """Add the row lower <= sum(coef x col) <= upper; repeated columns are merged."""
        merged: dict[int, float] = {}
        for col, coef in terms:
            merged[col] = merged.get(col, 0.0) + coef
        for col, coef in sorted(merged.items()):
            if coef != 0.0:
                self.index.append(col)
                self.value.append(coef)
        self.starts.append(len(self.index))
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def solve(
        self,
        allowance: "Allowance | None",
        enough: float | None = None,
        start: dict | None = None,
        rel_gap: float = REL_GAP,
        tolerance: float = FEASIBILITY_TOLERANCE,
        root_iterations_per_line: float | None = None,
        linear: bool = False,
    ) -> Solved:
        """Minimise the cost with HiGHS (one thread, fixed seed) within `allowance` (None: to the end).

        With `enough`, a known lower bound of the cost from elsewhere, the solve stops as soon as
        it has a solution that costs no more (within REL_GAP): that solution is then optimal.
        `start` gives values of some columns by key (a partial MIP start HiGHS completes).
        `rel_gap` may be looser where only a good solution is wanted, not a bound; `tolerance` is
        HiGHS's primal and MIP feasibility tolerance. `linear` solves the linear relaxation
        instead (every column continuous): its optimum is then the bound, and its simplex
        iterations are what the allowance limits.

        The allowance is charged for the program's build and for the run (`work`); it bounds the
        run's nodes (`work.node_limit`), and the call's guard its time. A program with more
        nonzeros than PRESOLVE_NONZEROS_PER_UNIT per unit left (a 0-1 program: the presolve of a
        linear program, with no probing, takes a fraction of its run), or whose root would outlast
        what is left (`work.root_units`, with `root_iterations_per_line` if given), is not solved
        at all.

        An infeasibility is believed only from a run without presolve (`run_checked`).
        """
        from poetsim.optimiser.work import BUILD_UNITS_PER_NONZERO, ROOT_ITERATIONS_PER_LINE, highs_units, root_units

        nonzeros, lines = len(self.index), len(self.cost) + len(self.row_lower)
        left = None
        if allowance is not None:
            allowance.charge(BUILD_UNITS_PER_NONZERO * nonzeros)
            left = allowance.left()
            per_line = ROOT_ITERATIONS_PER_LINE if root_iterations_per_line is None else root_iterations_per_line
            if left is not None and (
                (not linear and nonzeros > PRESOLVE_NONZEROS_PER_UNIT * left)
                or root_units(nonzeros, lines, per_line, linear) > left
            ):
                return Solved(False, False, 0.0, None)
        limit_s = None if allowance is None else allowance.guard.left_s()
        given = [(self.columns[key], value) for key, value in (start or {}).items() if key in self.columns]
        options = {
            "mip_rel_gap": rel_gap,
            "mip_abs_gap": 0.0,
            "threads": 1,
            "random_seed": 0,
            "mip_detect_symmetry": DETECT_SYMMETRY,
            **NO_UNCHECKED_WORK,
            "mip_feasibility_tolerance": tolerance,
            "primal_feasibility_tolerance": tolerance,
        }
        options.update(_limits(left, limit_s, nonzeros, lines, linear))
        job = HighsJob(
            model=model_arrays(
                self.cost,
                [0.0] * len(self.cost),
                self.upper,
                self.row_lower,
                self.row_upper,
                self.starts,
                self.index,
                self.value,
                [False] * len(self.integer) if linear else self.integer,
            ),
            options=options,
            stop_s=limit_s,
            enough=enough,
            partial_start=([c for c, _ in given], [v for _, v in given]) if given else None,
        )
        answer = run_checked(job, limit_s)
        if allowance is not None:
            allowance.charge(highs_units(nonzeros, lines, answer.iterations, answer.nodes, linear))
        if answer.rejected:
            from poetsim.errors import InternalError

            raise InternalError(f"HiGHS rejected {answer.rejected} of a cover")
        if answer.status in INFEASIBLE:
            return Solved(True, True, math.inf, None)
        if linear or not any(self.integer):  # a linear program: its optimum is its bound
            bound = answer.objective if answer.status == "kOptimal" and answer.objective is not None else 0.0
        else:
            bound = answer.dual_bound if answer.dual_bound is not None else 0.0
        values = None if answer.values is None else {key: answer.values[col] for key, col in self.columns.items()}
        exact = answer.status == "kOptimal"
        if enough is not None and answer.objective is not None and answer.objective <= enough * (1 + REL_GAP) + 1e-12:
            bound, exact = max(bound, min(enough, answer.objective)), True
        return Solved(False, exact, max(bound, 0.0), values)


def _limits(left: float | None, limit_s: float | None, nonzeros: int, lines: int, linear: bool) -> dict:
    """HiGHS's limits of a run with `left` units and `limit_s` seconds of guard (None: none).

    Its nodes, or a linear program's simplex iterations (it has no nodes), from the units; its
    time from the guard.
    """
    from poetsim.optimiser.work import iteration_limit, node_limit

    limits: dict = {}
    if left is not None:
        limits["mip_max_nodes"] = node_limit(left, nonzeros, lines)
        if linear:
            limits["simplex_iteration_limit"] = iteration_limit(left, nonzeros, lines)
    if limit_s is not None:
        limits["time_limit"] = max(float(limit_s), 0.01)
    return limits


def model_arrays(cost, lower, upper, row_lower, row_upper, starts, index, value, integer) -> dict:
    """A model's columns and CSR rows as the arrays a `HighsJob` carries (quick to pickle)."""
    import numpy as np

    return {
        "cost": np.asarray(cost, dtype=np.float64),
        "lower": np.asarray(lower, dtype=np.float64),
        "upper": np.asarray(upper, dtype=np.float64),
        "row_lower": np.asarray(row_lower, dtype=np.float64),
        "row_upper": np.asarray(row_upper, dtype=np.float64),
        "starts": np.asarray(starts, dtype=np.int32),
        "index": np.asarray(index, dtype=np.int32),
        "value": np.asarray(value, dtype=np.float64),
        "integer": np.asarray(integer, dtype=bool),
    }


@dataclass(frozen=True)
class HighsJob:
    """One HiGHS run for the HiGHS process: the model, options, start, and when to stop it.

    `stop_s` (from the run's start: the call's guard), `enough` (a solution that costs no more is
    enough) and `gap` are applied by a callback; `full_start` is a value per column,
    `partial_start` (columns, values) some of them. `gap` is (incumbent, bound, bound_holds,
    rel_gap, abs_gap) in model units: the run stops once its best solution, or `incumbent` if
    lower, is within `rel_gap` of its value plus `abs_gap` of the higher of `bound` and (where
    `bound_holds`) its own dual bound (`gap_closed`). Every rule but the guard depends only on
    the run's own progress, so a run stops at the same point on any machine.
    """

    model: dict
    options: dict
    stop_s: float | None = None
    enough: float | None = None
    gap: tuple[float, float, bool, float, float] | None = None
    full_start: list | None = None
    partial_start: tuple | None = None


@dataclass(frozen=True)
class HighsAnswer:
    """What a HiGHS run gave.

    Its status's name (`HighsModelStatus`: kOptimal, kTimeLimit, ...; or "killed" when it did not
    answer by its deadline), the best solution and the dual bound.
    """

    status: str
    objective: float | None  # the best solution's cost; None without one
    dual_bound: float | None  # HiGHS's dual bound when finite
    values: list[float] | None  # the best solution, by column
    run_s: float  # HiGHS's run time (the wait, when killed)
    rejected: str = ""  # what HiGHS refused (an option, the model), if it did
    iterations: int = 0  # simplex iterations, the start's completion included
    nodes: int = 0  # branch-and-bound nodes, the start's completion included


def run_highs(job: HighsJob, limit_s: float | None, watch=None) -> HighsAnswer:
    """Run `job` in a HiGHS process; kill it if it has not answered KILL_GRACE_S past `limit_s`.

    `watch(incumbent, bound)`, if given, hears HiGHS's progress now and then (either may be
    None), for the display only: what stops a run is in the job.
    """
    solver = _take()
    began = perf_counter()
    kill_at = None if limit_s is None else began + limit_s + KILL_GRACE_S
    dual, objective, values = None, None, None
    answered = False
    try:
        solver.conn.send((vars(job), watch is not None))  # fields: the process has no `poetsim` import of this module
        while True:
            wait_s = None if kill_at is None else max(kill_at - perf_counter(), 0.0)
            if not solver.conn.poll(wait_s):
                break  # late: killed below, with what it sent so far
            message = solver.conn.recv()
            if message[0] == "done":
                answered = True
                return HighsAnswer(*message[1])
            if message[0] == "solution":
                objective, values = message[1], message[2]
            if message[-1] is not None:
                dual = message[-1] if dual is None else max(dual, message[-1])
            if message[0] == "progress" and watch is not None:
                watch(message[1], message[2])
    except (EOFError, OSError) as exc:
        from poetsim.errors import InternalError

        raise InternalError(f"the HiGHS process ended without an answer (exit code {solver.process.poll()})") from exc
    finally:
        if answered:
            _give_back(solver)
        else:
            solver.end()
    return HighsAnswer("killed", objective, dual, values, perf_counter() - began)


def run_checked(job: HighsJob, limit_s: float | None, watch=None) -> HighsAnswer:
    """`run_highs`, with an infeasibility believed only from a run without presolve.

    HiGHS 1.16's presolve has called a feasible model infeasible (docs/optimiser.md, section 5). So
    an infeasible answer of a run with presolve is checked without presolve, within what is left
    of the guard: first the linear relaxation (its infeasibility proves the program's), then, if
    that has a solution, the program itself. The last run's answer is returned, its run time and
    tallies the sum of all; a check that ends first is a stop, not a proof.

    The relaxation goes first because it is the quick check: HiGHS's MIP solver without presolve
    can spend minutes in the root of a program whose relaxation its LP solver proves infeasible in
    a second (a 17,528-row timed cover: 548 s against 1.6 s).
    """
    import numpy as np

    began = perf_counter()
    answer = run_highs(job, limit_s, watch)
    if answer.status not in INFEASIBLE or answer.rejected or job.options.get("presolve") == "off":
        return answer
    relaxed = replace(
        job,
        model={**job.model, "integer": np.zeros(len(job.model["integer"]), dtype=bool)},
        enough=None,
        gap=None,
        full_start=None,
        partial_start=None,
    )
    checks = [answer, _without_presolve(relaxed, limit_s, began, watch)]
    if checks[-1].status == "kOptimal" and not checks[-1].rejected:
        checks.append(_without_presolve(job, limit_s, began, watch))
    else:  # a proof, or a stop; the relaxation's values are no solution of the program
        checks[-1] = replace(checks[-1], objective=None, dual_bound=None, values=None)
    return replace(
        checks[-1],
        run_s=sum(a.run_s for a in checks),
        iterations=sum(a.iterations for a in checks),
        nodes=sum(a.nodes for a in checks),
    )


def _without_presolve(job: HighsJob, limit_s: float | None, began: float, watch) -> HighsAnswer:
    """`job` run without presolve, within what is left of `limit_s` from `began`."""
    left_s = None if limit_s is None else max(limit_s - (perf_counter() - began), 0.01)
    options = {**job.options, "presolve": "off", **({} if left_s is None else {"time_limit": left_s})}
    return run_highs(replace(job, options=options, stop_s=left_s), left_s, watch)


class _Solver:
    """A HiGHS process (this file run as a script) and the parent's end of its pipe.

    It is in a session of its own, so a Ctrl-C at the terminal reaches only its parent, which
    decides; it dies with its parent (`poetsim.processes.die_with_parent`).
    """

    def __init__(self):
        self.conn, child = Pipe()
        root = str(Path(__file__).resolve().parents[3])  # where the `poetsim` package is
        self.process = subprocess.Popen(
            [sys.executable, "-P", __file__, root, str(child.fileno()), str(os.getpid())],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        child.close()
        self.owner = os.getpid()

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def end(self) -> None:
        """Kill the process (it may be inside HiGHS, where nothing else stops it), reap it, close the pipe.

        Killed first: a process still sending into a pipe its parent has closed would print the
        broken pipe on the terminal it shares.
        """
        if self.owner != os.getpid():
            return
        self.process.kill()
        self.process.wait()
        self.conn.close()


_IDLE: list[_Solver] = []
_LOCK = threading.Lock()


def _take() -> _Solver:
    with _LOCK:
        while _IDLE:
            solver = _IDLE.pop()
            if solver.usable():
                return solver
            solver.end()
    return _Solver()


def _give_back(solver: _Solver) -> None:
    with _LOCK:
        _IDLE.append(solver)


def prestart() -> None:
    """Start a HiGHS process now, unless one is idle: it starts in the background (0.2 s)."""
    with _LOCK:
        if not any(solver.usable() for solver in _IDLE):
            _IDLE.append(_Solver())


@atexit.register
def _end_idle() -> None:
    with _LOCK:
        for solver in _IDLE:
            solver.end()
        _IDLE.clear()


def _solve(job: HighsJob, watched: bool, conn) -> tuple:
    """Run HiGHS on `job` in this process (the HiGHS process's side of `run_highs`); the answer as the fields of a HighsAnswer.

    While it works it sends ("solution", cost, values, dual bound) for each better solution, and
    ("progress", incumbent, dual bound) from the MIP callback if `watched`, else ("bound", dual
    bound) when it rose, each at most every BOUND_EVERY_S (for the display, and for a run killed at
    the guard: nothing else reads them).
    """
    import highspy

    began = perf_counter()
    ends_at = None if job.stop_s is None else began + job.stop_s
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)

    def refused(status) -> bool:
        return status == highspy.HighsStatus.kError

    if refused(h.passModel(_highs_lp(job.model))):
        return ("kModelError", None, None, None, 0.0, "the model")
    for name, option in job.options.items():
        if refused(h.setOptionValue(name, option)):
            return ("kModelError", None, None, None, 0.0, f"option {name}")
    limit_s = job.options.get("time_limit")
    limit_ends_at = None if limit_s is None else began + float(limit_s)
    start, start_iterations, start_nodes = _completed_start(job, limit_ends_at)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = start
        solution.value_valid = True
        if refused(h.setSolution(solution)):
            return ("kModelError", None, None, None, 0.0, "setSolution")
    if limit_ends_at is not None:  # completing the start took some of the run's time
        h.setOptionValue("time_limit", max(limit_ends_at - perf_counter(), 0.01))
    callbacks = _Callbacks(job, ends_at, watched, conn, highspy.kHighsInf)
    h.cbMipInterrupt.subscribe(callbacks.interrupt)
    h.cbMipImprovingSolution.subscribe(callbacks.improved)
    # HiGHS's thread pool is global and sized once per process; a new size needs a reset.
    highspy.Highs.resetGlobalScheduler(True)
    h.run()
    info = h.getInfo()
    solved = info.primal_solution_status == 2  # kSolutionStatusFeasible
    return (
        h.getModelStatus().name,
        info.objective_function_value if solved else None,
        callbacks.finite(info.mip_dual_bound),
        list(h.getSolution().col_value) if solved else None,
        h.getRunTime(),
        "",
        max(info.simplex_iteration_count, 0) + start_iterations,
        max(info.mip_node_count, 0) + start_nodes,
    )


class _Callbacks:
    """The MIP callbacks of one run in the HiGHS process: when to interrupt it, and what to send.

    The run is interrupted past `ends_at` (HiGHS checks its own time limit only now and then), once
    its best solution is within REL_GAP of `job.enough`, or once `gap_closed` says its gap is
    closed. Progress (if `watched`) or a risen dual bound goes to `conn` at most every
    BOUND_EVERY_S; each better solution goes at once. `inf` is HiGHS's infinity: a value at or
    beyond it is none.
    """

    def __init__(self, job: HighsJob, ends_at: float | None, watched: bool, conn, inf: float) -> None:
        self.ends_at, self.enough, self.gap = ends_at, job.enough, job.gap
        self.watched, self.conn, self.inf = watched, conn, inf
        self.sent_bound, self.sent_at = -math.inf, 0.0  # the last dual bound sent, and when

    def finite(self, x: float) -> float | None:
        """`x`, or None where it is infinite in HiGHS's sense."""
        return x if math.isfinite(x) and abs(x) < self.inf else None

    def stops(self, primal: float | None, dual: float | None) -> bool:
        """Whether the run should stop: past its deadline, good enough, or its gap closed."""
        if self.ends_at is not None and perf_counter() > self.ends_at:
            return True
        if self.enough is not None and primal is not None and primal <= self.enough * (1 + REL_GAP) + 1e-12:
            return True
        return self.gap is not None and gap_closed(primal, dual, *self.gap)

    def interrupt(self, event) -> None:
        """The cbMipInterrupt callback: stop the run where `stops` says so, and report progress."""
        out = event.data_out
        primal, dual = self.finite(out.mip_primal_bound), self.finite(out.mip_dual_bound)
        if self.stops(primal, dual):
            event.interrupt()
        if perf_counter() - self.sent_at < BOUND_EVERY_S:
            return
        if self.watched:
            self.sent_at = perf_counter()
            self.conn.send(("progress", primal, dual))
        elif dual is not None and dual > self.sent_bound:
            self.sent_bound, self.sent_at = dual, perf_counter()
            self.conn.send(("bound", dual))

    def improved(self, event) -> None:
        """The cbMipImprovingSolution callback: send the better solution with the dual bound."""
        out = event.data_out
        self.conn.send(("solution", out.objective_function_value, list(out.mip_solution), self.finite(out.mip_dual_bound)))


def gap_closed(
    primal: float | None, dual: float | None, incumbent: float, bound: float, bound_holds: bool, rel_gap: float, abs_gap: float
) -> bool:
    """Whether a run may stop.

    Its best solution `primal`, or `incumbent` if lower, is within `rel_gap` of its value plus
    `abs_gap` of the higher of `bound` and (where `bound_holds`) the run's dual bound `dual` (model
    units: the overhead above keep-all, so never below 0).
    """
    best = min(primal if primal is not None else math.inf, incumbent)
    floor = max(max(dual, 0.0) if dual is not None and bound_holds else -math.inf, bound)
    return best < math.inf and floor > -math.inf and best - floor <= rel_gap * max(best, 0.0) + abs_gap


def _highs_lp(m: dict, lower=None, upper=None):
    """The HighsLp of a job's model (`model_arrays`), with other column bounds if given."""
    import highspy

    n, rows = len(m["cost"]), len(m["row_lower"])
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, rows
    lp.col_cost_ = m["cost"]
    lp.col_lower_ = m["lower"] if lower is None else lower
    lp.col_upper_ = m["upper"] if upper is None else upper
    lp.row_lower_, lp.row_upper_ = m["row_lower"], m["row_upper"]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = m["starts"], m["index"], m["value"]
    kinds = highspy.HighsVarType
    lp.integrality_ = [kinds.kInteger if b else kinds.kContinuous for b in m["integer"]]
    return lp


def _completed_start(job: HighsJob, ends_at: float | None) -> tuple[list[float] | None, int, int]:
    """The job's start as a whole solution that satisfies every row, or None if there is none.

    HiGHS completes a partial start, and repairs a whole one it finds infeasible, by solving a
    sub-MIP in the same instance, and its MIP callbacks report that sub-MIP's dual bound as if it
    were the model's. HiGHS 1.16, on a 60-item covering knapsack whose optimum is 512, with a
    partial start: a callback said 595.5; with a whole start holding one fractional value: 1781.
    A run killed or stopped on such a report would give a bound above the optimum. So the start
    is completed here, in an instance of its own with no callbacks: the given columns fixed
    (a whole start: its integer columns, rounded), the rest solved for, within HiGHS's own node
    limit for starts (`mip_max_start_nodes`) and the run's time. What comes back is feasible at
    the model's tolerances, and HiGHS takes such a start as it is, with no sub-MIP; with it come
    the simplex iterations and nodes it took.
    """
    import highspy

    m = job.model
    lower, upper = list(m["lower"]), list(m["upper"])
    fixed: list[tuple[int, float]]
    if job.partial_start is not None:
        fixed = list(zip(*job.partial_start))
    elif job.full_start is not None:
        fixed = [(c, float(round(v))) for c, (v, integer) in enumerate(zip(job.full_start, m["integer"])) if integer]
    else:
        return None, 0, 0
    for column, value in fixed:
        if not lower[column] - 1e-9 <= value <= upper[column] + 1e-9:
            return None, 0, 0
        lower[column] = upper[column] = value
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(_highs_lp(m, lower, upper))
    for name in ("mip_feasibility_tolerance", "primal_feasibility_tolerance", "random_seed", "mip_rel_gap"):
        if name in job.options:
            h.setOptionValue(name, job.options[name])
    h.setOptionValue("threads", 1)
    h.setOptionValue("mip_max_nodes", h.getOptionValue("mip_max_start_nodes")[1])
    if ends_at is not None:
        left_s = ends_at - perf_counter()
        if left_s <= 0:
            return None, 0, 0
        h.setOptionValue("time_limit", left_s)
    highspy.Highs.resetGlobalScheduler(True)
    h.run()
    info = h.getInfo()
    spent = max(info.simplex_iteration_count, 0), max(info.mip_node_count, 0)
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        return None, *spent
    return list(h.getSolution().col_value), *spent


def _serve(fd: int, parent_pid: int) -> None:
    """The HiGHS process: solve each job that comes down the pipe until it closes."""
    from poetsim.processes import die_with_parent

    die_with_parent(parent_pid)
    conn = Connection(fd)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        fields, watched = message
        answer = _solve(HighsJob(**fields), watched, conn)
        try:
            conn.send(("done", answer))
        except OSError:  # the parent closed its end (it stopped waiting): no one to answer
            return


if __name__ == "__main__":  # the HiGHS process (`_Solver`): root of poetsim, pipe, parent's pid
    sys.path.insert(0, sys.argv[1])
    _serve(int(sys.argv[2]), int(sys.argv[3]))
