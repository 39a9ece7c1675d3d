"""Local improvement of a plan: single changes that save energy and still fit the budgets.

Plans made from rules, from the covers' choices and from the solver's columns often hold an
output's restore where RAM would allow less: a recomputation where the output could have stayed
in RAM or come back from storage for less, a page-out and page-in where it could have stayed or
been rebuilt more cheaply, or a transfer in a stage too short to hide it. Five kinds of change,
each a plan built with the same four sets per stage as every other plan:

- keep instead of recompute (`bridges`): hold a recomputed output from its previous presence to
  the stage that recomputed it, and drop the recomputations that only served to rebuild it;
- page instead of recompute (`paged_recomputations`, where paging is allowed): page a recomputed
  output out after its previous presence (unless a copy is on storage) and back in before the
  stage that recomputed it, and drop the recomputations as for a bridge;
- keep instead of page (`kept_pages`): hold a paged output from its previous presence to its
  page-in, and drop the page-in (and the page-out, once no page-in needs the copy);
- recompute instead of page (`recomputed_pages`): drop a page-in and rebuild the output in the
  stage that reads it next, with any input it needs that is not in RAM there, and drop the
  page-out once no page-in needs it;
- move a transfer (`moved_transfers`, under overlap timing only): a page-out or page-in that
  makes its stage outlast the stage's compute goes to another stage of its stretch where it
  stalls less, the output resident accordingly longer or shorter. Moving saves no transfer
  energy, only stall time, and so the static power over it.

`swap` pairs a change that saves energy but breaks the RAM budget with an eviction that brings
the plan back within it: an output resident where the changed plan peaks, freed and recomputed
at its next reader (`evictions`) or paged out before that stage and back in after it
(`paged_evictions`).

`polish` judges each change by the model's own accounting (`plan.figures`, the same judge as
`Incumbent.offer`), after a screen by its energy alone (`plan.Energies`: summed over the stages it
made, it rules out a change that cannot beat the best so far without a replay), takes the one
that fits and saves most, and scans again, until a whole scan
finds none: the plan it returns is a local optimum for these changes (unless its allowance ran
out first). It never makes a plan worse. (Taking the first change that saves anything instead
can strand a plan: keeping an input a later recomputation needs may leave too little room to
keep the recomputed output itself.)
"""

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.plans.plan import Accounting, Energies, Plan, account, figures
from poetsim.optimiser.plans.rules import reads
from poetsim.optimiser.work import replay_units, screen_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Figures, Moves, Timing
from poetsim.tolerances import exceeds

#: All moves: a change may rebuild a paged output where recomputation is allowed, and page a
#: recomputed one where paging is.
BOTH = Moves(recompute=True, page=True)

#: At most this many moved transfers bring a change that `swap` tries back within the deadline.
REPAIR_STEPS = 4


def polish(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None = None,
    moves: Moves = BOTH,
) -> Plan:
    """The plan after every single change that saves energy and still fits, the largest saving first.

    Changes (module docstring) are taken until none saves energy; `moves` says which moves a change
    may use (recomputation, for rebuilding a paged output; paging, for a recomputed one). Under
    overlap timing a change that saves energy and keeps the RAM budget but misses the deadline
    counts with the moved transfers that bring it within the deadline (`_on_time`), if any do.
    A change tried is charged to `allowance` as a screen where its energy rules it out (`_screened`),
    else as a replay; once it is spent, the best plan so far is returned.
    """
    base = account(plan, graph, costs, timing)
    best_j = figures(plan, graph, costs, timing, base).total_j
    retimed = Timing(timing) is Timing.OVERLAP
    while True:
        taken = None
        energies = Energies(plan, costs, timing, best_j)
        for candidate in changes_of(plan, graph, moves, costs, timing, base, hopeful=True, ram_bytes=budgets.ram_bytes):
            if spent(allowance):
                return plan if taken is None else taken  # the best this scan had reached
            if _screened(energies, candidate, best_j, len(graph), allowance):
                continue
            acc = account(candidate, graph, costs, timing, base=base)
            fig = figures(candidate, graph, costs, timing, acc)
            if fig.total_j >= best_j:
                continue
            if budgets.fits(fig):
                taken, best_j = candidate, fig.total_j
            elif retimed and candidate.moves.page and fig.peak_ram_bytes <= budgets.ram_bytes:
                repaired = _on_time(candidate, acc, fig, graph, costs, budgets, timing, allowance)
                if repaired is not None and repaired[1] < best_j:
                    taken, best_j = repaired
        if taken is None:
            return plan
        plan, base = taken, account(taken, graph, costs, timing)


