"""Benchmark of the optimiser on architectures it was not tuned on: the outside set.

The nine architectures of `scenarios/outside.yaml` (poetsim.pytorch.architectures, captured at
batch 8 into scenarios/graphs/outside/) at 50 % and 35 % of keep-all RAM and 1.2x, hybrid,
overlap timing, on the Raspberry Pi 4 and the Jetson TX2, each solved as `poetsim solve` solves
it (the baselines as starts, the independent checker after) with EFFORT units of work.

One row per case. Targets: at most MAX_UNPROVEN of the overhead above keep-all unproven
(`gap_overhead`), and no single change of the returned schedule (keep or page instead of
recompute, keep or recompute instead of page, move a stalling transfer;
`optimiser.plans.polish.changes_of`) that fits the budgets at less energy, each change judged
by the independent checker (`improving_changes`). A case proven infeasible (no schedule fits the
budgets) meets the targets: nothing of it is unproven.
The cases run two at a time; the search counts its effort in work, so the rows do not depend on
that.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd

from benchmarks.common import machine, write_rows
from poetsim import api
from poetsim.errors import ScheduleError
from poetsim.inputs.scenario import load_scenario
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.polish import changes_of
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.model import Moves
from poetsim.status import Status

SCENARIO = Path("scenarios/outside.yaml")
EFFORT = 60.0
RAMS = ("50%", "35%")
PLATFORMS = ("rpi4", "jetson-tx2")
RUNTIME_X = 1.2
#: The share of the overhead above keep-all that may stay unproven at a case.
MAX_UNPROVEN = 0.30
HYBRID = Moves(recompute=True, page=True)
#: Cases run at once (one HiGHS thread each).
WORKERS = 2


@dataclass(frozen=True)
class OutsideRow:
    """One case: what the solve proved, its work and time, and whether a single change improves it."""

    model: str
    nodes: int
    platform: str
    ram: str
    runtime_x: float
    status: str
    message: str
    keep_all_j: float | None
    objective_j: float | None
    bound_j: float | None
    gap_overhead: float | None
    effort: float
    work: float | None
    wall_s: float
    changes_tried: int
    improving_changes: int
    refused_changes: int
    within_target: bool
    machine: str


def improving_changes(run: api.Run) -> tuple[int, int, int]:
    """How many single changes of the run's schedule there are, fit at less energy, and are refused.

    Each change is replayed by the independent checker, not by the optimiser's own accounting; a
    change it refuses (a recomputation of an output still in RAM, say) is no schedule, so no
    improvement, and is counted apart.
    """
    if run.schedule is None or run.checked is None:
        return 0, 0, 0
    problem = run.problem
    plan = plans.from_schedule(run.schedule, problem.graph)
    if plan is None:
        return 0, 0, 0
    tolerance_j = 1e-9 * run.checked.total_j
    tried = better = refused = 0
    for change in changes_of(plan, problem.graph, HYBRID, problem.costs, problem.timing):
        tried += 1
        schedule = plans.to_schedule(change, problem.graph, problem.costs, problem.timing)
        try:
            checked = check_schedule(schedule, problem.graph, problem.costs, problem.timing)
        except ScheduleError:
            refused += 1
            continue
        better += problem.budgets.fits(checked) and checked.total_j < run.checked.total_j - tolerance_j
    return tried, better, refused


def bench_one(model: str, plat: str, ram: str) -> OutsideRow:
    """One case, solved as `poetsim solve` solves it."""
    began = perf_counter()
    run = api.solve(
        load_scenario(SCENARIO), model=model, platform=plat, ram=ram, runtime=RUNTIME_X, strategy="hybrid", effort=EFFORT
    )
    wall_s = perf_counter() - began
    tried, better, refused = improving_changes(run)
    solve = run.solve
    gap = solve.gap_overhead if solve is not None else None
    return OutsideRow(
        model=run.problem.graph.name,
        nodes=len(run.problem.graph),
        platform=plat,
        ram=ram,
        runtime_x=RUNTIME_X,
        status=run.status.value,
        message=run.message,
        keep_all_j=run.keep_all.total_j if run.keep_all is not None else None,
        objective_j=run.checked.total_j if run.checked is not None else None,
        bound_j=solve.bound_j if solve is not None else None,
        gap_overhead=gap,
        effort=EFFORT,
        work=solve.work if solve is not None else None,
        wall_s=wall_s,
        changes_tried=tried,
        improving_changes=better,
        refused_changes=refused,
        within_target=run.status is Status.INFEASIBLE
        or (run.status.has_schedule and gap is not None and gap <= MAX_UNPROVEN and better == 0),
        machine=f"{machine(with_highs=True)}, load {os.getloadavg()[0]:.1f}",
    )


def cases() -> list[tuple[str, str, str]]:
    """(model file, platform, RAM) of every case, in the scenario's model order."""
    return [(spec, plat, ram) for spec in load_scenario(SCENARIO).model for plat in PLATFORMS for ram in RAMS]


def run(out_csv: Path) -> pd.DataFrame:
    """Every case, one CSV row each, in case order as each finishes."""
    with ProcessPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(bench_one, *case) for case in cases()]
        return write_rows(out_csv, OutsideRow, (future.result() for future in futures))
