"""Set-up of each worker of a local Dask cluster (a Dask preload): Ctrl-C is the sweep's alone,
and so is the terminal.

The terminal sends Ctrl-C to every process of the foreground group, the cluster's workers
included; a worker that took it would die with a traceback while the sweep closes the cluster
itself. A worker shares the sweep's stderr, so its logs (a closed connection logged with a
traceback when the sweep stops it) would break the rule of one line per stopped sweep.
Loaded by name through `distributed.worker.preload` (see `poetsim.sweeps.dask_pool`).
"""

import logging
import signal


def dask_setup(worker) -> None:
    """Called by Dask in each worker process once it starts: ignore SIGINT, log nothing below CRITICAL."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the process's main thread: leave SIGINT as it is
        pass
