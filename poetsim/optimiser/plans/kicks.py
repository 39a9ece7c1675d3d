"""Kicks: a step out of a local optimum of `polish` and `swap`, then back within the RAM budget.

A plan that polish and swap leave has no single change, nor a change paired with one eviction,
that saves energy and fits. Its cheaper neighbours are further away: a change that saves much
but breaks the RAM budget, and several evictions that make room for it. A kick (`kicked`) takes
one such change, drawn by a seeded random generator from those that keep the deadline, then
evicts outputs resident at the stage where RAM peaks (`polish.evictions_of`: by recomputation or
by paging, as the moves allow), each time the one that frees the most bytes there per joule it
costs or the next best (the same generator decides), until the plan fits or `MAX_EVICTIONS` are
made. Never the output the change made resident: evicting it would only undo the change. What
comes out is usually dearer than the plan kicked; polished, it often reaches another local
optimum, sometimes a cheaper one. Repeated from the best plan so far, this is an iterated local
search (Lourenço, Martin and Stützle, "Iterated Local Search", Handbook of Metaheuristics, 2003).

The generator is seeded by the caller and the changes come in a fixed order, so the same plan
and seed give the same kick on any machine.
"""

import random

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.plans.plan import Plan, account, figures
from poetsim.optimiser.plans.polish import BOTH, changes_of, evictions_of
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing

#: At most this many evictions bring a kicked plan back within the RAM budget.
MAX_EVICTIONS = 8

#: The eviction taken is the best per byte or one of the next `CHOICES - 1`, by the generator.
CHOICES = 2


def kicks(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None = None,
    moves: Moves = BOTH,
) -> list[Plan]:
    """The single changes of `plan` (`polish.changes_of`) that save energy and keep the deadline but break the RAM budget.

    In their fixed order. One replay of a plan is charged to `allowance` per change; once it is
    spent, those found so far.
    """
    own = account(plan, graph, costs, timing)
    own_j = figures(plan, graph, costs, timing, own).total_j
    found = []
    for changed in changes_of(plan, graph, moves, costs, timing, own, hopeful=True):
        if spent(allowance):
            break
        charge(allowance, replay_units(len(graph)))
        fig = figures(changed, graph, costs, timing, base=own)
        if fig.total_j < own_j and fig.peak_ram_bytes > budgets.ram_bytes and budgets.meets_deadline(fig.runtime_s):
            found.append(changed)
    return found


def kicked(
    plan: Plan,
    changed: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    rng: random.Random,
    allowance: Allowance | None = None,
    moves: Moves = BOTH,
) -> Plan | None:
    """`changed` (one of `kicks(plan)`) after the evictions that bring it back within the RAM budget.

    None where evictions cannot do so in `MAX_EVICTIONS` steps, or where the result misses the
    deadline. One replay of a plan is charged to `allowance` per plan tried; once it is spent, None.
    """
    return _evicted(changed, _made_resident(plan, changed), graph, costs, budgets, timing, rng, allowance, moves)


def _made_resident(plan: Plan, changed: Plan) -> frozenset[int]:
    """The outputs `changed` keeps in some stage where `plan` does not."""
    return frozenset().union(*(new - old for old, new in zip(plan.kept, changed.kept) if new is not old))


def _evicted(
    plan: Plan,
    spared: frozenset[int],
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    rng: random.Random,
    allowance: Allowance | None,
    moves: Moves,
) -> Plan | None:
    """`plan` after evictions at its RAM peak (`polish.evictions_of`, none of `spared`) until it fits; None if it does not."""
    for _ in range(MAX_EVICTIONS + 1):
        charge(allowance, replay_units(len(graph)))
        acc = account(plan, graph, costs, timing)
        fig = figures(plan, graph, costs, timing, acc)
        if fig.peak_ram_bytes <= budgets.ram_bytes:
            return plan if budgets.fits(fig) else None
        peak = max(range(len(graph)), key=acc.stage_peak_bytes)
        ranked = []
        for n, evicted in enumerate(evictions_of(plan, graph, costs, acc, peak, moves, spared)):
            if spent(allowance):
                return None
            charge(allowance, replay_units(len(graph)))
            ev_acc = account(evicted, graph, costs, timing, base=acc)
            freed = acc.stage_peak_bytes(peak) - ev_acc.stage_peak_bytes(peak)
            if freed > 0:
                extra_j = figures(evicted, graph, costs, timing, ev_acc).total_j - fig.total_j
                ranked.append((extra_j / freed, n, evicted))
        if not ranked:
            return None
        ranked.sort(key=lambda entry: entry[:2])
        plan = ranked[rng.randrange(min(CHOICES, len(ranked)))][2]
    return None