def swap(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None = None,
    moves: Moves = BOTH,
) -> Plan | None:
    """The cheapest plan that fits made of a single change and an eviction; None if none saves energy.

    A plan `polish` returns has no single change that saves energy and fits, yet a change that
    saves much often breaks one budget only, and other changes could restore it at less than it
    saves. So each single change (`changes_of`) that saves energy and keeps the deadline but not
    the RAM budget is followed, in turn, by each eviction at the stage where its RAM peaks
    (`evictions_of`: by recomputation or by paging, as `moves` allow; not those that could not fit
    below the best so far, `hopeless_evictions`); the evicted change that fits at the least energy
    is returned. A change that misses only the deadline is polish's to repair, with moved
    transfers (`_on_time`). A plan tried is charged to `allowance` as a screen where its energy rules
    it out (`_screened`), else as a replay; once it is spent, the best so far is returned.
    """
    own = account(plan, graph, costs, timing)
    best, best_j = None, figures(plan, graph, costs, timing, own).total_j
    energies = Energies(plan, costs, timing, best_j)
    for changed in changes_of(plan, graph, moves, costs, timing, own, hopeful=True):
        if spent(allowance):
            break
        if _screened(energies, changed, best_j, len(graph), allowance):
            continue
        acc = account(changed, graph, costs, timing, base=own)
        fig = figures(changed, graph, costs, timing, acc)
        if fig.total_j < best_j and not budgets.fits(fig) and budgets.meets_deadline(fig.runtime_s):
            best, best_j = _evicted(changed, acc, fig.total_j, graph, costs, budgets, timing, allowance, moves, (best, best_j))
    return best


def _evicted(
    plan: Plan,
    acc: Accounting,
    plan_j: float,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None,
    moves: Moves,
    best: tuple[Plan | None, float],
) -> tuple[Plan | None, float]:
    """The cheapest of `best` and the evictions of `plan` (its accounting `acc`, its energy `plan_j`) at its peak stage that fit.

    Only the outputs that could make one are evicted (`hopeless_evictions`).
    """
    peak = max(range(len(graph)), key=acc.stage_peak_bytes)
    spared = hopeless_evictions(plan, costs, acc, peak, budgets.ram_bytes, plan_j, best[1], moves)
    energies = None
    for evicted in evictions_of(plan, graph, costs, acc, peak, moves, spared):
        if spent(allowance):
            break
        if energies is None:
            charge(allowance, replay_units(len(graph)))
            energies = Energies(plan, costs, timing, plan_j)
        if _screened(energies, evicted, best[1], len(graph), allowance):
            continue
        fig = figures(evicted, graph, costs, timing, base=acc)
        if budgets.fits(fig) and fig.total_j < best[1]:
            best = evicted, fig.total_j
    return best


def _screened(energies: Energies, changed: Plan, best_j: float, nodes: int, allowance: Allowance | None) -> bool:
    """Whether `changed` certainly costs no less than `best_j` by its energy alone (`Energies.cannot_beat`).

    Charges `allowance` for what was done: a screen where it does, a replay where the caller must
    replay `changed` after all.
    """
    if energies.cannot_beat(changed, best_j):
        charge(allowance, screen_units(nodes))
        return True
    charge(allowance, replay_units(nodes))
    return False


def _on_time(
    plan: Plan,
    acc: Accounting,
    fig: Figures,
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    allowance: Allowance | None,
) -> tuple[Plan, float] | None:
    """`plan` (within the RAM budget, past the deadline) after moved transfers bring it within the deadline, and its energy.

    Each step takes the moved transfer (`moved_transfers`) that shortens the runtime most and
    keeps the RAM budget, at most `REPAIR_STEPS` of them; None if the deadline is still missed.
    """
    for _ in range(REPAIR_STEPS):
        step: tuple[float, float, Plan, Accounting, Figures] | None = None
        for moved in moved_transfers(plan, graph, costs, acc):
            if spent(allowance):
                return None
            charge(allowance, replay_units(len(graph)))
            moved_acc = account(moved, graph, costs, timing, base=acc)
            moved_fig = figures(moved, graph, costs, timing, moved_acc)
            shorter = moved_fig.peak_ram_bytes <= budgets.ram_bytes and moved_fig.runtime_s < fig.runtime_s
            if shorter and (step is None or (moved_fig.runtime_s, moved_fig.total_j) < step[:2]):
                step = (moved_fig.runtime_s, moved_fig.total_j, moved, moved_acc, moved_fig)
        if step is None:
            return None
        plan, acc, fig = step[2], step[3], step[4]
        if budgets.meets_deadline(fig.runtime_s):
            return plan, fig.total_j
    return None


