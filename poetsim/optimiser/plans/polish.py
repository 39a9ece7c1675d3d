"""Local improvement of a plan: keep an output across a gap instead of recomputing it again.

The plans made from rules and from the covers' choices decide, per output, "recompute before
the next reader"; where RAM allows, holding the output from its previous use to that reader is
cheaper, and the recomputations that only served to rebuild it (its dead inputs) go too. On
the ResNet-18 study (rpi4, 50 % RAM, recompute-only) the cover's plan recomputed `conv1` for
`layer1.0.conv1.grad` (stage 133) and again for `bn1.grad` two stages later; keeping it between
the two fits the budget and cuts the overhead from 3.27 J to 2.52 J.

`polish` tries every such *bridge* of the incumbent, keeps the one that saves most while the plan
still fits the budgets by the model's own accounting (`plan.figures`, the same judge as
`Incumbent.offer`), and repeats until none saves energy or the time is up. It never makes a plan
worse, and each plan it returns is built with the same four sets per stage as every other plan.
"""

from dataclasses import replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.plans.plan import Plan, figures
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Timing

#: At most this many improving bridges are applied in one call (each is a full pass over the
#: candidates): a bound on the work when the clock has no limit.
MAX_ROUNDS = 200


def polish(
    plan: Plan, graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, allowance: Allowance | None = None
) -> Plan:
    """The plan after every bridge that saves energy and still fits, best saving first.

    `allowance` stops the search there with the best plan so far.
    """
    best_j = figures(plan, graph, costs, timing).total_j
    for _ in range(MAX_ROUNDS):
        found = None
        for candidate in bridges(plan, graph):
            if spent(allowance):
                return plan if found is None else found  # the best this round had reached
            charge(allowance, replay_units(len(graph)))
            fig = figures(candidate, graph, costs, timing)
            if budgets.fits(fig) and fig.total_j < best_j:
                found, best_j = candidate, fig.total_j
        if found is None:
            return plan
        plan = found
    return plan


def bridges(plan: Plan, graph: TrainingGraph):
    """Each plan that keeps one recomputed output from its previous presence to its recomputation.

    For a recomputation of i in stage s, let p be the last earlier stage where i is computed,
    paged in or kept; i is then added to the kept sets of stages p .. s-1 (so it is resident
    at the start of s) and no longer computed in s, and the recomputations of stage s that
    nothing reads any more are dropped with it.
    """
    for stage, computed in enumerate(plan.computed):
        for i in computed[:-1]:  # the last compute of a stage is its own node
            previous = _last_presence(plan, i, stage)
            if previous is None:
                continue
            kept = list(plan.kept)
            for s in range(previous, stage):
                kept[s] = kept[s] | {i}
            stage_computed = [k for k in computed if k != i]
            yield replace(
                plan,
                kept=tuple(kept),
                computed=_with_stage(
                    plan.computed, stage, _live(stage_computed, stage, kept[stage], plan.paged_out[stage], graph)
                ),
            )


def _last_presence(plan: Plan, i: int, stage: int) -> int | None:
    for s in range(stage - 1, -1, -1):
        if i in plan.kept[s] or i in plan.paged_in[s] or i in plan.computed[s]:
            return s
    return None


def _live(
    computed: list[int], stage: int, kept: frozenset[int], paged_out: frozenset[int], graph: TrainingGraph
) -> tuple[int, ...]:
    """The stage's computes without recomputations whose output nothing uses any more.

    A recomputed output is used when a later compute of the stage reads it, or it is kept for
    the next stage or paged out; dropping one can leave its own inputs unused, so repeat.
    """
    live = list(computed)
    while True:
        dead = [
            k
            for n, k in enumerate(live[:-1])
            if k not in kept and k not in paged_out and not any(k in graph.nodes[j].deps for j in live[n + 1 :])
        ]
        if not dead:
            return tuple(live)
        live = [k for k in live if k not in dead]


def _with_stage(computed: tuple[tuple[int, ...], ...], stage: int, new: tuple[int, ...]):
    return computed[:stage] + (new,) + computed[stage + 1 :]
