"""The steps of one `optimise` call that need no MILP.

Covers that raise the bound, rule-made plans that lower the incumbent, and the plans polished. Each
takes what the steps before it found and returns it with its own products added (`Found`); the
incumbent and the bound are the call's `Standing`. `search.Search` runs them in order
(docs/optimiser.md, "The search").
"""

import math
import random
from dataclasses import dataclass, field, replace

from poetsim.optimiser import milp_steps
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.baselines.simple import held_input_plan, rebuilt_plan, start_plan
from poetsim.optimiser.bounds.cover import CoverBound, cover_bound, paging_floor_j, second_restore_bound
from poetsim.optimiser.bounds.events import Event
from poetsim.optimiser.bounds.timed_cover import relaxation_bound, timed_cover_bound
from poetsim.optimiser.call import Call
from poetsim.optimiser.found import Found
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import cover_plan, events_plan
from poetsim.optimiser.plans.incumbent import Candidate
from poetsim.optimiser.plans.kicks import kicked, kicks
from poetsim.optimiser.plans.polish import polish, swap
from poetsim.optimiser.plans.rules import plan_from_decisions
from poetsim.schedule.model import Moves, Schedule, Timing
from poetsim.strategies import KEEP_ALL

RECOMPUTE_ONLY = Moves(recompute=True, page=False)

#: The seed of every call's kicks (`_Kicks`).
KICK_SEED = 0


def cover(call: Call) -> Found:
    """The plain eviction cover: the call's first bound, or its proof that nothing fits."""
    task = call.task
    call.report("bound")
    found = cover_bound(task.graph, task.costs, task.budgets, task.moves, task.timing, call.allowance.part(call.shares.cover))
    if found.infeasible:
        call.standing.refute(found.message)
    else:
        call.standing.raise_bound(found.bound_j, "the eviction cover")
    return Found(cover=found)


def rule_plans(call: Call, found: Found, starts: tuple[Schedule, ...]) -> Found:
    """The plans that need no solver: keep-all, the cover's choice, the starts, the held-input plans.

    The held-input plans (`held_input_plan`, with recomputation, within the budget) recompute the
    outputs that are cheap per byte and hold the dear ones a late recomputation needs: on densely
    connected graphs the other plans' recomputations cascade back through the layers a
    concatenation joins. If none of these fits, the first rule-made plan that does
    (`first_schedule`).
    """
    task, standing = call.task, call.standing
    assert found.cover is not None, "the cover comes first"
    standing.offer(plan_from_decisions(task.graph, {}), KEEP_ALL.name)
    first = cover_plan(task.graph, task.costs, task.budgets, task.timing, found.cover, call.allowance)
    standing.offer(first, "the cover's choice")
    for schedule in starts:
        standing.offer(plans.from_schedule(schedule, task.graph), "a start")
    if task.moves.recompute:
        held = held_input_plan(task.graph, task.costs, task.budgets, task.timing, call.allowance)
        standing.offer(held, "the cheap outputs recomputed, the dear held")
    call.note("plans")
    if standing.best is None:
        first_schedule(call)
    return replace(found, first_plan=first)


def first_schedule(call: Call) -> None:
    """A schedule before anything else, whatever the budget says: the first rule-made plan that fits.

    So a call whose budget is spent still returns a schedule whenever a rule can make one; the
    greedies that drop recomputed cascades, tried last, stop when the budget is spent.
    """
    task = call.task
    call.note("first schedule")
    plan = start_plan(task.graph, task.costs, task.budgets, task.moves, task.timing, call.allowance, first_fit=True)
    call.standing.offer(plan, "the greedy")


def greedy(call: Call, found: Found) -> Found:
    """The rule-made plans of `baselines.start_plan` (keep-all, greedy, checkpoint-sqrt)."""
    call.note("greedy")
    return _greedy(call, found, call.shares.greedy)


def without_milp(call: Call, found: Found) -> Found:
    """Where no MILP step fits what is left.

    The greedy plans that their step did not finish, with most of it, if that step was cut short;
    then polishing the incumbent again.
    """
    if not found.greedy_cut or call.allowance.ends_at is None:
        return found
    call.note("greedy")
    return polish_step(call, _greedy(call, found, call.shares.greedy_again))


def _greedy(call: Call, found: Found, fraction: float) -> Found:
    """`baselines.start_plan` within `fraction` of what is left; notes whether it ran out."""
    task = call.task
    allowance = call.allowance.part(fraction)
    finished = set(found.greedy_finished)
    plan = start_plan(task.graph, task.costs, task.budgets, task.moves, task.timing, allowance, finished=finished)
    call.standing.offer(plan, "the greedy")
    return replace(found, greedy_finished=frozenset(finished), greedy_cut=allowance.over())


