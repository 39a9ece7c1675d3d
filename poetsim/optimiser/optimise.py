"""`optimise`: budgets in, a schedule, its predicted figures and what is proven about it out.

One call runs, on one clock (`clock.Clock`), from the cheapest proof to the dearest:

1. pre-checks and the eviction cover (`cover`): a proven lower bound, or a proof that nothing fits;
2. plans that need no solver: keep-all, the plan made from the cover's choice (`cover_plan`), the
   schedules of other strategies handed in as `starts`; the cheapest that fits is the
   incumbent, and if it meets the bound within the gap it is optimal, with no MILP built;
3. the steps of `search.Search`: the placement search, the timed cover and the greedy (the
   greedy first for recompute-only), polishing the incumbent (`polish`), the recompute-only
   cover with second restores, the MILP restricted to a cover's choice, and the full MILP from
   the incumbent, stopped as soon as the incumbent is within the gap of the best bound, or when
   the clock runs out. Where the MILP is too large for the time left, the greedy runs again
   instead if its own step ran out of time.

Whatever stops it, the cheapest schedule found so far is returned with the best proven bound.
"""

from collections.abc import Sequence
from pathlib import Path

from poetsim.errors import UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.inputs.solvers import check_available
from poetsim.optimiser.bounds.cover import cover_bound
from poetsim.optimiser.clock import Clock, Progress, Reporter
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.outcome import SolveOutcome
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import cover_plan
from poetsim.optimiser.plans.rules import plan_from_decisions
from poetsim.optimiser.search import COVER_SHARE, Search
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Schedule, Timing
from poetsim.status import Status
from poetsim.strategies import KEEP_ALL


def optimise(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing = Timing.OVERLAP,
    solver: str = "highs",
    time_limit_s: float | None = None,
    mip_rel_gap: float = 1e-4,
    threads: int | None = None,
    warm_start: bool = True,
    starts: Sequence[Schedule] = (),
    on_progress: Progress | None = None,
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
    run = Search(graph, costs, budgets, moves, timing, solver, mip_rel_gap, threads, clock, report)
    if not warm_start:
        return run.bare()
    report("bound")
    run.cover = cover_bound(graph, costs, budgets, moves, timing, time_limit_s=clock.share_s(COVER_SHARE))
    if run.cover.infeasible:
        return _empty(moves, timing, solver, Status.INFEASIBLE, run.cover.message, clock)
    run.raise_bound(run.cover.bound_j, "the eviction cover")
    best = run.best
    best.offer(plan_from_decisions(graph, {}), KEEP_ALL.name)
    run.first_plan = cover_plan(graph, costs, budgets, timing, run.cover, clock.ends_at)
    best.offer(run.first_plan, "the cover's choice")
    for schedule in starts:
        best.offer(plans.from_schedule(schedule, graph), "a start")
    report("plans", best.total_j, run.bound_j)
    if best.best is None:
        run.first_schedule()
    # The steps between the placement search and the MILP, by the moves.
    # - With paging the second restores come first (they serve only below the paging floor,
    #   `Search.second_restores`), and the timed cover, which places the transfers, before the greedy.
    # - Recompute-only runs the greedy before the timed cover. On `paper_fig3`'s ResNet-50 points
    #   (Pi, 30 s, two calls at once as in a sweep) the timed cover took 8-11 s and raised no bound,
    #   leaving the greedy 1-4 s: 649.96-651.47 J at 50 % RAM, 678.90-698.23 J at 35 %; with the
    #   greedy first, 648.96 J (2.15 % of the overhead unproven instead of 19-35 %) and 678.90 J.
    #   Its second restores come after polish.
    # - Both end with the rebuilt greedy (`Search.rebuild`), which takes its time from the MILP's.
    if moves.page:
        middle = (run.second_restores, run.page_in_bound, run.timed, run.greedy, run.polish, run.rebuild)
    else:
        middle = (run.page_in_bound, run.greedy, run.timed, run.polish, run.second_restores, run.rebuild)
    for step in (run.place, *middle, run.build, run.restricted_solve, run.full_solve):
        if run.proven() or run.infeasible or clock.expired():
            break
        if step in (run.build, run.restricted_solve, run.full_solve) and not run.time_for_milp():
            run.without_milp()
            break
        step()
    return run.outcome()


def write_lp(graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing, path) -> None:
    """Write the model of one solve as a CPLEX LP file (golden tests, debugging, other solvers)."""
    from poetsim.optimiser.milp.pyomo_model import write_model_lp

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
        return (
            f"infeasible: RAM budget {budgets.ram_bytes:,} bytes is below the {graph.min_feasible_ram_bytes:,} bytes "
            "that the largest node and its inputs need at once"
        )
    plain_s = costs.plain_runtime_s
    if not budgets.meets_deadline(plain_s):
        return (
            f"infeasible: runtime budget {budgets.runtime_s:.6g} s is below one plain pass of {plain_s:.6g} s "
            f"({budgets.runtime_s / plain_s:.3g}x); every schedule computes each node at least once"
        )
    return ""


def _empty(moves, timing, solver, status, message, clock: Clock) -> SolveOutcome:
    return SolveOutcome(
        moves,
        timing,
        solver,
        status,
        None,
        None,
        None,
        None,
        None,
        None,
        clock.elapsed_s(),
        0.0,
        0.0,
        0,
        0,
        message,
        wall_s=clock.elapsed_s(),
    )
