"""Benchmark of the simulator: instructions and events per CPU second, memory per instruction.

Cases. Synthetic: a training-shaped chain (forward chain, loss, backward chain, each gradient
reading its forward activation) whose schedule keeps the last activation, pages every even one
out and back in, and recomputes every odd one from its paged neighbour, so all four
instructions, waits and (on a narrow bus) contention are exercised at any length; the longest
has 49,999 forward nodes (99,999 nodes, the most a graph may have), about 325,000
instructions. Zoo: the keep-all and checkpoint-sqrt baselines of zoo models on the `rpi4`
profile, and a greedy paging schedule of ResNet-18 on the Jetson TX2, whose bus-bound operators
contend with its transfers. Every case runs in both replay modes.

Figures. Time is CPU time (`time.process_time`) of `simulate()`, which includes its validation
by the checker; the best of several runs is reported (the machine may be shared), with the
median beside it: `REPEATS` runs, or as many as take `MIN_CASE_CPU_S` for a short case.
`instructions` excludes `Free` (it moves no data and takes no time); `events` are rows of the
trace. Memory is the peak traced by `tracemalloc` during one more run, per instruction.
`checker_ratio` is the simulation's time over the checker's alone, `loop_ratio` over a bare
Python loop over the instructions. Targets: at least `TARGET_PER_S` instructions per
second and at most `TARGET_BYTES` bytes per instruction on every case.

    python -m benchmarks.simulator [out.csv] [--quick]

(default results/bench/simulator.csv; --quick runs only the short cases).

`shipped_agreement` replays every schedule shipped under results/<scenario>/points/ in both
modes and sets the simulated makespan and peak beside the checked prediction:

    python -m benchmarks.simulator --shipped [out.csv]   # default results/bench/simulator_shipped.csv
"""

import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd

from poetsim import optimiser
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.graphs.zoo import build_model
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.inputs.scenario import load_scenario
from poetsim.optimiser.baselines.simple import PAGING, greedy_plan
from poetsim.optimiser.plans import plan as plans
from poetsim.pipeline import problem_for_point
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import CostTable, node_costs
from poetsim.schedule.formats import load_json
from poetsim.schedule.model import Budgets, Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing
from poetsim.simulator import Mode, simulate
from poetsim.sweeps.runner import point_slug

_T = TypeVar("_T")

DEFAULT_OUT = Path("results/bench/simulator.csv")
SHIPPED_OUT = Path("results/bench/simulator_shipped.csv")
#: Forward lengths of the synthetic chains: about 1,000, 10,000 and 325,000 instructions.
CHAIN_FORWARD_NODES = (150, 1500, 49_999)  # the longest: 99,999 nodes, within MAX_NODES
QUICK_CHAIN_FORWARD_NODES = (150, 1500)
#: A bus narrow enough that the chain's operators contend with its transfers (bytes/s): a forward
#: operator moves 2 MB in 20 ms (100 MB/s) beside a page-out at 24.5 MB/s or a page-in at 45.5 MB/s.
NARROW_BUS_BYTES_PER_S = 110e6
ZOO_MODELS = ("resnet18", "resnet50", "bert_base")
PLATFORM = "rpi4"
#: Runs per case; the best CPU time is reported, the median beside it. A short case runs until
#: its runs have taken `MIN_CASE_CPU_S` (at most `MAX_REPEATS` runs): a run of a few hundred
#: microseconds is shorter than a time slice, so five of them may all be slowed by a neighbour.
REPEATS = 5
MIN_CASE_CPU_S = 0.5
MAX_REPEATS = 500
TARGET_PER_S = 300_000
TARGET_BYTES = 200


@dataclass(frozen=True)
class Case:
    """One schedule to replay: its name, graph, costs, device and RAM budget.

    Without a budget given, the RAM budget is the schedule's peak under the stage model, as if
    it had been made for it (the deadline is left open), so that free-running waits for RAM.
    """

    name: str
    schedule: Schedule
    graph: TrainingGraph
    costs: CostTable
    platform: Platform
    given_budgets: Budgets | None = None

    @property
    def budgets(self) -> Budgets:
        """The budgets given, else the schedule's own peak RAM and no runtime limit."""
        if self.given_budgets is not None:
            return self.given_budgets
        peak = check_schedule(self.schedule, self.graph, self.costs, Timing.OVERLAP).peak_ram_bytes
        return Budgets(int(peak), float("inf"))


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
    """A schedule of the training chain that both pages and recomputes.

    It keeps f_{L-1}; pages even activations out after their forward use and back in before
    their backward use; drops odd ones and recomputes them from their (paged-in) predecessor.
    """
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


