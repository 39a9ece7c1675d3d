"""Benchmark of the optimiser: model size, build, hand-off and solve time, and proven gaps.

One row per graph: the zoo's models and the Checkmate paper's training graphs (the shared
yardstick of the rematerialisation literature, Jain et al. MLSys 2020), each solved hybrid on
the Raspberry Pi 4 profile at 50 % of keep-all RAM and 1.2x runtime under overlap timing. The
figures answer: how large the MILP is, where the time goes (Python build, hand-off to the
solver, the solver itself), and how close to proven optimal the search gets within its effort.
"""

from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd

from benchmarks.common import machine, write_rows
from poetsim.graphs.io import load_graph
from poetsim.graphs.zoo import MODELS
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser import optimise
from poetsim.schedule.costs import node_costs
from poetsim.schedule.model import Budgets, Moves, Timing

#: The Checkmate graphs shipped with the repository (scenarios/graphs/checkmate/README.md).
CHECKMATE_GRAPHS = Path(__file__).resolve().parents[1] / "scenarios" / "graphs" / "checkmate"

#: Graphs of this many nodes or more get the larger effort.
LARGE_NODES = 200
#: Per-graph efforts in work units (about a second each on the reference machine): POET's
#: ResNet-18 target is a proof within 60 s wall.
SMALL_EFFORT = 60.0
LARGE_EFFORT = 120.0

RAM_SHARE = 0.5
RUNTIME_X = 1.2
PLATFORM = "rpi4"


@dataclass(frozen=True)
class BenchRow:
    """One graph's solve: sizes, times in seconds, the solver's status and gaps."""

    model: str
    nodes: int
    edges: int
    variables: int
    constraints: int
    build_s: float
    handoff_s: float
    solve_s: float
    wall_s: float
    status: str
    keep_all_j: float
    objective_j: float | None
    bound_j: float | None
    cover_bound_j: float | None
    found_by: str
    overhead_pct: float | None
    gap_total: float | None
    gap_overhead: float | None
    effort: float
    work: float
    message: str
    machine: str


def default_models() -> list[str]:
    """Every zoo model at its standard input and batch 1, then every Checkmate graph present, by path."""
    return [*sorted(MODELS), *sorted(str(p) for p in CHECKMATE_GRAPHS.glob("*.json"))]


def bench_one(model: str, effort: float | None = None) -> BenchRow:
    """Solve one graph at the benchmark's budgets and record where the time went.

    Without `effort`, graphs of LARGE_NODES or more get LARGE_EFFORT, others SMALL_EFFORT.
    """
    graph = load_graph(model)
    if effort is None:
        effort = LARGE_EFFORT if len(graph) >= LARGE_NODES else SMALL_EFFORT
    costs = node_costs(graph, load_platform(PLATFORM))
    budgets = Budgets(int(RAM_SHARE * graph.keep_all_peak_bytes), RUNTIME_X * costs.plain_runtime_s)
    keep_all_j = costs.keep_all_energy_j(Timing.OVERLAP)
    began = perf_counter()
    outcome = optimise(graph, costs, budgets, Moves(recompute=True, page=True), Timing.OVERLAP, effort=effort)
    wall_s = perf_counter() - began
    overhead = None if outcome.objective_j is None else 100 * (outcome.objective_j / keep_all_j - 1)
    return BenchRow(
        model=graph.name,
        nodes=len(graph),
        edges=len(graph.edges),
        variables=outcome.num_variables,
        constraints=outcome.num_constraints,
        build_s=outcome.build_s,
        handoff_s=outcome.handoff_s,
        solve_s=outcome.solve_s,
        wall_s=wall_s,
        status=outcome.status,
        keep_all_j=keep_all_j,
        objective_j=outcome.objective_j,
        bound_j=outcome.bound_j,
        cover_bound_j=outcome.cover_bound_j,
        found_by=outcome.found_by,
        overhead_pct=overhead,
        gap_total=outcome.gap_total,
        gap_overhead=outcome.gap_overhead,
        effort=effort,
        work=outcome.work,
        message=outcome.message,
        machine=machine(with_highs=True),
    )


def run(out_csv: Path, models: list[str] | None = None, effort: float | None = None) -> pd.DataFrame:
    """Benchmark `models` (default: `default_models()`) and write one CSV row per graph, as each ends."""
    return write_rows(out_csv, BenchRow, (bench_one(model, effort) for model in models or default_models()))