def polish_step(call: Call, found: Found) -> Found:
    """The incumbent polished (`polish`) within a share of what is left.

    Outputs kept where a recomputation or a page-in was, or rebuilt where a page-in was.
    """
    _polish(call, call.allowance.part(call.shares.polish))
    return found


def settle(call: Call, found: Found) -> Found:
    """The incumbent polished until no single change (`polish`) improves it, whatever the effort says; then swapped and kicked.

    Its work is still counted. The schedule a call returns is then a local optimum for these
    changes, unless the guard stops the call first. The plan polished is the one its schedule reads
    back as (`plan.from_schedule`: every output freed as early as it may be), so that the changes
    are those of the schedule returned. Then, while the incumbent is unproven, the cheapest pair
    of a change and an eviction (`swap`) replaces it and is polished again, until no pair saves
    energy or the swaps have done what `_swaps_allowance` lets them; then, while the effort lasts
    (a call without one ends here), the incumbent is kicked (`_Kicks`).
    """
    _settled(call)
    if call.allowance.ends_at is None:
        return found
    kicker = _Kicks(call)
    while not call.done() and kicker.kick():
        pass
    return found


def _settled(call: Call) -> None:
    """The incumbent polished whatever the effort says, then swapped and polished while a swap saves energy and may run."""
    unbounded = Allowance(call.allowance.meter, None)
    _polish(call, unbounded, as_returned=True)
    swaps = _swaps_allowance(call)
    while not call.standing.proven() and not swaps.over() and _swap(call, swaps):
        _polish(call, unbounded, as_returned=True)


def _swaps_allowance(call: Call) -> Allowance:
    """What settle's swaps may do: what is left of the effort, or as much as the whole effort from now if that is more.

    So the swaps get their share however much of the effort the steps before took; a call that
    swaps on past its effort does at most twice its effort's work, besides polish. No end in a
    call without an effort.
    """
    effort, meter = call.allowance.ends_at, call.allowance.meter
    return Allowance(meter, None if effort is None else max(effort, meter.used() + effort))


@dataclass
class _Kicks:
    """The incumbent kicked out of its local optimum (`kicks.kicked`), polished, and settled again when that is cheaper.

    An iterated local search: each kick starts from the best plan so far. The change kicked is
    drawn by a generator seeded the same in every call, from the incumbent's changes that save
    energy but break the RAM budget (`kicks.kicks`, found once per incumbent): the same inputs
    give the same kicks on any machine.
    """

    call: Call
    rng: random.Random = field(default_factory=lambda: random.Random(KICK_SEED))
    #: The incumbent kicked from, its plan as its schedule reads back, and its changes to kick with.
    start: tuple[Candidate, plans.Plan, list[plans.Plan]] | None = None

    def kick(self) -> bool:
        """One kick; False where the incumbent has no change to kick with."""
        call, candidate = self.call, self.call.standing.best
        if candidate is None:
            return False
        task = call.task
        args = (task.graph, task.costs, task.budgets, task.timing)
        if self.start is None or self.start[0] is not candidate:
            call.note("kick")
            plan = _as_returned(call, candidate.plan)
            self.start = (candidate, plan, kicks(plan, *args, call.allowance, task.moves))
        _, plan, changes = self.start
        if not changes:
            return False
        out = kicked(plan, self.rng.choice(changes), *args, self.rng, call.allowance, task.moves)
        if out is not None:
            polished = polish(out, *args, call.allowance, task.moves)
            if call.standing.offer(polished, f"{candidate.source.split(', kicked')[0]}, kicked"):
                _settled(call)
        return True


def _swap(call: Call, allowance: Allowance) -> bool:
    """The incumbent replaced by its cheapest pair of a change and an eviction (`swap`), within `allowance`; whether one was."""
    task, candidate = call.task, call.standing.best
    if candidate is None:
        return False
    call.note("swap")
    plan = _as_returned(call, candidate.plan)
    swapped = swap(plan, task.graph, task.costs, task.budgets, task.timing, allowance, task.moves)
    return call.standing.offer(swapped, f"{candidate.source.split(', swapped')[0]}, swapped")


def _polish(call: Call, allowance: Allowance, as_returned: bool = False) -> None:
    task, candidate = call.task, call.standing.best
    if candidate is None:
        return
    call.note("polish")
    plan = _as_returned(call, candidate.plan) if as_returned else candidate.plan
    polished = polish(plan, task.graph, task.costs, task.budgets, task.timing, allowance, task.moves)
    call.standing.offer(polished, f"{candidate.source}, polished")


def _as_returned(call: Call, plan: plans.Plan) -> plans.Plan:
    """`plan` as its schedule reads back (`plan.from_schedule`: every output freed as early as it may be)."""
    task = call.task
    return plans.from_schedule(plans.to_schedule(plan, task.graph, task.costs, task.timing), task.graph) or plan


