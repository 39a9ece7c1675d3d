"""The worker pool: jobs run in worker processes, failures come back as values, workers never outlive it."""

import ctypes
import os
import signal
import sys
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import psutil

from poetsim.errors import StorageError
from poetsim.sweeps.workers import Died, ProcessPool, Raised


def square(x):
    return x * x


def refuse(message):
    raise StorageError(message)


def how_signals_stand(_):
    """SIGINT's disposition, and the signal the kernel sends this process when its parent ends."""
    pdeathsig = ctypes.c_int(0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(2, ctypes.byref(pdeathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, pdeathsig.value


def note_pid_then_sleep(path):
    Path(path).write_text(str(os.getpid()))
    time.sleep(60)


def collect(pool: ProcessPool, count: int, timeout_s: float = 60) -> list[tuple[Hashable, Any, Any]]:
    ended: list[tuple[Hashable, Any, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(ended) < count:
        assert time.monotonic() < deadline, "jobs did not end"
        ended += pool.collect(0.2)
    return ended


def test_jobs_run_in_parallel_workers_and_come_back_tagged():
    with ProcessPool(2, square) as pool:
        for n in range(5):
            pool.submit(f"job{n}", n)
        assert sorted((tag, result) for tag, _, result in collect(pool, 5)) == [(f"job{n}", n * n) for n in range(5)]


def test_an_exception_comes_back_as_a_value_to_raise():
    with ProcessPool(1, refuse) as pool:
        pool.submit("a", "disk full")
        ((_, _, outcome),) = collect(pool, 1)
    assert isinstance(outcome, Raised) and isinstance(outcome.error, StorageError)
    assert str(outcome.error) == "disk full"


def test_a_worker_ignores_sigint_and_dies_with_its_parent():
    with ProcessPool(1, how_signals_stand) as pool:
        pool.submit("a", None)
        ((_, _, (ignores_sigint, pdeathsig)),) = collect(pool, 1)
    assert ignores_sigint
    if sys.platform.startswith("linux"):
        assert pdeathsig == signal.SIGKILL


def test_a_job_whose_worker_dies_twice_is_reported_as_died(tmp_path):
    note = tmp_path / "pid"
    with ProcessPool(1, note_pid_then_sleep) as pool:
        pool.submit("a", str(note))
        killed = set()
        for _ in range(2):
            deadline = time.monotonic() + 60
            while not note.exists() or int(note.read_text() or 0) in killed:
                assert time.monotonic() < deadline
                assert pool.collect(0.1) == []
            pid = int(note.read_text())
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        ((tag, _, outcome),) = collect(pool, 1)
    assert tag == "a" and isinstance(outcome, Died)
    assert outcome.message == "its worker process died 2 times (last killed by SIGKILL, perhaps for lack of memory)"


def test_close_ends_a_busy_worker_at_once(tmp_path):
    note = tmp_path / "pid"
    pool = ProcessPool(1, note_pid_then_sleep)
    pool.submit("a", str(note))
    deadline = time.monotonic() + 60
    while not note.exists() or not note.read_text():
        assert time.monotonic() < deadline
        pool.collect(0.1)
    worker = psutil.Process(int(note.read_text()))
    pool.close()
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE


def test_a_pool_has_at_least_one_worker():
    with ProcessPool(0, square) as pool:
        pool.submit("a", 3)
        assert collect(pool, 1)[0][2] == 9
