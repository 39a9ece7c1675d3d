"""`optimise`: budgets in, a schedule, its predicted figures and what is proven about it out.

One call runs, on one clock (`clock.Clock`), from the cheapest proof to the dearest:

1. pre-checks and the eviction cover (`cover`): a proven lower bound, or a proof that nothing fits;
2. plans that need no solver: keep-all, the plan made from the cover's choice (`cover_plan`), the
   schedules of other strategies handed in as `starts`, and the greedy; the cheapest that fits
   is the incumbent, and if it meets the bound within the gap it is optimal, with no MILP built;
3. the MILP restricted to the cover's choice (`cover_plan.restricted`): small, fast, an upper bound;
4. the full MILP, started from the incumbent, stopped as soon as the incumbent is within the gap
   of the best bound (the solver's or the cover's), or when the clock runs out.

Whatever stops it, the cheapest schedule found so far is returned with the best proven bound.
"""

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter

from poetsim.costs import CostTable
from poetsim.errors import InfeasibleBudgetError, PoetsimError, UserInputError
from poetsim.graph import TrainingGraph
from poetsim.optimiser import plan as plans
from poetsim.optimiser.baselines import start_plan
from poetsim.optimiser.clock import Clock, Progress, Reporter
from poetsim.optimiser.cover import CoverBound, cover_bound
from poetsim.optimiser.cover_plan import admits, cover_plan, events_plan, restricted
from poetsim.optimiser.formulation import formulate
from poetsim.optimiser.incumbent import Incumbent
from poetsim.optimiser.rows import Formulation
from poetsim.optimiser.rules import plan_from_decisions
from poetsim.optimiser.solvers import SolverResult, SolverSettings, check_available, solve
from poetsim.optimiser.timed_cover import placement, stalled, timed_cover_bound
from poetsim.schedule import Budgets, Figures, Moves, Schedule, Timing
from poetsim.status import Status


@dataclass(frozen=True)
class SolveOutcome:
    """One solve: status, schedule, its predicted figures, and what is proven about it.

    Energies are joules of one iteration. `gap_overhead` relates the proven gap to the energy
    above keep-all, the only part a schedule can change: it is the figure to read (a 0.03 %
    gap on the total can be a 28 % gap on the overhead, POET.md).
    """

    moves: Moves
    timing: Timing
    solver: str
    status: Status                 # OPTIMAL, FEASIBLE (a schedule with a gap), INFEASIBLE or NO_SOLUTION
    schedule: Schedule | None
    predicted: Figures | None      # the model's figures of the returned schedule
    objective_j: float | None      # total energy of the returned schedule per the model
    bound_j: float | None          # best proven lower bound on total energy (the solver's or the cover's)
    gap_total: float | None        # (objective - bound) / objective
    gap_overhead: float | None     # (objective - bound) / (objective - keep-all energy)
    build_s: float                 # everything before the first solver run: cover, plans, model build
    handoff_s: float
    solve_s: float                 # the solver runs (restricted and full)
    num_variables: int
    num_constraints: int
    message: str
    found_by: str = ""             # where the returned schedule came from (cover, a start, solver, ...)
    cover_bound_j: float | None = None  # the eviction cover's bound on the total energy
    wall_s: float = 0.0            # the whole call


#: Shares of the time left that the plain cover, the placement of its choice and the timed cover
#: may take (each stops sooner when it is solved; docs/optimiser.md has their measured times).
COVER_SHARE = 0.2
PLACEMENT_SHARE = 0.5
#: At most this many choices of the same cost are placed (see _Run.place).
PLACEMENT_ROUNDS = 10
TIMED_SHARE = 0.6
#: Share of the time left for the greedy plans (they stop where they are when it runs out).
GREEDY_SHARE = 0.25
#: Share of the time left for the MILP restricted to the cover's choice, and its cap in seconds.
RESTRICTED_SHARE = 0.25
RESTRICTED_CAP_S = 60.0
#: A MILP step (build, restricted or full solve) starts only with this much time left.
MIN_MILP_S = 2.0
#: Whether the full solve gets the cover's bound as a row, objective >= floor (docs/optimiser.md).
OBJECTIVE_FLOOR_ROW = False


