"""A schedule made from the eviction cover's own choice: often it meets the bound, a proof at once.

The cover (`cover`) says which outputs to restore and by which move, but not when. This module
turns that choice into a plan: each chosen output is made absent over the stages the cover
counts on it (one stretch between two of its uses where one suffices, so that it is restored
once, as the bound charges), recomputed just before its next reader, or paged out and back in
around that window. Under `overlap` timing each transfer goes to the stage of its window with
the most compute time left to hide DMA behind, since a stall costs static energy the bound does
not count; under `compute-only` transfers are free of time, so an output is paged out as soon
as it may be and paged in just before its reader. The plan is judged by the model's own
accounting (`plan.figures`); it is returned only if it fits the budgets.
"""

import itertools
import math
from dataclasses import replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge
from poetsim.optimiser.bounds.cover import CoverBound
from poetsim.optimiser.bounds.events import EventKind
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.plans.keeps import repair_keeps
from poetsim.optimiser.plans.plan import Plan, figures
from poetsim.optimiser.plans.rules import Mode, plan_from_decisions, uses
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Timing
from poetsim.tolerances import exceeds


def cover_plan(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    cover: CoverBound,
    allowance: Allowance | None = None,
) -> Plan | None:
    """The plan that restores what `cover` chose, or None if it misses the budgets (or the cover has no choice).

    The per-output keeps (`keeps.repair_keeps`) stop when `allowance`, the call's, is spent: on
    300-node graphs they can take a good part of it.
    """
    if cover.infeasible or not (cover.recomputed or cover.paged):
        return None
    timing = Timing(timing)
    windows = _absence_windows(graph, cover)
    decisions = {(i, a, b): (Mode.RECOMPUTE if i in cover.recomputed else Mode.PAGE) for (i, a, b) in windows}
    tried = []
    if timing is Timing.OVERLAP:
        hidden = _hidden_transfers(graph, costs, windows, decisions)
        tried += [_balanced_transfers(graph, costs, cover, decisions, hidden), hidden]
    tried.append({})  # as early out and as late in as the stretch allows
    return _cheapest_fit(graph, costs, budgets, timing, decisions, tried, allowance)


def _cheapest_fit(graph, costs, budgets, timing, decisions, page_stage_options, allowance=None) -> Plan | None:
    """The cheapest plan that fits among the decisions replayed with each set of page stages; None if none fits.

    Recomputed outputs are kept, dropped again, or kept where RAM allows (`keeps.repair_keeps`).
    """
    best = None
    recomputes = any(mode is Mode.RECOMPUTE for mode in decisions.values())
    options = list(page_stage_options)
    for page_stages in options:

        def replay(keep, page_stages=page_stages):
            charge(allowance, replay_units(len(graph)))
            plan = plan_from_decisions(graph, decisions, page_stages, keep_recomputed=keep)
            return plan, figures(plan, graph, costs, timing)

        kept = replay(True)
        tried = [kept]
        if recomputes:
            tried.append(replay(False))
            if not budgets.fits(kept[1]):
                tried.append(repair_keeps(replay, budgets, kept, allowance))
            pulled = _page_ins_before_needs(decisions, page_stages, [plan for plan, _ in filter(None, tried)])
            if pulled not in options:
                options.append(pulled)
        for plan, fig in filter(None, tried):
            if budgets.fits(fig) and (best is None or fig.total_j < best[0]):
                best = (fig.total_j, plan)
    return None if best is None else best[1]


