"""Worker processes that run a sweep's points: one job at a time each, and never outliving the sweep.

Why not `concurrent.futures.ProcessPoolExecutor`: it cannot end its workers at once (leaving
its `with` block waits for every running job, minutes of solving), it does not say which job a
dead worker was running (every job then fails), and its workers take Ctrl-C as their own.
Here:

- a worker ignores SIGINT, so Ctrl-C (sent by the terminal to the whole process group) reaches
  only the sweep, which decides what to keep; SIGINT is blocked in the parent while a worker
  starts, so the worker's Python never sees one before it ignores them;
- a worker dies with its parent, however the parent ends (SIGKILL included): on Linux the
  kernel sends it SIGKILL when the parent exits (`prctl(PR_SET_PDEATHSIG)`), and a watchdog
  thread checks the parent's pid every second where that is not available;
- `close` ends every worker within about a second (SIGTERM, then SIGKILL);
- a job whose worker dies (killed, out of memory, crashed) runs again once in a fresh worker;
  a second death is reported as `Died`, so the caller can record the job as failed and go on.
"""

import contextlib
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from multiprocessing import connection, get_context, resource_tracker
from typing import Any

from poetsim.errors import InternalError
from poetsim.processes import die_with_parent

#: How many times a job may lose its worker before it is given up as `Died`.
MAX_DEATHS = 2
#: How long `close` waits after SIGTERM before it sends SIGKILL.
TERM_GRACE_S = 1.0


@dataclass(frozen=True)
class Died:
    """A job given up because its worker died each time it ran (`MAX_DEATHS` times); `message` says how."""

    message: str


def death_message(exitcode: int | None, deaths: int) -> str:
    """'its worker process died 2 times (last killed by SIGKILL, perhaps for lack of memory)'."""
    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
        if exitcode == -signal.SIGKILL:
            how += ", perhaps for lack of memory"
    else:
        how = f"exit code {exitcode}"
    return f"its worker process died {deaths} times (last {how})"


@dataclass(frozen=True)
class Raised:
    """A job that raised: the exception, to be raised again by the caller."""

    error: BaseException