def optimise(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing = Timing.OVERLAP,
    solver: str = "highs", time_limit_s: float | None = None, mip_rel_gap: float = 1e-4, threads: int | None = None,
    warm_start: bool = True, starts: Sequence[Schedule] = (), on_progress: Progress | None = None,
) -> SolveOutcome:
    """Find the least-energy schedule within `budgets` using `moves` and say what is proven about it.

    `mip_rel_gap` is relative to the overhead above keep-all: "optimal" means no schedule is
    cheaper by more than that share of the overhead (plus a thousandth of the cheapest decision).
    `time_limit_s` bounds the whole call (bound, plans, build, solves, rounding). `starts` are
    schedules of other strategies or baselines: the cheapest that uses only `moves` and fits
    becomes the incumbent, so the answer is never worse. `on_progress(elapsed_s, incumbent_j,
    bound_j, phase)` is called at most about once a second while the call works.

    `warm_start=False` solves the bare MILP (no cover, no rule-made plans, no start, no
    restricted pass): a reference for tests and benchmarks.
    """
    timing = _parse(Timing, timing)
    check_available(solver)
    clock = Clock(time_limit_s)
    report = Reporter(on_progress, clock)
    obvious = _obviously_infeasible(graph, costs, budgets)
    if obvious:
        return _empty(moves, timing, solver, Status.INFEASIBLE, obvious, clock)
    run = _Run(graph, costs, budgets, moves, timing, solver, mip_rel_gap, threads, clock, report)
    if not warm_start:
        return run.bare()
    report("bound")
    run.cover = cover_bound(graph, costs, budgets, moves, timing, time_limit_s=clock.share_s(COVER_SHARE))
    if run.cover.infeasible:
        return _empty(moves, timing, solver, Status.INFEASIBLE, run.cover.message, clock)
    run.bound_j = run.cover.bound_j
    best = run.best
    best.offer(plan_from_decisions(graph, {}), "keep-all")
    best.offer(cover_plan(graph, costs, budgets, timing, run.cover), "the cover's choice")
    for schedule in starts:
        best.offer(plans.from_schedule(schedule, graph), "a start")
    report("plans", best.total_j, run.bound_j)
    if best.best is None:
        run.first_schedule()
    for step in (run.place, run.timed, run.greedy, run.build, run.restricted_solve, run.full_solve):
        if run.proven() or run.infeasible or clock.expired():
            break
        if step in (run.build, run.restricted_solve, run.full_solve) and not run.time_for_milp():
            break
        step()
    return run.outcome()