def _page_ins_before_needs(decisions, page_stages: dict, replayed: list[Plan]) -> dict:
    """`page_stages` with each page-in moved before the first recomputation of its output inside its paged stretch.

    A replay recomputes whatever a recomputation needs and is not resident: an output paged out
    over a stretch whose consumer is recomputed before the stretch's reader (a normalisation
    recomputed from a paged convolution, for the activation after it) is then recomputed too,
    at the price of a convolution, though paging it in a little sooner would do. The page-in
    goes to the stage before the earliest such recomputation in any of the `replayed` plans.
    """
    paged: dict[int, list[tuple[int, int]]] = {}
    for (i, a, b), mode in decisions.items():
        if mode is Mode.PAGE:
            paged.setdefault(i, []).append((a, b))
    moved = dict(page_stages)
    for plan in replayed:
        for t, computed in enumerate(plan.computed):
            for k in computed:
                if k == t:
                    continue
                for a, b in paged.get(k, ()):
                    out, into = moved.get((k, a, b), (a, b - 1))
                    if a < t - 1 < into:  # inside the stretch, before its page-in, and a stage to move it to
                        moved[k, a, b] = (out, t - 1)
    return moved


def _absence_windows(graph: TrainingGraph, cover: CoverBound) -> dict[tuple[int, int, int], list[int]]:  # noqa: C901 - the first stretches and the rows they leave uncovered grow one map of windows, in order
    """Per chosen stretch (i, a, b), the first and last stage i is to be absent in.

    Each chosen output starts with the stretch that holds most of the stages the cover counts
    it for; a stage whose excess the chosen stretches do not cover then adds the largest output
    that could cover it, until every stage is covered in the cover's own accounting.
    """
    m = graph.output_bytes
    chosen = {i: "R" for i in cover.recomputed} | {i: "P" for i in cover.paged}
    counts_at: dict[int, list[int]] = {i: [] for i in chosen}
    for row in cover.rows:
        for i in row.by_recompute:
            if chosen.get(i) == "R":
                counts_at[i].append(row.stage)
        for i in row.by_paging:
            if chosen.get(i) == "P":
                counts_at[i].append(row.stage)
    windows: dict[tuple[int, int, int], list[int]] = {}
    for i, stages in counts_at.items():
        by_stretch: dict[tuple[int, int, int], list[int]] = {}
        for t in stages:
            by_stretch.setdefault(_stretch(graph, i, t), []).append(t)
        if by_stretch:
            key, held = max(by_stretch.items(), key=lambda kv: (len(kv[1]), -kv[0][1]))
            windows[key] = [min(held), max(held)]
    for row in cover.rows:
        covering = [i for i in chosen if row.stage in counts_at[i]]
        absent = [i for i in covering if _inside(windows, graph, i, row.stage)]
        short = row.excess_bytes - sum(m[i] for i in absent)
        for i in sorted(set(covering) - set(absent), key=lambda n: -m[n]):
            if short <= 0:
                break
            key = _stretch(graph, i, row.stage)
            window = windows.setdefault(key, [row.stage, row.stage])
            window[0], window[1] = min(window[0], row.stage), max(window[1], row.stage)
            short -= m[i]
    return windows


def _stretch(graph: TrainingGraph, i: int, t: int) -> tuple[int, int, int]:
    """(i, a, b): the uses a < t < b of i around stage t (t is not a use when the cover counts i at t)."""
    u = uses(graph, i)
    for a, b in itertools.pairwise(u):
        if a < t < b:
            return i, a, b
    raise ValueError(f"stage {t} is not between two uses of node {i}")


def _inside(windows, graph, i: int, t: int) -> bool:
    window = windows.get(_stretch(graph, i, t))
    return window is not None and window[0] <= t <= window[1]


def _hidden_transfers(graph, costs: CostTable, windows, decisions) -> dict:
    """Page-out and page-in stages that hide DMA time behind compute, largest transfers first.

    A page-out must be issued before the window (in stage a or a+1 at the earliest), a page-in
    after it (under overlap it holds RAM from its own stage) and before the reader b. Each goes
    to the stage of its range with the most compute time not yet covered by other transfers;
    ties go to the stage that holds RAM least (earliest out, latest in).
    """
    free_s = [c * costs.dma_channels for c in costs.compute_s]
    transfers = []
    for (i, a, b), mode in decisions.items():
        if mode is Mode.PAGE:
            first, last = windows[i, a, b]
            transfers.append((costs.page_out_s[i], "out", (i, a, b), range(a + (a == i), first)))
            transfers.append((costs.page_in_s[i], "in", (i, a, b), range(last + 1, b)))
    chosen: dict[tuple[int, int, int], list[int]] = {}
    for time_s, kind, key, stages in sorted(transfers, key=lambda x: -x[0]):
        if not stages:
            continue
        stage = max(stages, key=lambda s: (free_s[s], -s)) if kind == "out" else max(stages, key=lambda s: (free_s[s], s))
        free_s[stage] -= time_s
        chosen.setdefault(key, [key[1], key[2] - 1])[0 if kind == "out" else 1] = stage
    return {key: tuple(stages) for key, stages in chosen.items()}


