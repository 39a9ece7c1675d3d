"""The optimiser: POET's MILP (stage formulation), its solvers, and the rule-based baselines.

Only `pyomo_model` imports Pyomo; the rows of the MILP are stated once in `formulation`.
"""

from poetsim.optimiser.baselines.simple import checkpoint_sqrt, keep_all
from poetsim.optimiser.optimise import optimise, write_lp
from poetsim.optimiser.outcome import SolveOutcome, require_feasible

__all__ = ["SolveOutcome", "checkpoint_sqrt", "keep_all", "optimise", "require_feasible", "write_lp"]
