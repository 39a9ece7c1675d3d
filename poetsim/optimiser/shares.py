"""How one `optimise` call divides its budget among its steps.

Each step gets a share of what is left of the call's budget when it starts; what it does not use
passes to the steps after it, and each stops sooner when it is done (docs/optimiser.md, "The
search"). The shares are one frozen configuration, `SHARES`.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Shares:
    """The shares of what is left that each step may use, and the limits of the MILP steps."""

    #: The plain eviction cover, the ground of most proofs. Usually it needs a small part; the
    #: share is large so that a cover that needs long is not cut before its proof.
    cover: float = 0.6
    #: The placement search (`placement`): the cover's choice placed in stages.
    placement: float = 0.7
    #: At most this many choices of the same cost are placed in one search.
    placement_rounds: int = 10
    #: A mixed choice's exact rounds get this share of the placement's budget, the single-move
    #: searches the rest.
    mixed_placement: float = 0.6
    #: The placement's stall-priced cover, of what the quick rounds leave.
    stall_cover: float = 0.7
    #: ... and of that, its cover without cascades.
    stall_no_cascade: float = 0.6
    #: The covers that price page-ins' stalls too (`steps.page_in_bound`).
    page_in_bound: float = 0.9
    #: ... and, for the second of them, the share of its cover without cascades: its bound comes
    #: from the cascade cover.
    page_in_no_cascade: float = 0.2
    #: The MILP confined to the choice of the first of those covers (`milp_steps.choice_solve`).
    choice_solve: float = 0.5
    #: ... which runs only with this many nonzeros of the stage MILP or fewer per unit left: the
    #: confined program is small, but HiGHS reads the whole one, and on the larger graphs its
    #: presolve and root then take most of the call.
    choice_nonzeros_per_unit: int = 10_000
    #: The timed cover, which places transfers and can prove more.
    timed: float = 0.6
    #: ... with no schedule yet: then the timed cover is what can prove that none exists.
    timed_no_schedule: float = 0.9
    #: The timed cover's linear relaxation (`steps.timed_relaxation`).
    timed_relaxation: float = 0.3
    #: ... its first round, which may take up to this share of what is left instead: on the larger
    #: graphs that round needs more than the share above (EfficientNet-B0 on the Pi at 50 %: 8.7
    #: of the 12.7 units left), and it gives most of the bound (there 0.274 J above keep-all, of
    #: the 0.278 J of three rounds).
    timed_relaxation_first: float = 0.75
    #: ... which runs only with this many units left: its first round takes up to 6 units on
    #: graphs of 150-400 nodes, which its share of 8 units covers (DenseNet-BC of the outside set,
    #: Pi, 50 %, 60 units, has 9.3 left there: the first round takes 4 of them and raises the
    #: bound from the page-out stall cover's 95.398 J to 95.690 J, keep-all being 95.011 J); with
    #: less left the covers that price page-ins prove more with them (the ResNet-18 study's points
    #: on the Pi at 25 % have 5.5 units left there: the page-in-priced covers leave 19 % of their
    #: overhead unproven, and 34 % once the relaxation took its share).
    timed_relaxation_min: float = 8.0
    #: The recompute-only cover with second restores (`steps.second_restores`).
    second_restores: float = 0.7
    #: The greedy plans (they stop where they are when it is spent).
    greedy: float = 0.25
    #: Polishing the incumbent between the steps (the last polish, `steps.settle`, has no share:
    #: it runs until no single change improves the schedule).
    polish: float = 0.1
    #: The rebuilt recompute-only greedy (`steps.rebuild`): it needs most of what is left to reach
    #: its best plan, where the stage MILP after it seldom finds more.
    rebuild: float = 0.8
    #: Each of the two runs of the greedy with both moves rebuilt with hidden transfers
    #: (`steps.rebuild_hiding`).
    rebuild_hiding: float = 0.3
    #: The MILP restricted to the cover's choice, and its cap.
    restricted: float = 0.25
    restricted_cap: float = 60.0
    #: The greedy plans once more, where no MILP step fits what is left and their first run was cut.
    greedy_again: float = 0.8
    #: A MILP step (build, restricted or full solve) starts only with this much left: a shorter
    #: run finds nothing.
    min_milp: float = 2.0
    #: ... and only with this many nonzeros or fewer per unit left: no node limit stops HiGHS's
    #: presolve and root, which on the stage MILPs of the zoo's larger graphs take minutes, and
    #: where the MILP found nothing in the time the other steps leave it.
    milp_nonzeros_per_unit: int = 2_000


#: The configuration every call uses.
SHARES = Shares()
