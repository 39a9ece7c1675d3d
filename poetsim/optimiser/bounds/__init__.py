"""Lower bounds on the energy overhead: the eviction covers."""
