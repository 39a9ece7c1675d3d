"""The placement search: the plain cover's choice, and others of its cost, placed in stages.

The plain cover's choice is one of often many of the same cost (outputs of one size and price),
and some can be placed without a stall where others cannot. So while a placement stalls, the
outputs whose transfers stall are avoided and the cover solved again; a choice that still costs
the plain bound and places without a stall is optimal, one that costs a little more is often a
near-optimal schedule. When a hybrid choice mixes both moves, the single-move choices are
searched too (paging first): a mixed choice may not place where a single-move one does.

Each search first runs quick rounds, placed by `cover_plan` (its transfers balanced over the
stages: milliseconds to a second); if they leave a gap, the stall-priced cover raises the bound;
then come exact rounds, placed by the timed cover confined to the choice (`timed_cover.placement`:
seconds to tens of seconds on 300-node graphs), with what is left of the budget.
"""

from dataclasses import replace

from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.bounds.cover import CoverBound, cover_bound
from poetsim.optimiser.bounds.timed_cover import placement, stalled
from poetsim.optimiser.call import Call
from poetsim.optimiser.found import Found
from poetsim.optimiser.plans.cover_plan import cover_plan, events_plan, plan_stalled
from poetsim.optimiser.steps import stall_priced
from poetsim.schedule.model import Moves, Timing

PAGING_ONLY = Moves(recompute=False, page=True)
RECOMPUTE_ONLY = Moves(recompute=True, page=False)


def place(call: Call, found: Found) -> Found:
    """Stages for the plain cover's choice, and their plan.

    Quick rounds first, then exact ones; the stall-priced cover between them (returned as
    `Found.stall_cover`).
    """
    plain = found.cover
    assert plain is not None, "the cover comes first"
    allowance = call.allowance.part(call.shares.placement)
    moves = call.task.moves
    searches: list[tuple[CoverBound | None, Moves]] = [(plain, plain.single_move or moves)]
    if plain.single_move is None and moves.recompute and moves.page:
        searches += [(None, PAGING_ONLY), (None, RECOMPUTE_ONLY)]
    if _quick_rounds(call, found, searches, allowance):
        return found
    found = replace(found, stall_cover=_stall_cover(call, found, allowance))
    if not call.done():
        _exact_rounds(call, found, searches, allowance)
    return found


def _quick_rounds(call: Call, found: Found, searches: list[tuple[CoverBound | None, Moves]], allowance: Allowance) -> bool:
    """The quick placement of each cover's choice, solving the single-move covers on first use.

    `searches` gets each cover solved here in place of its None. True when the search is over:
    the placement's allowance or the call's is spent, or the incumbent is proven.
    """
    for n, (choice, single) in enumerate(searches):
        if allowance.over():
            return True
        if choice is None:
            task = call.task
            choice = cover_bound(task.graph, task.costs, task.budgets, single, task.timing, allowance)
            searches[n] = (choice, single)
        if not choice.infeasible:
            _search_choices(call, found, choice, single, allowance, exact=False)
        if call.standing.proven() or call.allowance.over():
            return True
    return False


def _exact_rounds(call: Call, found: Found, searches: list[tuple[CoverBound | None, Moves]], allowance: Allowance) -> None:
    """The exact placement of each feasible cover's choice, until an allowance is spent or a proof.

    A mixed choice (the first of several) gets part of what is left, so that the single-move
    searches get a turn.
    """
    for n, (choice, single) in enumerate(searches):
        if allowance.over():
            return
        search = allowance.part(call.shares.mixed_placement if n == 0 and len(searches) > 1 else 1.0)
        assert choice is not None, "every cover was solved in the quick rounds"
        if choice.infeasible:
            continue
        _search_choices(call, found, choice, single, search, exact=True)
        if call.standing.proven() or call.allowance.over():
            return


def _stall_cover(call: Call, found: Found, allowance: Allowance) -> CoverBound | None:
    """The cover with each page-out's own stall priced (item 6), under `overlap` with paging.

    A higher bound where some page-out cannot hide behind any stage it may run in, and a choice that
    avoids such outputs, placed as in the quick rounds.

    Its choice is placed only when it pages something and differs from the plain cover's: a
    choice that pages nothing has no stall to avoid (it costs what the plain cover prices it at).
    """
    plain = found.cover
    assert plain is not None, "the cover comes first"
    if plain.pages_nothing:
        return None
    priced = stall_priced(call, allowance.part(call.shares.stall_cover), page_in_stalls=False)
    if priced is None:
        return None
    if call.standing.proven() or not priced.paged or (priced.recomputed, priced.paged) == (plain.recomputed, plain.paged):
        return priced
    _search_choices(call, found, priced, priced.single_move or call.task.moves, allowance, exact=False)
    return priced


def _search_choices(call: Call, found: Found, choice: CoverBound, moves: Moves, allowance: Allowance, exact: bool) -> None:
    """Place `choice` (quick: by `cover_plan`; `exact`: by the timed cover confined to it).

    While new outputs stall, avoid them and place the cover's next choice, until the incumbent is
    proven or the budget or the choices run out. A choice that costs a little more than the bound
    can still place without a stall: no proof then, but a good schedule.
    """
    task = call.task
    avoid: frozenset[int] = frozenset()
    for round_ in range(call.shares.placement_rounds):
        if not choice.restores or allowance.over():
            return
        call.note("placement")
        stalling = _place_exact(call, choice, round_, allowance) if exact else _place_quick(call, found, choice)
        if stalling is None or call.standing.proven() or not stalling - avoid or allowance.over():
            return
        avoid |= stalling
        # Searching among single-move choices when the first was one: that cover has no cascades
        # and is solved in a fraction of what the hybrid one takes.
        choice = cover_bound(task.graph, task.costs, task.budgets, moves, task.timing, allowance, avoid=avoid)
        if choice.infeasible:
            return


def _place_quick(call: Call, found: Found, choice: CoverBound) -> frozenset[int] | None:
    """The plan of `choice` by `cover_plan`, offered; the outputs whose transfers stall in it (None: no plan).

    Under compute-only, transfers take no time: nothing stalls.
    """
    task = call.task
    if choice is found.cover:
        plan = found.first_plan
    else:
        plan = cover_plan(task.graph, task.costs, task.budgets, task.timing, choice, call.allowance)
        call.standing.offer(plan, "the placement search")
    if plan is None:
        return None
    return plan_stalled(plan, task.costs) if task.timing is Timing.OVERLAP else frozenset()


def _place_exact(call: Call, choice: CoverBound, round_: int, allowance: Allowance) -> frozenset[int] | None:
    """The plan of the timed cover confined to `choice`, offered.

    The outputs whose transfers stall in it (None: cut short by the budget, its stalls say nothing
    about the choice). The first placement may take all that is left (it is the likeliest to
    succeed), later ones half: a good placement is wanted, not its proof.
    """
    task = call.task
    placed = placement(task.graph, task.costs, task.budgets, task.timing, choice, allowance.part(1.0 if round_ == 0 else 0.5))
    plan = events_plan(task.graph, task.costs, task.budgets, task.timing, placed)
    call.standing.offer(plan, "the cover's placement")
    if not placed.exact and plan is None:
        return None
    return stalled(task.graph, task.costs, placed)