def hopeless_evictions(
    plan: Plan, costs: CostTable, acc: Accounting, stage: int, ram_bytes: int, plan_j: float, best_j: float, moves: Moves
) -> frozenset[int]:
    """The outputs resident at `stage` whose eviction there cannot make `plan` (energy `plan_j`) fit below `best_j`.

    An eviction frees one output at `stage` and changes nothing else there, so the stage's peak
    falls by at most the output's bytes: one smaller than the stage's excess over `ram_bytes`
    leaves it over. And an eviction only adds energy: a recomputation at least the output's
    compute energy, paging at least its page-in's. Their figures would reject both.
    """
    excess = acc.stage_peak_bytes(stage) - ram_bytes

    def least_j(i: int) -> float:
        return min(costs.compute_j[i] if moves.recompute else math.inf, costs.page_in_j[i] if moves.page else math.inf)

    return frozenset(i for i in plan.resident(stage) if costs.output_bytes[i] < excess or exceeds(plan_j + least_j(i), best_j))


def evictions(
    plan: Plan, graph: TrainingGraph, stage: int, spared: frozenset[int] = frozenset(), read_at: list[list[int]] | None = None
) -> Iterator[Plan]:
    """Each plan that frees one output resident at the start of `stage` and recomputes it where it is next read.

    Not one of `spared`; `read_at` is the plan's `reads`, if the caller has them. For an output i
    resident at the start of `stage`, let u be the last earlier stage that computes or reads it
    and r the first from `stage` on that does: i leaves the kept sets of stages u .. r-1 (it is
    freed after its reader in u) and is computed in r, after every input of it that is not
    resident there, computed in r too (a cascade, as in `recomputed_pages`). An output that
    nothing reads from `stage` on is only freed. Not where i is paged out or in from u to r, nor
    where an input of the cascade is being paged in during r.
    """
    read_at = reads(plan, graph) if read_at is None else read_at
    for i in sorted(plan.resident(stage) - spared):
        held = _held_over(plan, read_at[i], i, stage)
        if held is None:
            continue
        used, reader = held
        kept = tuple(k - {i} if used <= s < reader else k for s, k in enumerate(plan.kept))
        if reader == len(plan.computed):
            yield replace(plan, kept=kept)
            continue
        computed = _rebuilt_in(plan, kept, i, reader, graph)
        if computed is None:
            continue
        yield replace(plan, kept=kept, computed=_with_stage(plan.computed, reader, computed))


def evictions_of(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    acc: Accounting,
    stage: int,
    moves: Moves = BOTH,
    spared: frozenset[int] = frozenset(),
) -> Iterator[Plan]:
    """The evictions at `stage` (none of `spared`) that `moves` allow.

    By recomputation (`evictions`), then by paging (`paged_evictions`), from one reading of the
    plan's reads.
    """
    read_at = reads(plan, graph)
    if moves.recompute:
        yield from evictions(plan, graph, stage, spared, read_at)
    if moves.page:
        yield from paged_evictions(plan, graph, costs, acc, stage, spared, read_at)


