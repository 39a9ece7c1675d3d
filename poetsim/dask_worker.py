"""Set-up of each worker of a local Dask cluster (a Dask preload): Ctrl-C is the sweep's alone.

The terminal sends Ctrl-C to every process of the foreground group, the cluster's workers
included; a worker that took it would die with a traceback while the sweep closes the cluster
itself. Loaded by name through `distributed.worker.preload` (see `poetsim.dask_pool`).
"""

import signal


def dask_setup(worker) -> None:
    """Called by Dask in each worker process once it starts: ignore SIGINT from then on."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:   # not the process's main thread: leave SIGINT as it is
        pass
