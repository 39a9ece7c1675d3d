"""Benchmark of certified optima: how much `optimise` proves within its effort, and how long it takes.

Rows:
- POET's main case, `resnet18_cifar` at batch 8 on the Raspberry Pi 4, hybrid, 50 % of keep-all
  RAM, 1.2x runtime, in both timing models (target: `optimal` within 60 s wall, build included);
- every zoo model at 50 % / 1.2x, hybrid, overlap timing, on `rpi4` and `jetson-tx2`, with 60
  units of effort (targets: `gap_overhead` <= 5 %, the whole call within 60 s plus 5 %, and
  never stopped by its wall-clock guard).

`scaling` is the A/B of the model's units (docs/optimiser.md, section 2): the bare MILP (no
cover, no start) in "balanced" and in "plain" units on a few graphs, each with the same limit.
"""

from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd

from benchmarks.common import machine, write_rows
from poetsim.graphs.zoo import MODELS
from poetsim.optimiser import optimise
from poetsim.optimiser.milp.formulation import formulate
from poetsim.optimiser.milp.solvers import SolverSettings, solve
from poetsim.optimiser.outcome import abs_gap_j
from poetsim.schedule.model import Moves, Timing
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

HYBRID = Moves(recompute=True, page=True)
#: The effort of each call in work units (about a second each on the reference machine), and the
#: wall time it is to hold.
EFFORT = 60.0
LIMIT_S = 60.0
#: The share over LIMIT_S that a call may take: the target is "the limit plus 5 %".
LIMIT_SLACK = 0.05
PLATFORMS = ("rpi4", "jetson-tx2")


@dataclass(frozen=True)
class CertifyRow:
    """One `optimise` call: the case, what it proved, its work, and its wall time against LIMIT_S."""

    case: str
    model: str
    batch_size: int | None
    platform: str
    ram: str
    runtime_x: float
    timing: str
    moves: str
    effort: float
    work: float
    status: str
    wall_s: float
    limit_held: bool
    guard_tripped: bool
    keep_all_j: float | None
    objective_j: float | None
    bound_j: float | None
    cover_bound_j: float | None
    gap_overhead: float | None
    found_by: str
    message: str
    machine: str


#: (case, model, batch size, platform, timing) of one row of the certification benchmark.
Case = tuple[str, str, int | None, str, Timing]


def cases() -> list[Case]:
    """(case, model, batch size, platform, timing) of every row, in order."""
    rows: list[Case] = [
        ("resnet18-main", "resnet18_cifar", 8, "rpi4", timing) for timing in (Timing.COMPUTE_ONLY, Timing.OVERLAP)
    ]
    rows += [("zoo", model, None, plat, Timing.OVERLAP) for model in sorted(MODELS) for plat in PLATFORMS]
    return rows


def bench_one(
    case: str,
    model: str,
    batch_size: int | None,
    plat: str,
    timing: Timing,
    effort: float = EFFORT,
    threads: int | None = None,
) -> CertifyRow:
    """One hybrid solve at 50 % RAM and 1.2x, timed from the call to its return."""
    problem = build_problem(model, plat, parse_ram("50%"), 1.2, timing, batch_size=batch_size)
    began = perf_counter()
    outcome = optimise(problem.graph, problem.costs, problem.budgets, HYBRID, timing, effort=effort, threads=threads)
    wall_s = perf_counter() - began
    costs = problem.costs
    keep_all_j = costs.keep_all_energy_j(timing)
    return CertifyRow(
        case=case,
        model=model,
        batch_size=batch_size,
        platform=plat,
        ram="50%",
        runtime_x=1.2,
        timing=timing.value,
        moves=HYBRID.label,
        effort=effort,
        work=outcome.work,
        status=outcome.status.value,
        wall_s=wall_s,
        limit_held=wall_s <= LIMIT_S * (1 + LIMIT_SLACK),
        guard_tripped="stopped by the time limit" in outcome.message,
        keep_all_j=keep_all_j,
        objective_j=outcome.objective_j,
        bound_j=outcome.bound_j,
        cover_bound_j=outcome.cover_bound_j,
        gap_overhead=outcome.gap_overhead,
        found_by=outcome.found_by,
        message=outcome.message,
        machine=machine(with_highs=True),
    )