def paged_evictions(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    acc: Accounting,
    stage: int,
    spared: frozenset[int] = frozenset(),
    read_at: list[list[int]] | None = None,
) -> Iterator[Plan]:
    """Each plan that pages one output resident at the start of `stage` out before it and back in after it.

    `acc` is the plan's accounting, `read_at` its `reads` if the caller has them. Not one of
    `spared`. For an output i resident at the start of
    `stage`, with u and r as in `evictions` (r a reader, at least two stages after `stage`): i is
    paged out in a stage o of `u+1 .. stage-1` (resident at its start, held to its end), the first
    whose room (compute less transfers) hides the transfer, else `u+1`, unless a copy is on storage
    already; it is paged in in a stage q of `stage+1 .. r-1`, the latest that hides the transfer,
    else `r-1`; it is absent from the end of o (of u, with a copy) to q. So it is absent at `stage`
    under either timing. Not where i is paged out or in from u to r.
    """
    channels = costs.dma_channels
    room = _room(costs, acc)
    copied = _first_stages(plan.paged_out)
    read_at = reads(plan, graph) if read_at is None else read_at
    for i in sorted(plan.resident(stage) - spared):
        held = _held_over(plan, read_at[i], i, stage)
        if held is None or held[1] < stage + 2 or held[1] == len(plan.computed):
            continue
        used, reader = held
        if copied.get(i, used) < used:
            out, gone = None, used + 1
        else:
            if stage < used + 2:
                continue
            out = _hiding(range(used + 1, stage), room, costs.page_out_s[i] / channels)[1]
            gone = out + 1
        at = _hiding(range(reader - 1, stage, -1), room, costs.page_in_s[i] / channels)[1]
        kept = tuple(k - {i} if gone <= s + 1 <= at else k for s, k in enumerate(plan.kept))
        paged_out = plan.paged_out if out is None else _with_set(plan.paged_out, out, plan.paged_out[out] | {i})
        yield replace(plan, kept=kept, paged_out=paged_out, paged_in=_with_set(plan.paged_in, at, plan.paged_in[at] | {i}))


def _held_over(plan: Plan, read_at: list[int], i: int, stage: int) -> tuple[int, int] | None:
    """The last stage u before `stage` that computes or reads i and the first r from `stage` on (the plan's length if none).

    None where no stage before `stage` does, or where i is paged out or in from u to r.
    """
    before = [s for s in read_at if s < stage]
    if not before:
        return None
    used = before[-1]
    reader = next((s for s in read_at if s >= stage), len(plan.computed))
    if any(i in plan.paged_in[s] or i in plan.paged_out[s] for s in range(used, min(reader + 1, len(plan.computed)))):
        return None
    return used, reader


def changes_of(
    plan: Plan,
    graph: TrainingGraph,
    moves: Moves = BOTH,
    costs: CostTable | None = None,
    timing: Timing | None = None,
    acc: Accounting | None = None,
    hopeful: bool = False,
    ram_bytes: int | None = None,
) -> Iterator[Plan]:
    """Every single change of `plan` (module docstring), in a fixed order.

    The bridges, then per page-in keeping the output instead, then (where `moves` recompute)
    rebuilding it instead, then (given the costs, under overlap timing) the moved transfers, then
    (given the costs, where `moves` page) the recomputations paged instead; `acc` is the plan's
    accounting, if the caller has it.

    Two filters leave out changes that their figures would only reject: with `hopeful`, a
    recomputation paged instead whose transfers cost more energy than every recomputation of its
    stage with its static energy, so that it cannot save energy (`_cannot_save`); with `ram_bytes`
    (and the costs), a bridge or a kept page that holds its output over a stage with less room
    than the output's bytes (`_no_room`), so that it cannot fit the RAM budget.
    """
    if costs is None or timing is None:
        yield from bridges(plan, graph)
        yield from kept_pages(plan, graph)
        if moves.recompute:
            yield from recomputed_pages(plan, graph)
        return
    acc = acc if acc is not None else account(plan, graph, costs, timing)
    full = None if ram_bytes is None else _no_room(costs, acc, ram_bytes)
    yield from bridges(plan, graph, full)
    yield from kept_pages(plan, graph, full)
    if moves.recompute:
        yield from recomputed_pages(plan, graph)
    if Timing(timing) is Timing.OVERLAP and plan.moves.page:
        yield from moved_transfers(plan, graph, costs, acc)
    if moves.page:
        yield from paged_recomputations(plan, graph, costs, acc, _cannot_save(plan, costs, timing) if hopeful else None)


#: A change's held output and the stages it is added to the kept sets of -> whether it cannot fit.
_Full = Callable[[int, int, int], bool]

#: A recomputed output, its stage, and whether the page-in comes with a page-out -> whether paging it instead cannot save energy.
_Hopeless = Callable[[int, int, bool], bool]

