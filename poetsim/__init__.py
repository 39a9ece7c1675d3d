"""poetsim: simulate and explore energy-optimal on-device training schedules (POET)."""

__version__ = "0.1.0"
