"""Benchmark of the simulator: simulated instructions per second on long schedules.

Two kinds of case. Synthetic: a training-shaped chain (forward chain, loss, backward chain,
each gradient reading its forward activation) whose schedule keeps the last activation, pages
every even one out and back in, and recomputes every odd one from its paged neighbour, so all
four instructions, stalls and (with a narrow bus) contention are exercised at any length. Zoo:
the keep-all and checkpoint-sqrt baselines of zoo models on the `rpi4` profile. Each schedule
is checked by the independent checker first, so the benchmark only times valid replays.

Each case is run `REPEATS` times and the best wall time is reported (the machine is shared, so
the best is the least disturbed), with the median beside it. The prediction of the checker's
`overlap` model is set beside the simulated makespan and peak. Run it with
`python -m benchmarks.simulator [out.csv]` (default results/bench/simulator.csv).
"""

import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from poetsim.checker import check_schedule
from poetsim.costs import CostTable, node_costs
from poetsim.graph import Node, TrainingGraph
from poetsim.profiles import Platform, load_platform
from poetsim.schedule import Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import simulate

DEFAULT_OUT = Path("results/bench/simulator.csv")
#: Forward lengths of the synthetic chains: about 1,000 and 10,000 instructions.
CHAIN_FORWARD_NODES = (150, 1500)
#: A bus narrow enough that compute and paging contend on the synthetic chain (bytes/s).
NARROW_BUS_BYTES_PER_S = 150e6
ZOO_MODELS = ("resnet18", "resnet50", "bert_base")
PLATFORM = "rpi4"
#: Runs per case; the best is reported as wall_s, the median beside it.
REPEATS = 5


def training_chain(forward_nodes: int) -> TrainingGraph:
    """f_0..f_{L-1} (a chain), the loss L, then gradients b_i = node 2L - i reading f_i and b_{i+1}.

    Activations are 1 MB and cost 40 MFLOP (20 ms at 2 GFLOP/s, about a 1 MB page-in on a Pi).
    """
    length = forward_nodes
    nodes = [Node(i, f"f{i}", "conv", False, (i - 1,) if i else (), 1_000_000, flops=40e6) for i in range(length)]
    nodes.append(Node(length, "loss", "loss", False, (length - 1,), 4, flops=1e3))
    for i in reversed(range(length)):
        nodes.append(Node(2 * length - i, f"b{i}", "conv_grad", True, (i, 2 * length - i - 1), 1_000_000, flops=80e6))
    return TrainingGraph.create(f"chain{length}", nodes)


def chain_schedule(graph: TrainingGraph) -> Schedule:
    """Keep f_{L-1}; page even activations out after their forward use and back in before
    their backward use; drop odd ones and recompute them from their (paged-in) predecessor."""
    length = (len(graph) - 1) // 2
    mode = ["keep" if i == length - 1 else ("page" if i % 2 == 0 else "recompute") for i in range(length)]
    stages: list[list[Instruction]] = [[] for _ in range(len(graph))]
    for t in range(length):
        if t and mode[t - 1] == "page":
            stages[t].append(PageOut(t - 1))
        stages[t].append(Compute(t))
        if t and mode[t - 1] != "keep":
            stages[t].append(Free(t - 1))
    stages[length].append(Compute(length))
    for i in range(length):
        if mode[i] == "page":
            # First needed by the recomputation of i+1, or by b_i if i+1 is kept.
            first_need = 2 * length - (i + 1 if mode[i + 1] == "recompute" else i)
            stages[first_need - 1].insert(0, PageIn(i))
    for i in reversed(range(length)):
        stage, grad = stages[2 * length - i], 2 * length - i
        if mode[i] == "recompute":
            stage.append(Compute(i))
        stage += [Compute(grad), Free(i), Free(grad - 1)]
    stages[-1].append(Free(len(graph) - 1))
    return Schedule(graph.name, len(graph), Timing.OVERLAP, tuple(tuple(s) for s in stages))


def _row(case: str, schedule: Schedule, graph: TrainingGraph, costs: CostTable, platform: Platform,
         bus_bytes_per_s: float | None = None) -> dict:
    """Check, then simulate `REPEATS` times; the best wall time is the one least disturbed by other load."""
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    instructions = sum(schedule.counts().values())
    walls_s = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = simulate(schedule, graph, costs, platform, bus_bytes_per_s=bus_bytes_per_s)
        walls_s.append(time.perf_counter() - start)
    best_s = min(walls_s)
    return {
        "case": case, "nodes": len(graph), "instructions": instructions, "trace_rows": len(result.trace),
        "wall_s": best_s, "median_wall_s": statistics.median(walls_s), "ops_per_s": instructions / best_s,
        "makespan_s": result.makespan_s, "predicted_runtime_s": predicted.runtime_s, "stall_s": result.stall_s,
        "bus_busy": result.bus_busy, "peak_ram_bytes": result.figures.peak_ram_bytes,
        "predicted_peak_ram_bytes": predicted.peak_ram_bytes,
    }


def run(out_csv: Path = DEFAULT_OUT) -> pd.DataFrame:
    """Time the simulator on every case and write one row per case to `out_csv`."""
    from poetsim import optimiser
    from poetsim.zoo import build_model

    platform = load_platform(PLATFORM)
    rows = []
    for length in CHAIN_FORWARD_NODES:
        graph = training_chain(length)
        schedule, costs = chain_schedule(graph), node_costs(graph, platform)
        rows.append(_row(f"chain{length} {PLATFORM}", schedule, graph, costs, platform))
        rows.append(_row(f"chain{length} {PLATFORM} narrow-bus", schedule, graph, costs, platform, NARROW_BUS_BYTES_PER_S))
    for model in ZOO_MODELS:
        graph = build_model(model)
        costs = node_costs(graph, platform)
        for name, baseline in (("keep-all", optimiser.keep_all), ("checkpoint-sqrt", optimiser.checkpoint_sqrt)):
            schedule, _ = baseline(graph, costs, Timing.OVERLAP)
            rows.append(_row(f"{model} {name} {PLATFORM}", schedule, graph, costs, platform))
    table = pd.DataFrame(rows)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_csv, index=False)
    return table


if __name__ == "__main__":
    print(run(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT).to_string(index=False))
