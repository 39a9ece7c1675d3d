"""Rule-made schedules: keep-all, checkpoint-sqrt, Capuchin and POFO.

Each `make_*(problem)` is the maker that the strategy registry (`poetsim.strategies`) names
for its baseline: one schedule from a fixed rule, which then fits the budgets or not. Each
imports its rule when called, so that importing one rule's module loads no other.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from poetsim.schedule.model import Schedule
    from poetsim.schedule.problem import Problem


def make_keep_all(problem: "Problem") -> "Schedule":
    """Every node computed once and kept until its last reader."""
    from poetsim.optimiser.baselines import simple

    return simple.keep_all(problem.graph, problem.costs, problem.timing)[0]


def make_checkpoint_sqrt(problem: "Problem") -> "Schedule":
    """Chen et al.'s sqrt(n) segments: boundaries kept, the rest recomputed."""
    from poetsim.optimiser.baselines import simple

    return simple.checkpoint_sqrt(problem.graph, problem.costs, problem.timing)[0]


def make_capuchin(problem: "Problem") -> "Schedule":
    """Capuchin's schedule for the problem's RAM budget."""
    from poetsim.optimiser.baselines.capuchin import capuchin_schedule

    return capuchin_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing).schedule


def make_pofo(problem: "Problem") -> "Schedule":
    """POFO's fastest chain schedule for the problem's RAM budget."""
    from poetsim.optimiser.baselines.pofo import pofo_schedule

    return pofo_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing).schedule
