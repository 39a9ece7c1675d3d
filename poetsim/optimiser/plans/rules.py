"""Rule-made plans: what to do with an output between two stages that read it.

A decision (i, a, b) -> mode says what happens to i's output between stage a, where it is read
or computed, and stage b > a + 1, where it is read next: RECOMPUTE drops it after stage a and
computes it again when stage b (or an earlier recomputation) needs it; PAGE pages it out in the
last stage it is resident at the start of, drops it, and pages it back in during stage b - 1;
`page_stages` may move either transfer within the stretch (to hide its DMA time behind a longer
stage, or to free RAM only where it is short). Anything not decided is kept.
`plan_from_decisions` replays decisions stage by stage, computing any missing input on demand,
so every decision set yields a plan that the model admits (the tests check its rows). `reads`
gives the stages that read an output in a plan, from which new decisions are proposed.
"""

import itertools
from collections.abc import Mapping
from enum import Enum

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.plans.plan import Plan


class Mode(str, Enum):
    """What a rule does with one output across one stretch between two reads."""

    KEEP = "keep"
    RECOMPUTE = "recompute"
    PAGE = "page"


#: (node, last stage before the stretch, stage after it) -> mode; the stretch is a+1 .. b-1.
Decisions = Mapping[tuple[int, int, int], Mode]

#: For a PAGE decision (i, a, b): (the earliest stage to page out in, the stage to page in during).
PageStages = Mapping[tuple[int, int, int], tuple[int, int]]


def uses(graph: TrainingGraph, i: int) -> tuple[int, ...]:
    """The stages that use i when every node is computed once: its own, then each reader's."""
    return (i, *graph.consumers[i])


def reads(plan: Plan, graph: TrainingGraph) -> list[list[int]]:
    """For each node, the stages of `plan` that compute it or read it, ascending."""
    found: list[list[int]] = [[] for _ in graph.nodes]
    for t, computed in enumerate(plan.computed):
        touched = set(computed)
        for k in computed:
            touched.update(graph.nodes[k].deps)
        for i in touched:
            found[i].append(t)
    return found


def plan_from_decisions(
    graph: TrainingGraph,
    decisions: Decisions,
    page_stages: PageStages | None = None,
    keep_recomputed: bool | frozenset[int] = True,
) -> Plan:
    """Replay decisions stage by stage: compute t and any missing ancestor, page, keep what is wanted.

    A PAGE stretch (i, a, b) pages out in stage a (a+1 if i is computed only during a) or, with
    `page_stages`, in its first entry (before a, if i is resident then; else no earlier than
    it), and pages in during its second (b - 1 by default); it stays a keep where the stretch
    leaves no room for both.

    An output computed again inside one of its RECOMPUTE stretches (for an earlier reader, or
    as the input of another recomputation) is kept from then on when `keep_recomputed` says so
    (True: every output; a set: those outputs), else dropped again and recomputed for its next
    reader: keeping costs RAM over the rest of the stretch, dropping costs energy and time.
    """
    return _replayed(graph, decisions, page_stages, keep_recomputed, graph.last_use)


def held_plan(
    graph: TrainingGraph,
    decisions: Decisions,
    page_stages: PageStages | None,
    keep_recomputed: bool | frozenset[int],
    holdable: frozenset[int],
) -> tuple[Plan, int]:
    """`plan_from_decisions` with the `holdable` inputs of late recomputations held; the plan and its replays.

    An output of `holdable` that a recomputation needs after its last reader (the cascade of a
    recomputed consumer, such as a concatenation recomputed in the backward pass from the
    outputs it joins) is kept from that reader until the last such recomputation, instead of
    being recomputed with its own inputs. The replay runs again with those outputs held until no
    recomputation needs one past the stage it is held to: each round holds an output longer, and
    none past the last stage, so the rounds end.
    """
    held = list(graph.last_use)
    plan, replays = _replayed(graph, decisions, page_stages, keep_recomputed, graph.last_use), 1
    while True:
        late = {k: t for t, computed in enumerate(plan.computed) for k in computed if k != t and t > held[k] and k in holdable}
        if not late:
            return plan, replays
        for k, t in late.items():
            held[k] = t
        plan, replays = _replayed(graph, decisions, page_stages, keep_recomputed, tuple(held)), replays + 1