def cases(quick: bool = False) -> list[Case]:
    """The benchmark's schedules (module doc); `quick`: the short ones only."""
    pi = load_platform(PLATFORM)
    narrow = pi.model_copy(update={"memory_bus_bytes_per_s": NARROW_BUS_BYTES_PER_S})
    found = []
    for length in QUICK_CHAIN_FORWARD_NODES if quick else CHAIN_FORWARD_NODES:
        graph = training_chain(length)
        schedule = chain_schedule(graph)
        found.append(Case(f"chain{length} {PLATFORM}", schedule, graph, node_costs(graph, pi), pi))
        found.append(Case(f"chain{length} {PLATFORM} narrow-bus", schedule, graph, node_costs(graph, narrow), narrow))
    for model in ZOO_MODELS[:1] if quick else ZOO_MODELS:
        graph = build_model(model)
        costs = node_costs(graph, pi)
        for name, baseline in (("keep-all", optimiser.keep_all), ("checkpoint-sqrt", optimiser.checkpoint_sqrt)):
            found.append(Case(f"{model} {name} {PLATFORM}", baseline(graph, costs, Timing.OVERLAP)[0], graph, costs, pi))
    if not quick:
        graph, tx2 = build_model("resnet18_cifar", batch_size=8), load_platform("jetson-tx2")
        costs = node_costs(graph, tx2)
        budgets = Budgets(graph.keep_all_peak_bytes // 2, float("inf"))
        plan = greedy_plan(graph, costs, budgets, PAGING, Timing.OVERLAP)
        assert plan is not None  # paging alone fits half the keep-all peak
        schedule = plans.to_schedule(plan, graph, costs, Timing.OVERLAP)
        found.append(Case("resnet18_cifar paging 50% jetson-tx2", schedule, graph, costs, tx2, budgets))
    return found


def _best_cpu_s(run: Callable[[], _T], repeats: int) -> tuple[float, float, _T]:
    """Best and median CPU seconds of `repeats` calls of `run`, and its last result."""
    times_s = []
    for _ in range(repeats):
        start = time.process_time()
        result = run()
        times_s.append(time.process_time() - start)
    return min(times_s), statistics.median(times_s), result


def _loop(schedule: Schedule) -> int:
    """A bare pass over the instructions: the floor any replay in Python is set against."""
    count = 0
    for stage in schedule.stages:
        for ins in stage:
            if type(ins) is not Free:
                count += 1
    return count


def measure(case: Case, mode: Mode) -> dict:
    """Time, count and weigh one case in one mode (module doc)."""
    counts = case.schedule.counts()
    instructions = sum(counts.values()) - counts["free"]
    budgets = case.budgets

    def replay():
        return simulate(case.schedule, case.graph, case.costs, case.platform, mode=mode, budgets=budgets)

    first_s, _, _ = _best_cpu_s(replay, 1)  # to size the repeats
    repeats = REPEATS if instructions < 100_000 else 3
    repeats = max(repeats, min(MAX_REPEATS, math.ceil(MIN_CASE_CPU_S / max(first_s, 1e-9))))
    cpu_s, median_s, result = _best_cpu_s(replay, repeats)
    checker_s, _, predicted = _best_cpu_s(lambda: check_schedule(case.schedule, case.graph, case.costs, Timing.OVERLAP), repeats)
    loop_s, _, _ = _best_cpu_s(lambda: _loop(case.schedule), repeats)
    tracemalloc.start()
    replay()
    memory_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    events = len(result.events)
    return {
        "case": case.name,
        "mode": mode.value,
        "nodes": len(case.graph),
        "instructions": instructions,
        "frees": counts["free"],
        "events": events,
        "cpu_s": cpu_s,
        "median_cpu_s": median_s,
        "instructions_per_s": instructions / cpu_s,
        "events_per_s": events / cpu_s,
        "checker_cpu_s": checker_s,
        "checker_ratio": cpu_s / checker_s,
        "loop_ratio": cpu_s / max(loop_s, 1e-9),
        "memory_bytes": memory_bytes,
        "bytes_per_instruction": memory_bytes / instructions,
        "meets_speed_target": instructions / cpu_s >= TARGET_PER_S,
        "meets_memory_target": memory_bytes / instructions <= TARGET_BYTES,
        "makespan_s": result.makespan_s,
        "predicted_runtime_s": predicted.runtime_s,
        "makespan_vs_predicted_pct": 100 * (result.makespan_s / predicted.runtime_s - 1),
        "bus_contention_s": result.delta.bus_contention_s,
        "stall_s": result.stall_s,
        "bus_busy": result.bus_busy,
        "peak_ram_bytes": result.figures.peak_ram_bytes,
        "predicted_peak_ram_bytes": predicted.peak_ram_bytes,
        "ram_budget_bytes": budgets.ram_bytes,
    }


def run(out_csv: Path = DEFAULT_OUT, quick: bool = False) -> pd.DataFrame:
    """Measure every case in both modes and write one row per case and mode to `out_csv`."""
    rows = [measure(case, mode) for case in cases(quick) for mode in Mode]
    table = pd.DataFrame(rows)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_csv, index=False)
    return table


