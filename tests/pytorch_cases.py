"""Schedules for the PyTorch tests that recompute and page at once, made fast and checked.

The MILP takes its time limit on graphs of a few hundred nodes; these tests need a schedule
that does both moves in well under a second. `recompute_and_page` takes checkpoint-sqrt's
schedule (which recomputes every segment in the backward pass) and pages one node out across
the longest stretch of stages in which nothing reads it; the checker must accept the result.
"""

import itertools

from poetsim.errors import ScheduleError
from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser import checkpoint_sqrt
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Compute, Free, PageIn, PageOut, Schedule, Timing


def recompute_and_page(graph: TrainingGraph, costs: CostTable, prefer=frozenset(), timing: Timing = Timing.OVERLAP) -> Schedule:
    """Checkpoint-sqrt with one node paged out and back in across an idle stretch (nodes in `prefer` first)."""
    schedule, _ = checkpoint_sqrt(graph, costs, timing)
    reads: dict[int, set[int]] = {i: set() for i in range(len(graph))}
    computes: dict[int, list[int]] = {i: [] for i in range(len(graph))}
    for t, ins in schedule.instructions():
        if isinstance(ins, Compute):
            computes[ins.node].append(t)
            for d in graph.nodes[ins.node].deps:
                reads[d].add(t)
    candidates = []
    for i, read_in in reads.items():
        ordered = sorted(read_in)
        for a, b in itertools.pairwise(ordered):
            if b - a >= 3 and not any(a < t <= b for t in computes[i]):
                candidates.append((i not in prefer, -(b - a), i, a, b))
    for _, _, i, a, b in sorted(candidates):
        stages = [list(stage) for stage in schedule.stages]
        stages[a + 1].insert(0, PageOut(i))
        stages[a + 1].append(Free(i))
        stages[b - 1].insert(0, PageIn(i))
        paged = Schedule(schedule.graph_name, schedule.num_nodes, timing, tuple(tuple(s) for s in stages))
        try:
            check_schedule(paged, graph, costs, timing)
        except ScheduleError:
            continue
        return paged
    raise AssertionError(f"{graph.name}: no node can be paged across an idle stretch")


def run_recomputed_and_paged(captured, swap_dir, prefer_names=()):
    """Execute `captured` following `recompute_and_page`'s schedule on the rpi4 profile's costs.

    The nodes named in `prefer_names` are paged first. Returns the execution and the checked
    prediction of its schedule.
    """
    from poetsim.inputs.profiles import load_platform
    from poetsim.pytorch.executor import execute
    from poetsim.schedule.costs import node_costs

    graph = captured.graph
    costs = node_costs(graph, load_platform("rpi4"))
    prefer = {node.id for node in graph.nodes if node.name in prefer_names}
    schedule = recompute_and_page(graph, costs, prefer=prefer)
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    return execute(captured, schedule, swap_dir), predicted
