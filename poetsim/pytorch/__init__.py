"""Bring your own PyTorch model: import one training step as a poetsim graph, run a schedule for real, train with it.

`from_torch` (capturing.py) imports a model as a graph, and `capture` as a Capture (the graph
with the step it was traced from), which `execute` and `validate_run` take; `execute`
(executor.py) runs one training step
instruction by instruction following a poetsim schedule; `profile_host` (host.py) measures this
machine as a platform profile; `validate_run` (validate.py) closes the loop; `scheduled` and
`fit` (training.py) train with a schedule in an ordinary loop. Everything here needs torch (the
CPU build); the CLI commands (poetsim.cli.torch, poetsim.cli.train) import torch only when one
of them runs.
"""

import importlib

_EXPORTS = {
    "from_torch": "poetsim.pytorch.capturing",
    "capture": "poetsim.pytorch.capturing",
    "execute": "poetsim.pytorch.executor",
    "profile_host": "poetsim.pytorch.host",
    "validate_run": "poetsim.pytorch.validate",
    "scheduled": "poetsim.pytorch.training",
    "fit": "poetsim.pytorch.training",
    "ScheduledModule": "poetsim.pytorch.training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Import torch-backed names on first use, so that `import poetsim.pytorch` stays cheap."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'poetsim.pytorch' has no attribute '{name}'")
