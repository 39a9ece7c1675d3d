"""Which recomputed outputs a rule-made plan keeps until their next reader, and which it drops again.

`rules.plan_from_decisions` recomputes a dropped output, and any missing input of it, when a
reader needs it. Whether each such output then stays resident (`keep_recomputed`) trades RAM
against energy: kept, it holds its bytes to the end of its stretch; dropped, it is recomputed
again for its next reader, cascade and all. The plan makers here choose per output.
"""

from collections.abc import Callable

from poetsim.optimiser.allowance import Allowance, spent
from poetsim.optimiser.plans.plan import Plan
from poetsim.schedule.model import Budgets, Figures

#: Replays a keep set (True: every output; a set: those) into a plan and its figures.
Replay = Callable[[bool | frozenset[int]], tuple[Plan, Figures]]

#: At most this many replays per repair: a cap on the work of one plan (tens of replays on graphs
#: of ResNet-18's size, hundreds on 300-node ones, hence also `allowance`).
REPAIR_REPLAYS = 600


def repair_keeps(
    replay: Replay, budgets: Budgets, kept: tuple[Plan, Figures], allowance: Allowance | None = None
) -> tuple[Plan, Figures] | None:
    """Keep recomputed outputs where RAM allows, drop them again where it does not.

    Keeping every recomputed output costs least but often breaks the RAM budget: a cascade
    recomputed for one backward reader (the chain of a residual stage, back to the stem) then
    stays resident to the end of its stretch. Dropping all of them again fits but recomputes the
    cascade for every reader, at several times the energy. Between the two: from
    keep-all-recomputed, stop keeping the output that
    takes the most bytes off the excess per joule added, until the plan fits; then keep again
    any output whose keeping still fits and costs less. A repair still over the RAM budget at
    `allowance` gives None; the keeping again stops there.
    """
    plan, fig = kept
    keep = recomputed(plan)
    replays = 0
    while not budgets.fits(fig):
        if not budgets.meets_deadline(fig.runtime_s):
            return None  # dropping more only adds recomputation time
        over = fig.peak_ram_bytes - budgets.ram_bytes
        best = None
        for i in sorted(keep & recomputed(plan)):
            if replays >= REPAIR_REPLAYS or spent(allowance):
                return None
            replays += 1
            trial = replay(keep - {i})
            saved = fig.peak_ram_bytes - trial[1].peak_ram_bytes
            if saved > 0:
                score = (trial[1].total_j - fig.total_j) / min(saved, over)
                if best is None or score < best[0]:
                    best = (score, i, trial)
        if best is None:
            return None
        _, dropped, (plan, fig) = best
        keep = keep - {dropped}
    return keep_more(replay, budgets, (plan, fig), keep, REPAIR_REPLAYS - replays, allowance)


def keep_more(
    replay: Replay,
    budgets: Budgets,
    start: tuple[Plan, Figures],
    keep: frozenset[int],
    replays: int = REPAIR_REPLAYS,
    allowance: Allowance | None = None,
) -> tuple[Plan, Figures]:
    """`start` with each recomputed output it drops kept instead, where that fits and costs less.

    `start` is replayed from `keep`; a keep is taken where the plan still fits and costs less. At
    most `replays` replays are made, none after `allowance` is spent.
    """
    plan, fig = start
    for i in sorted(recomputed(plan) - keep)[: max(replays, 0)]:
        if spent(allowance):
            break
        trial = replay(keep | {i})
        if budgets.fits(trial[1]) and trial[1].total_j < fig.total_j:
            keep, (plan, fig) = keep | {i}, trial
    return plan, fig


def recomputed(plan: Plan) -> frozenset[int]:
    """The outputs a plan computes in a stage other than their own."""
    return frozenset(k for t, computed in enumerate(plan.computed) for k in computed if k != t)