def _balanced_transfers(graph: TrainingGraph, costs: CostTable, cover: CoverBound, decisions, stages: dict) -> dict:  # noqa: C901 - one improvement loop whose steps share the overflow and coverage state
    """Page stages with less DMA beyond compute: `stages` improved one transfer at a time.

    Each stage's DMA time beyond its compute (x channels) is its overflow, which stalls the
    stage. While some stage overflows, the transfer in an overflowing stage whose move to
    another stage of its range cuts the total overflow most is moved, provided every stage row
    of the cover stays covered in the cover's own accounting: an output is absent right after
    `Compute(t)` if t lies inside a stretch it is recomputed over, or after its page-out (and
    after the stretch's first use) and before its page-in. A page-out may move as far as the
    stage before the page-in, a page-in as far as the stage before the reader. Moving a
    page-out later or a page-in earlier shortens the absence, so the rows it leaves must keep
    enough room without it; that is what the windows of `_hidden_transfers` cannot do. The
    schedule is judged afterwards by the model's own accounting, as every plan.
    """
    m = graph.output_bytes
    capacity = [c * costs.dma_channels for c in costs.compute_s]
    slack = {row.stage: -row.excess_bytes for row in cover.rows}
    paged = {}
    for key, mode in decisions.items():
        i, a, b = key
        if mode is Mode.PAGE and key in stages:
            paged[key] = list(stages[key])
        elif mode is Mode.RECOMPUTE:
            for t in range(a + 1, b):
                if t in slack:
                    slack[t] += m[i]
    for (i, a, _), (out, into) in paged.items():
        for t in range(max(out, a) + 1, into):
            if t in slack:
                slack[t] += m[i]
    load = [0.0] * len(capacity)
    for (i, _, _), (out, into) in paged.items():
        load[out] += costs.page_out_s[i]
        load[into] += costs.page_in_s[i]

    def over(s: int, extra: float) -> float:
        return max(load[s] + extra - capacity[s], 0.0)

    def best_move(key, end: int):
        """The best stage for the page-out (end 0) or page-in (end 1) of `key`: (cut, stage)."""
        i, a, b = key
        out, into = paged[key]
        time_s = (costs.page_out_s if end == 0 else costs.page_in_s)[i]
        here = out if end == 0 else into
        saved = over(here, 0.0) - over(here, -time_s)
        best = (0.0, here)
        # Walk away from the present stage both ways. Lengthening the absence never hurts;
        # shortening it gives up one row per step (row s: a page-out in s holds i at s, a
        # page-in in s holds it from the start of s), which must have room without i.
        if end == 0:
            ranges = ((range(here - 1, a + (a == i) - 1, -1), False), (range(here + 1, into), True))
        else:
            ranges = ((range(here + 1, b), False), (range(here - 1, max(out, a), -1), True))
        for candidates, shortens in ranges:
            room = math.inf
            for s in candidates:
                if shortens and s in slack:
                    room = min(room, slack[s])
                    if room < m[i]:
                        break
                cut = saved - (over(s, time_s) - over(s, 0.0))
                if cut > best[0] + 1e-12:
                    best = (cut, s)
        return best

    for _ in range(4 * len(paged) + 1):
        moves = []
        for key, (out, into) in paged.items():
            for end, stage in ((0, out), (1, into)):
                if exceeds(load[stage], capacity[stage]):
                    cut, to = best_move(key, end)
                    if to != stage:
                        moves.append((cut, key, end, to))
        if not moves:
            break
        cut, key, end, to = max(moves)
        i, a, b = key
        out, into = paged[key]
        if end == 0:
            load[out] -= costs.page_out_s[i]
            load[to] += costs.page_out_s[i]
            first, last, sign = (max(out, a) + 1, max(to, a) + 1, -1) if to > out else (max(to, a) + 1, max(out, a) + 1, 1)
        else:
            load[into] -= costs.page_in_s[i]
            load[to] += costs.page_in_s[i]
            first, last, sign = (to, into, -1) if to < into else (into, to, 1)
        for t in range(first, last):
            if t in slack:
                slack[t] += sign * m[i]
        paged[key][end] = to
    return {key: tuple(value) for key, value in paged.items()}


