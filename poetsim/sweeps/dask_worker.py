"""What runs on a Dask worker for a sweep: each point, and a local worker's set-up.

Each point runs after a check that the worker's poetsim is the client's; on a local cluster's
workers, a set-up leaves Ctrl-C and the terminal to the sweep.

A point travels as bytes (the pickled function and job) with a small function that Dask sends
by value (`poetsim.sweeps.dask_pool.point_task`), so neither the scheduler nor a worker needs
poetsim to unpickle the task: the scheduler needs only Dask, and a worker whose poetsim is
missing or not the client's answers "refused" (`run_job`) instead of dying on a task it cannot
read. The sweep then names the worker and what differs, and stops.

The terminal sends Ctrl-C to every process of the foreground group, a local cluster's workers
included; a worker that took it would die with a traceback while the sweep closes the cluster
itself. A local worker shares the sweep's stderr, so its logs (a closed connection logged with
a traceback when the sweep stops it) would break the rule of one line per stopped sweep.
`dask_setup` is loaded by name through `distributed.worker.preload` for the local cluster.
"""

import contextlib
import logging
import pickle
import signal
from typing import Any

from poetsim.sweeps.environment import Environment, here

#: What the user does about a worker whose poetsim is not the client's.
REMEDY = "install the client's poetsim, with the same Python, HiGHS and Dask, on every worker (docs/scale-out.md)"
#: The first item of a point task's answer: the point's outcome follows, or this worker's address.
DONE, REFUSED = "done", "refused"


def run_job(payload: bytes, wanted: dict[str, str]) -> tuple[str, Any]:
    """Run a point's job if this worker's environment is `wanted`; else refuse it.

    `payload` is the pickle of (function, job); the answer is (DONE, function(job)) if this
    worker's environment is the client's, as `describe` says it, and (REFUSED, this worker's
    address) otherwise.
    """
    if here().difference(Environment.parse(wanted)):
        from distributed import get_worker

        return REFUSED, get_worker().address
    function, job = pickle.loads(payload)
    return DONE, function(job)


def dask_setup(worker) -> None:
    """Called by Dask in each local worker process once it starts: ignore SIGINT, log nothing below CRITICAL."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    with contextlib.suppress(ValueError):  # not the process's main thread: leave SIGINT as it is
        signal.signal(signal.SIGINT, signal.SIG_IGN)