class _Run:
    """The state of one `optimise` call: clock, bound, incumbent, model, and the solver's account."""

    def __init__(self, graph, costs, budgets, moves, timing, solver, mip_rel_gap, threads, clock, report):
        self.graph, self.costs, self.budgets, self.moves, self.timing = graph, costs, budgets, moves, timing
        self.solver, self.mip_rel_gap, self.clock, self.report = solver, mip_rel_gap, clock, report
        self.threads = threads or os.cpu_count() or 1
        self.keep_all_j = costs.plain_compute_j + (costs.static_power_w * costs.plain_runtime_s
                                                   if timing is Timing.OVERLAP else 0.0)
        self.abs_gap_j = abs_gap_j(costs, moves, timing)
        self.best = Incumbent(graph, costs, budgets, moves, timing)
        self.cover: CoverBound | None = None
        self.timed_cover: CoverBound | None = None
        self.infeasible = ""  # why no schedule fits, when a cover proved it
        self.greedy_done = False
        self.settings_ends_at: float | None = None
        self.bound_j: float | None = None
        self.form: Formulation | None = None
        self.build_s: float | None = None
        self.handoff_s = self.solve_s = 0.0
        self.solver_status: Status | None = None

    def time_for_milp(self) -> bool:
        """Whether enough time is left for a MILP step: HiGHS overruns limits below a second or so
        (0.3 s took 0.6 s, 0.7 s took 1.6 s on ResNet-18), and a shorter run finds nothing."""
        left = self.clock.left_s()
        return left is None or left >= MIN_MILP_S

    def proven(self) -> bool:
        """Whether the incumbent is within the gap settings of the best bound."""
        return self.best.best is not None and self.bound_j is not None and within_gap(
            self.best.total_j, self.bound_j, self.keep_all_j, self.mip_rel_gap, self.abs_gap_j)

    def place(self) -> None:
        """Stages for the plain cover's choice (the timed cover confined to it), and their plan.

        The plain cover's choice is one of often many of the same cost (outputs of one size and
        price), and some can be placed without a stall where others cannot. So while a placement
        stalls, the outputs whose transfers stall are avoided and the cover solved again; a
        choice that still costs the plain bound and places without a stall is optimal, one that
        costs a little more is often a near-optimal schedule.
        """
        choice, avoid = self.cover, frozenset()
        single = _single_move(self.cover)
        share = self.clock.share_s(PLACEMENT_SHARE)
        ends_at = None if share is None else perf_counter() + share
        for _ in range(PLACEMENT_ROUNDS):
            if not (choice.recomputed or choice.paged):
                return
            self.report("placement", self.best.total_j, self.bound_j)
            # Each placement gets a third of what is left: a good one is wanted, not its proof.
            placed = placement(self.graph, self.costs, self.budgets, self.timing, choice,
                               None if ends_at is None else (ends_at - perf_counter()) / 3)
            plan = events_plan(self.graph, self.costs, self.budgets, self.timing, placed)
            self.best.offer(plan, "the cover's placement")
            if not placed.exact and plan is None:
                return  # cut short by the clock: its stalls say nothing about the choice
            more = stalled(self.graph, self.costs, placed) - avoid
            if self.proven() or not more or (ends_at is not None and perf_counter() >= ends_at):
                return
            avoid |= more
            # Searching among single-move choices when the first was one: that cover has no
            # cascades and is solved in a fraction of a second where the hybrid one takes seconds.
            choice = cover_bound(self.graph, self.costs, self.budgets, single or self.moves, self.timing,
                                 None if ends_at is None else ends_at - perf_counter(), avoid=avoid)
            if choice.infeasible:
                return
            # A choice that costs a little more than the bound can still place without a stall:
            # no proof then, but a good schedule (ResNet-50: 0.27 % of the overhead above it).

    def timed(self) -> None:
        """The timed cover: a higher bound where transfers cannot hide, and the plan of its events.

        When the plain cover chose one move only, the timed cover of that move alone (smaller,
        often several times faster) goes first: its events are schedules of these moves too, and
        if they meet the plain bound no more is needed; else they start the full timed cover,
        which gets what is left of the step's share. The step gets most of the time: on graphs
        of ResNet-18's size it finds and proves optima that the stage MILP does not reach in
        minutes (docs/optimiser.md).
        """
        start = ()
        single = _single_move(self.cover)
        share = self.clock.share_s(TIMED_SHARE)
        ends_at = None if share is None else perf_counter() + share
        if single is not None and single != self.moves:
            self.report("timed bound", self.best.total_j, self.bound_j)
            first = timed_cover_bound(self.graph, self.costs, self.budgets, single, self.timing, share,
                                      self.cover.bound_j)
            start = first.events
            self.best.offer(events_plan(self.graph, self.costs, self.budgets, self.timing, first),
                            f"the timed cover of {single.label} moves")
            if self.proven() or self.clock.expired():
                return
        self.report("timed bound", self.best.total_j, self.bound_j)
        self.timed_cover = timed_cover_bound(self.graph, self.costs, self.budgets, self.moves, self.timing,
                                             None if ends_at is None else max(ends_at - perf_counter(), 0.0),
                                             self.cover.bound_j, self.cover.rows, start)
        if self.timed_cover.infeasible:
            if self.best.best is None:
                self.infeasible = self.timed_cover.message
            return
        self._raise_bound(self.timed_cover.bound_j)
        self.best.offer(events_plan(self.graph, self.costs, self.budgets, self.timing, self.timed_cover),
                        "the timed cover's events")

    def first_schedule(self) -> None:
        """A schedule before anything else, whatever the clock says: the first rule-made plan that
        fits. So a call whose time runs out still returns a schedule whenever a rule can make one
        (the quickest greedy takes 2 s on bert_base, the largest zoo graph)."""
        self.report("first schedule", self.best.total_j, self.bound_j)
        self.best.offer(start_plan(self.graph, self.costs, self.budgets, self.moves, self.timing, first_fit=True),
                        "the greedy")

    def greedy(self) -> None:
        """The rule-made plans of `baselines.start_plan` (keep-all, greedy, checkpoint-sqrt), once."""
        if self.greedy_done:
            return
        self.greedy_done = True
        self.report("greedy", self.best.total_j, self.bound_j)
        share = self.clock.share_s(GREEDY_SHARE)
        ends_at = None if share is None else perf_counter() + share
        self.best.offer(start_plan(self.graph, self.costs, self.budgets, self.moves, self.timing, ends_at), "the greedy")

    def build(self) -> None:
        self.report("build", self.best.total_j, self.bound_j)
        self.form = formulate(self.graph, self.costs, self.budgets, self.moves, self.timing)
        self.build_s = self.clock.elapsed_s()

    def settings(self, time_limit_s: float | None, floor: bool = False) -> SolverSettings:
        """The stopping rules of a solver run that must end before the call's deadline, less a reserve."""
        form = self.form
        ends_at = self.clock.ends_at
        floor_value = None
        if floor and self.cover is not None and self.cover.overhead_j:
            floor_value = self.cover.overhead_j / form.energy_scale_j
        self.settings_ends_at = ends_at
        return SolverSettings(mip_rel_gap=self.mip_rel_gap, mip_abs_gap=self.abs_gap_j / form.energy_scale_j,
                              time_limit_s=time_limit_s, threads=self.threads, objective_floor=floor_value,
                              ends_at=ends_at)

    def watch(self, phase: str, bound_holds: bool):
        """The solver's watch: report progress, stop once the incumbent is within the gap of the bound.

        A restricted model's bound is not a bound of the problem (`bound_holds` False): only its
        incumbents count then.
        """
        form = self.form

        def seen(primal, dual) -> bool:
            if self.settings_ends_at is not None and perf_counter() > self.settings_ends_at:
                return True  # HiGHS's own limit is checked only now and then
            incumbent = None if primal is None else form.keep_all_j + primal * form.energy_scale_j
            bound = None if dual is None or not bound_holds else form.keep_all_j + max(dual, 0.0) * form.energy_scale_j
            self.report(phase, incumbent, bound if bound is None or self.bound_j is None else max(bound, self.bound_j))
            best = min(x for x in (incumbent, self.best.total_j, math.inf) if x is not None)
            floor = max(x for x in (bound, self.bound_j, -math.inf) if x is not None)
            return best < math.inf and floor > -math.inf and within_gap(
                best, floor, self.keep_all_j, self.mip_rel_gap, self.abs_gap_j)

        return seen

    def start_columns(self, form: Formulation) -> list[float] | None:
        """The incumbent as column values of `form`, if it lies within the model's windows and bounds."""
        if self.best.best is None:
            return None
        try:
            values = plans.to_columns(form, self.best.best.plan, self.graph, self.costs)
        except KeyError:
            return None
        return values if admits(form, values) else None

    def restricted_solve(self) -> None:
        """The MILP confined to the covers' choice, for a share of the time left: a fast upper bound."""
        choice = self.timed_cover if self.timed_cover is not None and self.timed_cover.events else self.cover
        if not (choice.recomputed or choice.paged):
            return
        form = restricted(self.form, self.graph, choice)
        result = self._solve(form, self.clock.share_s(RESTRICTED_SHARE, RESTRICTED_CAP_S), "restricted solve",
                             bound_holds=False)
        if result.values is not None:
            self.best.offer(plans.from_columns(form, result.values), "the restricted solve")

    def full_solve(self) -> None:
        """The full MILP from the incumbent, until the gap closes or the clock runs out."""
        result = self._solve(self.form, None, "solve", bound_holds=True, floor=OBJECTIVE_FLOOR_ROW)
        self.solver_status = result.status
        if result.values is not None:
            self.best.offer(plans.from_columns(self.form, result.values), self.solver)
        if result.bound is not None and math.isfinite(result.bound) and result.status.has_schedule:
            self._raise_bound(self.form.keep_all_j + max(result.bound, 0.0) * self.form.energy_scale_j)

    def bare(self) -> "SolveOutcome":
        """The MILP alone, as POET states it: no cover, no plans, no start."""
        self.build()
        self.bound_j = self.keep_all_j  # the overhead is never negative
        self.full_solve()
        return self.outcome()

    def _solve(self, form: Formulation, time_limit_s: float | None, phase: str, bound_holds: bool,
               floor: bool = False) -> SolverResult:
        self.report(phase, self.best.total_j, self.bound_j)
        result = solve(form, self.solver, self.settings(time_limit_s, floor), self.start_columns(form),
                       self.watch(phase, bound_holds))
        self.handoff_s += result.handoff_s
        self.solve_s += result.solve_s
        return result

    def _raise_bound(self, bound_j: float) -> None:
        if self.bound_j is None or bound_j > self.bound_j:
            self.bound_j = bound_j

    def outcome(self) -> "SolveOutcome":
        """The outcome from the incumbent, the best bound and the solver's own account."""
        form = self.form
        sizes = {"num_variables": form.num_columns if form else 0, "num_constraints": form.num_rows if form else 0}
        common = dict(build_s=self.build_s if self.build_s is not None else self.clock.elapsed_s(),
                      handoff_s=self.handoff_s, solve_s=self.solve_s,
                      cover_bound_j=None if self.cover is None else self.cover.bound_j, **sizes)
        candidate = self.best.best
        if candidate is None and self.infeasible:
            return SolveOutcome(self.moves, self.timing, self.solver, Status.INFEASIBLE, None, None, None, None, None,
                                None, message=self.infeasible, wall_s=self.clock.elapsed_s(), **common)
        if candidate is None:
            if self.solver_status is Status.INFEASIBLE:
                message = _infeasible_message(self.graph, self.costs, self.budgets, self.moves)
                status = Status.INFEASIBLE
            else:
                message = f"no schedule was found within the time limit of {self.clock.limit_s} s"
                status = Status.NO_SOLUTION
            return SolveOutcome(self.moves, self.timing, self.solver, status, None, None, None, self.bound_j, None,
                                None, message=message, wall_s=self.clock.elapsed_s(), **common)
        objective_j = candidate.total_j
        bound_j = min(self.bound_j, objective_j) if self.bound_j is not None else self.keep_all_j
        proven_gap = max(objective_j - bound_j, 0.0)
        overhead_j = objective_j - self.keep_all_j
        gap_total = proven_gap / objective_j if objective_j > 0 else 0.0
        gap_overhead = proven_gap / overhead_j if overhead_j > 0 else 0.0
        optimal = self.solver_status is Status.OPTIMAL or self.proven()
        status = Status.OPTIMAL if optimal else Status.FEASIBLE
        if optimal and self.form is None:
            message = f"proven optimal with no solver run: {candidate.source} meets the eviction cover's bound"
        elif optimal:
            message = f"proven optimal; the schedule is from {candidate.source}"
        else:
            message = f"stopped with a gap of {_pct(gap_overhead)} of the overhead; the schedule is from {candidate.source}"
        schedule = plans.to_schedule(candidate.plan, self.graph, self.costs, self.timing, {
            "moves": self.moves.label, "solver": self.solver, "status": status.value, "found_by": candidate.source,
            "ram_budget_bytes": str(self.budgets.ram_bytes), "runtime_budget_s": repr(self.budgets.runtime_s)})
        return SolveOutcome(
            self.moves, self.timing, self.solver, status, schedule, candidate.figures, objective_j, bound_j,
            gap_total, gap_overhead, message=message, found_by=candidate.source, wall_s=self.clock.elapsed_s(),
            **common)


