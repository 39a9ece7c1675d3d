"""What runs on a Dask worker for a sweep: each point, after a check that the worker's poetsim is
the client's; and, on a local cluster's workers, a set-up that leaves Ctrl-C and the terminal
to the sweep.

A worker of an external cluster is checked when the sweep first sees it
(`poetsim.sweeps.dask_pool`); `run_checked` checks again where the point runs, so a worker
that joins between two looks never records a row computed by another poetsim.

The terminal sends Ctrl-C to every process of the foreground group, a local cluster's workers
included; a worker that took it would die with a traceback while the sweep closes the cluster
itself. A local worker shares the sweep's stderr, so its logs (a closed connection logged with
a traceback when the sweep stops it) would break the rule of one line per stopped sweep.
`dask_setup` is loaded by name through `distributed.worker.preload` for the local cluster.
"""

import logging
import signal
from collections.abc import Callable
from typing import Any

from poetsim.errors import UnavailableError
from poetsim.sweeps.environment import Environment, here

#: What the user does about a scheduler or worker whose poetsim is not the client's.
REMEDY = (
    "install the client's poetsim, with the same Python, HiGHS and Dask, on the scheduler and every worker (docs/scale-out.md)"
)


def run_checked(function: Callable[[Any], Any], job: Any, wanted: dict[str, str]) -> Any:
    """`function(job)`, if this worker's environment is `wanted` (the client's, as `describe` says
    it); UnavailableError naming the worker and the difference otherwise."""
    difference = here().difference(Environment.parse(wanted))
    if difference:
        from distributed import get_worker

        raise UnavailableError(f"the Dask worker {get_worker().address} {difference}; {REMEDY}")
    return function(job)


def dask_setup(worker) -> None:
    """Called by Dask in each local worker process once it starts: ignore SIGINT, log nothing below CRITICAL."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the process's main thread: leave SIGINT as it is
        pass
