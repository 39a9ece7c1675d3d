"""Where one `optimise` call stands.

Its cheapest schedule so far, its best lower bound, and whether a cover proved that no schedule
fits.
"""

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.outcome import abs_gap_j, within_gap
from poetsim.optimiser.plans.incumbent import Candidate, Incumbent
from poetsim.optimiser.plans.plan import Plan
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing


class Standing:
    """The incumbent, the best bound (and what gave it), and an infeasibility a cover proved."""

    def __init__(self, graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing, rel_gap: float):
        self.incumbent = Incumbent(graph, costs, budgets, moves, timing)
        self.keep_all_j = costs.keep_all_energy_j(timing)
        self.rel_gap = rel_gap
        self.abs_gap_j = abs_gap_j(costs, moves, timing)
        self.bound_j: float | None = None
        self.bound_by = ""  # what gave `bound_j`, named in the outcome's message
        self.infeasible = ""  # why no schedule fits, when a cover proved it and no schedule was found

    @property
    def best(self) -> Candidate | None:
        """The cheapest fitting plan offered so far."""
        return self.incumbent.best

    @property
    def total_j(self) -> float | None:
        """The incumbent's total energy, if there is one."""
        return self.incumbent.total_j

    def offer(self, plan: Plan | None, source: str) -> bool:
        """Offer a plan to the incumbent (`Incumbent.offer`); whether it was kept."""
        return self.incumbent.offer(plan, source)

    def raise_bound(self, bound_j: float | None, by: str) -> None:
        """Take `bound_j` if it is higher than the best bound so far; `by` names what gave it."""
        if bound_j is not None and (self.bound_j is None or bound_j > self.bound_j):
            self.bound_j, self.bound_by = bound_j, by

    def refute(self, message: str) -> None:
        """A cover proved that no schedule fits: the answer, unless a schedule is known already."""
        if self.best is None:
            self.infeasible = message

    def proven(self) -> bool:
        """Whether the incumbent is within the gap settings of the best bound."""
        return (
            self.best is not None
            and self.bound_j is not None
            and within_gap(self.best.total_j, self.bound_j, self.keep_all_j, self.rel_gap, self.abs_gap_j)
        )
