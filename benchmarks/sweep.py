"""Benchmark of sweeps: wall time of the ResNet-18 study, what it proves, and resuming it.

Targets: the 108-point study in under 3 minutes on the 2-core machine, every point
with a schedule within 1 % of its overhead (`max_gap_overhead`), at least 90 % of them proven
optimal (`optimal_share`); a resume of the finished sweep in under 5 s. The machine's load
average when the sweep starts and ends is recorded beside them: time-limited steps get less
done on a loaded machine. Every solved row is compared with the shipped
`results/resnet18/runs.csv` (`compare_with_shipped`: rows kept, moved, proofs lost and gained,
gaps moved). Run with `python -m benchmarks sweep`; writes results/bench/sweep.csv.

`python -m benchmarks sweep-loaded` sweeps the same study while one busy process per core
competes for the machine (a load about twice the sweep's own), and compares every row with the
shipped `results/resnet18/runs.csv`: what a proof buys is an answer that load cannot move,
which this counts (results/bench/sweep-loaded.csv).
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import machine
from poetsim import strategies
from poetsim.analysis.results import load_results
from poetsim.inputs.scenario import load_scenario
from poetsim.status import Status
from poetsim.strategies import Kind
from poetsim.sweeps.runner import run_sweep, save_scenario_copy

DEFAULT_OUT = Path("results/bench/sweep.csv")
SCENARIO = Path("scenarios/resnet18.yaml")


def run(out_csv: Path = DEFAULT_OUT, scenario_path: Path = SCENARIO, jobs: int | None = None) -> pd.DataFrame:
    """Sweep the scenario from scratch into a scratch folder, then resume it; one CSV row."""
    scenario = load_scenario(scenario_path)
    directory = out_csv.parent / f"sweep-{scenario.name}"
    shutil.rmtree(directory, ignore_errors=True)
    save_scenario_copy(scenario, directory)
    load_start = os.getloadavg()[0]
    start = time.perf_counter()
    path = run_sweep(scenario, directory, jobs=jobs)
    sweep_s = time.perf_counter() - start
    load_end = os.getloadavg()[0]
    start = time.perf_counter()
    run_sweep(scenario, directory, jobs=jobs, resume=True)
    resume_s = time.perf_counter() - start
    frame = load_results(path)
    counts = frame["status"].value_counts().to_dict()
    solved = frame[frame["strategy"].isin(strategies.names(Kind.SOLVED))]
    scheduled = solved[solved["status"].isin(["optimal", "feasible"])]
    row = {
        "scenario": scenario.name,
        "points": len(frame),
        "jobs": jobs or os.cpu_count(),
        "sweep_s": round(sweep_s, 2),
        "resume_s": round(resume_s, 3),
        "mean_point_s": round(float(frame["wall_s"].mean()), 3),
        "max_point_s": round(float(frame["wall_s"].max()), 3),
        **{f"status_{k}": v for k, v in sorted(counts.items())},
        "solved_with_schedule": len(scheduled),
        "optimal_share": round(float((scheduled["status"] == "optimal").mean()), 3) if len(scheduled) else None,
        "max_gap_overhead": round(float(scheduled["gap_overhead"].max()), 4) if len(scheduled) else None,
        "load_start": round(load_start, 2),
        "load_end": round(load_end, 2),
        **compare_with_shipped(path, SHIPPED),
        "machine": machine(),
    }
    result = pd.DataFrame([row])
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out_csv, index=False)
    return result


SHIPPED = Path("results/resnet18/runs.csv")


def compare_with_shipped(path: Path, shipped: Path = SHIPPED) -> dict:
    """How the solved rows of a sweep's runs.csv at `path` stand against the shipped ones.

    Rows whose status and energy are kept or moved, proofs lost and gained, unproven rows that
    moved, the largest energy change (a share of the shipped energy), and rows kept whose
    `gap_overhead` moved (a time-limited bound).
    """
    solved = strategies.names(Kind.SOLVED)
    new = load_results(path).set_index("point_key")
    old = load_results(shipped).set_index("point_key")
    old = old[old["strategy"].isin(solved)]

    def proven(status) -> bool:
        return Status.parse(str(status)).is_proven

    kept = moved = proofs_lost = proofs_gained = unproven_moved = gaps_moved = 0
    largest = 0.0
    for key, was in old.iterrows():
        now = new.loc[key]
        energy_was, energy_now = was["predicted_total_j"], now["predicted_total_j"]
        same_energy = (pd.isna(energy_was) and pd.isna(energy_now)) or (
            not pd.isna(energy_was) and not pd.isna(energy_now) and abs(energy_now - energy_was) <= 1e-9 * abs(energy_was)
        )
        if was["status"] == now["status"] and same_energy:
            kept += 1
            gap_was, gap_now = was["gap_overhead"], now["gap_overhead"]
            gaps_moved += not ((pd.isna(gap_was) and pd.isna(gap_now)) or abs(gap_now - gap_was) <= 1e-9)
            continue
        moved += 1
        proofs_lost += proven(was["status"]) and not proven(now["status"])
        proofs_gained += not proven(was["status"]) and proven(now["status"])
        unproven_moved += not proven(was["status"]) and not proven(now["status"])
        if not pd.isna(energy_was) and not pd.isna(energy_now):
            largest = max(largest, abs(energy_now - energy_was) / energy_was)
    return {
        "rows_kept": kept,
        "rows_moved": moved,
        "proofs_lost": proofs_lost,
        "proofs_gained": proofs_gained,
        "unproven_moved": unproven_moved,
        "largest_energy_change": round(largest, 6),
        "gaps_moved": gaps_moved,
        "proven_shipped": int(old["status"].map(proven).sum()),
        "proven_now": int(new.loc[old.index, "status"].map(proven).sum()),
    }


def run_loaded(
    out_csv: Path = Path("results/bench/sweep-loaded.csv"),
    scenario_path: Path = SCENARIO,
    shipped: Path = SHIPPED,
    hogs: int | None = None,
) -> pd.DataFrame:
    """Sweep the study with `hogs` busy processes beside it (default one per core); one CSV row.

    The row compares each solved point with the shipped run: statuses and energies kept or
    moved.
    """
    scenario = load_scenario(scenario_path)
    directory = out_csv.parent / f"sweep-loaded-{scenario.name}"
    shutil.rmtree(directory, ignore_errors=True)
    if hogs is None:
        hogs = os.cpu_count() or 1
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        time.sleep(2.0)  # let the load average feel them
        load_start = os.getloadavg()[0]
        start = time.perf_counter()
        path = run_sweep(scenario, directory)
        sweep_s = time.perf_counter() - start
        load_end = os.getloadavg()[0]
    finally:
        for process in busy:
            process.kill()
            process.wait()
    row = {
        "scenario": scenario.name,
        "points": int(load_results(shipped)["strategy"].isin(strategies.names(Kind.SOLVED)).sum()),
        "hogs": hogs,
        "sweep_s": round(sweep_s, 2),
        "load_start": round(load_start, 2),
        "load_end": round(load_end, 2),
        **compare_with_shipped(path, shipped),
        "machine": machine(),
    }
    result = pd.DataFrame([row])
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out_csv, index=False)
    return result