def shipped_agreement(
    out_csv: Path = SHIPPED_OUT, scenarios_dir: Path = Path("scenarios"), results_dir: Path = Path("results")
) -> pd.DataFrame:
    """Replay each shipped point's schedule in both modes beside its checked prediction.

    The costs are today's (`node_costs`), so a schedule made under older costs is re-costed; the
    RAM budget is the point's. One row per point and mode: predicted and simulated makespan and
    peak, their differences, and the makespan difference by cause.
    """
    rows = []
    for scenario_path in sorted(Path(scenarios_dir).glob("*.yaml")):
        scenario = load_scenario(scenario_path)
        points_dir = Path(results_dir) / scenario.name / "points"
        for point in scenario.points():
            problem = problem_for_point(scenario, point)
            # Folders are named by point_slug; results made before file keys carried hashes used names.
            older = f"{Path(point.model).stem}_{problem.platform.name}_ram{point.ram.key}_rt{point.runtime_x!r}x_{point.strategy}"
            paths = [points_dir / name / "schedule.json" for name in (point_slug(point), older.replace("%", "pct"))]
            path = next((path for path in paths if path.exists()), None)
            if path is None:
                continue
            schedule = load_json(path)
            predicted = check_schedule(schedule, problem.graph, problem.costs, problem.timing)
            for mode in Mode:
                result = simulate(
                    schedule,
                    problem.graph,
                    problem.costs,
                    problem.platform,
                    mode=mode,
                    budgets=problem.budgets,
                    ram_capacity_bytes=problem.ram_capacity_bytes,
                )
                rows.append(
                    {
                        "scenario": scenario.name,
                        "model": problem.graph.name,
                        "platform": problem.platform.name,
                        "ram": str(point.ram),
                        "runtime_x": point.runtime_x,
                        "strategy": point.strategy,
                        "timing": problem.timing.value,
                        "mode": mode.value,
                        "page_outs": predicted.page_outs,
                        "recomputations": predicted.recomputations,
                        "predicted_runtime_s": predicted.runtime_s,
                        "simulated_runtime_s": result.makespan_s,
                        "runtime_difference_pct": 100 * (result.makespan_s / predicted.runtime_s - 1),
                        "predicted_peak_ram_bytes": predicted.peak_ram_bytes,
                        "simulated_peak_ram_bytes": result.figures.peak_ram_bytes,
                        "ram_budget_bytes": problem.budgets.ram_bytes,
                        "stall_s": result.stall_s,
                        "over_deadline": result.over_deadline,
                        **{f"delta_{name}": value for name, value in vars(result.delta).items()},
                    }
                )
    table = pd.DataFrame(rows)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_csv, index=False)
    return table


if __name__ == "__main__":
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--shipped" in flags:
        shipped = shipped_agreement(Path(arguments[0]) if arguments else SHIPPED_OUT)
        summary = shipped.groupby(["scenario", "mode"])["runtime_difference_pct"].agg(["count", "min", "max"])
        print(summary.to_string())
        sys.exit(0)
    table = run(Path(arguments[0]) if arguments else DEFAULT_OUT, quick="--quick" in flags)
    columns = [
        "case",
        "mode",
        "instructions",
        "events",
        "cpu_s",
        "instructions_per_s",
        "events_per_s",
        "checker_ratio",
        "bytes_per_instruction",
        "makespan_vs_predicted_pct",
        "peak_ram_bytes",
    ]
    print(table[columns].to_string(index=False))