def _replayed(  # noqa: C901 - one stage-by-stage replay whose rules (compute, page, keep) share its state
    graph: TrainingGraph,
    decisions: Decisions,
    page_stages: PageStages | None,
    keep_recomputed: bool | frozenset[int],
    last_use: tuple[int, ...],
) -> Plan:
    """The replay of `plan_from_decisions`, each output read last at `last_use` (the graph's, or later where held)."""
    T = len(graph)
    page_stages = page_stages or {}
    stretches: dict[int, list[tuple[int, int, Mode]]] = {}
    for (i, a, b), mode in decisions.items():
        if mode is not Mode.KEEP:
            stretches.setdefault(i, []).append((a, b, mode))
    page_in_at: list[set[int]] = [set() for _ in range(T)]
    in_stage: dict[tuple[int, int], int] = {}  # (i, b) -> the stage i is paged in during
    for i, spans in stretches.items():
        for a, b, mode in spans:
            if mode is Mode.PAGE:
                in_stage[i, b] = page_stages.get((i, a, b), (a, b - 1))[1]
                page_in_at[in_stage[i, b]].add(i)
    page_out_at: list[set[int]] = [set() for _ in range(T)]
    for (i, a, b), (out, _) in page_stages.items():
        if decisions.get((i, a, b)) is Mode.PAGE and i < out < a:
            # Paged out while still read before the stretch (it stays resident until a): the copy
            # is then on storage when the stretch starts, and i is dropped right after a.
            page_out_at[out].add(i)
    last_computed = [-1] * T
    held_until: dict[tuple[int, int], int] = {}  # (i, b) -> last stage i is resident at the start of

    def keeps(i: int) -> bool:
        return keep_recomputed if isinstance(keep_recomputed, bool) else i in keep_recomputed

    # Each output's stretches by start, and a cursor into them: the replay asks only about stage
    # t + 1 as t grows, so a cursor that moves forward finds the stretch holding it. Stretches of
    # one output that overlap (not made by the rules here) are searched in their given order.
    ordered = {i: sorted(found) for i, found in stretches.items()}
    overlapping = {i for i, found in ordered.items() if any(x[1] > y[0] for x, y in itertools.pairwise(found))}
    cursor = dict.fromkeys(ordered, 0)
    stretched = frozenset(ordered)
    last_read_at: list[set[int]] = [set() for _ in range(T)]
    for i in range(T):
        if 0 <= last_use[i] < T:
            last_read_at[last_use[i]].add(i)
    page_starts: list[list[int]] = [[] for _ in range(T)]
    for i, found in ordered.items():
        for a, _, mode in found:
            if mode is Mode.PAGE and 0 <= a < T:
                page_starts[a].append(i)

    def stretch(i: int, s: int):
        found = ordered.get(i)
        if found is None:
            return None
        if i in overlapping:
            return next(((a, b, mode) for a, b, mode in stretches[i] if a < s <= b), None)
        k = cursor[i]
        while k < len(found) and found[k][1] < s:
            k += 1
        cursor[i] = k
        return found[k] if k < len(found) and found[k][0] < s else None

    def wanted(i: int, s: int) -> bool:
        """Should i be resident at the start of stage s?"""
        if s > last_use[i]:
            return False
        found = stretch(i, s)
        if found is None or (keeps(i) and last_computed[i] > found[0]):
            # Kept, or computed again inside the stretch (a segment recomputed for an earlier
            # reader): keep it rather than compute it once more.
            return True
        _a, b, mode = found
        if mode is Mode.RECOMPUTE:
            return False
        if (i, b) not in held_until:
            return True  # no room to page across this stretch: keep
        return s <= held_until[i, b] or s > in_stage[i, b]

    resident: frozenset[int] = frozenset()
    on_storage: set[int] = set()
    computed, kept, paged_out, paged_in = [], [], [], []
    for t in range(T):
        need, stack = {t}, [t]
        while stack:
            for d in graph.nodes[stack.pop()].deps:
                if d not in resident and d not in need:
                    need.add(d)
                    stack.append(d)
        for k in need:
            last_computed[k] = t
        for i in page_starts[t]:
            if i not in resident and i not in need:
                continue
            found = stretch(i, t + 1)
            if found and found[0] == t and found[2] is Mode.PAGE:
                earliest = page_stages.get((i, found[0], found[1]), (t, 0))[0]
                _plan_page_out(
                    i, t, found[1], earliest, in_stage[i, found[1]], i in resident, i in on_storage, held_until, page_out_at
                )
        outs = frozenset(i for i in page_out_at[t] if i in resident and i not in on_storage)
        ins = frozenset(i for i in page_in_at[t] if i in on_storage and i not in need and i not in resident)
        computed.append(tuple(sorted(need)))
        paged_out.append(outs)
        paged_in.append(ins)
        # What stays: outputs without stretches until their last reader, the rest as `wanted` says.
        # Resident and paged-in outputs without stretches are read at t or later, so only those
        # read last at t leave; recomputed ones (possibly past their last plain reader) are asked.
        carried = (resident | ins) - need
        resident = frozenset(
            ((carried - stretched) - last_read_at[t])
            | {i for i in carried & stretched if wanted(i, t + 1)}
            | {i for i in need if (t < last_use[i] if i not in ordered else wanted(i, t + 1))}
        )
        kept.append(resident)
        on_storage |= outs
    return Plan(tuple(computed), tuple(kept), tuple(paged_out), tuple(paged_in))


def _plan_page_out(
    i: int, a: int, b: int, earliest: int, page_in: int, resident: bool, on_storage: bool, held_until: dict, page_out_at: list
) -> None:
    """Where a PAGE stretch of i that starts after stage a pages out.

    In stage a if i is resident at its start, else in a+1 (i is only computed during a), and not
    before `earliest`; nowhere if storage already holds i. The page-in (in stage `page_in`) must
    come at least one stage after the page-out (usable only from the next); otherwise the stretch is
    kept.
    """
    if on_storage:
        held_until[i, b] = a
        return
    stage = max(a if resident else a + 1, earliest)
    if page_in >= stage + 1:
        held_until[i, b] = stage
        page_out_at[stage].add(i)
