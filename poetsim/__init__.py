"""poetsim: simulate and explore energy-optimal on-device training schedules (POET).

The public API (`poetsim.api`): `load_scenario`, `solve`, `simulate`, `sweep`, `compare`, each
returning typed results (`Run`, `SweepResult`, `StrategyComparison`), `from_torch` (needs PyTorch) and
`run_on_device` (a schedule on an emulated microcontroller, `DeviceRun`; docs/device.md); the
command line is built on it. Names are imported on first use, so that `import poetsim` (and
the start of every command) stays light.
"""

import importlib

__version__ = "0.2.0"

#: Public name -> the module that defines it.
_PUBLIC = {
    "Choice": "poetsim.api",
    "StrategyComparison": "poetsim.api",
    "SweepResult": "poetsim.api",
    "compare": "poetsim.api",
    "load_scenario": "poetsim.api",
    "simulate": "poetsim.api",
    "solve": "poetsim.api",
    "sweep": "poetsim.api",
    "Run": "poetsim.pipeline",
    "ResultRow": "poetsim.runs",
    "Status": "poetsim.status",
    "from_torch": "poetsim.pytorch.capturing",
    "DeviceRun": "poetsim.device.run",
    "run_on_device": "poetsim.device.run",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        module = importlib.import_module(_PUBLIC[name])
        # Bind every public name of that module at once, so later lookups skip this hook.
        for public, source in _PUBLIC.items():
            if source == _PUBLIC[name]:
                globals()[public] = getattr(module, public)
        return globals()[name]
    raise AttributeError(f"module 'poetsim' has no attribute '{name}'")


__all__ = ["__version__", *_PUBLIC]
