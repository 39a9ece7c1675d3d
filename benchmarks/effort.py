"""Benchmark of the optimiser's effort: work units against seconds, and the same answer under load.

One row per case: an `optimise` call with EFFORT units, on the machine as it is and then beside
two processes that keep two cores busy. The columns answer: how many CPU seconds (this process
and its HiGHS processes) and wall seconds a unit of work takes here (`optimiser.work` calibrates
a unit to about a second of the reference machine, idle), and whether the loaded call returned
the same row (status, energy, bound, message, schedule) as the quiet one.
"""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd
import psutil

from benchmarks.common import machine, write_rows
from poetsim.optimiser import optimise
from poetsim.schedule.model import Moves, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

EFFORT = 12.0
MOVES = {"hybrid": Moves(True, True), "recompute-only": Moves(True, False), "paging-only": Moves(False, True)}
#: (model, batch size, input size, platform, RAM, runtime, strategy): points the studies leave
#: unproven, where the whole effort is spent, on graphs of 137 to 351 nodes.
CASES = (
    ("resnet18_cifar", 8, None, "rpi4", "50%", 1.2, "recompute-only"),
    ("resnet18_cifar", 8, None, "rpi4", "35%", 1.2, "recompute-only"),
    ("resnet18_cifar", 8, None, "rpi4", "25%", 1.2, "hybrid"),
    ("resnet18_cifar", 8, None, "jetson-tx2", "50%", 1.2, "hybrid"),
    ("mobilenet_v2", 1, 96, "rpi4", "40%", 1.2, "hybrid"),
    ("resnet50", 1, None, "rpi4", "50%", 1.2, "hybrid"),
    ("resnet50", 1, None, "jetson-tx2", "35%", 1.2, "hybrid"),
)


@dataclass(frozen=True)
class EffortRow:
    """One case: the work it did, the seconds that took quiet and loaded, and whether both agree."""

    model: str
    platform: str
    ram: str
    runtime_x: float
    strategy: str
    effort: float
    work: float
    cpu_s: float
    wall_s: float
    cpu_s_per_unit: float
    loaded_wall_s: float
    same_when_loaded: bool
    status: str
    gap_overhead: float | None
    machine: str


def _cpu_s() -> float:
    """CPU seconds of this process and its children (the HiGHS processes) so far."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return total


def _row(outcome) -> tuple:
    schedule = None if outcome.schedule is None else outcome.schedule.stages
    return (outcome.status, outcome.message, outcome.objective_j, outcome.bound_j, outcome.work, schedule)


def bench_one(model, batch_size, input_size, plat, ram, runtime_x, strategy, effort: float = EFFORT) -> EffortRow:
    """One case, quiet and beside two busy processes."""
    problem = build_problem(model, plat, parse_ram(ram), runtime_x, Timing.OVERLAP, batch_size=batch_size, input_size=input_size)
    args = (problem.graph, problem.costs, problem.budgets, MOVES[strategy], Timing.OVERLAP)
    cpu, began = _cpu_s(), perf_counter()
    quiet = optimise(*args, effort=effort)
    cpu_s, wall_s = _cpu_s() - cpu, perf_counter() - began
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        began = perf_counter()
        loaded = optimise(*args, effort=effort)
        loaded_wall_s = perf_counter() - began
    finally:
        for process in busy:
            process.kill()
            process.wait()
    return EffortRow(
        model=model,
        platform=plat,
        ram=ram,
        runtime_x=runtime_x,
        strategy=strategy,
        effort=effort,
        work=quiet.work,
        cpu_s=cpu_s,
        wall_s=wall_s,
        cpu_s_per_unit=cpu_s / quiet.work if quiet.work else 0.0,
        loaded_wall_s=loaded_wall_s,
        same_when_loaded=_row(quiet) == _row(loaded),
        status=quiet.status.value,
        gap_overhead=quiet.gap_overhead,
        machine=f"{machine(with_highs=True)}, load {os.getloadavg()[0]:.1f}",
    )


def run(out_csv: Path) -> pd.DataFrame:
    """Every case, one CSV row each, as each finishes."""
    return write_rows(out_csv, EffortRow, (bench_one(*case) for case in CASES))
