"""Schedules made without a solver: keep-all, checkpoint-sqrt, and the greedy MIP start.

All three are decision sets of `rules` (keep, recompute or page an output between two uses),
so each yields a plan that the model admits. The greedy start is what `optimise` hands the
solver: a feasible answer at once, which the solver then improves.
"""

import math

from poetsim.costs import CostTable
from poetsim.graph import TrainingGraph
from poetsim.optimiser.plan import Accounting, Plan, account, figures, to_schedule
from poetsim.optimiser.rules import Mode, plan_from_decisions, reads, uses
from poetsim.schedule import Budgets, Figures, Schedule, Strategy, Timing

#: Candidates the greedy replays per step and per mode (the rest are ranked by a cheap estimate).
_REPLAYS_PER_MODE = 4


def keep_all(graph: TrainingGraph, costs: CostTable, timing: Timing) -> tuple[Schedule, Figures]:
    """Every node computed once and kept until its last reader: the reference of budgets."""
    return _result(plan_from_decisions(graph, {}), graph, costs, timing, "keep-all")


def checkpoint_sqrt(graph: TrainingGraph, costs: CostTable, timing: Timing) -> tuple[Schedule, Figures]:
    """Chen et al. 2016 (arXiv 1604.06174): keep ~sqrt(n) segment boundaries of the forward pass.

    The forward nodes are cut into about sqrt(n) segments of consecutive nodes; the last node of
    each segment is kept, the others are dropped across their longest idle interval (forward to
    backward) and recomputed from the nearest kept ancestors when the backward pass reads them,
    then kept until their last reader, so a segment is recomputed once, as in the paper. On a
    graph with long skip connections recomputation reaches back through several segments.
    """
    return _result(plan_from_decisions(graph, checkpoint_decisions(graph)), graph, costs, timing, "checkpoint-sqrt")


def checkpoint_decisions(graph: TrainingGraph) -> dict:
    """RECOMPUTE every forward node but the segment boundaries across its longest idle stretch.

    A stretch of no stage (the loss, read at once by its gradient) is kept: dropping it saves
    nothing.
    """
    forward = [n.id for n in graph.nodes if not n.backward]
    size = max(1, round(math.sqrt(len(forward))))
    boundaries = set(forward[size - 1::size])
    decisions = {}
    for i in forward:
        u = uses(graph, i)
        gaps = [(b - a, a, b) for a, b in zip(u, u[1:])]
        if i not in boundaries and gaps and max(gaps)[0] >= 2:
            _, a, b = max(gaps)
            decisions[i, a, b] = Mode.RECOMPUTE
    return decisions


def _result(plan: Plan, graph, costs, timing, name: str) -> tuple[Schedule, Figures]:
    schedule = to_schedule(plan, graph, costs, timing, {"strategy": name})
    return schedule, figures(plan, graph, costs, timing)


def fits(fig: Figures, budgets: Budgets) -> bool:
    """Whether figures meet the budgets (the deadline with the checker's 1e-9 tolerance)."""
    return fig.peak_ram_bytes <= budgets.ram_bytes and fig.runtime_s <= budgets.runtime_s * (1 + 1e-9)


def start_plan(graph: TrainingGraph, costs: CostTable, budgets: Budgets, strategy: Strategy, timing: Timing) -> Plan | None:
    """The cheapest plan that fits among keep-all, checkpoint-sqrt and the greedy; None if none does."""
    candidates = [plan_from_decisions(graph, {}), greedy_plan(graph, costs, budgets, strategy, timing)]
    if strategy is not Strategy.PAGING_ONLY:
        candidates.append(plan_from_decisions(graph, checkpoint_decisions(graph)))
    feasible = []
    for plan in candidates:
        if plan is not None:
            fig = figures(plan, graph, costs, timing)
            if fits(fig, budgets):
                feasible.append((fig.total_j, plan))
    return min(feasible, key=lambda pair: pair[0])[1] if feasible else None


