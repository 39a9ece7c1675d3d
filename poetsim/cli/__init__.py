"""The `poetsim` command line: parse, call the library (`poetsim.api`), show the result.

`app` is the typer app with every command registered: the catalogue (models, platforms, graph,
validate), one point (solve, simulate), a study (sweep, compare, report, paper, check) and the
PyTorch commands (import-torch, execute, profile, validate-run, train) and the device commands
(device run, device profile, device sweep).
"""

from poetsim.cli import catalogue, device, solving, study, torch, train  # noqa: F401  (each registers its commands)
from poetsim.cli.app import app

__all__ = ["app"]