#: The share of a change's transfer energy by which the most it could save must fall short for
#: `_cannot_save` to leave it out: a margin far above rounding, so that it never leaves out a
#: change whose replay would come out cheaper.
_MARGIN = 1e-9


def _no_room(costs: CostTable, acc: Accounting, ram_bytes: int) -> _Full:
    """Whether holding output i from stage `previous` to `stage` (`_kept_over`) breaks `ram_bytes`, by `acc`'s stage peaks.

    Stages previous+2 .. stage-1 see i neither at their start nor computed, paged or read in
    them before the change (its last presence is at most previous+1), and after it i is resident
    through each of them while nothing else of theirs changes: each of their peaks rises by i's
    bytes exactly. If one of them then passes the budget, so does the changed plan.
    """
    peaks = acc.stage_peaks

    def full(i: int, previous: int, stage: int) -> bool:
        inner = peaks[previous + 2 : stage]
        return bool(inner) and max(inner) + costs.output_bytes[i] > ram_bytes

    return full


def _cannot_save(plan: Plan, costs: CostTable, timing: Timing) -> _Hopeless:
    """Whether paging recomputed output i in instead of recomputing it in `stage` costs more energy than it can save.

    The change drops recomputations of `stage` only, which saves at most their energy and, under
    overlap timing, the static energy of their time (the stage can shorten by that much at most;
    the transfers only lengthen the stages they run in); it adds the page-in's energy and, with
    `out`, the page-out's.
    """
    static_w = costs.static_power_w if Timing(timing) is Timing.OVERLAP else 0.0
    most = [sum(costs.compute_j[k] + static_w * costs.compute_s[k] for k in computed[:-1]) for computed in plan.computed]

    def hopeless(i: int, stage: int, out: bool) -> bool:
        transfers_j = costs.page_in_j[i] + (costs.page_out_j[i] if out else 0.0)
        return most[stage] < transfers_j * (1.0 - _MARGIN)

    return hopeless


def bridges(plan: Plan, graph: TrainingGraph, full: _Full | None = None) -> Iterator[Plan]:
    """Each plan that keeps one recomputed output from its previous presence to its recomputation.

    For a recomputation of i in stage s, let p be the last earlier stage where i is computed,
    paged in or kept; i is then added to the kept sets of stages p .. s-1 (so it is resident
    at the start of s) and no longer computed in s, and the recomputations of stage s that
    nothing reads any more are dropped with it. Not where `full` says i cannot be held so long.
    """
    for stage, computed in enumerate(plan.computed):
        for i in computed[:-1]:  # the last compute of a stage is its own node
            previous = _last_presence(plan, i, stage)
            if previous is None or (full is not None and full(i, previous, stage)):
                continue
            kept = _kept_over(plan.kept, i, previous, stage)
            stage_computed = [k for k in computed if k != i]
            yield replace(
                plan,
                kept=kept,
                computed=_with_stage(
                    plan.computed, stage, _live(stage_computed, stage, kept[stage], plan.paged_out[stage], graph)
                ),
            )


def kept_pages(plan: Plan, graph: TrainingGraph, full: _Full | None = None) -> Iterator[Plan]:
    """Each plan that keeps one paged output in RAM instead of paging it back in.

    For a page-in of i in stage t, let p be the last earlier stage where i is computed, paged in
    or kept; i is added to the kept sets of stages p .. t-1 and the page-in goes (i is resident
    from stage t+1 on as before); its page-outs go too once no page-in of i is left. Not where
    `full` says i cannot be held so long.
    """
    for stage, paged_in in enumerate(plan.paged_in):
        for i in sorted(paged_in):
            previous = _last_presence(plan, i, stage)
            if previous is None or (full is not None and full(i, previous, stage)):
                continue
            yield _without_page_in(replace(plan, kept=_kept_over(plan.kept, i, previous, stage)), i, stage)


