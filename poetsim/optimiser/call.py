"""One `optimise` call as its steps see it: what is asked, how, with what budget, and where it stands."""

from dataclasses import dataclass

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.clock import Clock, Reporter
from poetsim.optimiser.shares import Shares
from poetsim.optimiser.standing import Standing
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing


@dataclass(frozen=True)
class Task:
    """What one call is asked: the graph and its costs, the budgets, the moves allowed, the timing."""

    graph: TrainingGraph
    costs: CostTable
    budgets: Budgets
    moves: Moves
    timing: Timing


@dataclass(frozen=True)
class SolveSettings:
    """How the call's MILP runs are stopped: the solver, its relative gap (of the overhead above keep-all) and its threads."""

    solver: str
    mip_rel_gap: float
    threads: int


@dataclass(frozen=True)
class Call:
    """What every step of one call shares.

    The task, the settings, the shares of its effort, the call's whole allowance and its clock (the
    guard), its progress report and its standing (which the steps update).
    """

    task: Task
    settings: SolveSettings
    shares: Shares
    allowance: Allowance
    clock: Clock
    report: Reporter
    standing: Standing

    def note(self, phase: str) -> None:
        """Report progress in `phase` with the standing's figures."""
        self.report(phase, self.standing.total_j, self.standing.bound_j)

    def done(self) -> bool:
        """Whether the search is over: the incumbent proven, no schedule possible, or the effort spent."""
        return self.standing.proven() or bool(self.standing.infeasible) or self.allowance.over()
