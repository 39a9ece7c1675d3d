"""The MILP solvers a scenario or `--solver` may name, and what each needs on this machine.

The names are user input, checked here at the edge; `poetsim.optimiser.milp.solvers` runs them.
"""

import importlib.util
import shutil

from poetsim.errors import SolverUnavailableError, UserInputError
from poetsim.extras import SOLVERS as SOLVERS_EXTRA

#: Solver name -> (the program it runs or the Python module it imports, how to install it).
SOLVERS = {
    "highs": ("highspy", "pip install highspy"),
    "scip": ("pyscipopt", SOLVERS_EXTRA.install),
    "gurobi": ("gurobipy", SOLVERS_EXTRA.install),
    "glpk": ("glpsol", "apt install glpk-utils"),
    "cbc": ("cbc", "apt install coinor-cbc"),
}
#: The solvers that are Python modules (the others are programs on PATH).
PYTHON_SOLVERS = ("highs", "scip", "gurobi")


def known(solver: str) -> str:
    """`solver` if poetsim can run it; ValueError naming the solvers otherwise."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver '{solver}' (use {', '.join(SOLVERS)})")
    return solver


def check_available(solver: str) -> None:
    """UserInputError for an unknown name, SolverUnavailableError naming the package if missing."""
    try:
        known(solver)
    except ValueError as error:
        raise UserInputError(str(error)) from None
    needs, install = SOLVERS[solver]
    if solver in PYTHON_SOLVERS:
        if importlib.util.find_spec(needs) is None:
            raise SolverUnavailableError(f"solver '{solver}' needs the {needs} package, which is not installed ({install})")
    elif shutil.which(needs) is None:
        raise SolverUnavailableError(
            f"solver '{solver}' needs the '{needs}' program, which is not on PATH (Debian/Ubuntu: {install})"
        )