def run(out_csv: Path, selected: list[Case] | None = None, effort: float = EFFORT) -> pd.DataFrame:
    """Run the cases (default all) and write one CSV row each, as each finishes."""
    return write_rows(out_csv, CertifyRow, (bench_one(*c, effort=effort) for c in (selected or cases())))


@dataclass(frozen=True)
class ScalingRow:
    """The bare MILP of one graph in one set of units: what HiGHS proved within the limit."""

    model: str
    batch_size: int | None
    timing: str
    ram: str
    units: str
    status: str
    solve_s: float
    objective: float | None  # overhead in joules
    bound: float | None  # proven bound on the overhead in joules
    gap_overhead: float | None
    time_limit_s: float
    machine: str


#: (model, batch size, timing, RAM) of the A/B: graphs of 77 to 137 nodes the bare MILP can make
#: progress on within a minute.
SCALING_CASES: tuple[tuple[str, int | None, Timing, str], ...] = (
    ("transformer", None, Timing.OVERLAP, "50%"),
    ("vgg16", None, Timing.COMPUTE_ONLY, "70%"),
    ("resnet18_cifar", 8, Timing.COMPUTE_ONLY, "50%"),
    ("resnet18_cifar", 8, Timing.OVERLAP, "50%"),
)


def scaling_one(model: str, batch_size: int | None, timing: Timing, ram: str, units: str, time_limit_s: float) -> ScalingRow:
    """The bare MILP (no start) of one case in `units`, on one thread, solved by HiGHS."""
    problem = build_problem(model, "rpi4", parse_ram(ram), 1.2, timing, batch_size=batch_size)
    form = formulate(problem.graph, problem.costs, problem.budgets, HYBRID, timing, units=units)
    settings = SolverSettings(
        mip_rel_gap=1e-4,
        mip_abs_gap=abs_gap_j(problem.costs, HYBRID, timing) / form.energy_scale_j,
        time_limit_s=time_limit_s,
        threads=1,
    )
    result = solve(form, "highs", settings, None)
    assert result.status is not None, "solve raises InternalError where HiGHS ends with a solve error"
    objective = None if result.objective is None else result.objective * form.energy_scale_j
    bound = None if result.bound is None else max(result.bound, 0.0) * form.energy_scale_j
    gap = None if objective is None or bound is None or objective <= 0 else (objective - bound) / objective
    return ScalingRow(
        model,
        batch_size,
        timing.value,
        ram,
        units,
        result.status.value,
        result.solve_s,
        objective,
        bound,
        gap,
        time_limit_s,
        machine(with_highs=True),
    )


def scaling(out_csv: Path, time_limit_s: float = LIMIT_S) -> pd.DataFrame:
    """The units A/B over SCALING_CASES, both units per case, side by side."""
    rows = (scaling_one(*case, units, time_limit_s) for case in SCALING_CASES for units in ("balanced", "plain"))
    return write_rows(out_csv, ScalingRow, rows)


@dataclass(frozen=True)
class CoverRowsRow:
    """The eviction cover of one case solved whole and on the rows it needs.

    Time and bound; for recompute-only, also the cover with second restores (docs/optimiser.md,
    section 3.1).
    """

    model: str
    batch_size: int | None
    platform: str
    ram: str
    strategy: str
    timing: str
    stage_rows: int
    whole_s: float
    grown_s: float
    whole_overhead_j: float | None  # None: infeasible
    grown_overhead_j: float | None
    both_exact: bool
    same_bound: bool
    second_restore_s: float | None  # recompute-only cases only
    second_restore_overhead_j: float | None
    machine: str


