"""Sweep points on a Dask distributed cluster, with the interface of `poetsim.sweeps.workers.ProcessPool`.

Without a scheduler address a local cluster is started (worker processes, one thread each).
With one, the sweep is a client of that cluster: its workers compute points and send each back
whole, and the client alone writes (`poetsim.sweeps.point`), so workers need no shared file
system, only the client's poetsim. What can go wrong with a cluster, and what happens (one
line; exit 69 unless said):

- an address that is not one (`notanaddress`, the dashboard's `http://host:8787`): refused
  before anything else (`scheduler_address`, exit 2);
- a scheduler that does not answer within `CONNECT_TIMEOUT_S`: UnavailableError naming it,
  before anything is written;
- a worker whose poetsim is not the client's (another version, other source files, none at
  all), or whose Python, HiGHS or Dask differ: UnavailableError naming it and both versions,
  as soon as the sweep sees it (at connect, or when it joins), by
  `poetsim.sweeps.environment.describe` sent by value, so that it runs without poetsim. A
  point's task is sent as bytes with a function sent by value (`point_task`): a worker handed
  a point before it was checked answers "refused" instead of dying on it, and no row ever
  comes from such a worker. The scheduler needs no poetsim (it passes points on as bytes),
  only the client's Python and Dask, checked at connect;
- a worker dies while running a point: Dask runs the point again elsewhere; once it has
  killed `allowed-failures` + 1 workers (2 on the local cluster, the scheduler's own setting
  otherwise) it is reported as `Died` and the sweep records it as `failed`;
- no worker at all (all killed, or none ever joined): after `no_worker_wait_s`, UnavailableError;
- the scheduler goes away: UnavailableError naming it, as soon as the connection drops.

`close` (at the end, on Ctrl-C, on an error) cancels every future of this sweep on the
cluster, so no queued point starts. Dask cannot stop a task that is running: a point running
on a worker of an external cluster goes on to its end (its time limit at most), and its answer
is dropped; it writes nothing. A local cluster's busy workers are killed instead.
"""

import contextlib
import dataclasses
import logging
import os
import pickle
import queue
import signal
import time
import uuid
import warnings
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import CancelledError
from multiprocessing import resource_tracker
from typing import Any

from poetsim.errors import PoetsimError, UnavailableError, UserInputError
from poetsim.sweeps import environment
from poetsim.sweeps.dask_worker import DONE, REFUSED, REMEDY
from poetsim.sweeps.workers import MAX_DEATHS, Died, Raised, sigint_blocked

#: How long a sweep waits for a Dask worker to appear before it gives up.
NO_WORKER_WAIT_S = 60.0
#: How long connecting to an external scheduler may take.
CONNECT_TIMEOUT_S = 10.0
#: How often the scheduler is asked which workers it has (new ones are checked then).
_WORKER_CHECK_S = 1.0
#: The protocols Dask schedulers speak (`distributed.comm`); `HOST:PORT` alone means tcp.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS_HELP = "use tcp://HOST:PORT, the address `dask scheduler` prints (port 8786 by default)"


