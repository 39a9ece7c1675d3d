"""What one `optimise` call returns, and the rules that read it.

When a gap is closed, how small a decision is, and what an infeasibility says.
"""

from dataclasses import dataclass

from poetsim.errors import InfeasibleBudgetError, PoetsimError
from poetsim.graphs.graph import TrainingGraph
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Figures, Moves, Schedule, Timing
from poetsim.status import Status


@dataclass(frozen=True)
class SolveOutcome:
    """One solve: status, schedule, its predicted figures, and what is proven about it.

    Energies are joules of one iteration. `gap_overhead` relates the proven gap to the energy
    above keep-all, the only part a schedule can change: it is the figure to read (a 0.03 %
    gap on the total can be a 28 % gap on the overhead, docs/optimiser.md).
    """

    moves: Moves
    timing: Timing
    solver: str
    status: Status  # OPTIMAL, FEASIBLE (a schedule with a gap), INFEASIBLE or NO_SOLUTION
    message: str
    schedule: Schedule | None = None
    predicted: Figures | None = None  # the model's figures of the returned schedule
    objective_j: float | None = None  # total energy of the returned schedule per the model
    bound_j: float | None = None  # best proven lower bound on total energy (the solver's or the cover's)
    gap_total: float | None = None  # (objective - bound) / objective
    gap_overhead: float | None = None  # (objective - bound) / (objective - keep-all energy)
    build_s: float = 0.0  # everything before the first solver run: cover, plans, model build
    handoff_s: float = 0.0
    solve_s: float = 0.0  # the solver runs (restricted and full)
    num_variables: int = 0
    num_constraints: int = 0
    found_by: str = ""  # where the returned schedule came from (cover, a start, solver, ...)
    cover_bound_j: float | None = None  # the eviction cover's bound on the total energy
    wall_s: float = 0.0  # the whole call
    work: float = 0.0  # the work units the whole call used (`work`: the same on any machine)


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


def within_gap(objective_j: float, bound_j: float, keep_all_j: float, rel_gap: float, abs_gap: float) -> bool:
    """Whether a schedule of `objective_j` is proven optimal by `bound_j`.

    The gap is at most `rel_gap` of its overhead above keep-all plus `abs_gap` joules.
    """
    return objective_j - bound_j <= rel_gap * max(objective_j - keep_all_j, 0.0) + abs_gap


def abs_gap_j(costs: CostTable, moves: Moves, timing: Timing) -> float:
    """A thousandth of the cheapest decision in joules: below it two schedules are one."""
    prices: list[float] = []
    if moves.recompute:
        prices += costs.compute_j
    if moves.page:
        prices += costs.page_in_j + costs.page_out_j
    positive = [p for p in prices if p > 0]
    return 1e-3 * min(positive) if positive else 1e-12


def infeasible_message(graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves) -> str:
    """The solver proved infeasibility: say what is known to be feasible instead."""
    return (
        f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM within "
        f"{budgets.runtime_s:.6g} s ({budgets.runtime_s / costs.plain_runtime_s:.3g}x); keep-all fits "
        f"{graph.keep_all_peak_bytes:,} bytes at 1x, and no schedule fits below {graph.min_feasible_ram_bytes:,} bytes"
    )


def pct(share: float | None) -> str:
    """A share as a percentage of three significant digits, or "unknown"."""
    return "unknown" if share is None else f"{100 * share:.3g} %"