def greedy_plan(graph: TrainingGraph, costs: CostTable, budgets: Budgets, strategy: Strategy, timing: Timing) -> Plan | None:
    """Take the cheapest bytes off the RAM peak until the budget fits, then undo what is not needed.

    Each step looks at the outputs resident at the start of the peak stage, in the interval
    that spans it, and ranks recomputing or paging each by energy per byte; the best few of each
    mode are replayed and the one that lowers the peak stage at the least energy per byte saved
    (stalls and cascaded recomputation included) is taken. A change that breaks the deadline is
    not tried again. Once the budget fits, each change is undone if the plan still fits without
    it. Cheap and not optimal: a MIP start.
    """
    allowed = [mode for mode, ok in ((Mode.RECOMPUTE, strategy is not Strategy.PAGING_ONLY),
                                     (Mode.PAGE, strategy is not Strategy.RECOMPUTE_ONLY)) if ok]
    decisions: dict[tuple[int, int, int], Mode] = {}
    banned: set = set()
    state = _replay(graph, costs, timing, decisions)
    while not fits(state[1], budgets):
        step = _best_step(graph, costs, budgets, timing, decisions, state, allowed, banned)
        if step is None:
            return None
        key, mode, state = step
        decisions[key] = mode
    return _polish(graph, costs, budgets, timing, decisions, state, allowed)[0]


def _polish(graph, costs, budgets, timing, decisions, state, allowed):
    """Undo each change the budget no longer needs, then try the other mode for each change."""
    for key in reversed(list(decisions)):
        trial = {k: m for k, m in decisions.items() if k != key}
        trial_state = _replay(graph, costs, timing, trial)
        if fits(trial_state[1], budgets):
            decisions, state = trial, trial_state
    for key, mode in list(decisions.items()):
        for other in allowed:
            if other is not mode:
                trial_state = _replay(graph, costs, timing, {**decisions, key: other})
                if fits(trial_state[1], budgets) and trial_state[1].total_j < state[1].total_j:
                    decisions, state = {**decisions, key: other}, trial_state
    return state


def _replay(graph, costs, timing, decisions) -> tuple[Plan, Figures, Accounting]:
    plan = plan_from_decisions(graph, decisions)
    return plan, figures(plan, graph, costs, timing), account(plan, graph, costs, timing)


def _stage_peak(acc: Accounting, t: int) -> int:
    return max(acc.start_bytes[t], *acc.after_bytes[t].values())


def _best_step(graph, costs, budgets, timing, decisions, state, allowed, banned):
    """The change that takes bytes off the peak stage at the least energy per byte, replayed."""
    plan, fig, acc = state
    peak_stage = max(range(len(graph)), key=lambda t: _stage_peak(acc, t))
    read_at = reads(plan, graph)
    ranked = {mode: [] for mode in allowed}
    for i in plan.resident(peak_stage):
        before = [s for s in read_at[i] if s < peak_stage]
        after = [s for s in read_at[i] if s > peak_stage]
        if not before or not after or graph.output_bytes[i] == 0:
            continue
        a, b = before[-1], after[0]
        if any(j == i and a2 < b and a < b2 for (j, a2, b2) in decisions):
            continue
        for mode in allowed:
            if (i, a, b, mode) in banned:
                continue
            cost_j = costs.compute_j[i] if mode is Mode.RECOMPUTE else costs.page_in_j[i] + costs.page_out_j[i]
            ranked[mode].append((cost_j / graph.output_bytes[i], (i, a, b)))
    best = None
    for mode, options in ranked.items():
        for _, key in sorted(options)[:_REPLAYS_PER_MODE]:
            trial = _replay(graph, costs, timing, {**decisions, key: mode})
            if trial[1].runtime_s > budgets.runtime_s * (1 + 1e-9):
                banned.add((*key, mode))  # more changes only add time: it will not fit later either
                continue
            saved = _stage_peak(acc, peak_stage) - _stage_peak(trial[2], peak_stage)
            if saved <= 0:
                continue
            score = (trial[1].total_j - fig.total_j) / saved
            if best is None or score < best[0]:
                best = (score, key, mode, trial)
    return None if best is None else best[1:]