def _single_move(cover: CoverBound) -> Moves | None:
    """The one move the cover's choice uses (paging or recomputation), or None for both or neither."""
    if bool(cover.recomputed) == bool(cover.paged):
        return None
    return Moves(recompute=bool(cover.recomputed), page=bool(cover.paged))


def within_gap(objective_j: float, bound_j: float, keep_all_j: float, rel_gap: float, abs_gap: float) -> bool:
    """Whether a schedule of `objective_j` is proven optimal by `bound_j`: the gap is at most
    `rel_gap` of its overhead above keep-all plus `abs_gap` joules."""
    return objective_j - bound_j <= rel_gap * max(objective_j - keep_all_j, 0.0) + abs_gap


def abs_gap_j(costs: CostTable, moves: Moves, timing: Timing) -> float:
    """A thousandth of the cheapest decision in joules: below it two schedules are one."""
    prices = []
    if moves.recompute:
        prices += costs.compute_j
    if moves.page:
        prices += costs.page_in_j + costs.page_out_j
    positive = [p for p in prices if p > 0]
    return 1e-3 * min(positive) if positive else 1e-12


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


def _empty(moves, timing, solver, status, message, clock: Clock) -> SolveOutcome:
    return SolveOutcome(moves, timing, solver, status, None, None, None, None, None, None,
                        clock.elapsed_s(), 0.0, 0.0, 0, 0, message, wall_s=clock.elapsed_s())


def _pct(share: float | None) -> str:
    return "unknown" if share is None else f"{100 * share:.3g} %"
