"""`optimise`: budgets in, a schedule, its predicted figures and what is proven about it out.

One call checks what is cheap to know first (a RAM budget below the largest node's working set,
a deadline below one plain pass), then runs the search (`search.Search`): the eviction cover,
rule-made plans, the placement search, further covers and plans, and the stage MILP, from the
cheapest proof to the dearest, until the incumbent is proven or the budget is spent.
"""

from collections.abc import Sequence
from pathlib import Path

from poetsim.errors import UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.inputs.solvers import check_available
from poetsim.optimiser.call import SolveSettings, Task
from poetsim.optimiser.clock import Clock, Progress, Reporter
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.outcome import SolveOutcome
from poetsim.optimiser.search import Search
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Schedule, Timing
from poetsim.status import Status
from poetsim.units import resolve_limits


def optimise(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing = Timing.OVERLAP,
    solver: str = "highs",
    effort: float | None = None,
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
    `effort` bounds the work of the whole call in work units (`work`: about a second each on the
    reference machine), so that the same inputs give the same answer on any machine and at any
    load. `time_limit_s` is a wall-clock guard over the whole call: a call that reaches it
    returns what it has, and its message says so. Either given alone derives the other
    (`work.resolve_limits`); neither lets the call run until the incumbent is proven. `starts` are
    schedules of other strategies or baselines: the cheapest that uses only `moves` and fits
    becomes the incumbent, so the answer is never worse. `on_progress(elapsed_s, incumbent_j,
    bound_j, phase)` is called at most about once a second while the call works.

    `threads` are HiGHS's for the stage MILP (default 1: the same answer on any machine).

    `warm_start=False` solves the bare MILP (no cover, no rule-made plans, no start, no
    restricted pass): a reference for tests and benchmarks.
    """
    timing = _parse(Timing, timing)
    check_available(solver)
    effort, time_limit_s = resolve_limits(effort, time_limit_s)
    clock = Clock(time_limit_s)
    obvious = _obviously_infeasible(graph, costs, budgets)
    if obvious:
        return SolveOutcome(
            moves, timing, solver, Status.INFEASIBLE, obvious, build_s=clock.elapsed_s(), wall_s=clock.elapsed_s()
        )
    task = Task(graph, costs, budgets, moves, timing)
    settings = SolveSettings(solver, mip_rel_gap, threads or 1)
    search = Search(task, settings, effort, clock, Reporter(on_progress, clock))
    return search.run(starts) if warm_start else search.bare()


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