def plan_stalled(plan: Plan, costs: CostTable) -> frozenset[int]:
    """The outputs paged in stages of `plan` whose transfers outlast the stage's computing."""
    found: set[int] = set()
    for t, computed in enumerate(plan.computed):
        moved = plan.paged_out[t] | plan.paged_in[t]
        dma_s = sum(costs.page_out_s[i] for i in plan.paged_out[t]) + sum(costs.page_in_s[i] for i in plan.paged_in[t])
        if moved and exceeds(dma_s / costs.dma_channels, sum(costs.compute_s[k] for k in computed)):
            found |= moved
    return frozenset(found)


def restricted(form: Formulation, graph: TrainingGraph, cover: CoverBound) -> Formulation:
    """The model confined to the cover's choice: a smaller MILP whose schedules are schedules.

    Outputs the cover keeps stay resident from their computation to their last reader and are
    neither recomputed nor paged; outputs it pages are never recomputed; outputs it recomputes
    are never paged. Only column bounds change, so every solution is one of the full model and
    its optimum an upper bound on the full optimum (equal to it when it meets the cover's bound).
    """
    lower, upper = list(form.col_lower), list(form.col_upper)
    restored = cover.recomputed | cover.paged
    for fam in form.variables:
        if fam.name not in ("R", "S_ram", "S_ssd", "M_in", "M_out"):
            continue
        for n, (t, i) in enumerate(fam.keys):
            col = fam.start + n
            if (fam.name == "R" and i not in cover.recomputed) or (
                fam.name in ("S_ssd", "M_in", "M_out") and i not in cover.paged
            ):
                upper[col] = 0.0
            elif fam.name == "S_ram" and i not in restored and t <= graph.last_use[i]:
                lower[col] = 1.0
    return replace(form, col_lower=tuple(lower), col_upper=tuple(upper))


def admits(form: Formulation, values: list[float]) -> bool:
    """Whether column values lie within the (possibly restricted) column bounds."""
    return all(lo - 1e-9 <= v <= up + 1e-9 for v, lo, up in zip(values, form.col_lower, form.col_upper))


def events_plan(graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, cover: CoverBound) -> Plan | None:
    """The plan of a timed cover's events (`timed_cover`).

    Each page-out, page-in and recomputation in the stretch of uses it serves, transfers in the
    stages the cover chose; None if it misses the budgets.
    """
    if not cover.events:
        return None
    page_out = {e.node: e.stage for e in cover.events if e.kind == EventKind.PAGE_OUT}
    decisions, page_stages = {}, {}
    for event in cover.events:
        i, s = event.node, event.stage
        u = uses(graph, i)
        if event.kind == EventKind.PAGE_IN:
            for a, b in itertools.pairwise(u):
                if a < s < b:
                    decisions[i, a, b] = Mode.PAGE
                    page_stages[i, a, b] = (page_out.get(i, a), s)
        elif event.kind == EventKind.ABSENT:  # absent at stage s, to be recomputed before its next reader
            for a, b in itertools.pairwise(u):
                if a < s < b:
                    decisions.setdefault((i, a, b), Mode.RECOMPUTE)
    return _cheapest_fit(graph, costs, budgets, timing, decisions, [page_stages])
