"""Local improvement of a plan: single changes that save energy and still fit the budgets.

Plans made from rules, from the covers' choices and from the solver's columns often hold an
output's restore where RAM would allow less: a recomputation where the output could have stayed
in RAM, a page-out and page-in where it could have stayed or been rebuilt more cheaply. Three
kinds of change, each a plan built with the same four sets per stage as every other plan:

- keep instead of recompute (`bridges`): hold a recomputed output from its previous presence to
  the stage that recomputed it, and drop the recomputations that only served to rebuild it;
- keep instead of page (`kept_pages`): hold a paged output from its previous presence to its
  page-in, and drop the page-in (and the page-out, once no page-in needs the copy);
- recompute instead of page (`recomputed_pages`): drop a page-in and rebuild the output in the
  stage that reads it next, with any input it needs that is not in RAM there, and drop the
  page-out once no page-in needs it.

`polish` judges each change by the model's own accounting (`plan.figures`, the same judge as
`Incumbent.offer`), takes the one that fits and saves most, and scans again, until a whole scan
finds none: the plan it returns is a local optimum for these changes (unless its allowance ran
out first). It never makes a plan worse. (Taking the first change that saves anything instead
can strand a plan: keeping an input a later recomputation needs may leave too little room to
keep the recomputed output itself.)
"""

from collections.abc import Iterator
from dataclasses import replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.plans.plan import Plan, figures
from poetsim.optimiser.plans.rules import reads
from poetsim.optimiser.work import replay_units
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing

#: All moves: polishing never adds a move the plan did not use, but it may rebuild an output
#: instead of paging it where recomputation is allowed.
BOTH = Moves(recompute=True, page=True)


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
    may use (recomputation, for rebuilding a paged output). One replay of a plan is charged to
    `allowance` per change tried; once it is spent, the best plan so far is returned.
    """
    best_j = figures(plan, graph, costs, timing).total_j
    while True:
        taken = None
        for candidate in changes_of(plan, graph, moves):
            if spent(allowance):
                return plan if taken is None else taken  # the best this scan had reached
            charge(allowance, replay_units(len(graph)))
            fig = figures(candidate, graph, costs, timing)
            if budgets.fits(fig) and fig.total_j < best_j:
                taken, best_j = candidate, fig.total_j
        if taken is None:
            return plan
        plan = taken


def changes_of(plan: Plan, graph: TrainingGraph, moves: Moves = BOTH) -> Iterator[Plan]:
    """Every single change of `plan` (module docstring), in a fixed order.

    The bridges, then per page-in keeping the output instead, then (where `moves` recompute)
    rebuilding it instead.
    """
    yield from bridges(plan, graph)
    yield from kept_pages(plan, graph)
    if moves.recompute:
        yield from recomputed_pages(plan, graph)


def bridges(plan: Plan, graph: TrainingGraph) -> Iterator[Plan]:
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
            kept = _kept_over(plan.kept, i, previous, stage)
            stage_computed = [k for k in computed if k != i]
            yield replace(
                plan,
                kept=kept,
                computed=_with_stage(
                    plan.computed, stage, _live(stage_computed, stage, kept[stage], plan.paged_out[stage], graph)
                ),
            )


def kept_pages(plan: Plan, graph: TrainingGraph) -> Iterator[Plan]:
    """Each plan that keeps one paged output in RAM instead of paging it back in.

    For a page-in of i in stage t, let p be the last earlier stage where i is computed, paged in
    or kept; i is added to the kept sets of stages p .. t-1 and the page-in goes (i is resident
    from stage t+1 on as before); its page-outs go too once no page-in of i is left.
    """
    for stage, paged_in in enumerate(plan.paged_in):
        for i in sorted(paged_in):
            previous = _last_presence(plan, i, stage)
            if previous is None:
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
            resident = kept[reader - 1]
            wanted = _rebuilt(i, resident | frozenset(plan.computed[reader]), graph)
            if wanted & plan.paged_in[reader]:
                continue  # an input is being paged in there: it cannot be computed in that stage
            computed = tuple(sorted(set(plan.computed[reader]) | wanted))
            changed = replace(plan, kept=kept, computed=_with_stage(plan.computed, reader, computed))
            yield _without_page_in(changed, i, stage)


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
    return tuple(k | {i} if first <= s < stop else k for s, k in enumerate(kept))


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
    return (*computed[:stage], new, *computed[stage + 1 :])


def _with_set(sets: tuple[frozenset[int], ...], stage: int, new: frozenset[int]) -> tuple[frozenset[int], ...]:
    return (*sets[:stage], new, *sets[stage + 1 :])
