"""The steps of one `optimise` call after its pre-checks: bounds, plans, placements, MILP runs.

`Search` holds what the steps share (the clock, the best bound, the incumbent, the model) and
each step is a method; `optimise` runs them in order until one proves the incumbent optimal,
a cover proves infeasibility, or the clock runs out (docs/optimiser.md, section 4).
"""

import math
import os
from time import perf_counter

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.baselines.simple import rebuilt_plan, start_plan
from poetsim.optimiser.bounds.cover import CoverBound, cover_bound, paging_floor_j, second_restore_bound
from poetsim.optimiser.bounds.timed_cover import placement, stalled, timed_cover_bound
from poetsim.optimiser.milp.formulation import formulate, last_useful_stage
from poetsim.optimiser.milp.rows import Formulation
from poetsim.optimiser.milp.solvers import SolverResult, SolverSettings, solve
from poetsim.optimiser.outcome import SolveOutcome, abs_gap_j, infeasible_message, pct, within_gap
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.plans.cover_plan import admits, cover_plan, events_plan, plan_stalled, restricted
from poetsim.optimiser.plans.incumbent import Incumbent
from poetsim.optimiser.plans.polish import polish
from poetsim.schedule.model import Moves, Timing
from poetsim.status import Status
from poetsim.strategies import KEEP_ALL

#: Shares of the time left that the plain cover, the placement of its choice and the timed cover
#: may take (each stops sooner when it is solved; docs/optimiser.md has their measured times).
#: The cover is the ground of most proofs. Solved whole it took 0.4-1.3 s on ResNet-18 (CIFAR)
#: at 1.2x-1.5x and 23-38 s on ResNet-50 (rpi4, hybrid, 50 %, 1.2x), where a share of 0.5 of a
#: 60 s call cut it on a slower day (the schedule fell from 0.82 J above keep-all to 4.88 J);
#: with a share of 0.2 of a 12 s limit a 2-core machine loaded twice over cut it, and the
#: ResNet-18 study lost 10 of its 50 proofs. On the rows it needs (`cover._solve_cover`) it
#: takes 0.01-1.2 s and 0.4 s there, so the share is seldom used. HiGHS runs in a process killed
#: at the deadline, so a large share cannot overrun the call. Time the cover does not use passes
#: to the next steps.
COVER_SHARE = 0.6
PLACEMENT_SHARE = 0.7
#: At most this many choices of the same cost are placed (see Search.place).
PLACEMENT_ROUNDS = 10
#: A mixed choice's search gets this share of the placement's time, the single-move searches the
#: rest. gpt2_small (Pi, 50 %, 1.2x, 60 s): the rows-as-needed cover chooses outputs of the same
#: cost as before whose placement takes 20.4 s (12.3 s before); with half (20.8 s) it was cut in
#: 2 of 8 runs and the point left at a 0.12 % gap; with 0.6 it was placed and proven in each of 2.
MIXED_PLACEMENT_SHARE = 0.6
TIMED_SHARE = 0.6
#: ... and with no schedule yet: then the timed cover is what can prove that none exists (TX2
#: paging-only at 70 % RAM, 1.5x: 2.7 s of CPU, 6.4 s on a machine loaded twice over, where
#: 0.6 of the time left cut it and the point ended `no-solution` instead of `infeasible`).
TIMED_SHARE_NO_SCHEDULE = 0.9
#: Share of the placement's time left after the quick rounds for the stall-priced cover (usually
#: a fraction of a second), and of that the share of its cover without cascades. On MobileNetV2
#: (Pi, 50 %) that one is solved in 2.3 s to 0.480 J above keep-all; the cascade one gives
#: 0.483 J after 7-10 s (a dual bound). With 0.5 and 0.3 (about 2 s) a 30 s call sometimes
#: ended with no bound from it; the exact placement rounds after it found nothing there.
STALL_COVER_SHARE = 0.7
STALL_NO_CASCADE_SHARE = 0.6
#: Share of the time left for the covers that price page-ins' stalls too (`Search.page_in_bound`).
PAGE_IN_BOUND_SHARE = 0.9
#: ... and, for the second of them (the recomputations' page-ins priced too), the share of its
#: time for its cover without cascades: the bound is the step's only product, and it comes from
#: the cascade cover.
PAGE_IN_NO_CASCADE_SHARE = 0.2
#: Share of the time left for the recompute-only cover with second restores (`Search.second_restores`).
#: On the ResNet-18 study's points at 50 % (12 s) its 143,446 nonzeros need 4.8 s by
#: `program.PRESOLVE_NONZEROS_PER_S` (solved in 1.8-1.9 s); with half the 9.6 s left the program
#: was declined, and the full MILP after it had found nothing there in its 9 s.
SECOND_RESTORE_SHARE = 0.7
#: Share of the time left for the greedy plans (they stop where they are when it runs out).
GREEDY_SHARE = 0.25
#: Share of the time left for polishing the incumbent (0.1 s on ResNet-18; it stops when it runs out).
POLISH_SHARE = 0.1
#: Share of the time left for the rebuilt greedy (`Search.rebuild`). On the ResNet-18 study's
#: recompute-only points at 35 % (1.2x, 12 s) it starts with about 7 s left and needs about 3 s
#: to reach its best plan; the stage MILP after it had found nothing there. Beside two busy
#: loops on the 2-core machine, 0.6 of the time left reached it on the Pi but not on the TX2
#: (0.01593 J above keep-all against 0.01412 J); 0.8 and 0.95 reached both.
REBUILD_SHARE = 0.8
#: Share of the time left for the MILP restricted to the cover's choice, and its cap in seconds.
RESTRICTED_SHARE = 0.25
RESTRICTED_CAP_S = 60.0
#: A MILP step (build, restricted or full solve) starts only with this much time left.
MIN_MILP_S = 2.0
#: A MILP step needs this many nonzeros per second of time left: HiGHS checks no clock in parts of
#: its presolve and root (bert_base, 2.4 M nonzeros: a 3.8 s limit took 8.8 s; MobileNetV2 and
#: ResNet-50 ran 63 s and 205 s past 10-20 s limits), and on such graphs it found nothing anyway.
MILP_NONZEROS_PER_S = 50_000
#: Before the model is built, its nonzeros are taken as this many per S_ram column (one per output
#: and stage from its computation to its last useful stage), by (recompute, page): measured on five
#: zoo graphs (105-351 nodes), 19.0 with paging alone, 19.8-22.8 with recomputation alone and
#: 37.0-40.1 with both. So a build the time left could not solve is skipped (ResNet-50: 2.3 M
#: nonzeros, 3 s of build that no solve followed).
NONZEROS_PER_COLUMN = {(False, True): 18, (True, False): 19, (True, True): 36}
#: Share of the time left for the greedy plans once more, where the MILP cannot run and their
#: first run was cut short (ResNet-50, TX2, hybrid, 50 %, 60 s: the greedies that drop recomputed
#: cascades, run last, give 0.00216 J above keep-all uncut; cut, the call ended at 0.00301 J).
GREEDY_AGAIN_SHARE = 0.8
#: Whether the full solve gets the cover's bound as a row, objective >= floor (docs/optimiser.md).
OBJECTIVE_FLOOR_ROW = False