def rebuild(call: Call, found: Found) -> Found:
    """The recompute-only greedy rebuilt change by change, then polished, while the incumbent pages nothing.

    The greedy is rebuilt by `baselines.rebuilt_plan`. With recomputation alone the greedy's early
    changes are often what a later one made costly, and the MILP seldom gets further. Where the
    incumbent pages, a recompute-only plan is seldom the better, and the step would only take the
    MILP's budget.
    """
    task, candidate = call.task, call.standing.best
    if not task.moves.recompute or (candidate is not None and candidate.plan.moves.page):
        return found
    call.note("rebuild")
    plan = rebuilt_plan(
        task.graph, task.costs, task.budgets, task.timing, call.allowance.part(call.shares.rebuild), call.allowance
    )
    if call.standing.offer(plan, "the greedy, rebuilt"):
        return polish_step(call, found)
    return found


def rebuild_hiding(call: Call, found: Found) -> Found:
    """The greedy with both moves rebuilt change by change, its transfers where compute hides them.

    Under `overlap` with both moves. `baselines.rebuilt_plan` runs twice, each within a share of
    what is left: with its page-ins hidden, then with its page-outs hidden too (each wins on
    some graphs). Where paging is slow against compute, the greedy that pages in right before the
    reader prices a swap at a stall it need not have and takes recomputations instead; this one
    weighs swaps at the stall they keep. Then the incumbent is polished, if either plan took it.
    """
    task = call.task
    if not (task.moves.recompute and task.moves.page) or task.timing is not Timing.OVERLAP:
        return found
    took = False
    for hide_page_outs in (False, True):
        if call.done():
            break
        call.note("rebuild with hidden transfers")
        allowance = call.allowance.part(call.shares.rebuild_hiding)
        plan = rebuilt_plan(
            task.graph, task.costs, task.budgets, task.timing, allowance, call.allowance, task.moves, hide_page_outs
        )
        took |= call.standing.offer(plan, "the greedy with hidden transfers, rebuilt")
    return polish_step(call, found) if took else found


def timed(call: Call, found: Found) -> Found:
    """The timed cover: a higher bound where transfers cannot hide, and the plan of its events.

    When the plain cover chose one move only, the timed cover of that move alone (smaller, often
    several times faster) goes first: its events are schedules of these moves too, and if they
    meet the plain bound no more is needed; else they start the full timed cover, which gets
    what is left of the step's budget.
    """
    task, standing = call.task, call.standing
    plain = found.cover
    assert plain is not None, "the cover comes first"
    single = plain.single_move
    share = call.shares.timed if standing.best is not None else call.shares.timed_no_schedule
    allowance = call.allowance.part(share)
    start: tuple[Event, ...] = ()
    args = (task.graph, task.costs, task.budgets)
    if single is not None and single != task.moves:
        call.note("timed bound")
        first = timed_cover_bound(*args, single, task.timing, allowance, plain.bound_j)
        start = first.events
        standing.offer(events_plan(*args, task.timing, first), f"the timed cover of {single.label} moves")
        if standing.proven() or call.allowance.over():
            return found
    call.note("timed bound")
    timed_cover = timed_cover_bound(*args, task.moves, task.timing, allowance, plain.bound_j, plain.rows, start)
    if timed_cover.infeasible:
        standing.refute(timed_cover.message)
        return replace(found, timed_cover=timed_cover)
    standing.raise_bound(timed_cover.bound_j, "the timed cover")
    standing.offer(events_plan(*args, task.timing, timed_cover), "the timed cover's events")
    return replace(found, timed_cover=timed_cover)


def timed_relaxation(call: Call, found: Found) -> Found:
    """The timed cover's linear relaxation over the stage rows it needs: a bound where transfers crowd stages.

    Under `overlap` with paging, where page-outs and page-ins of different outputs compete for
    the stages that could hide them; the timed cover itself seldom fits a point's effort there.
    Only with `Shares.timed_relaxation_min` units left: with less, the covers after it make better
    use of them. Its first round may take `Shares.timed_relaxation_first` of what is left; the
    rounds after it share `Shares.timed_relaxation`.
    """
    task, left = call.task, call.allowance.left()
    if not (task.moves.page and task.timing is Timing.OVERLAP) or call.standing.proven():
        return found
    if left is not None and left < call.shares.timed_relaxation_min:
        return found
    call.note("timed bound")
    allowance = call.allowance.part(call.shares.timed_relaxation)
    first = call.allowance.part(call.shares.timed_relaxation_first)
    bound_j = relaxation_bound(task.graph, task.costs, task.budgets, task.moves, task.timing, allowance, first)
    call.standing.raise_bound(bound_j, "the timed cover's linear relaxation")
    return found