#: (model, batch size, platform, RAM, strategy, timing) of the covers' A/B (docs/optimiser.md,
#: section 3.1): POET's graph at several budgets, strategies and both timings, and the zoo's large graphs.
COVER_CASES = (
    ("resnet18_cifar", 8, "rpi4", "50%", "hybrid", Timing.COMPUTE_ONLY),
    ("resnet18_cifar", 8, "rpi4", "50%", "hybrid", Timing.OVERLAP),
    ("resnet18_cifar", 8, "rpi4", "50%", "recompute-only", Timing.OVERLAP),
    ("resnet18_cifar", 8, "jetson-tx2", "50%", "recompute-only", Timing.OVERLAP),
    ("resnet18_cifar", 8, "rpi4", "35%", "recompute-only", Timing.OVERLAP),
    ("resnet18_cifar", 8, "rpi4", "25%", "recompute-only", Timing.OVERLAP),
    ("resnet18_cifar", 8, "rpi4", "35%", "paging-only", Timing.OVERLAP),
    ("resnet18_cifar", 8, "rpi4", "25%", "hybrid", Timing.OVERLAP),
    ("resnet18_cifar", 8, "jetson-tx2", "25%", "hybrid", Timing.OVERLAP),
    ("resnet18_cifar", 8, "jetson-tx2", "70%", "paging-only", Timing.OVERLAP),
    ("transformer", None, "rpi4", "25%", "recompute-only", Timing.OVERLAP),
    *(
        (model, None, plat, "50%", "hybrid", Timing.OVERLAP)
        for model in ("resnet18", "resnet50", "mobilenet_v2", "bert_base", "gpt2_small", "transformer")
        for plat in PLATFORMS
    ),
)


def cover_rows_one(
    model: str, batch_size: int | None, plat: str, ram: str, strategy: str, timing: Timing, time_limit_s: float = 120.0
) -> CoverRowsRow:
    """`cover_bound` with every stage row from the start, then from the 5 of largest excess.

    And `second_restore_bound` for recompute-only.
    """
    from poetsim import strategies
    from poetsim.optimiser.allowance import effort
    from poetsim.optimiser.bounds.cover import cover_bound, second_restore_bound

    problem = build_problem(model, plat, parse_ram(ram), 1.2, timing, batch_size=batch_size)
    args = (problem.graph, problem.costs, problem.budgets, strategies.get(strategy).moves, timing)
    timed = []
    for first_rows in (None, 5):
        began = perf_counter()
        cover = cover_bound(*args, effort(time_limit_s, time_limit_s), first_rows=first_rows)
        timed.append((perf_counter() - began, cover))
    (whole_s, whole), (grown_s, grown) = timed
    same = whole.infeasible == grown.infeasible and (
        whole.bound_j is None or (grown.bound_j is not None and abs(whole.bound_j - grown.bound_j) <= 1e-9 * abs(whole.bound_j))
    )
    twice_s = twice_j = None
    if strategy == "recompute-only":
        began = perf_counter()
        twice = second_restore_bound(problem.graph, problem.costs, problem.budgets, timing, effort(time_limit_s, time_limit_s))
        twice_s, twice_j = perf_counter() - began, twice.overhead_j
    return CoverRowsRow(
        model,
        batch_size,
        plat,
        ram,
        strategy,
        timing.value,
        len(whole.rows),
        whole_s,
        grown_s,
        whole.overhead_j,
        grown.overhead_j,
        whole.exact and grown.exact,
        same,
        twice_s,
        twice_j,
        machine(with_highs=True),
    )


def cover_ab(out_csv: Path) -> pd.DataFrame:
    """The covers' A/B over COVER_CASES: whole against grown, one row per case."""
    return write_rows(out_csv, CoverRowsRow, (cover_rows_one(*case) for case in COVER_CASES))
