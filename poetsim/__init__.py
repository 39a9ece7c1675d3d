"""poetsim: simulate and explore energy-optimal on-device training schedules (POET).

The public API (`poetsim.api`): `load_scenario`, `solve`, `simulate`, `sweep`, `compare`, each
returning typed results (`Run`, `SweepResult`, `Comparison`); the command line is built on it.
"""

__version__ = "0.2.0"

from poetsim.api import Choice, Comparison, SweepResult, compare, load_scenario, simulate, solve, sweep  # noqa: E402
from poetsim.pipeline import Run  # noqa: E402
from poetsim.runs import ResultRow  # noqa: E402
from poetsim.status import Status  # noqa: E402



def __getattr__(name: str):
    """`poetsim.from_torch`, imported on first use: it needs PyTorch, which nothing else does."""
    if name == "from_torch":
        from poetsim.pytorch.capture import from_torch

        return from_torch
    raise AttributeError(f"module 'poetsim' has no attribute '{name}'")


__all__ = ["Choice", "Comparison", "ResultRow", "Run", "Status", "SweepResult", "__version__", "compare",
           "load_scenario", "simulate", "solve", "sweep"]
