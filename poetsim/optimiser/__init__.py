"""The optimiser: POET's MILP (stage formulation), its solvers, and the rule-based baselines.

Only `pyomo_model` imports Pyomo; the rows of the MILP are stated once in `formulation`. The
names below are imported when first used, so that a process which needs one submodule (the
HiGHS process imports `milp.program` alone) does not load the whole search.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from poetsim.optimiser.baselines.simple import checkpoint_sqrt, keep_all
    from poetsim.optimiser.optimise import optimise, write_lp
    from poetsim.optimiser.outcome import SolveOutcome, require_feasible

__all__ = ["SolveOutcome", "checkpoint_sqrt", "keep_all", "optimise", "require_feasible", "write_lp"]

#: The module that defines each public name.
_HOMES = {
    "SolveOutcome": "poetsim.optimiser.outcome",
    "checkpoint_sqrt": "poetsim.optimiser.baselines.simple",
    "keep_all": "poetsim.optimiser.baselines.simple",
    "optimise": "poetsim.optimiser.optimise",
    "require_feasible": "poetsim.optimiser.outcome",
    "write_lp": "poetsim.optimiser.optimise",
}


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'poetsim.optimiser' has no attribute '{name}'")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
