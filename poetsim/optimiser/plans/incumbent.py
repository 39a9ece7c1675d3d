"""The best schedule found so far in one `optimise` call, whoever found it.

Plans come from several places: keep-all, the plan made from the cover's choice, other
strategies' schedules handed in as starts, the greedy, the restricted solve and the full solve.
Each is judged by the model's own accounting (`plan.figures`) and kept if it uses only the
allowed moves, fits the budgets and costs less than the best so far. So the returned schedule is
never worse than any plan that was tried, whatever the solver does with it.
"""

from dataclasses import dataclass

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.plans.plan import Plan, figures
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Figures, Moves, Timing


@dataclass(frozen=True)
class Candidate:
    """A plan that fits, its figures, and where it came from (for the outcome's message)."""

    plan: Plan
    figures: Figures
    source: str

    @property
    def total_j(self) -> float:
        """The plan's total energy by the model, in joules."""
        return self.figures.total_j


class Incumbent:
    """Keeps the cheapest fitting plan offered so far."""

    def __init__(self, graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing):
        self._graph, self._costs, self._budgets, self._moves, self._timing = graph, costs, budgets, moves, timing
        self.best: Candidate | None = None

    def offer(self, plan: Plan | None, source: str) -> bool:
        """Keep `plan` if it is allowed, fits and is cheaper than the best; whether it was kept."""
        if plan is None or not self._moves.allows(plan.moves):
            return False
        fig = figures(plan, self._graph, self._costs, self._timing)
        if not self._budgets.fits(fig):
            return False
        if self.best is not None and fig.total_j >= self.best.total_j:
            return False
        self.best = Candidate(plan, fig, source)
        return True

    @property
    def total_j(self) -> float | None:
        """The best plan's total energy in joules; None before any plan was kept."""
        return None if self.best is None else self.best.total_j
