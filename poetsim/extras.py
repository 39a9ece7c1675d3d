"""The optional parts of poetsim: each an install extra, and the modules that tell whether it is there.

The core (`pip install poetsim`) solves, simulates, sweeps and reports; PyTorch, the second and
third MILP solvers and the browser that the report's test drives come with extras, so that the
core installs without them. A command that needs a missing extra stops with one line naming it
(`NotInstalledError`, exit 4): the CLI's boundary turns the import that failed into that line.
"""

from dataclasses import dataclass

from poetsim.errors import NotInstalledError


@dataclass(frozen=True)
class Extra:
    """One install extra: its name in `poetsim[NAME]`, what it brings, and the modules it installs."""

    name: str
    brings: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        """The command that installs it."""
        return f"pip install 'poetsim[{self.name}]'"


#: PyTorch's CPU build: import-torch, execute, profile and validate-run.
TORCH = Extra("torch", "PyTorch", ("torch",))
#: SCIP and Gurobi, for `--solver scip` and `--solver gurobi` (HiGHS is in the core).
SOLVERS = Extra("solvers", "the SCIP and Gurobi solvers", ("pyscipopt", "gurobipy"))
#: Playwright, which drives a browser over the report in the tests.
BROWSER = Extra("browser", "Playwright", ("playwright",))
#: Every extra but the test tools.
EXTRAS = (TORCH, SOLVERS, BROWSER)


def providing(module: str | None) -> Extra | None:
    """The extra that installs the top-level package of `module`, if any does."""
    top = (module or "").partition(".")[0]
    return next((extra for extra in EXTRAS if top in extra.modules), None)


def missing(module: str | None) -> NotInstalledError | None:
    """The one-line error for a failed import of `module`, where an extra installs it."""
    extra = providing(module)
    if extra is None:
        return None
    return NotInstalledError(f"this command needs {extra.brings} ({module}), which is not installed: {extra.install}")