class _Worker:
    """One worker process, its end of the pipe, and the job it is running (if any)."""

    def __init__(self, context, function: Callable[[Any], Any]):
        parent_end, child_end = context.Pipe(duplex=True)
        self.process = context.Process(target=_serve, args=(child_end, function, os.getpid()), daemon=True, name="poetsim-worker")
        _start_without_sigint(self.process)
        child_end.close()
        self.conn = parent_end
        self.job: tuple[Hashable, Any] | None = None

    def end(self) -> None:
        """SIGTERM (the worker's default action is to end at once), SIGKILL after a grace."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(TERM_GRACE_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(TERM_GRACE_S)
        self.conn.close()


class ProcessPool:
    """Up to `size` worker processes running `function(job)` (a picklable, module-level function).

    `submit(tag, job)` queues a job; `collect(timeout_s)` returns `(tag, job, outcome)` for the
    jobs that ended, where outcome is the function's return value, `Raised` or `Died`. Use it
    as a context manager, or call `close`: the workers end there, whatever they were doing.
    """

    def __init__(self, size: int, function: Callable[[Any], Any]):
        self._size = max(1, size)
        self._function = function
        self._context = get_context("spawn")
        # Start multiprocessing's resource tracker now: started inside `_start_without_sigint`,
        # it would unblock SIGINT there, and a worker could then start without the block.
        resource_tracker.ensure_running()
        self._workers: list[_Worker] = []
        self._queue: deque[tuple[Hashable, Any]] = deque()
        self._deaths: dict[Hashable, int] = {}

    def submit(self, tag: Hashable, job: Any) -> None:
        """Queue `job` under `tag`; it starts on the first free worker."""
        self._queue.append((tag, job))
        self._dispatch()

    @property
    def busy(self) -> int:
        """Jobs queued or running."""
        return len(self._queue) + sum(w.job is not None for w in self._workers)

    def collect(self, timeout_s: float, dispatch: bool = True) -> list[tuple[Hashable, Any, Any]]:
        """Wait up to `timeout_s` for jobs to end; their tags, jobs and outcomes.

        A job whose worker died is queued again (up to `MAX_DEATHS`); with `dispatch` false
        (a sweep that is stopping), no queued job is started.
        """
        running = [w for w in self._workers if w.job is not None]
        if not running:
            return []
        waitables = [w.conn for w in running] + [w.process.sentinel for w in running]
        ready = set(connection.wait(waitables, timeout_s))
        ended = []
        for worker in running:
            if worker.job is None or (worker.conn not in ready and worker.process.sentinel not in ready):
                continue
            tag, job = worker.job
            outcome = self._receive(worker)
            if outcome is None:  # the worker died before it could answer
                self._workers.remove(worker)
                worker.end()
                deaths = self._deaths[tag] = self._deaths.get(tag, 0) + 1
                if deaths < MAX_DEATHS:
                    self._queue.appendleft((tag, job))
                    continue
                outcome = Died(death_message(worker.process.exitcode, deaths))
            ended.append((tag, job, outcome))
        if dispatch:
            self._dispatch()
        return ended

    def close(self) -> None:
        """End every worker now; queued jobs are dropped."""
        self._queue.clear()
        for worker in self._workers:
            worker.end()
        self._workers.clear()

    def __enter__(self) -> "ProcessPool":
        """The pool itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc) -> None:
        """Close the pool: its workers end, whatever they were doing."""
        self.close()

    def _receive(self, worker: _Worker):
        """The worker's answer, or None if it died first (its pipe closed, or its process ended)."""
        try:
            if worker.conn.poll():
                kind, value = worker.conn.recv()
                worker.job = None
                return Raised(value) if kind == "raised" else value
        except (EOFError, OSError):
            pass
        worker.process.join(TERM_GRACE_S)
        return None

    def _dispatch(self) -> None:
        for worker in [w for w in self._workers if w.job is None and not w.process.is_alive()]:
            self._workers.remove(worker)  # an idle worker that died (killed from outside): replace it
            worker.end()
        for worker in self._workers:
            if worker.job is None and self._queue:
                self._send(worker, self._queue.popleft())
        while self._queue and len(self._workers) < self._size:
            worker = _Worker(self._context, self._function)
            self._workers.append(worker)
            self._send(worker, self._queue.popleft())

    @staticmethod
    def _send(worker: _Worker, item: tuple[Hashable, Any]) -> None:
        worker.job = item
        with contextlib.suppress(OSError, ValueError):  # the worker is gone; `collect` sees its sentinel and runs it again
            worker.conn.send(item[1])


def _start_without_sigint(process) -> None:
    """Start a process with SIGINT blocked, so the child's Python cannot be interrupted before it ignores SIGINT."""
    with sigint_blocked():
        process.start()


@contextlib.contextmanager
def sigint_blocked():
    """Block SIGINT in this thread meanwhile.

    A Ctrl-C then waits (it is not lost), and the processes started meanwhile inherit the block,
    so it never reaches them before they can ignore it.

    (Ignoring SIGINT here meanwhile would not do: a native thread of this process, such as a
    BLAS pool's, may take the signal while it is ignored, and it is then lost.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _serve(conn, function: Callable[[Any], Any], parent_pid: int) -> None:
    """A worker's life: ignore SIGINT, die with the parent, run jobs until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent(parent_pid)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = ("ok", function(job))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            answer = ("raised", exc)
        try:
            conn.send(answer)
        except (OSError, EOFError):
            return
        except Exception as exc:  # noqa: BLE001 - an answer that does not pickle
            conn.send(("raised", InternalError(f"a worker's answer could not be sent back: {type(exc).__name__}: {exc}")))