def page_in_bound(call: Call, found: Found) -> Found:
    """The covers with page-ins' own stalls priced as well as page-outs', under `overlap` with paging.

    Right after the placement search: first with the page-ins' stalls, then also with the
    page-ins that recomputations need (item 6). The first one's choice is placed by the MILP
    confined to it (`milp_steps.choice_solve`), between the two covers: placed by `cover_plan`,
    such a choice gives worse schedules than the page-out-priced cover's. The second is for its
    bound only.
    """
    allowance = call.allowance.part(call.shares.page_in_bound)
    before = found.stall_cover or found.cover
    for cascade_page_ins in (False, True):
        if (
            allowance.over()
            or call.standing.proven()
            or call.standing.infeasible
            or (before is not None and before.pages_nothing)
        ):
            return found
        before = stall_priced(call, allowance, page_in_stalls=True, cascade_page_ins=cascade_page_ins)
        if before is not None and not cascade_page_ins:
            found = milp_steps.choice_solve(call, replace(found, page_in_cover=before))
    return found


def stall_priced(call: Call, allowance: Allowance, page_in_stalls: bool, cascade_page_ins: bool = False) -> CoverBound | None:
    """The stall-priced cover under `overlap` with paging (else None), its bound taken.

    None too when it proves that no schedule fits (the search's answer then, if it has none). The
    page-out windows are priced in the first of these covers only, the one with page-out stalls
    alone: in the covers after it their re-solve takes the budget those covers prove with.
    """
    task = call.task
    if task.timing is not Timing.OVERLAP or not task.moves.page:
        return None
    call.note("stall bound")
    share = call.shares.page_in_no_cascade if cascade_page_ins else call.shares.stall_no_cascade
    found = cover_bound(
        task.graph,
        task.costs,
        task.budgets,
        task.moves,
        task.timing,
        allowance,
        stalls=True,
        no_cascade_share=share,
        page_in_stalls=page_in_stalls,
        cascade_page_ins=cascade_page_ins,
        page_out_windows=not page_in_stalls,
    )
    if found.infeasible:
        call.standing.refute(found.message)
        return None
    if found.bound_j is not None:
        call.standing.raise_bound(
            found.bound_j,
            "the cover with the recomputations' page-ins priced"
            if cascade_page_ins
            else "the cover with page-in stalls priced"
            if page_in_stalls
            else "the cover with page-out stalls priced",
        )
    return found


def second_restores(call: Call, found: Found) -> Found:
    """The recompute-only cover with second restores (item 7), for the bound only.

    It counts an output rebuilt for a cascade and absent again as two recomputations. With both
    moves it serves only while the bound is below the paging floor (`paging_floor_j`): every
    schedule that pages costs at least that floor, so the recompute-only bound holds up to it, and
    no further.
    """
    task, standing = call.task, call.standing
    if not task.moves.recompute:
        return found
    floor_j = paging_floor_j(task.costs, task.timing) if task.moves.page else math.inf
    if standing.bound_j is None or floor_j <= standing.bound_j:
        return found
    call.note("second restores")
    bound = _recompute_only_bound(call, call.allowance.part(call.shares.second_restores))
    if bound.bound_j == math.inf and not task.moves.page:  # no recompute-only schedule fits
        standing.refute(bound.infeasible)
        return found
    if bound.bound_j is not None:
        standing.raise_bound(min(bound.bound_j, floor_j), "the paging floor" if floor_j <= bound.bound_j else bound.by)
    return found


@dataclass(frozen=True)
class _RecomputeOnly:
    """The recompute-only bound on the total energy and the cover that gave it.

    The bound is None if the budget gave none, and inf (with why) if no recompute-only schedule
    fits.
    """

    bound_j: float | None
    infeasible: str = ""
    by: str = ""


def _recompute_only_bound(call: Call, allowance: Allowance) -> _RecomputeOnly:
    """The recompute-only bound with second restores within `allowance`.

    With both moves the recompute-only cover on the rows it needs comes first (a fraction of the
    step).
    """
    task = call.task
    bound_j = None
    if task.moves.page:
        plain = cover_bound(task.graph, task.costs, task.budgets, RECOMPUTE_ONLY, task.timing, allowance)
        if plain.infeasible:
            return _RecomputeOnly(math.inf, plain.message)
        bound_j = plain.bound_j
    only = "the recompute-only cover"
    if allowance.over():
        return _RecomputeOnly(bound_j, by=only)
    twice = second_restore_bound(task.graph, task.costs, task.budgets, task.timing, allowance)
    if twice.infeasible:
        return _RecomputeOnly(math.inf, twice.message)
    if twice.bound_j is None or (bound_j is not None and bound_j >= twice.bound_j):
        return _RecomputeOnly(bound_j, by=only)
    return _RecomputeOnly(twice.bound_j, by=f"{only} with second restores")
