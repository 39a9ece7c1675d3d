"""What the steps of one `optimise` call hand on to each other.

Each step returns it with its own products added (the incumbent and the bound are the call's
`Standing`).
"""

from dataclasses import dataclass

from poetsim.optimiser.bounds.cover import CoverBound
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.plans.plan import Plan
from poetsim.status import Status


@dataclass(frozen=True)
class Found:
    """The products of the steps so far.

    `cover` is the plain eviction cover and `first_plan` the plan made from its choice;
    `stall_cover` the placement search's stall-priced cover, `page_in_cover` the cover with
    page-in stalls priced too (`steps.page_in_bound`), `timed_cover` the timed cover;
    `greedy_finished` the rules of `baselines.start_plan` that ran to their end and
    `greedy_cut` whether the greedy step's budget ran out; `form` the stage MILP once built
    (`build_s` into the call), with the solver runs' hand-off and solve times and the full
    solve's own status.
    """

    cover: CoverBound | None = None
    first_plan: Plan | None = None
    stall_cover: CoverBound | None = None
    page_in_cover: CoverBound | None = None
    timed_cover: CoverBound | None = None
    greedy_finished: frozenset[int] = frozenset()
    greedy_cut: bool = False
    form: Formulation | None = None
    build_s: float | None = None
    handoff_s: float = 0.0
    solve_s: float = 0.0
    solver_status: Status | None = None
