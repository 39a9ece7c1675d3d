"""The `poetsim` command."""