def scheduler_address(text: str) -> str:
    """The address to connect to, `scheme://host:port`, from `--scheduler`; UserInputError if it is not one.

    Checked before anything starts, so a typo costs no cluster start and writes nothing.
    """
    scheme, separator, rest = text.strip().partition("://")
    if not separator:
        scheme, rest = "tcp", text.strip()
    if scheme in ("http", "https"):
        raise UserInputError(
            f"--scheduler: '{text}' is a web address (the dashboard's), not the Dask scheduler's; {_ADDRESS_HELP}"
        )
    if scheme not in SCHEMES:
        known = ", ".join(SCHEMES)
        raise UserInputError(f"--scheduler: '{text}': unknown protocol {scheme}:// (Dask speaks {known}); {_ADDRESS_HELP}")
    host, colon, port = rest.rpartition(":")
    if not colon or not host:
        missing = "no host" if colon else ("no port" if rest else "no host and port")
        raise UserInputError(f"--scheduler: '{text}' is not a Dask scheduler address ({missing}); {_ADDRESS_HELP}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        what = f"port {port} is not one from 1 to 65535" if port else "no port"
        raise UserInputError(f"--scheduler: '{text}' is not a Dask scheduler address ({what}); {_ADDRESS_HELP}")
    return f"{scheme}://{rest}"


class DaskPool:
    """Points as Dask futures: `submit(tag, job)`, `collect(timeout_s)`, `close()` (see ProcessPool).

    `scheduler` is an address checked by `scheduler_address`; None starts a local cluster of
    `workers` processes.
    """

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
        self._futures: dict[Any, tuple[Any, Hashable, Any]] = {}  # by Dask key
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._cluster = None
        self._own_processes: set[int] = set()
        self._wanted = environment.here()
        self._wanted_fields = dataclasses.asdict(self._wanted)  # plain: no poetsim needed to read it
        self._task = point_task()
        self._checked: set[str] = set()
        self._error: UnavailableError | None = None
        _quiet_dask_logs()
        try:
            if scheduler:
                self._client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S:g}s", set_as_default=False)
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
                with dask.config.set(settings), sigint_blocked(), warnings.catch_warnings():
                    # Its scheduler's HTTP server (no dashboard) takes another port when 8787 is taken.
                    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
                    self._cluster = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,
                    )
                self._own_processes = _child_pids() - before
                _quiet_dask_logs()  # `silence_logs` held only while it started
                self._client = Client(self._cluster, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            self._close_cluster()
            where = f"reach the Dask scheduler {scheduler}" if scheduler else "start a local Dask cluster"
            raise UnavailableError(f"cannot {where} ({_one_line(exc)})") from None
        scheduler_rpc = self._client.scheduler
        assert scheduler_rpc is not None  # a client that has connected knows its scheduler
        self.address = scheduler_rpc.address
        self._name = f"the Dask scheduler {scheduler}" if scheduler else f"the local Dask cluster's scheduler {self.address}"
        self._checked_at = 0.0
        self._no_worker_since: float | None = None
        try:
            self._check_scheduler()
            self._check_workers()
        except BaseException:
            self.close()
            raise

    def submit(self, tag: Hashable, job: Any) -> None:
        """Send `job` to the cluster as a task named after `tag`; its outcome comes back from `collect`."""
        key = f"poetsim {tag} {self._token}"  # names the point on the dashboard; the token keeps two sweeps' keys apart
        payload = pickle.dumps((self._function, job))
        try:
            future = self._client.submit(self._task, payload, self._wanted_fields, key=key, pure=False)
        except (OSError, TimeoutError, CancelledError) as exc:
            raise self._lost(timed_out=isinstance(exc, TimeoutError)) from None
        self._futures[future.key] = (future, tag, job)
        future.add_done_callback(self._done.put)

    def collect(self, timeout_s: float, dispatch: bool = True) -> list[tuple[Hashable, Any, Any]]:
        """Points whose futures ended within `timeout_s`: their tags, jobs and outcomes.

        An outcome is the point's answer, `Died` (its workers died each time), or `Raised` (an
        error to raise: a PoetsimError from the point, or UnavailableError for a worker that
        could not run it). Raises UnavailableError when the scheduler is gone, or has had no
        worker for `no_worker_wait_s`.
        """
        if self._error is not None:
            raise self._error
        if not self._futures:
            return []
        ended = []
        try:
            ended.append(self._done.get(block=timeout_s > 0, timeout=timeout_s if timeout_s > 0 else None))
            while True:
                ended.append(self._done.get_nowait())
        except queue.Empty:
            pass
        found = []
        try:
            for future in ended:
                entry = self._futures.pop(future.key, None)
                if entry is None or entry[0] is not future:
                    continue  # a future collected already, whose data Dask computed again
                _, tag, job = entry
                found.append((tag, job, self._outcome(future)))
            if dispatch:  # not while the sweep stops: it must not wait on the scheduler then
                self._check_workers()
        except UnavailableError as exc:
            if not found:
                raise
            self._error = exc  # raised at the next call: the points found first are recorded
        return found

    def close(self) -> None:
        """Cancel this sweep's futures on the cluster, then close the client and any local cluster.

        A local cluster's worker processes that are still running points are killed first: a
        Dask worker cannot stop a running task, and would hold the cluster's close (and the
        exit of the sweep) until the point's solve ends.
        """
        busy = [entry[0] for entry in self._futures.values()]
        self._futures.clear()
        client = getattr(self, "_client", None)
        if client is not None:
            with contextlib.suppress(OSError, TimeoutError, CancelledError):
                if busy and client.status == "running":
                    client.cancel(busy, force=True)
            with contextlib.suppress(OSError, TimeoutError, CancelledError):
                client.close(timeout=2)
        if busy and self._cluster is not None:
            for nanny in getattr(self._cluster, "workers", {}).values():
                nanny.auto_restart = False
            for pid in self._own_processes & _child_pids():
                _kill(pid)
        self._close_cluster()

    def __enter__(self) -> "DaskPool":
        """The pool itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc) -> None:
        """Close the pool, as `close` does."""
        self.close()

    def _outcome(self, future) -> Any:
        """What an ended future means for its point (see `collect`)."""
        from distributed import KilledWorker

        if future.status == "cancelled":
            if self._client.status != "running":
                raise self._lost()
            return Died("its Dask task was cancelled on the cluster (by another client, or a restart of the scheduler)")
        try:
            if future.status == "finished":
                kind, answer = future.result()
                future.release()  # the cluster forgets it: never computed again for this sweep
                if kind == DONE:
                    return answer
                return Raised(self._refusal(answer))
            error = future.exception()
        except (OSError, TimeoutError, CancelledError) as exc:
            raise self._lost(timed_out=isinstance(exc, TimeoutError)) from None
        future.release()
        if isinstance(error, KilledWorker):
            return Died(f"its Dask worker died each time it ran ({_one_line(error)})")
        if isinstance(error, PoetsimError):
            return Raised(error)
        cause = f"{type(error).__name__}: {_one_line(error)}"
        return Raised(UnavailableError(f"the Dask cluster could not run a point ({cause}); {REMEDY}"))

    def _check_workers(self) -> None:
        """Check the workers that joined since the last look.

        UnavailableError once the scheduler is gone, or has had no worker for
        `no_worker_wait_s`.
        """
        now = time.monotonic()
        if now - self._checked_at < _WORKER_CHECK_S:
            return
        self._checked_at = now
        if self._client.status != "running":
            raise self._lost()
        try:
            workers = set(self._client.nthreads())
        except (OSError, TimeoutError, CancelledError) as exc:
            raise self._lost(timed_out=isinstance(exc, TimeoutError)) from None
        self._check_environments(workers - self._checked)
        if workers:
            self._no_worker_since = None
            return
        self._no_worker_since = self._no_worker_since or now
        if now - self._no_worker_since >= self._wait_s:
            raise UnavailableError(f"{self._name} has had no worker for {self._wait_s:g} s")

    def _check_scheduler(self) -> None:
        """UnavailableError if the scheduler's Python or Dask is not the client's.

        The scheduler needs no poetsim: points pass it as bytes.
        """
        answer = self._by_value(lambda describe: self._client.run_on_scheduler(describe))
        difference = environment.Environment.parse(answer).difference(self._wanted, poetsim=False)
        if difference:
            raise UnavailableError(f"{self._name} {difference}; run it with the client's Python and Dask")

    def _refusal(self, address: str) -> UnavailableError:
        """The error for a worker that refused a point: what differs there, as its check says."""
        self._checked.discard(address)
        try:
            self._check_environments([address])
        except UnavailableError as exc:
            return exc
        return UnavailableError(f"the Dask worker {address} refused a point: its poetsim is not the client's; {REMEDY}")

    def _check_environments(self, workers: Iterable[str]) -> None:
        """UnavailableError naming the first of `workers` whose poetsim (or Python, HiGHS, Dask) is not the client's."""
        workers = sorted(workers)
        if not workers:
            return
        answers = self._by_value(lambda describe: self._client.run(describe, workers=workers, on_error="return"))
        for address, answer in sorted(answers.items()):
            if isinstance(answer, OSError):
                continue  # it went away meanwhile; if it comes back, it is checked then
            if isinstance(answer, BaseException):
                difference: str | None = f"cannot run poetsim's check ({type(answer).__name__}: {_one_line(answer)})"
            else:
                difference = environment.Environment.parse(answer).difference(self._wanted)
            if difference:
                raise UnavailableError(f"the Dask worker {address} {difference}; {REMEDY}")
            self._checked.add(address)

    def _by_value(self, call: Callable[[Callable[[], dict[str, str]]], Any]) -> Any:
        """`call(describe)`, with `describe` sent by value.

        A process without poetsim (or with another one) still runs it, and says so.
        """
        import cloudpickle

        cloudpickle.register_pickle_by_value(environment)
        try:
            return call(environment.describe)
        except (OSError, TimeoutError, CancelledError) as exc:
            raise self._lost(timed_out=isinstance(exc, TimeoutError)) from None
        finally:
            cloudpickle.unregister_pickle_by_value(environment)

    def _lost(self, timed_out: bool = False) -> UnavailableError:
        """The scheduler gone, in words: it stopped answering, or its connection closed."""
        how = "it stopped answering" if timed_out else "its connection closed"
        return UnavailableError(f"lost {self._name}: {how}")

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            with contextlib.suppress(OSError, TimeoutError):
                self._cluster.close(timeout=2)
            self._cluster = None


def point_task() -> Callable[[bytes, dict[str, str]], tuple[str, Any]]:
    """The function each point's Dask task runs.

    It is `poetsim.sweeps.dask_worker.run_job` where the worker can import it; (REFUSED, the
    worker's address) where it cannot.

    Made here, inside a function, so that Dask sends it by value (a nested function cannot be
    pickled by name): neither the scheduler nor a worker without poetsim then needs poetsim
    to read a point's task, and such a worker answers instead of dying on it.
    """

    def run_point_task(payload: bytes, wanted: dict[str, str]) -> tuple[str, Any]:
        try:
            from poetsim.sweeps.dask_worker import run_job
        except Exception:  # noqa: BLE001 - no poetsim, or another one: the client asks what there is
            from distributed import get_worker

            return REFUSED, get_worker().address  # a string: sent by value with the function
        return run_job(payload, wanted)

    return run_point_task


def _quiet_dask_logs() -> None:
    """Silence Dask's loggers below CRITICAL in this process.

    Dask logs a dropped connection with tracebacks (a lost scheduler: about a hundred lines),
    each from a logger of its own level (`distributed.client` among them); the sweep says what
    happened in one line instead.
    """
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _child_pids() -> set[int]:
    """This process's children (a local cluster's worker processes among them)."""
    import psutil  # a dependency of Dask distributed

    return {child.pid for child in psutil.Process().children()}


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