def recomputed_pages(plan: Plan, graph: TrainingGraph) -> Iterator[Plan]:
    """Each plan that rebuilds one paged output instead of paging it back in.

    For a page-in of i in stage t, let r be the first later stage that reads i: i leaves the
    kept sets of stages t .. r-1 (it is no longer resident before r), the page-in goes, and i is
    computed in stage r, after every input of it that is not resident there, computed in r
    too (and so on back: a cascade; not where one of them is being paged in during r). Its
    page-outs go once no page-in of i is left. A page-in that another page-in of i follows
    before r serves no read: it goes, and i leaves the kept sets only up to the next page-in.
    """
    read_at = reads(plan, graph)
    for stage, paged_in in enumerate(plan.paged_in):
        for i in sorted(paged_in):
            later = [s for s in read_at[i] if s > stage]
            if not later:
                continue
            reader = later[0]
            again = next((s for s in range(stage + 1, reader) if i in plan.paged_in[s]), None)
            if again is not None:
                unread = tuple(k - {i} if stage <= s < again else k for s, k in enumerate(plan.kept))
                yield _without_page_in(replace(plan, kept=unread), i, stage)
                continue
            kept = tuple(k - {i} if stage <= s < reader else k for s, k in enumerate(plan.kept))
            computed = _rebuilt_in(plan, kept, i, reader, graph)
            if computed is None:
                continue
            changed = replace(plan, kept=kept, computed=_with_stage(plan.computed, reader, computed))
            yield _without_page_in(changed, i, stage)


def moved_transfers(plan: Plan, graph: TrainingGraph, costs: CostTable, acc: Accounting) -> Iterator[Plan]:
    """Each plan that moves one transfer out of a stage it makes stall (`acc`, the plan's accounting).

    A stage stalls where its transfers take longer than its compute (over the DMA channels). Each
    transfer of such a stage is offered at most five other stages of its stretch (`_other_stages`),
    judged by their room (compute less transfers). A page-out of i may go to any stage i could
    be resident at the start of, between its compute and its first page-in (or recomputation); i
    is then resident up to the later of the page-out and its last reader there. A page-in may go
    to any stage after the page-out where i is not resident, up to the stage before its next
    reader; i is resident from the stage after it.
    """
    channels = costs.dma_channels
    room = _room(costs, acc)
    read_at = reads(plan, graph)
    yield from _moved_page_outs(plan, room, read_at, [s / channels for s in costs.page_out_s])
    yield from _moved_page_ins(plan, room, read_at, [s / channels for s in costs.page_in_s])


def _moved_page_outs(plan: Plan, room: list[float], read_at: list[list[int]], out_s: list[float]) -> Iterator[Plan]:
    """The page-out moves of `moved_transfers`."""
    computed_at: dict[int, list[int]] = {}
    for t, computed in enumerate(plan.computed):
        for k in computed:
            computed_at.setdefault(k, []).append(t)
    first_in = _first_stages(plan.paged_in)
    for out, paged_out in enumerate(plan.paged_out):
        for i in sorted(paged_out):
            if room[out] >= 0 or i not in first_in:
                continue
            made = max(t for t in computed_at[i] if t < out)
            stop = min([t for t in computed_at[i] if out < t < first_in[i]] + [first_in[i]])
            last_read = max(t for t in read_at[i] if t < stop)
            for s in _other_stages(range(made + 1, stop), out, room, out_s[i]):
                end = max(s, last_read)  # i resident at the start of stages made+1 .. end
                kept = tuple(k | {i} if made <= t < end else k - {i} if end <= t < stop else k for t, k in enumerate(plan.kept))
                moved = tuple(o - {i} if t == out else o | {i} if t == s else o for t, o in enumerate(plan.paged_out))
                yield replace(plan, kept=kept, paged_out=moved)


def _moved_page_ins(plan: Plan, room: list[float], read_at: list[list[int]], in_s: list[float]) -> Iterator[Plan]:
    """The page-in moves of `moved_transfers`."""
    outs = {i: t for t, paged_out in enumerate(plan.paged_out) for i in paged_out}
    for at, paged_in in enumerate(plan.paged_in):
        for i in sorted(paged_in):
            later = [t for t in read_at[i] if t > at]
            if room[at] >= 0 or not later or i not in outs:
                continue
            previous = _last_presence(plan, i, at)
            if previous is None:
                continue
            first = max(outs[i], previous + (1 if i in plan.kept[previous] else 0)) + 1
            for s in _other_stages(range(first, later[0]), at, room, in_s[i]):
                low, high = min(s, at), max(s, at)
                kept = tuple((k | {i} if s < at else k - {i}) if low <= t < high else k for t, k in enumerate(plan.kept))
                moved = tuple(p - {i} if t == at else p | {i} if t == s else p for t, p in enumerate(plan.paged_in))
                yield replace(plan, kept=kept, paged_in=moved)