class Search:
    """The state of one `optimise` call: clock, bound, incumbent, model, and the solver's account."""

    def __init__(self, graph, costs, budgets, moves, timing, solver, mip_rel_gap, threads, clock, report):
        self.graph, self.costs, self.budgets, self.moves, self.timing = graph, costs, budgets, moves, timing
        self.solver, self.mip_rel_gap, self.clock, self.report = solver, mip_rel_gap, clock, report
        self.threads = threads or os.cpu_count() or 1
        self.keep_all_j = costs.keep_all_energy_j(timing)
        self.abs_gap_j = abs_gap_j(costs, moves, timing)
        self.best = Incumbent(graph, costs, budgets, moves, timing)
        self.cover: CoverBound | None = None
        self.first_plan: plans.Plan | None = None  # cover_plan of the plain cover's choice
        self.timed_cover: CoverBound | None = None
        self.stall_found: CoverBound | None = None  # the placement search's stall-priced cover
        self.infeasible = ""  # why no schedule fits, when a cover proved it
        self.greedy_cut = False  # the greedy step ran out of its time
        self.greedy_finished: set[int] = set()  # the rules of `start_plan` that ran to their end
        self.settings_ends_at: float | None = None
        self.bound_j: float | None = None
        self.bound_by = ""  # what gave `bound_j`, named in the outcome's message
        self.form: Formulation | None = None
        self.build_s: float | None = None
        self.handoff_s = self.solve_s = 0.0
        self.solver_status: Status | None = None

    def the_cover(self) -> CoverBound:
        assert self.cover is not None, "the cover bound runs before every other step"
        return self.cover

    def the_form(self) -> Formulation:
        assert self.form is not None, "the model is built before a solve"
        return self.form

    def time_for_milp(self) -> bool:
        """Whether enough time is left for a MILP step: HiGHS overruns limits below a second or so
        (0.3 s took 0.6 s, 0.7 s took 1.6 s on ResNet-18), and a shorter run finds nothing; nor
        does one whose presolve alone would outlast the time left (MILP_NONZEROS_PER_S; before the
        build, by `milp_nonzeros_estimate`, so a build no solve could follow is skipped too)."""
        left = self.clock.left_s()
        if left is None:
            return True
        nonzeros = len(self.form.row_index) if self.form is not None else milp_nonzeros_estimate(self.graph, self.moves)
        return left >= MIN_MILP_S and nonzeros <= MILP_NONZEROS_PER_S * left

    def proven(self) -> bool:
        """Whether the incumbent is within the gap settings of the best bound."""
        return (
            self.best.best is not None
            and self.bound_j is not None
            and within_gap(self.best.total_j, self.bound_j, self.keep_all_j, self.mip_rel_gap, self.abs_gap_j)
        )

    def place(self) -> None:
        """Stages for the plain cover's choice, and their plan: quick rounds first, then exact ones.

        The plain cover's choice is one of often many of the same cost (outputs of one size and
        price), and some can be placed without a stall where others cannot. So while a placement
        stalls, the outputs whose transfers stall are avoided and the cover solved again; a
        choice that still costs the plain bound and places without a stall is optimal, one that
        costs a little more is often a near-optimal schedule. When a hybrid choice mixes both
        moves, the single-move choices are searched too (paging first): on bert_base a mixed
        choice would not place, the paging-only one placed within 5.6 % of the hybrid bound.

        Each search first runs quick rounds, placed by `cover_plan` (its transfers balanced over
        the stages, `cover_plan._balanced_transfers`: milliseconds to a second); if they leave a
        gap, the stall-priced cover raises the bound (`_stall_cover`); then come exact rounds,
        placed by the timed cover confined to the choice (`timed_cover.placement`: seconds to
        tens of seconds on 300-node graphs), with what is left of the time. On ResNet-50 (Pi,
        50 %, 1.2x) three quick rounds reach a schedule 0.26 % of the overhead above the bound in
        1.5 s, where the exact rounds need 65 s (docs/optimiser.md, section 3.3).
        """
        share = self.clock.share_s(PLACEMENT_SHARE)
        ends_at = None if share is None else perf_counter() + share
        single = _single_move(self.the_cover())
        searches: list[tuple[CoverBound | None, Moves]] = [(self.cover, single or self.moves)]
        if single is None and self.moves.recompute and self.moves.page:
            searches += [(None, Moves(recompute=False, page=True)), (None, Moves(recompute=True, page=False))]
        for n, (choice, moves) in enumerate(searches):
            if ends_at is not None and perf_counter() >= ends_at:
                return
            if choice is None:
                choice = cover_bound(
                    self.graph,
                    self.costs,
                    self.budgets,
                    moves,
                    self.timing,
                    None if ends_at is None else ends_at - perf_counter(),
                )
                searches[n] = (choice, moves)
            if not choice.infeasible:
                self._quick_search(choice, moves, ends_at)
            if self.proven() or self.clock.expired():
                return
        self._stall_cover(ends_at)
        if self.proven() or self.infeasible or self.clock.expired():
            return
        for n, (choice, moves) in enumerate(searches):
            left = None if ends_at is None else ends_at - perf_counter()
            if left is not None and left <= 0:
                return
            # A mixed choice gets part of what is left, so that the single-move searches get a turn.
            if ends_at is None or left is None:
                search_ends = None
            else:
                search_ends = perf_counter() + (left * MIXED_PLACEMENT_SHARE if n == 0 and len(searches) > 1 else left)
            assert choice is not None
            if choice.infeasible:
                continue
            self._place_search(choice, moves, search_ends)
            if self.proven() or self.clock.expired():
                return

    def _stall_cover(self, ends_at: float | None) -> None:
        """The cover with each page-out's own stall priced (`cover`, item 6), under `overlap` with
        paging: a higher bound where some page-out cannot hide behind any stage it may run in,
        and a choice that avoids such outputs, placed as in the quick rounds.

        Its choice is placed only when it pages something and differs from the plain cover's.
        On ResNet-18 (ImageNet, batch 1, Pi, 70 % RAM, 1.2x) the plain cover's choice pages two
        early outputs whose page-outs stall wherever they run; the quick rounds then find a
        choice that places without a stall, 0.0633588 J above keep-all, and the stall-priced
        cover proves it optimal in 0.1 s (the plain bound: 0.0633446 J).
        """
        if _pages_nothing(self.the_cover()):
            return
        share = None if ends_at is None else max(ends_at - perf_counter(), 0.0) * STALL_COVER_SHARE
        found = self._stall_priced(share, page_in_stalls=False)
        self.stall_found = found
        if found is None:
            return
        # A choice that pages nothing has no stall to avoid (it costs what the plain cover prices
        # it at); placing one took 17 s on ResNet-50 (TX2) and gave nothing.
        plain = self.the_cover()
        if self.proven() or not found.paged or (found.recomputed, found.paged) == (plain.recomputed, plain.paged):
            return
        self._quick_search(found, _single_move(found) or self.moves, ends_at)

    def _quick_search(self, choice: CoverBound, moves: Moves, ends_at: float | None) -> None:
        """The rounds of `_search_choices`, each choice placed by `cover_plan` (balanced transfers)."""

        def place(choice: CoverBound, round_: int) -> frozenset[int] | None:
            plan = (
                self.first_plan
                if choice is self.cover
                else cover_plan(self.graph, self.costs, self.budgets, self.timing, choice, self.clock.ends_at)
            )
            if choice is not self.cover:
                self.best.offer(plan, "the placement search")
            if plan is None:
                return None
            # Under compute-only, transfers take no time: nothing stalls, and no other choice is sought.
            return plan_stalled(plan, self.costs) if self.timing is Timing.OVERLAP else frozenset()

        self._search_choices(choice, moves, ends_at, place)

    def _place_search(self, choice: CoverBound, moves: Moves, ends_at: float | None) -> None:
        """The rounds of `_search_choices`, each choice placed by the timed cover confined to it."""

        def place(choice: CoverBound, round_: int) -> frozenset[int] | None:
            # The first placement may take all that is left (it is the likeliest to succeed: 12 s
            # on gpt2_small), later ones half: a good placement is wanted, not its proof.
            left = None if ends_at is None else ends_at - perf_counter()
            placed = placement(
                self.graph,
                self.costs,
                self.budgets,
                self.timing,
                choice,
                None if left is None else (left if round_ == 0 else left / 2),
            )
            plan = events_plan(self.graph, self.costs, self.budgets, self.timing, placed)
            self.best.offer(plan, "the cover's placement")
            if not placed.exact and plan is None:
                return None  # cut short by the clock: its stalls say nothing about the choice
            return stalled(self.graph, self.costs, placed)

        self._search_choices(choice, moves, ends_at, place)

    def _search_choices(self, choice: CoverBound, moves: Moves, ends_at: float | None, place) -> None:
        """Place `choice` (`place(choice, round)` offers the plan and returns the outputs whose
        transfers stall, or None to stop); while new outputs stall, avoid them and place the
        cover's next choice, until the incumbent is proven or the time or the choices run out."""
        avoid: frozenset[int] = frozenset()
        for round_ in range(PLACEMENT_ROUNDS):
            if not (choice.recomputed or choice.paged) or (ends_at is not None and perf_counter() >= ends_at):
                return
            self.report("placement", self.best.total_j, self.bound_j)
            stalling = place(choice, round_)
            if stalling is None or self.proven() or not stalling - avoid or (ends_at is not None and perf_counter() >= ends_at):
                return
            avoid |= stalling
            # Searching among single-move choices when the first was one: that cover has no
            # cascades and is solved in a fraction of a second where the hybrid one takes seconds.
            # A choice that costs a little more than the bound can still place without a stall:
            # no proof then, but a good schedule (ResNet-50 on the Pi: 0.26 % of the overhead).
            choice = cover_bound(
                self.graph,
                self.costs,
                self.budgets,
                moves,
                self.timing,
                None if ends_at is None else ends_at - perf_counter(),
                avoid=avoid,
            )
            if choice.infeasible:
                return

    def timed(self) -> None:
        """The timed cover: a higher bound where transfers cannot hide, and the plan of its events.

        When the plain cover chose one move only, the timed cover of that move alone (smaller,
        often several times faster) goes first: its events are schedules of these moves too, and
        if they meet the plain bound no more is needed; else they start the full timed cover,
        which gets what is left of the step's share. The step gets most of the time: on graphs
        of ResNet-18's size it finds and proves optima that the stage MILP does not reach in
        minutes (docs/optimiser.md).
        """
        cover = self.the_cover()
        start: tuple[tuple[str, int, int], ...] = ()
        single = _single_move(cover)
        share = self.clock.share_s(TIMED_SHARE if self.best.best is not None else TIMED_SHARE_NO_SCHEDULE)
        ends_at = None if share is None else perf_counter() + share
        if single is not None and single != self.moves:
            self.report("timed bound", self.best.total_j, self.bound_j)
            first = timed_cover_bound(self.graph, self.costs, self.budgets, single, self.timing, share, cover.bound_j)
            start = first.events
            self.best.offer(
                events_plan(self.graph, self.costs, self.budgets, self.timing, first), f"the timed cover of {single.label} moves"
            )
            if self.proven() or self.clock.expired():
                return
        self.report("timed bound", self.best.total_j, self.bound_j)
        self.timed_cover = timed_cover_bound(
            self.graph,
            self.costs,
            self.budgets,
            self.moves,
            self.timing,
            None if ends_at is None else max(ends_at - perf_counter(), 0.0),
            cover.bound_j,
            cover.rows,
            start,
        )
        if self.timed_cover.infeasible:
            if self.best.best is None:
                self.infeasible = self.timed_cover.message
            return
        if self.timed_cover.bound_j is not None:
            self.raise_bound(self.timed_cover.bound_j, "the timed cover")
        self.best.offer(
            events_plan(self.graph, self.costs, self.budgets, self.timing, self.timed_cover), "the timed cover's events"
        )

    def first_schedule(self) -> None:
        """A schedule before anything else, whatever the clock says: the first rule-made plan that
        fits. So a call whose time runs out still returns a schedule whenever a rule can make one
        (the quickest greedy takes 2 s on bert_base, the largest zoo graph); the greedies that
        drop recomputed cascades, tried last, stop at the clock's end."""
        self.report("first schedule", self.best.total_j, self.bound_j)
        self.best.offer(
            start_plan(self.graph, self.costs, self.budgets, self.moves, self.timing, self.clock.ends_at, first_fit=True),
            "the greedy",
        )

    def greedy(self) -> None:
        """The rule-made plans of `baselines.start_plan` (keep-all, greedy, checkpoint-sqrt)."""
        self.report("greedy", self.best.total_j, self.bound_j)
        self._greedy(GREEDY_SHARE)

    def without_milp(self) -> None:
        """Where no MILP step fits the time left: the greedy plans that their step did not finish,
        with most of it, if that step was cut short; then polishing the incumbent again (`polish`)."""
        if not self.greedy_cut or self.clock.left_s() is None:
            return
        self.report("greedy", self.best.total_j, self.bound_j)
        self._greedy(GREEDY_AGAIN_SHARE)
        self.polish()

    def _greedy(self, fraction: float) -> None:
        """`baselines.start_plan` within `fraction` of the time left; notes whether it ran out."""
        share = self.clock.share_s(fraction)
        ends_at = None if share is None else perf_counter() + share
        self.best.offer(
            start_plan(self.graph, self.costs, self.budgets, self.moves, self.timing, ends_at, finished=self.greedy_finished),
            "the greedy",
        )
        self.greedy_cut = ends_at is not None and perf_counter() >= ends_at

    def polish(self) -> None:
        """The incumbent polished (`polish`): outputs kept across a gap where a recomputation was."""
        candidate = self.best.best
        if candidate is None or not self.moves.recompute:
            return
        self.report("polish", self.best.total_j, self.bound_j)
        share = self.clock.share_s(POLISH_SHARE)
        ends_at = None if share is None else perf_counter() + share
        self.best.offer(
            polish(candidate.plan, self.graph, self.costs, self.budgets, self.timing, ends_at), f"{candidate.source}, polished"
        )

    def rebuild(self) -> None:
        """The recompute-only greedy rebuilt change by change (`baselines.rebuilt_plan`), then
        polished, while the incumbent pages nothing: with recomputation alone the greedy's early
        changes are often what a later one made costly, and the MILP seldom gets further on
        graphs of ResNet-18's size. Where the incumbent pages, a recompute-only plan is seldom
        the better (the Pi's hybrid points), and the step would only take the MILP's time."""
        candidate = self.best.best
        if not self.moves.recompute or (candidate is not None and candidate.plan.moves.page):
            return
        self.report("rebuild", self.best.total_j, self.bound_j)
        share = self.clock.share_s(REBUILD_SHARE)
        plan = rebuilt_plan(
            self.graph,
            self.costs,
            self.budgets,
            self.timing,
            None if share is None else perf_counter() + share,
            self.clock.ends_at,
        )
        if self.best.offer(plan, "the greedy, rebuilt"):
            self.polish()

    def second_restores(self) -> None:
        """The recompute-only cover that counts an output rebuilt for a cascade and absent again as
        two recomputations (`cover`, item 7), for the bound only. `optimise` places it by the moves:
        recompute-only after polish; with both moves right after the placement search, and only
        while the bound is below the paging floor (`paging_floor_j`): every schedule that pages
        costs at least that floor, so the recompute-only bound holds up to it, and no further.

        On the ResNet-18 study's points at 50 % (batch 8, 1.2x) it lifts the bound from 1.629 to
        1.837 J above keep-all on the Pi, and from 0.000623 to 0.000741 J on the TX2, where the
        best schedules found cost 2.470 and 0.000810 J; the MILP after it had found nothing there.
        With both moves it comes before the timed cover, which on the study's TX2 hybrid point at
        50 % (12 s) took 6.4 s and found nothing, after which this step had 3 s, too few for its
        rows.
        """
        if not self.moves.recompute:
            return
        floor_j = paging_floor_j(self.costs, self.timing) if self.moves.page else math.inf
        if self.bound_j is None or floor_j <= self.bound_j:
            return
        self.report("second restores", self.best.total_j, self.bound_j)
        share = self.clock.share_s(SECOND_RESTORE_SHARE)
        bound_j, why, by = self._recompute_only_bound(None if share is None else perf_counter() + share)
        if bound_j == math.inf and not self.moves.page:  # no recompute-only schedule fits
            if self.best.best is None:
                self.infeasible = why
            return
        if bound_j is not None:
            self.raise_bound(min(bound_j, floor_j), "the paging floor" if floor_j <= bound_j else by)

    def _recompute_only_bound(self, ends_at: float | None) -> tuple[float | None, str, str]:
        """The recompute-only bound with second restores, within `ends_at`: its total energy (None
        if the time gave none; inf if no recompute-only schedule fits, with why) and the cover that
        gave it. With both moves the recompute-only cover on the rows it needs comes first (a
        fraction of a second)."""

        def left_s() -> float | None:
            return None if ends_at is None else ends_at - perf_counter()

        bound_j = None
        if self.moves.page:
            plain = cover_bound(self.graph, self.costs, self.budgets, Moves(recompute=True, page=False), self.timing, left_s())
            if plain.infeasible:
                return math.inf, plain.message, ""
            bound_j = plain.bound_j
        only = "the recompute-only cover"
        left = left_s()
        if left is not None and left <= 0:
            return bound_j, "", only
        found = second_restore_bound(self.graph, self.costs, self.budgets, self.timing, left)
        if found.infeasible:
            return math.inf, found.message, ""
        if found.bound_j is None or (bound_j is not None and bound_j >= found.bound_j):
            return bound_j, "", only
        return found.bound_j, "", f"{only} with second restores"

    def page_in_bound(self) -> None:
        """The covers with page-ins' own stalls priced as well as page-outs', first as before and
        then also with the page-ins that recomputations need (`cover`, item 6), under `overlap`
        with paging: bounds only, right after the placement search.

        Their choices are not placed: on the ResNet-18 study's hybrid points at 25 % (batch 8, Pi,
        1.2x, 12 s) the first lifts the bound from 1.03 to 1.32 J above keep-all (rpi4) and from
        1.13 to 1.41 J (rpi4-nocache) in 1.1-1.4 s, the second to 1.66 and 1.74 J in 1.4-1.8 s;
        but the first's choice placed in the placement search instead of the page-out-priced one
        left schedules of 2.016 and 2.162 J against 2.006 and 2.126 J. After polish, a sweep of
        the study on 2 cores sometimes left the first too little time. The second alone, or
        first, or placed, each lost something on a slowed machine (docs/optimiser.md, section
        3.1, "Where the step runs"); after the first, it adds its bound when there is time.
        """
        share = self.clock.share_s(PAGE_IN_BOUND_SHARE)
        ends_at = None if share is None else perf_counter() + share
        before = self.stall_found or self.cover
        for cascade_page_ins in (False, True):
            left = None if ends_at is None else ends_at - perf_counter()
            if (left is not None and left <= 0) or self.proven() or self.infeasible or _pages_nothing(before):
                return
            before = self._stall_priced(left, page_in_stalls=True, cascade_page_ins=cascade_page_ins)

    def _stall_priced(
        self, time_limit_s: float | None, page_in_stalls: bool, cascade_page_ins: bool = False
    ) -> CoverBound | None:
        """The stall-priced cover under `overlap` with paging (else None), its bound taken; None
        too when it proves that no schedule fits (the search's answer then, if it has none)."""
        if self.timing is not Timing.OVERLAP or not self.moves.page:
            return None
        self.report("stall bound", self.best.total_j, self.bound_j)
        share = PAGE_IN_NO_CASCADE_SHARE if cascade_page_ins else STALL_NO_CASCADE_SHARE
        found = cover_bound(
            self.graph,
            self.costs,
            self.budgets,
            self.moves,
            self.timing,
            time_limit_s,
            stalls=True,
            no_cascade_share=share,
            page_in_stalls=page_in_stalls,
            cascade_page_ins=cascade_page_ins,
        )
        if found.infeasible:
            if self.best.best is None:
                self.infeasible = found.message
            return None
        if found.bound_j is not None:
            self.raise_bound(
                found.bound_j,
                "the cover with the recomputations' page-ins priced"
                if cascade_page_ins
                else "the cover with page-in stalls priced"
                if page_in_stalls
                else "the cover with page-out stalls priced",
            )
        return found

    def build(self) -> None:
        self.report("build", self.best.total_j, self.bound_j)
        self.form = formulate(self.graph, self.costs, self.budgets, self.moves, self.timing)
        self.build_s = self.clock.elapsed_s()

    def settings(self, time_limit_s: float | None, floor: bool = False, confirm_infeasible: bool = True) -> SolverSettings:
        """The stopping rules of a solver run that must end before the call's deadline, less a
        reserve; `confirm_infeasible` False where an infeasibility would prove nothing."""
        form = self.the_form()
        ends_at = self.clock.ends_at
        floor_value = None
        if floor and self.cover is not None and self.cover.overhead_j:
            floor_value = self.cover.overhead_j / form.energy_scale_j
        self.settings_ends_at = ends_at
        return SolverSettings(
            mip_rel_gap=self.mip_rel_gap,
            mip_abs_gap=self.abs_gap_j / form.energy_scale_j,
            time_limit_s=time_limit_s,
            threads=self.threads,
            objective_floor=floor_value,
            ends_at=ends_at,
            confirm_infeasible=confirm_infeasible,
        )

    def watch(self, phase: str, bound_holds: bool):
        """The solver's watch: report progress, stop once the incumbent is within the gap of the bound.

        A restricted model's bound is not a bound of the problem (`bound_holds` False): only its
        incumbents count then.
        """
        form = self.the_form()

        def seen(primal, dual) -> bool:
            if self.settings_ends_at is not None and perf_counter() > self.settings_ends_at:
                return True  # HiGHS's own limit is checked only now and then
            incumbent = None if primal is None else form.keep_all_j + primal * form.energy_scale_j
            bound = None if dual is None or not bound_holds else form.keep_all_j + max(dual, 0.0) * form.energy_scale_j
            self.report(phase, incumbent, bound if bound is None or self.bound_j is None else max(bound, self.bound_j))
            best = min(x for x in (incumbent, self.best.total_j, math.inf) if x is not None)
            floor = max(x for x in (bound, self.bound_j, -math.inf) if x is not None)
            return (
                best < math.inf
                and floor > -math.inf
                and within_gap(best, floor, self.keep_all_j, self.mip_rel_gap, self.abs_gap_j)
            )

        return seen

    def start_columns(self, form: Formulation) -> list[float] | None:
        """The incumbent as column values of `form`, if it lies within the model's windows and bounds."""
        if self.best.best is None:
            return None
        try:
            values = plans.to_columns(form, self.best.best.plan, self.graph, self.costs)
        except KeyError:
            return None
        return values if admits(form, values) else None

    def restricted_solve(self) -> None:
        """The MILP confined to the covers' choice, for a share of the time left: a fast upper bound."""
        choice = self.timed_cover if self.timed_cover is not None and self.timed_cover.events else self.the_cover()
        if not (choice.recomputed or choice.paged):
            return
        form = restricted(self.the_form(), self.graph, choice)
        result = self._solve(form, self.clock.share_s(RESTRICTED_SHARE, RESTRICTED_CAP_S), "restricted solve", bound_holds=False)
        if result.values is not None:
            self.best.offer(plans.from_columns(form, result.values), "the restricted solve")

    def full_solve(self) -> None:
        """The full MILP from the incumbent, until the gap closes or the clock runs out."""
        form = self.the_form()
        result = self._solve(form, None, "solve", bound_holds=True, floor=OBJECTIVE_FLOOR_ROW)
        self.solver_status = result.status
        if result.values is not None:
            self.best.offer(plans.from_columns(form, result.values), self.solver)
        if result.bound is not None and math.isfinite(result.bound) and result.status is not None and result.status.has_schedule:
            self.raise_bound(form.keep_all_j + max(result.bound, 0.0) * form.energy_scale_j, f"the {self.solver} MILP")

    def bare(self) -> "SolveOutcome":
        """The MILP alone, as POET states it: no cover, no plans, no start."""
        self.build()
        self.raise_bound(self.keep_all_j, KEEP_ALL.name)  # the overhead is never negative
        self.full_solve()
        return self.outcome()

    def _solve(
        self, form: Formulation, time_limit_s: float | None, phase: str, bound_holds: bool, floor: bool = False
    ) -> SolverResult:
        self.report(phase, self.best.total_j, self.bound_j)
        result = solve(
            form,
            self.solver,
            self.settings(time_limit_s, floor, confirm_infeasible=bound_holds),
            self.start_columns(form),
            self.watch(phase, bound_holds),
        )
        self.handoff_s += result.handoff_s
        self.solve_s += result.solve_s
        return result

    def raise_bound(self, bound_j: float | None, by: str) -> None:
        """Take `bound_j` if it is higher than the best bound so far; `by` names what gave it."""
        if bound_j is not None and (self.bound_j is None or bound_j > self.bound_j):
            self.bound_j, self.bound_by = bound_j, by

    def outcome(self) -> "SolveOutcome":
        """The outcome from the incumbent, the best bound and the solver's own account."""
        form = self.form
        sizes = {"num_variables": form.num_columns if form else 0, "num_constraints": form.num_rows if form else 0}
        common = dict(
            build_s=self.build_s if self.build_s is not None else self.clock.elapsed_s(),
            handoff_s=self.handoff_s,
            solve_s=self.solve_s,
            cover_bound_j=None if self.cover is None else self.cover.bound_j,
            **sizes,
        )
        candidate = self.best.best
        if candidate is None and self.infeasible:
            return SolveOutcome(
                self.moves,
                self.timing,
                self.solver,
                Status.INFEASIBLE,
                None,
                None,
                None,
                None,
                None,
                None,
                message=self.infeasible,
                wall_s=self.clock.elapsed_s(),
                **common,
            )
        if candidate is None:
            if self.solver_status is Status.INFEASIBLE:
                message = infeasible_message(self.graph, self.costs, self.budgets, self.moves)
                status = Status.INFEASIBLE
            elif self.solver_status is not None and self.solver_status.has_schedule:
                # Every solution is read through a plan and judged by the model's accounting: one
                # that breaks the budgets there is not reported (a solver's fault, not a schedule).
                message = (
                    f"no schedule: the {self.solver} MILP's solution breaks the budgets under the model's "
                    "accounting, and no other plan fits"
                )
                status = Status.NO_SOLUTION
            else:
                within = "" if self.clock.limit_s is None else f" within the time limit of {self.clock.limit_s:.1f} s"
                message = f"no schedule was found{within}"
                status = Status.NO_SOLUTION
            return SolveOutcome(
                self.moves,
                self.timing,
                self.solver,
                status,
                None,
                None,
                None,
                self.bound_j,
                None,
                None,
                message=message,
                wall_s=self.clock.elapsed_s(),
                **common,
            )
        objective_j = candidate.total_j
        bound_j = min(self.bound_j, objective_j) if self.bound_j is not None else self.keep_all_j
        proven_gap = max(objective_j - bound_j, 0.0)
        overhead_j = objective_j - self.keep_all_j
        gap_total = proven_gap / objective_j if objective_j > 0 else 0.0
        gap_overhead = proven_gap / overhead_j if overhead_j > 0 else 0.0
        optimal = self.solver_status is Status.OPTIMAL or self.proven()
        status = Status.OPTIMAL if optimal else Status.FEASIBLE
        by = self.bound_by or KEEP_ALL.name
        if optimal and self.form is None:
            message = f"proven optimal with no solver run: {candidate.source} meets the lower bound from {by}"
        elif self.solver_status is Status.OPTIMAL:
            message = f"proven optimal by the {self.solver} MILP; the schedule is from {candidate.source}"
        elif optimal:
            message = f"proven optimal by the lower bound from {by}; the schedule is from {candidate.source}"
        else:
            message = (
                f"stopped with a gap of {pct(gap_overhead)} of the overhead (the lower bound from {by}); "
                f"the schedule is from {candidate.source}"
            )
        schedule = plans.to_schedule(
            candidate.plan,
            self.graph,
            self.costs,
            self.timing,
            {
                "moves": self.moves.label,
                "solver": self.solver,
                "status": status.value,
                "found_by": candidate.source,
                "ram_budget_bytes": str(self.budgets.ram_bytes),
                "runtime_budget_s": repr(self.budgets.runtime_s),
            },
        )
        return SolveOutcome(
            self.moves,
            self.timing,
            self.solver,
            status,
            schedule,
            candidate.figures,
            objective_j,
            bound_j,
            gap_total,
            gap_overhead,
            message=message,
            found_by=candidate.source,
            wall_s=self.clock.elapsed_s(),
            **common,
        )


