"""Benchmark of sweeps: wall time of the ResNet-18 study and of resuming it when finished.

Target: a ~100-point ResNet-18 sweep across the platforms in under 10 minutes on
the 2-core machine, and a resume of the finished sweep in under 5 s. Run with
`python -m benchmarks sweep`; writes results/bench/sweep.csv.
"""

import os
import shutil
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import machine
from poetsim.results import load_results
from poetsim.scenario import load_scenario
from poetsim.sweep import run_sweep, save_scenario_copy

DEFAULT_OUT = Path("results/bench/sweep.csv")
SCENARIO = Path("scenarios/resnet18.yaml")


def run(out_csv: Path = DEFAULT_OUT, scenario_path: Path = SCENARIO, jobs: int | None = None) -> pd.DataFrame:
    """Sweep the scenario from scratch into a scratch folder, then resume it; one CSV row."""
    scenario = load_scenario(scenario_path)
    directory = out_csv.parent / f"sweep-{scenario.name}"
    shutil.rmtree(directory, ignore_errors=True)
    save_scenario_copy(scenario, directory)
    start = time.perf_counter()
    path = run_sweep(scenario, directory, jobs=jobs)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    run_sweep(scenario, directory, jobs=jobs, resume=True)
    resume_s = time.perf_counter() - start
    frame = load_results(path)
    counts = frame["status"].value_counts().to_dict()
    row = {
        "scenario": scenario.name, "points": len(frame), "jobs": jobs or os.cpu_count(),
        "sweep_s": round(sweep_s, 2), "resume_s": round(resume_s, 3),
        "mean_point_s": round(float(frame["wall_s"].mean()), 3), "max_point_s": round(float(frame["wall_s"].max()), 3),
        **{f"status_{k}": v for k, v in sorted(counts.items())},
        "machine": machine(),
    }
    result = pd.DataFrame([row])
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out_csv, index=False)
    return result
