"""Benchmark of the optimiser: model size, build, hand-off and solve time, and proven gaps.

One row per graph: the zoo's models and the Checkmate paper's training graphs (the shared
yardstick of the rematerialisation literature, Jain et al. MLSys 2020), each solved hybrid on
the Raspberry Pi 4 profile at 50 % of keep-all RAM and 1.2x runtime under overlap timing. The
figures answer: how large the MILP is, where the time goes (Python build, hand-off to the
solver, the solver itself), and how close to proven optimal the solver gets within the limit.
"""

import csv
from dataclasses import dataclass, fields
from pathlib import Path
from time import perf_counter

from poetsim.costs import node_costs
from poetsim.graphio import load_graph
from poetsim.optimiser import optimise
from poetsim.profiles import load_platform
from poetsim.schedule import Budgets, Strategy, Timing

#: The Checkmate graphs shipped beside the repository (../shared/benchmarks/graphs).
CHECKMATE_GRAPHS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "graphs"

#: Zoo models of the benchmark, smallest first: POET's main model, then two 300+-node graphs.
ZOO_MODELS = ("resnet18_cifar", "mobilenet_v2", "resnet50")

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
    overhead_pct: float | None
    gap_total: float | None
    gap_overhead: float | None
    time_limit_s: float
    message: str


def default_models() -> list[str]:
    """The zoo models, then every Checkmate graph present, by path."""
    return [*ZOO_MODELS, *sorted(str(p) for p in CHECKMATE_GRAPHS.glob("*.json"))]


def bench_one(model: str, time_limit_s: float) -> BenchRow:
    """Solve one graph at the benchmark's budgets and record where the time went."""
    graph = load_graph(model)
    costs = node_costs(graph, load_platform(PLATFORM))
    budgets = Budgets(int(RAM_SHARE * graph.keep_all_peak_bytes), RUNTIME_X * costs.plain_runtime_s)
    keep_all_j = costs.plain_compute_j + costs.static_power_w * costs.plain_runtime_s
    began = perf_counter()
    outcome = optimise(graph, costs, budgets, Strategy.HYBRID, Timing.OVERLAP, time_limit_s=time_limit_s)
    wall_s = perf_counter() - began
    overhead = None if outcome.objective_j is None else 100 * (outcome.objective_j / keep_all_j - 1)
    return BenchRow(
        model=graph.name, nodes=len(graph), edges=len(graph.edges),
        variables=outcome.num_variables, constraints=outcome.num_constraints,
        build_s=outcome.build_s, handoff_s=outcome.handoff_s, solve_s=outcome.solve_s, wall_s=wall_s,
        status=outcome.status, keep_all_j=keep_all_j, objective_j=outcome.objective_j, bound_j=outcome.bound_j,
        overhead_pct=overhead, gap_total=outcome.gap_total, gap_overhead=outcome.gap_overhead,
        time_limit_s=time_limit_s, message=outcome.message,
    )


def run(out_csv: Path, models: list[str] | None = None, time_limit_s: float = 600) -> list[BenchRow]:
    """Benchmark `models` (default: `default_models()`) and write one CSV row per graph.

    Rows are written as they finish, so an interrupted run keeps what it measured.
    """
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in fields(BenchRow)]
    rows = []
    with out_csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for model in models or default_models():
            row = bench_one(model, time_limit_s)
            writer.writerow({name: getattr(row, name) for name in names})
            handle.flush()
            rows.append(row)
    return rows