def milp_nonzeros_estimate(graph: TrainingGraph, moves: Moves) -> int:
    """The stage MILP's nonzeros as `Search.time_for_milp` takes them before it is built: a little
    below what five zoo graphs measured (NONZEROS_PER_COLUMN) per S_ram column."""
    last = last_useful_stage(graph)
    columns = sum(max(last[i] - i, 0) for i in range(len(graph)))
    return NONZEROS_PER_COLUMN[moves.recompute, moves.page] * columns


def _pages_nothing(cover: CoverBound | None) -> bool:
    """Whether a cover was solved to its optimum by a choice that pages nothing.

    Then each cover that only prices paging further (the page-outs' stalls, the page-ins',
    the page-ins that recomputations need: `cover`, item 6) has that optimum too: every such
    cover is at least the one it refines, and this choice is one of its solutions at the same
    cost (with nothing paged, its stall and page-in columns are all zero). Solving it would
    only spend time: 1.1 s of a 12 s point on ResNet-18 (CIFAR, TX2, hybrid, 50 %).
    """
    return cover is not None and cover.exact and not cover.infeasible and not cover.paged


def _single_move(cover: CoverBound) -> Moves | None:
    """The one move the cover's choice uses (paging or recomputation), or None for both or neither."""
    if bool(cover.recomputed) == bool(cover.paged):
        return None
    return Moves(recompute=bool(cover.recomputed), page=bool(cover.paged))
