"""Benchmark of stopping a sweep: seconds from a signal to the sweep's exit, and to its last worker's end.

Target: a sweep stopped by SIGINT (to it alone, or Ctrl-C to its process group) or SIGTERM
exits within 5 s with every returned row kept; after SIGKILL its workers end within 5 s too.
Each case sweeps a small scenario whose points end at once (keep-all fits at 100 %), in about a
second (ResNet-18 CIFAR at 35 % of keep-all RAM, paging-only, proven) or at the 5 s time limit
(the same, recompute-only, left unproven), so that the sweep lasts about 8 s on 2 workers and a
signal finds points both finished and in flight; it is signalled
`REPEATS` times at spread-out moments. Run with
`python -m benchmarks faults`; writes results/bench/faults.csv.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil

from benchmarks.common import machine

DEFAULT_OUT = Path("results/bench/faults.csv")
REPEATS = 5
SCENARIO = """\
name: stop-bench
model: resnet18_cifar
batch_size: 8
platform: rpi4
budgets: {ram: [100%, 35%], runtime: [1.2x, 1.5x]}
strategies: [recompute-only, paging-only]
time_limit_s: 5
"""
CASES = (("SIGINT", False), ("SIGINT", True), ("SIGTERM", False), ("SIGKILL", False))


def stop_once(folder: Path, signame: str, to_group: bool, delay_s: float, executor: str) -> dict:
    """Sweep into a fresh folder, signal it `delay_s` after it holds the folder, time the exit."""
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "poetsim", "sweep", str(folder / "s.yaml"), "-j", "2", "--out", str(out), "--executor", executor],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    while not (out / "scenario.yaml").exists() and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(delay_s)
    family = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    signum = signal.Signals[signame]
    start = time.perf_counter()
    if proc.poll() is not None:
        raise RuntimeError(f"the bench sweep ended before its {signame} at {delay_s:.1f} s: make its points slower")
    (os.killpg if to_group else os.kill)(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    exit_s = time.perf_counter() - start
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family):
        time.sleep(0.01)
    workers_s = time.perf_counter() - start
    return {
        "executor": executor,
        "signal": signame + (" to group" if to_group else ""),
        "delay_s": round(delay_s, 2),
        "exit_code": proc.returncode,
        "exit_s": round(exit_s, 3),
        "workers_gone_s": round(workers_s, 3),
        "stderr_lines": len(err.strip().splitlines()),
    }


def run(out_csv: Path = DEFAULT_OUT, executors: tuple[str, ...] = ("process", "dask")) -> pd.DataFrame:
    """Every case `REPEATS` times per executor; one CSV row per run, and a summary printed."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        raise SystemExit(
            "benchmarks faults: SIGINT is ignored here (started by a shell's `&`?), and the sweeps "
            "would inherit that and run to their end; run it in the foreground"
        )
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "s.yaml").write_text(SCENARIO)
        for executor in executors:
            for signame, to_group in CASES:
                for repeat in range(REPEATS):
                    delay_s = 0.5 + 3.0 * repeat / max(1, REPEATS - 1)
                    rows.append(stop_once(folder, signame, to_group, delay_s, executor))
    frame = pd.DataFrame(rows)
    frame["machine"] = machine()
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_csv, index=False)
    return (
        frame.groupby(["executor", "signal"])
        .agg(
            runs=("exit_s", "size"),
            exit_codes=("exit_code", lambda c: ",".join(map(str, sorted(set(c))))),
            max_exit_s=("exit_s", "max"),
            max_workers_gone_s=("workers_gone_s", "max"),
            max_stderr_lines=("stderr_lines", "max"),
        )
        .reset_index()
    )
