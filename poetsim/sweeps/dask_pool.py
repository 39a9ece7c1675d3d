"""Sweep points on a Dask distributed cluster, with the interface of `poetsim.sweeps.workers.ProcessPool`.

Without a scheduler address a local cluster is started (worker processes, one thread each).
What can go wrong with a cluster, and what happens:

- a worker dies while running a point: Dask runs the point again elsewhere; once it has
  killed `allowed-failures` + 1 workers (2 on the local cluster, the scheduler's own setting
  otherwise) it is reported as `Died` and the sweep records it as `failed`;
- no worker at all (all killed, or none ever joined an external scheduler): after
  `no_worker_wait_s` the pool raises UnavailableError naming the scheduler, instead of
  waiting for ever;
- the scheduler goes away: UnavailableError naming it.
"""

import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Hashable
from multiprocessing import resource_tracker
from typing import Any

from poetsim.errors import UnavailableError
from poetsim.sweeps.workers import MAX_DEATHS, Died, Raised, sigint_blocked

#: How long a sweep waits for a Dask worker to appear before it gives up.
NO_WORKER_WAIT_S = 60.0
#: How often the scheduler is asked how many workers it has.
_WORKER_CHECK_S = 1.0


class DaskPool:
    """Points as Dask futures: `submit(tag, job)`, `collect(timeout_s)`, `close()` (see ProcessPool)."""

    def __init__(
        self,
        function: Callable[[Any], Any],
        workers: int,
        scheduler: str | None = None,
        no_worker_wait_s: float = NO_WORKER_WAIT_S,
    ):
        import dask
        from dask.distributed import Client, LocalCluster

        self._function = function
        self._wait_s = no_worker_wait_s
        self._token = uuid.uuid4().hex[:8]
        self._futures: dict = {}
        self._cluster = None
        self._own_processes: set[int] = set()
        try:
            if scheduler:
                self._client = Client(scheduler, timeout="10s")
            else:
                resource_tracker.ensure_running()  # ours, not the cluster's: never to be killed
                before = _child_pids()
                # The cluster's workers ignore SIGINT once started (`poetsim.sweeps.dask_worker`), so
                # Ctrl-C reaches only the sweep, which then closes the cluster itself; SIGINT is
                # held back from them meanwhile where their start inherits the block.
                settings = {
                    "distributed.scheduler.allowed-failures": MAX_DEATHS - 1,
                    "distributed.worker.preload": ["poetsim.sweeps.dask_worker"],
                }
                with dask.config.set(settings), sigint_blocked():
                    self._cluster = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,
                    )
                self._own_processes = _child_pids() - before
                # `silence_logs` holds only while the cluster starts; its scheduler runs in this
                # process and logs closed connections, with tracebacks, when a sweep stops.
                logging.getLogger("distributed").setLevel(logging.CRITICAL)
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as exc:
            self._close_cluster()
            raise UnavailableError(f"--scheduler: cannot reach the Dask scheduler {scheduler} ({_one_line(exc)})") from None
        self.address = self._client.scheduler.address
        self._name = f"the Dask scheduler {scheduler}" if scheduler else f"the local Dask cluster's scheduler {self.address}"
        self._checked_at = 0.0
        self._no_worker_since: float | None = None

    def submit(self, tag: Hashable, job: Any) -> None:
        try:  # the key names the point on the dashboard; the token keeps two sweeps' keys apart
            future = self._client.submit(self._function, job, key=f"poetsim {tag} {self._token}", pure=False)
        except (OSError, TimeoutError) as exc:
            raise self._lost(exc) from None
        self._futures[future] = (tag, job)

    def collect(self, timeout_s: float, dispatch: bool = True) -> list[tuple[Hashable, Any, Any]]:
        """Points whose futures ended within `timeout_s`: their tags, jobs and outcomes."""
        from dask.distributed import wait as dask_wait
        from distributed import KilledWorker

        if not self._futures:
            return []
        try:
            done = dask_wait(list(self._futures), timeout=timeout_s, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            done = set()
        except OSError as exc:
            raise self._lost(exc) from None
        if not done:
            self._check_workers()
        ended = []
        for future in done:
            tag, job = self._futures.pop(future)
            if future.status == "finished":
                outcome = future.result()
            elif future.status == "error":
                error = future.exception()
                outcome = (
                    Died(f"its Dask worker died each time it ran ({_one_line(error)})")
                    if isinstance(error, KilledWorker)
                    else Raised(error)
                )
            else:
                outcome = Died(f"its Dask future ended as {future.status}")
            ended.append((tag, job, outcome))
        return ended

    def close(self) -> None:
        """Cancel what is left, then close the client and any local cluster.

        A local cluster's worker processes that are still running points are killed first: a
        Dask worker cannot stop a running task, and would hold the cluster's close (and the
        exit of the sweep) until the point's solve ends.
        """
        busy = bool(self._futures)
        try:
            if busy:
                self._client.cancel(list(self._futures))
            self._client.close(timeout=2)
        except (OSError, TimeoutError):
            pass
        self._futures.clear()
        if busy and self._cluster is not None:
            for nanny in getattr(self._cluster, "workers", {}).values():
                nanny.auto_restart = False
            for pid in self._own_processes & _child_pids():
                _kill(pid)
        self._close_cluster()

    def __enter__(self) -> "DaskPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_workers(self) -> None:
        """UnavailableError once the scheduler has had no worker for `no_worker_wait_s`."""
        now = time.monotonic()
        if now - self._checked_at < _WORKER_CHECK_S:
            return
        self._checked_at = now
        try:
            workers = len(self._client.nthreads())
        except (OSError, TimeoutError) as exc:
            raise self._lost(exc) from None
        if workers:
            self._no_worker_since = None
            return
        self._no_worker_since = self._no_worker_since or now
        if now - self._no_worker_since >= self._wait_s:
            raise UnavailableError(f"{self._name} has had no worker for {self._wait_s:g} s")

    def _lost(self, exc: BaseException) -> UnavailableError:
        return UnavailableError(f"lost {self._name} ({_one_line(exc)})")

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            try:
                self._cluster.close(timeout=2)
            except (OSError, TimeoutError):
                pass
            self._cluster = None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _child_pids() -> set[int]:
    """This process's children (a local cluster's worker processes among them)."""
    import psutil  # a dependency of Dask distributed

    return {child.pid for child in psutil.Process().children()}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
