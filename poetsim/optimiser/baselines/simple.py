"""Schedules made without a solver: keep-all, checkpoint-sqrt, and the greedy MIP start.

All three are decision sets of `rules` (keep, recompute or page an output between two uses),
so each yields a plan that the model admits. The greedy start is what `optimise` hands the
solver: a feasible answer at once, which the solver then improves.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.plans.keeps import keep_more
from poetsim.optimiser.plans.plan import Accounting, Plan, account, figures, to_schedule
from poetsim.optimiser.plans.rules import Decisions, Mode, PageStages, held_plan, plan_from_decisions, reads, uses
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Figures, Moves, Schedule, Timing
from poetsim.strategies import CHECKPOINT_SQRT, KEEP_ALL
from poetsim.tolerances import cheaper

#: The single-move restrictions, whose greedy plans also start a solve that may use both moves.
PAGING = Moves(recompute=False, page=True)
RECOMPUTING = Moves(recompute=True, page=False)

#: The thresholds `held_input_plan` tries at most (DenseNet-BC's forward outputs have 25 ratios).
HELD_THRESHOLDS = 32

#: Candidates the greedy replays per step and per mode (the rest are ranked by a cheap estimate).
_REPLAYS_PER_MODE = 4

#: A stretch of one output: (node, last stage before the stretch, stage after it), as in `rules`.
_Stretch = tuple[int, int, int]

#: The greedy's decisions so far, which it extends one step at a time.
_Decisions = dict[_Stretch, Mode]

#: A stretch and a mode the greedy no longer tries (it broke the deadline, or `rebuilt_plan` took it out).
_Barred = tuple[int, int, int, Mode]

#: Decisions replayed: their plan, its figures and its accounting.
_Replayed = tuple[Plan, Figures, Accounting]

#: Where the PAGE decisions transfer: decisions in, their stages out (`hidden_page_stages`).
_Placed = Callable[[Decisions], PageStages]

#: `_replay` with the greedy's settings bound: decisions in, their replayed state out.
_Replay = Callable[[Decisions], _Replayed]


def keep_all(graph: TrainingGraph, costs: CostTable, timing: Timing) -> tuple[Schedule, Figures]:
    """Every node computed once and kept until its last reader: the reference of budgets."""
    return _result(plan_from_decisions(graph, {}), graph, costs, timing, KEEP_ALL.name)


def checkpoint_sqrt(graph: TrainingGraph, costs: CostTable, timing: Timing) -> tuple[Schedule, Figures]:
    """Chen et al. 2016 (arXiv 1604.06174): keep ~sqrt(n) segment boundaries of the forward pass.

    About sqrt(n) boundaries are chosen among the forward pass's cut points (see
    `checkpoint_decisions`) and kept; every other forward activation the backward pass reads is
    dropped after its last forward reader and recomputed from the nearest kept boundary when
    the backward pass first needs it, then kept until its last reader, so each segment is
    recomputed once, as in the paper.
    """
    return _result(plan_from_decisions(graph, checkpoint_decisions(graph)), graph, costs, timing, CHECKPOINT_SQRT.name)


def checkpoint_decisions(graph: TrainingGraph) -> _Decisions:
    """RECOMPUTE every forward node but the segment boundaries from its last forward use to its first backward one.

    Boundaries are cut points of the forward pass (no forward edge jumps over them), as in Chen
    et al.'s treatment of non-linear graphs: a boundary inside a residual block would let
    recomputation run back along the skip connections to the input, and the rebuilt
    activations would then stay resident. About sqrt(n) boundaries are picked, each the cut
    point nearest an even split of the forward nodes. A stretch of no stage (the loss, read at
    once by its gradient) is kept: dropping it saves nothing, and so are data inputs.
    """
    forward = [n.id for n in graph.nodes if not n.backward]
    size = max(1, round(math.sqrt(len(forward))))
    # A boundary must be read by the backward pass, or it is freed after the forward pass anyway.
    cuts = [p for p in forward_cut_points(graph, forward) if any(graph.nodes[r].backward for r in graph.consumers[forward[p]])]
    boundaries = set()
    for k in range(1, size + 1):
        target = k * len(forward) / size - 1
        if cuts:
            boundaries.add(forward[min(cuts, key=lambda p: abs(p - target))])
    decisions: _Decisions = {}
    for i in forward:
        if i in boundaries or graph.nodes[i].op == "input":
            continue
        u = uses(graph, i)
        a = max(k for k in u if not graph.nodes[k].backward)
        later = [k for k in u if k > a]
        if later and later[0] - a >= 2:
            decisions[i, a, later[0]] = Mode.RECOMPUTE
    return decisions


def held_input_plan(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, allowance: Allowance | None = None
) -> Plan | None:
    """Recompute the outputs that are cheap per byte, hold the dear ones: the cheapest such plan that fits, or None.

    For a threshold of compute seconds per output byte, every forward output at or below it is
    dropped between each two of its reads and recomputed, and the outputs above it that those
    recomputations need after their last reader are held until then (`rules.held_plan`). So a
    concatenation and the normalisation and activation after it (DenseNet's memory-efficient
    layers, Pleiss et al. 2017, arXiv 1707.06990) are recomputed from the layer outputs they
    join, held, not from the convolutions behind them. At most `HELD_THRESHOLDS` thresholds,
    spread over the outputs' own ratios, each with recomputed outputs kept until their next
    reader and dropped again; where the cheapest drops them, each is then kept where that still
    fits and costs less (`keeps.keep_more`). `allowance` stops the search where it is.
    """
    forward = [n.id for n in graph.nodes if not n.backward and n.op != "input" and graph.output_bytes[n.id] > 0]
    ratio = {i: costs.compute_s[i] / graph.output_bytes[i] for i in forward}
    levels = sorted(set(ratio.values()))
    if len(levels) > HELD_THRESHOLDS:
        levels = [levels[round(k * (len(levels) - 1) / (HELD_THRESHOLDS - 1))] for k in range(HELD_THRESHOLDS)]
    best = None
    for level in levels:
        if spent(allowance):
            break
        decisions = _recomputed_between_reads(graph, [i for i in forward if ratio[i] <= level])
        holdable = frozenset(i for i in forward if ratio[i] > level)
        for keep in (True, False):
            if spent(allowance):
                break
            plan = _planned(graph, decisions, None, keep, holdable, allowance)
            fig = figures(plan, graph, costs, timing)
            if budgets.fits(fig) and (best is None or fig.total_j < best[1].total_j):
                best = (plan, fig, decisions, holdable, keep)
    if best is None:
        return None
    plan, fig, decisions, holdable, keep = best
    if keep:
        return plan

    def with_keeps(kept: bool | frozenset[int]) -> tuple[Plan, Figures]:
        replayed = _planned(graph, decisions, None, kept, holdable, allowance)
        return replayed, figures(replayed, graph, costs, timing)

    return keep_more(with_keeps, budgets, (plan, fig), frozenset(), allowance=allowance)[0]


def _recomputed_between_reads(graph: TrainingGraph, outputs: list[int]) -> _Decisions:
    """RECOMPUTE each of `outputs` over every stretch between two of its uses that has a stage."""
    decisions: _Decisions = {}
    for i in outputs:
        decisions.update({(i, a, b): Mode.RECOMPUTE for a, b in itertools.pairwise(uses(graph, i)) if b > a + 1})
    return decisions


def forward_cut_points(graph: TrainingGraph, forward: list[int]) -> list[int]:
    """Positions p in `forward` such that no forward edge runs from before p to after p.

    Keeping the node at such a position is enough to recompute everything after it without
    reaching further back. Edges out of data inputs (`op: input`, such as labels read by the
    loss) are ignored: inputs are always kept.
    """
    position = {node: p for p, node in enumerate(forward)}
    cuts, reach = [], -1
    for p, node in enumerate(forward):
        if reach <= p:
            cuts.append(p)
        for reader in graph.consumers[node]:
            if reader in position and graph.nodes[node].op != "input":
                reach = max(reach, position[reader])
    return cuts


def _result(plan: Plan, graph: TrainingGraph, costs: CostTable, timing: Timing, name: str) -> tuple[Schedule, Figures]:
    schedule = to_schedule(plan, graph, costs, timing, {"strategy": name})
    return schedule, figures(plan, graph, costs, timing)


def start_plan(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    allowance: Allowance | None = None,
    first_fit: bool = False,
    finished: set[int] | None = None,
) -> Plan | None:
    """The cheapest plan that fits among keep-all, checkpoint-sqrt and the greedies; None if none does.

    For hybrid moves the paging-only and the recompute-only greedy run beside the hybrid one,
    since each single-mode plan is a hybrid plan too. `allowance` stops the greedies where they are: a greedy that has not
    reached the budget by then yields nothing, one that has is returned unpolished. With
    `first_fit` the first plan that fits is returned, trying the quickest rules first (the
    paging greedy is the fastest on the zoo's graphs);
    then only the greedies that drop recomputed cascades heed `allowance`, and if no plan fits, the
    greedies run again with the deadline lifted (each heeding `allowance`): a plan they make counts
    only if it fits the real budgets. `finished`, kept by the caller across calls, holds the
    rules that ran to their end before `allowance`; they are not run again (a second call after a
    first was cut short goes on with the rest).
    """
    makers: list[Callable[[], Plan | None]] = [lambda: plan_from_decisions(graph, {})]
    if moves.recompute:
        makers.append(lambda: plan_from_decisions(graph, checkpoint_decisions(graph)))
    greedies = [moves]
    if moves.recompute and moves.page:
        # Each single-mode greedy is a hybrid plan too, and often the better start: the hybrid
        # greedy's per-byte ranking can favour a mode that later steps make expensive.
        greedies = [PAGING, moves, RECOMPUTING] if first_fit else [moves, PAGING, RECOMPUTING]
    # A first fit is wanted whatever the clock says from the greedies that usually find one.
    makers += [
        partial(greedy_plan, graph, costs, budgets, single, timing, None if first_fit else allowance) for single in greedies
    ]
    # Under tight budgets the greedy that keeps recomputed cascades finds no step that lowers the
    # peak; the one that drops them again does.
    makers += [
        partial(greedy_plan, graph, costs, budgets, single, timing, allowance, keep_recomputed=False)
        for single in greedies
        if single.recompute
    ]
    best = _cheapest_fit(makers, graph, costs, budgets, timing, first_fit, finished, allowance)
    if best is None and first_fit and math.isfinite(budgets.runtime_s):
        # Each greedy refuses a change that breaks the deadline on its own, yet the RAM budget is
        # often reached only through such changes, which the undoing and keeping steps then bring
        # back within the deadline. So when a first schedule is wanted and nothing fits, the
        # greedies run again with the deadline lifted; what they make must still fit the real
        # budgets. A search that has a schedule already spends its effort elsewhere.
        lifted = replace(budgets, runtime_s=math.inf)
        best = _cheapest_fit(
            [
                partial(greedy_plan, graph, costs, lifted, single, timing, allowance, keep_recomputed=keep)
                for single in greedies
                for keep in (True, False)
                if keep or single.recompute
            ],
            graph,
            costs,
            budgets,
            timing,
            first_fit,
        )
    return best


def _cheapest_fit(
    makers: list[Callable[[], Plan | None]],
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    first_fit: bool,
    finished: set[int] | None = None,
    allowance: Allowance | None = None,
) -> Plan | None:
    """The cheapest plan of `makers` within `budgets` (with `first_fit`, the first), or None.

    Makers whose index is in `finished` are skipped, and those that end before `allowance` is
    spent join it, so that a later call runs only the makers that were cut short or not reached.
    """
    best = None
    for n, make in enumerate(makers):
        if finished is not None and n in finished:
            continue
        plan = make()
        if finished is not None and not spent(allowance):
            finished.add(n)
        if plan is None:
            continue
        fig = figures(plan, graph, costs, timing)
        if budgets.fits(fig) and (best is None or fig.total_j < best[0]):
            best = (fig.total_j, plan)
            if first_fit:
                break
    return None if best is None else best[1]


def greedy_plan(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    allowance: Allowance | None = None,
    keep_recomputed: bool = True,
) -> Plan | None:
    """Take the cheapest bytes off the RAM peak until the budget fits, then undo what is not needed.

    Each step looks at the outputs resident at the start of the peak stage, in the interval
    that spans it, and ranks recomputing or paging each by energy per byte; the best few of each
    mode are replayed and the one that lowers the peak stage at the least energy per byte saved
    (stalls and cascaded recomputation included) is taken. A change that breaks the deadline is
    not tried again. Once the budget fits, each change is undone if the plan still fits without
    it. Cheap and not optimal: a MIP start.

    With `keep_recomputed` False, recomputed outputs are dropped again after their reader (less
    RAM, more recomputation; `rules.plan_from_decisions`), and once the plan fits, each is kept
    where that still fits and costs less (`keeps.keep_more`).
    """
    allowed = _allowed(moves)
    replay = partial(_replay, graph, costs, timing, keep_recomputed=keep_recomputed, allowance=allowance)
    found = _fill(graph, costs, budgets, timing, {}, set(), allowed, replay, allowance)
    if found is None:
        return None
    decisions, state = _polish(budgets, found[0], found[1], allowed, replay, allowance)
    if keep_recomputed or spent(allowance):
        return state[0]
    return _with_keeps(graph, costs, budgets, timing, decisions, state)[0]


def rebuilt_plan(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None = None,
    keeps_allowance: Allowance | None = None,
    moves: Moves = RECOMPUTING,
    hide_page_outs: bool = False,
) -> Plan | None:
    """The greedy that drops recomputed cascades, improved change by change; None if no plan fits.

    Its changes are taken out one at a time, and the RAM budget filled again without each. The
    greedy takes the change that saves the most peak bytes per joule at each step, and an
    early change that a later one made costly stays. So each change in turn is removed and
    barred, the greedy fills the budget from there and `_polish` undoes what is then not
    needed; the result is kept when it fits the budgets at less energy, and the rounds go on
    while one improves. The greedy and its fills ignore the deadline (a change the deadline
    bars alone is often brought back within it by later undoing, `start_plan`); only plans
    within it are kept, each with its recomputed outputs kept where that pays, as the greedy
    does (`keeps.keep_more`), and the rebuilt plan is returned only where it is the cheaper.
    Deterministic; `allowance` stops the search where it is, and `keeps_allowance` (the call's,
    as for `cover_plan`) the keeps after it (docs/optimiser.md, "Plans").

    `moves` are recomputation alone by default. Where they page too, each page-in goes to a stage
    whose compute hides it (`hidden_page_stages`; with `hide_page_outs` each page-out too), so that
    the greedy weighs a swap at the stall it need have, not at the stall of the stage before its
    reader.
    """
    allowed = _allowed(moves)
    placed = partial(hidden_page_stages, costs, hide_page_outs=hide_page_outs) if moves.page else None
    lifted = replace(budgets, runtime_s=math.inf)
    replay = partial(_replay, graph, costs, timing, keep_recomputed=False, allowance=allowance, placed=placed)
    found = _fill(graph, costs, lifted, timing, {}, set(), allowed, replay, allowance)
    if found is None:
        return None
    current = _polish(lifted, found[0], found[1], allowed, replay, allowance)
    start = best = current if budgets.fits(current[1][1]) else None
    improved = True
    while improved and not spent(allowance):
        improved = False
        for key in sorted(current[0]):
            if spent(allowance):
                break
            if key not in current[0]:
                continue
            trial = {k: m for k, m in current[0].items() if k != key}
            found = _fill(graph, costs, lifted, timing, trial, {(*key, mode) for mode in allowed}, allowed, replay, allowance)
            if found is None:
                continue
            decisions, state = _polish(lifted, found[0], found[1], allowed, replay, allowance)
            if budgets.fits(state[1]) and (best is None or cheaper(state[1].total_j, best[1][1].total_j)):
                current = best = decisions, state
                improved = True
    if best is None:
        return None
    rebuilt = _with_keeps(graph, costs, budgets, timing, best[0], best[1], allowance=keeps_allowance, placed=placed)
    if start is None or start is best:
        return rebuilt[0]
    first = _with_keeps(graph, costs, budgets, timing, start[0], start[1], allowance=keeps_allowance, placed=placed)
    return min((rebuilt, first), key=lambda found: found[1].total_j)[0]


def _allowed(moves: Moves) -> list[Mode]:
    return [mode for mode, ok in ((Mode.RECOMPUTE, moves.recompute), (Mode.PAGE, moves.page)) if ok]


def hidden_page_stages(costs: CostTable, decisions: Decisions, hide_page_outs: bool = False) -> PageStages:
    """For each PAGE decision (i, a, b), transfer stages whose own compute hides the transfer.

    The page-in goes to the latest stage of the stretch, at least two after the page-out, whose
    node computes for at least the page-in's time; where none does, to the one that computes
    longest (the latest of equals): an output paged back in earlier holds RAM longer, one paged
    in beside a short stage stalls. With `hide_page_outs` the page-out goes likewise to the
    earliest stage from a on that hides it (holding the output resident until then), else it
    stays where the rules place it (a, or a+1 where i is only computed during a). A stage's own
    compute stands for its time: recomputations and other transfers in it are not counted, the
    plan's replay judges the result.
    """
    seconds = costs.compute_s
    stages: dict[tuple[int, int, int], tuple[int, int]] = {}
    for (i, a, b), mode in decisions.items():
        if mode is not Mode.PAGE:
            continue
        out = a
        if hide_page_outs and seconds[a] < costs.page_out_s[i] and b - 1 > a:
            out = _hiding(range(a, b - 1), seconds, costs.page_out_s[i], latest=False)
        within = range(out + 2, b)
        stages[i, a, b] = (out, _hiding(within, seconds, costs.page_in_s[i], latest=True) if within else b - 1)
    return stages


def _hiding(stretch: range, seconds: Sequence[float], transfer_s: float, latest: bool) -> int:
    """The latest (or earliest) stage of `stretch` that computes for `transfer_s`, else the longest."""
    ordered = reversed(stretch) if latest else iter(stretch)
    hiding = next((t for t in ordered if seconds[t] >= transfer_s), None)
    if hiding is not None:
        return hiding
    return max(stretch, key=lambda t: (seconds[t], t if latest else -t))


def _fill(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    decisions: _Decisions,
    banned: set[_Barred],
    allowed: list[Mode],
    replay: _Replay,
    allowance: Allowance | None,
) -> tuple[_Decisions, _Replayed] | None:
    """The greedy's steps from `decisions` until the plan fits `budgets`, with their replayed state.

    None when no step lowers the peak stage any more or `allowance` is spent. `decisions` itself
    is left as it was; `banned` gains the changes that broke the deadline (`_best_step`).
    """
    decisions = dict(decisions)
    state = replay(decisions)
    while not budgets.fits(state[1]):
        if spent(allowance):
            return None
        step = _best_step(graph, costs, budgets, timing, decisions, state, allowed, banned, replay)
        if step is None:
            return None
        key, mode, state = step
        decisions[key] = mode
    return decisions, state


def _with_keeps(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    decisions: Decisions,
    state: _Replayed,
    allowance: Allowance | None = None,
    placed: _Placed | None = None,
) -> tuple[Plan, Figures]:
    """The plan of `decisions` with each recomputed output kept where that pays, and its figures.

    `state` is `decisions` replayed with recomputed outputs dropped; each is then kept where
    that still fits the budgets and costs less (`keeps.keep_more`, which stops at `allowance`).
    `placed` gives the transfers' stages, as in `_replay`.
    """
    page_stages = None if placed is None else placed(decisions)

    def with_keeps(keep: bool | frozenset[int]) -> tuple[Plan, Figures]:
        plan = _planned(graph, decisions, page_stages, keep, None, allowance)
        return plan, figures(plan, graph, costs, timing)

    return keep_more(with_keeps, budgets, state[:2], frozenset(), allowance=allowance)


def _polish(
    budgets: Budgets,
    decisions: _Decisions,
    state: _Replayed,
    allowed: list[Mode],
    replay: _Replay,
    allowance: Allowance | None = None,
) -> tuple[_Decisions, _Replayed]:
    """Undo each change the budget no longer needs, then try the other mode for each change.

    Returns the decisions and their replayed state. Changes are undone latest first, each where
    the plan still fits without it; a change then switches mode where that fits and costs less
    energy. A spent `allowance` stops the polish where it is.
    """
    for key in reversed(list(decisions)):
        if spent(allowance):
            return decisions, state
        trial = {k: m for k, m in decisions.items() if k != key}
        trial_state = replay(trial)
        if budgets.fits(trial_state[1]):
            decisions, state = trial, trial_state
    for key, mode in list(decisions.items()):
        if spent(allowance):
            return decisions, state
        for other in allowed:
            if other is not mode:
                trial_state = replay({**decisions, key: other})
                if budgets.fits(trial_state[1]) and trial_state[1].total_j < state[1].total_j:
                    decisions, state = {**decisions, key: other}, trial_state
    return decisions, state


def _replay(
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    decisions: Decisions,
    keep_recomputed: bool = True,
    allowance: Allowance | None = None,
    placed: _Placed | None = None,
) -> _Replayed:
    """The plan of `decisions`, its figures and accounting; one replay charged to `allowance`.

    `placed`, if given, says in which stages the PAGE decisions transfer (else the rules' own).
    """
    page_stages = None if placed is None else placed(decisions)
    plan = _planned(graph, decisions, page_stages, keep_recomputed, None, allowance)
    acc = account(plan, graph, costs, timing)
    return plan, figures(plan, graph, costs, timing, acc), acc


def _planned(
    graph: TrainingGraph,
    decisions: Decisions,
    page_stages: PageStages | None,
    keep_recomputed: bool | frozenset[int],
    holdable: frozenset[int] | None,
    allowance: Allowance | None,
) -> Plan:
    """The plan of `decisions`, its replays charged to `allowance`.

    With `holdable`, those outputs are held for recomputations that need them after their last
    reader (`rules.held_plan`, a replay a round).
    """
    if holdable is None:
        charge(allowance, replay_units(len(graph)))
        return plan_from_decisions(graph, decisions, page_stages, keep_recomputed=keep_recomputed)
    plan, replays = held_plan(graph, decisions, page_stages, keep_recomputed, holdable)
    charge(allowance, replays * replay_units(len(graph)))
    return plan


def _best_step(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    decisions: _Decisions,
    state: _Replayed,
    allowed: list[Mode],
    banned: set[_Barred],
    replay: _Replay,
) -> tuple[_Stretch, Mode, _Replayed] | None:
    """The change that takes bytes off the peak stage at the least energy per byte, replayed.

    Only the best few of each mode by the estimate of `_ranked` are replayed. A change that
    breaks the deadline joins `banned`: more changes only add time, so it will not fit later
    either. None if no replayed change lowers the peak stage.
    """
    plan, fig, acc = state
    peak_stage = max(range(len(graph)), key=acc.stage_peak_bytes)
    best = None
    for mode, options in _ranked(graph, costs, plan, peak_stage, decisions, allowed, banned).items():
        for _, key in sorted(options)[:_REPLAYS_PER_MODE]:
            trial = replay({**decisions, key: mode})
            if not budgets.meets_deadline(trial[1].runtime_s):
                banned.add((*key, mode))
                continue
            saved = acc.stage_peak_bytes(peak_stage) - trial[2].stage_peak_bytes(peak_stage)
            if saved <= 0:
                continue
            score = (trial[1].total_j - fig.total_j) / saved
            if best is None or score < best[0]:
                best = (score, key, mode, trial)
    return None if best is None else best[1:]


def _ranked(
    graph: TrainingGraph,
    costs: CostTable,
    plan: Plan,
    peak_stage: int,
    decisions: _Decisions,
    allowed: list[Mode],
    banned: set[_Barred],
) -> dict[Mode, list[tuple[float, _Stretch]]]:
    """Per mode, the changes that may lower the peak stage, each with its energy per byte.

    A candidate is an output resident at the start of the peak stage and read before and after
    it, over the stretch between those reads; a stretch that overlaps a decision on the same
    output, a barred change and an output of no bytes are left out. The estimate is the move's
    own energy (a recomputation's compute, a swap's two transfers): stalls and cascaded
    recomputation show only in a replay.
    """
    read_at = reads(plan, graph)
    ranked: dict[Mode, list[tuple[float, _Stretch]]] = {mode: [] for mode in allowed}
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
    return ranked
