"""Results as tables: the headline, the energy guard and the paper's claims."""

from poetsim import strategies

#: The rule-made baselines `poetsim compare` adds at every point beside the scenario's own
#: strategies, so that every headline row shows the reference it is measured against.
COMPARE_BASELINES = (strategies.KEEP_ALL.name, strategies.CHECKPOINT_SQRT.name)

#: The guard's default tolerances: a share of the baseline's energy overhead above keep-all
#: (and of its peak RAM), and a floor in joules under which no change of energy counts.
GUARD_RTOL = 1e-3
GUARD_ATOL_J = 1e-6