def paged_recomputations(
    plan: Plan, graph: TrainingGraph, costs: CostTable, acc: Accounting, hopeless: _Hopeless | None = None
) -> Iterator[Plan]:
    """Each plan that pages one recomputed output back in instead of recomputing it (`acc`, the plan's accounting).

    For a recomputation of i in stage s, let p be i's last earlier presence. Unless a copy of i
    is already on storage, i is paged out in a stage o after p (resident at its start: kept from
    p to o-1), in p+1, in the first stage whose room (compute less transfers) hides the
    transfer, or in a stage that computes longer than every one before it (`_longer_computes`);
    it is paged in in a stage q after o and p, in s-1 or in the latest stage that hides the
    transfer, and resident from q+1 to s. The recomputation goes, with those of its
    inputs that nothing else reads any more. Not where `hopeless` says the change cannot save
    energy.
    """
    channels = costs.dma_channels
    room = _room(costs, acc)
    copied = _first_stages(plan.paged_out)
    for stage, computed in enumerate(plan.computed):
        for i in computed[:-1]:  # the last compute of a stage is its own node
            previous = _last_presence(plan, i, stage)
            if previous is None:
                continue
            if copied.get(i, stage) < stage - 1:
                outs: list[int | None] = [None]
            else:
                stretch = range(previous + 1, stage - 1)
                hiding = _hiding(stretch, room, costs.page_out_s[i] / channels)
                outs = list(dict.fromkeys([*hiding, *_longer_computes(stretch, acc.compute_s, costs.page_out_s[i] / channels)]))
            for out in outs:
                if hopeless is not None and hopeless(i, stage, out is not None):
                    continue
                on_storage = copied[i] if out is None else out
                after = previous + (2 if i in plan.kept[previous] else 1)  # the first stage i is not resident at
                ins = range(max(on_storage + 1, after), stage)
                for at in dict.fromkeys(_hiding(ins[::-1], room, costs.page_in_s[i] / channels)):
                    yield _paged_instead(plan, graph, i, stage, previous, out, at)


def _room(costs: CostTable, acc: Accounting) -> list[float]:
    """Per stage, its compute less its transfers over the DMA channels (negative: the stage stalls)."""
    return [c - d / costs.dma_channels for c, d in zip(acc.compute_s, acc.dma_s)]


def _first_stages(sets: tuple[frozenset[int], ...]) -> dict[int, int]:
    """Each output of the per-stage `sets`, and the first stage that holds it."""
    first: dict[int, int] = {}
    for t in range(len(sets) - 1, -1, -1):
        first.update(dict.fromkeys(sets[t], t))
    return first


def _hiding(stages: range, room: list[float], transfer_s: float) -> tuple[int, ...]:
    """The first of `stages` and the first that hides a transfer of `transfer_s` (else the first again); none if empty."""
    if not stages:
        return ()
    return stages[0], next((t for t in stages if room[t] >= transfer_s), stages[0])


def _longer_computes(stages: range, compute_s: Sequence[float], transfer_s: float) -> list[int]:
    """Each of `stages` that computes longer than every one before it, up to the first whose compute hides `transfer_s`.

    Where another transfer fills a stage, its room is short although its compute is long: a move
    of that transfer (`moved_transfers`) can free the stage for this one.
    """
    chosen: list[int] = []
    longest = 0.0
    for t in stages:
        if compute_s[t] > longest:
            chosen.append(t)
            longest = compute_s[t]
            if longest >= transfer_s:
                break
    return chosen[1:]  # the first stage is `_hiding`'s already


def _paged_instead(plan: Plan, graph: TrainingGraph, i: int, stage: int, previous: int, out: int | None, at: int) -> Plan:
    """`plan` with i paged out in `out` (None: a copy is on storage) and in in `at` instead of recomputed in `stage`."""
    kept, paged_out = plan.kept, plan.paged_out
    if out is not None:
        kept = _kept_over(kept, i, previous, out)
        paged_out = _with_set(paged_out, out, paged_out[out] | {i})
    kept = _kept_over(kept, i, at, stage)
    computed = _live([k for k in plan.computed[stage] if k != i], stage, kept[stage], paged_out[stage], graph)
    return replace(
        plan,
        kept=kept,
        paged_out=paged_out,
        paged_in=_with_set(plan.paged_in, at, plan.paged_in[at] | {i}),
        computed=_with_stage(plan.computed, stage, computed),
    )


