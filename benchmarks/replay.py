"""Benchmark of a plan's replay in polish: every stage replayed, against the plan's accounting lending its unchanged stages.

On the nine architectures of the outside set (`scenarios/outside.yaml`) on the Raspberry Pi 4 at
50 % of keep-all RAM and 1.2x, overlap timing: the first greedy plan that fits with both moves
(`baselines.simple.start_plan`, as a call's first schedule), then one scan of polish over it:
each single change (`polish.changes_of`) accounted from scratch, and accounted with the plan's
own accounting as `base` (`plan.account`). One row per graph.

Target: every change's accounting the same either way, to the bit (`same`). Reported: changes
per second both ways and their ratio, and the seconds per work unit both ways (a replay is
charged `work.replay_units` however many stages it replays). And the share of the time a change
takes, made and replayed as polish replays it, that it takes made and screened by its energy alone
(`plan.Energies`, charged `work.screen_units`): `screen_share`.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd

from benchmarks.common import machine, write_rows
from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.io import load_graph
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser.baselines.simple import start_plan
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.polish import changes_of
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable, node_costs
from poetsim.schedule.model import Budgets, Moves, Timing

GRAPHS = Path("scenarios/graphs/outside")
MODELS = (
    "mobilenet_v1",
    "mobilenet_v3_small",
    "shufflenet_v2",
    "efficientnet_b0",
    "densenet_bc",
    "resnext29",
    "squeezenet1_1",
    "vit_tiny",
    "text_transformer",
)
PLATFORM = "rpi4"
RAM_SHARE = 0.5
RUNTIME_X = 1.2
HYBRID = Moves(recompute=True, page=True)


@dataclass(frozen=True)
class ReplayRow:
    """One graph: its plan's changes, replayed both ways."""

    model: str
    nodes: int
    changes: int
    alone_per_s: float
    lent_per_s: float
    speedup: float
    alone_s_per_unit: float
    lent_s_per_unit: float
    same: bool
    screen_share: float
    machine: str


def replay_row(model: str) -> ReplayRow | None:
    """The row of one graph; None where no greedy plan fits (then there is nothing to polish)."""
    graph = load_graph(GRAPHS / f"{model}.json")
    costs = node_costs(graph, load_platform(PLATFORM))
    timing = Timing.OVERLAP
    budgets = Budgets(int(RAM_SHARE * graph.keep_all_peak_bytes), RUNTIME_X * costs.plain_runtime_s)
    plan = start_plan(graph, costs, budgets, HYBRID, timing, first_fit=True)
    if plan is None:
        return None
    changes = list(changes_of(plan, graph, HYBRID, costs, timing))
    started = perf_counter()
    alone = [plans.account(change, graph, costs, timing) for change in changes]
    alone_s = perf_counter() - started
    started = perf_counter()
    base = plans.account(plan, graph, costs, timing)
    lent = [plans.account(change, graph, costs, timing, base) for change in changes]
    lent_s = perf_counter() - started
    units = replay_units(len(graph)) * len(changes)
    made_s, replayed_s, screened_s = _scan_times(plan, graph, costs, timing, base)
    return ReplayRow(
        model=model,
        nodes=len(graph),
        changes=len(changes),
        alone_per_s=len(changes) / alone_s,
        lent_per_s=len(changes) / lent_s,
        speedup=alone_s / lent_s,
        alone_s_per_unit=alone_s / units,
        lent_s_per_unit=lent_s / units,
        same=alone == lent,
        screen_share=(made_s + screened_s) / (made_s + replayed_s),
        machine=f"{machine()}, load {os.getloadavg()[0]:.1f}",
    )


def _scan_times(
    plan: plans.Plan, graph: TrainingGraph, costs: CostTable, timing: Timing, base: plans.Accounting
) -> tuple[float, float, float]:
    """Seconds of one scan of polish over `plan`: making its changes, replaying them, and screening them by energy.

    Replayed as polish replays a change (accounting lent by `base`, then its figures); screened
    as polish screens one (`plan.Energies.of`).
    """
    started = perf_counter()
    changes = list(changes_of(plan, graph, HYBRID, costs, timing, base))
    made_s = perf_counter() - started
    started = perf_counter()
    for change in changes:
        plans.figures(change, graph, costs, timing, plans.account(change, graph, costs, timing, base))
    replayed_s = perf_counter() - started
    started = perf_counter()
    energies = plans.Energies(plan, costs, timing, plans.figures(plan, graph, costs, timing, base).total_j)
    for change in changes:
        energies.of(change)
    return made_s, replayed_s, perf_counter() - started


def run(out: Path) -> pd.DataFrame:
    """Replay every graph's changes both ways; write the CSV; return its table."""
    table = write_rows(out, ReplayRow, (row for row in map(replay_row, MODELS) if row is not None))
    if not table["same"].all():
        print("replay: a change's accounting differs when its plan's accounting lends the unchanged stages")
    return table
