"""Results as tables: the headline, the energy guard and the paper's claims."""

from poetsim.strategies import COMPARE_BASELINES

__all__ = ["COMPARE_BASELINES", "GUARD_ATOL_J", "GUARD_RTOL"]

#: The guard's default tolerances: a share of the baseline's energy overhead above keep-all
#: (and of its peak RAM), and a floor in joules under which no change of energy counts.
GUARD_RTOL = 1e-3
GUARD_ATOL_J = 1e-6