def _other_stages(stretch: range, at: int, room: list[float], transfer_s: float) -> list[int]:
    """Stages of `stretch` other than `at` to move a transfer of `transfer_s` to.

    Nearest `at` on either side: the first stage where it would stall less than it does in `at`,
    and the first with room for all of it; and the stage where it would stall least.
    """
    now_s = min(transfer_s, -room[at])  # the stall the transfer makes in `at`
    stall = {t: max(0.0, transfer_s - max(room[t], 0.0)) for t in stretch if t != at}
    less = [t for t, s in stall.items() if s < now_s]
    chosen = []
    for side in ([t for t in less if t < at][::-1], [t for t in less if t > at]):
        if side:
            chosen.append(side[0])
            chosen.append(next((t for t in side if stall[t] == 0.0), side[0]))
    if less:
        chosen.append(min(less, key=lambda t: (stall[t], abs(t - at))))
    return list(dict.fromkeys(chosen))


def _rebuilt_in(plan: Plan, kept: tuple[frozenset[int], ...], i: int, stage: int, graph: TrainingGraph) -> tuple[int, ...] | None:
    """The computes of `stage` with i rebuilt in it, given the `kept` sets (a cascade, `_rebuilt`).

    None where an input it needs is being paged in during that stage: it cannot be computed there.
    """
    wanted = _rebuilt(i, kept[stage - 1] | frozenset(plan.computed[stage]), graph)
    if wanted & plan.paged_in[stage]:
        return None
    return tuple(sorted(set(plan.computed[stage]) | wanted))


def _rebuilt(i: int, present: frozenset[int], graph: TrainingGraph) -> set[int]:
    """Output i and every input it needs, back to what is `present`, to compute it in one stage."""
    wanted: set[int] = set()
    stack = [i]
    while stack:
        k = stack.pop()
        if k in wanted or k in present:
            continue
        wanted.add(k)
        stack.extend(graph.nodes[k].deps)
    return wanted


def _without_page_in(plan: Plan, i: int, stage: int) -> Plan:
    """`plan` without i's page-in in `stage`, and without its page-outs if no page-in of i is left."""
    paged_in = _with_set(plan.paged_in, stage, plan.paged_in[stage] - {i})
    paged_out = plan.paged_out
    if not any(i in s for s in paged_in):
        paged_out = tuple(s - {i} for s in paged_out)
    return replace(plan, paged_in=paged_in, paged_out=paged_out)


def _kept_over(kept: tuple[frozenset[int], ...], i: int, first: int, stop: int) -> tuple[frozenset[int], ...]:
    """The kept sets with i added to stages first .. stop-1."""
    first, stop = max(first, 0), max(stop, first, 0)
    return (*kept[:first], *(k | {i} for k in kept[first:stop]), *kept[stop:])


def _last_presence(plan: Plan, i: int, stage: int) -> int | None:
    for s in range(stage - 1, -1, -1):
        if i in plan.kept[s] or i in plan.paged_in[s] or i in plan.computed[s]:
            return s
    return None


def _live(
    computed: list[int], stage: int, kept: frozenset[int], paged_out: frozenset[int], graph: TrainingGraph
) -> tuple[int, ...]:
    """The stage's computes without recomputations whose output nothing uses any more.

    A recomputed output is used when a later compute of the stage that is itself used reads it,
    or it is kept for the next stage or paged out. One pass from the stage's own node back
    decides each compute after every compute behind it, so dropping one that leaves its own
    inputs unused drops those too.
    """
    read: set[int] = set()
    live: list[int] = []
    for n in range(len(computed) - 1, -1, -1):
        k = computed[n]
        if n == len(computed) - 1 or k in kept or k in paged_out or k in read:
            live.append(k)
            read.update(graph.nodes[k].deps)
    return tuple(reversed(live))


def _with_stage(computed: tuple[tuple[int, ...], ...], stage: int, new: tuple[int, ...]):
    return (*computed[:stage], new, *computed[stage + 1 :])


def _with_set(sets: tuple[frozenset[int], ...], stage: int, new: frozenset[int]) -> tuple[frozenset[int], ...]:
    return (*sets[:stage], new, *sets[stage + 1 :])
