"""Benchmark of a sweep on a Dask cluster against the same sweep on local worker processes.

A grid of a few hundred quick points (the MCU MLP over nine RAM budgets, four runtimes and five
strategies: 360 points, most of them ending within a tenth of a second, so that what a point
costs to send, run and write back shows) is swept three ways on this machine, two workers each:
local processes (`--executor process -j 2`), a local Dask cluster (`--executor dask -j 2`), and
an external cluster (`dask scheduler` and two `dask worker --nthreads 1` processes on the
loopback address, started from a folder of their own, the way docs/scale-out.md starts them).
Each executor sweeps the grid `REPEATS` times, in turn with the others; a row gives its fastest
sweep (the external cluster started beforehand: its start is its own column), the time per
point, the overhead per point against local processes, and whether every one of its sweeps
wrote the rows and point files of the local processes (timings aside). Run with
`python -m benchmarks cluster`; writes results/bench/cluster.csv.
"""

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import machine
from poetsim.inputs.scenario import load_scenario
from poetsim.sweeps.runner import run_sweep

DEFAULT_OUT = Path("results/bench/cluster.csv")
SCENARIO = """\
name: cluster-bench
model: mlp
batch_size: 2
platform: [mkr1000, nrf52840]
budgets:
  ram: [100%, 95%, 90%, 85%, 80%, 75%, 70%, 65%, 60%]
  runtime: [1.0x, 1.25x, 1.5x, 2.0x]
strategies: [hybrid, recompute-only, paging-only, keep-all, checkpoint-sqrt]
time_limit_s: 30
"""
WORKERS = 2
#: Sweeps per executor, taken in turn (process, local cluster, external cluster, again...), so
#: that a machine shared with other work loads each executor alike; the fastest counts.
REPEATS = 3
#: Columns that are times of a run, not results: left out when two sweeps' rows are compared.
TIMINGS = {"build_s", "solve_s", "wall_s"}
#: The executors compared: (name, executor, whether on the external cluster).
EXECUTORS = (("process", "process", False), ("dask, local cluster", "dask", False), ("dask, external cluster", "dask", True))


def run(out_csv: Path = DEFAULT_OUT) -> pd.DataFrame:
    """Sweep the grid `REPEATS` times on each executor into scratch folders; one CSV row per executor."""
    with tempfile.TemporaryDirectory(prefix="poetsim-cluster-bench-") as scratch:
        root = Path(scratch)
        (root / "bench.yaml").write_text(SCENARIO)
        scenario = load_scenario(root / "bench.yaml")
        cluster = _Cluster(root / "cluster")
        times: dict[str, list[float]] = {name: [] for name, _, _ in EXECUTORS}
        loads = []
        try:
            start = time.perf_counter()
            address = cluster.start(WORKERS)
            cluster_start_s = time.perf_counter() - start
            for repeat in range(REPEATS):
                for name, executor, external in EXECUTORS:
                    folder = root / f"{name}-{repeat}"
                    loads.append(os.getloadavg()[0])
                    start = time.perf_counter()
                    jobs = None if external else WORKERS
                    run_sweep(scenario, folder, jobs=jobs, executor=executor, scheduler=address if external else None)
                    times[name].append(time.perf_counter() - start)
        finally:
            cluster.close()
        points = len(scenario.points())
        reference = root / "process-0"
        fastest_process_s = min(times["process"])
        rows = []
        for name, _, external in EXECUTORS:
            sweep_s = min(times[name])
            folders = [root / f"{name}-{repeat}" for repeat in range(REPEATS)]
            rows.append(
                {
                    "executor": name,
                    "workers": WORKERS,
                    "points": points,
                    "repeats": REPEATS,
                    "cluster_start_s": round(cluster_start_s, 2) if external else None,
                    "sweep_s": round(sweep_s, 2),
                    "sweep_s_slowest": round(max(times[name]), 2),
                    "per_point_ms": round(1000 * sweep_s / points, 2),
                    "overhead_per_point_ms": round(1000 * (sweep_s - fastest_process_s) / points, 2),
                    "rows_equal": all(_rows(folder) == _rows(reference) for folder in folders),
                    "files_equal": all(_point_files(folder) == _point_files(reference) for folder in folders),
                    "load_min": round(min(loads), 2),
                    "load_max": round(max(loads), 2),
                    "machine": machine(),
                }
            )
    result = pd.DataFrame(rows)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out_csv, index=False)
    return result


def _rows(folder: Path) -> dict[str, dict]:
    with (folder / "runs.csv").open(newline="") as handle:
        return {row["point_key"]: {k: v for k, v in row.items() if k not in TIMINGS} for row in csv.DictReader(handle)}


def _point_files(folder: Path) -> dict[str, bytes]:
    """Every point's files but result.json (which holds the timings), by path under points/."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted((folder / "points").rglob("*"))
        if path.is_file() and path.name != "result.json"
    }


class _Cluster:
    """`dask scheduler` and its workers on the loopback address, each in a session of its own."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        self.processes: list[subprocess.Popen] = []

    def start(self, workers: int) -> str:
        bin_dir = Path(sys.executable).parent
        info = self.root / "scheduler.json"
        self._spawn(
            [bin_dir / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", info]
        )
        deadline = time.monotonic() + 120
        while not info.exists() or not info.read_text().strip().endswith("}"):
            if time.monotonic() > deadline:
                raise RuntimeError("the benchmark's scheduler did not start")
            time.sleep(0.05)
        address = json.loads(info.read_text())["address"]
        for _ in range(workers):
            self._spawn(
                [bin_dir / "dask", "worker", address, "--nthreads", "1", "--no-dashboard", "--local-directory", self.root]
            )
        from distributed import Client

        with Client(address, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)
        return address

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def _spawn(self, command: list) -> None:
        self.processes.append(
            subprocess.Popen(
                list(map(str, command)),
                cwd=self.root,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
