"""The eviction-cover lower bound: a small 0-1 program whose optimum no schedule can beat.

The stage MILP's LP relaxation is weak because it can keep an output "half" in RAM and pay half
of restoring it. The cover cannot: it asks only which outputs are ever restored, and by which
move, so that every stage's working set fits the budget. docs/optimiser.md ("The eviction
cover") proves it a lower bound under poetsim's own semantics, item by item; the docstrings here
cite those items. Its rows and prices are in `cover_rows`, its program in `cover_model`.

`cover_bound` solves it from a few stage rows, adding the rows its solution breaks
(`_RowGeneration`); `second_restore_bound` adds item 7 to the recompute-only cover;
`paging_floor_j` is the least any schedule that pages can cost.
"""

from dataclasses import dataclass, replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.bounds.columns import Col
from poetsim.optimiser.bounds.cover_model import CoverModel, CoverShape, CoverSolution
from poetsim.optimiser.bounds.cover_rows import (
    CoverRow,
    by_excess,
    counted_at,
    cover_rows,
    crowds_windows,
    deadline_slack_s,
    either_outputs,
    has_cascades,
    page_in_levels,
    room_shortfall,
    stall_levels,
)
from poetsim.optimiser.bounds.events import Event
from poetsim.optimiser.milp.program import PRESOLVE_NONZEROS_PER_UNIT
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing

#: A stage whose covering row's least slack (a share of its excess) passes this breaks a choice.
ELASTIC_TOLERANCE = 1e-7
#: Within a budget, item 7's rows are added (nearest readers first) until the program has this
#: share of the nonzeros `program.PRESOLVE_NONZEROS_PER_UNIT` allows in it: the rest goes to
#: building it.
SECOND_RESTORE_NONZERO_SHARE = 0.8
#: Share of the cover's budget for its first solve, without cascades.
NO_CASCADE_SHARE = 0.3
#: Share of a stall-priced cover's budget for its solve without page-out windows (item 6); the
#: rest, and what that solve leaves, goes to the cover with them when its choice crowds a window
#: or it was not solved; it starts from the first solve's bound, so it never ends below it.
WINDOWLESS_SHARE = 0.5
#: A cover is first solved with this many of its stage rows, those of largest excess; the rows its
#: solution breaks are added and it is solved again (`_RowGeneration`). A handful of rows usually
#: carries the whole optimum, and a program of every row is many times slower.
FIRST_ROWS = 5


@dataclass(frozen=True)
class CoverBound:
    """The eviction cover of one problem: a proven lower bound and the choice that attains it.

    `bound_j` is a lower bound on the total energy of every schedule within the budgets (None
    when `infeasible`: then no schedule of these moves fits, and `message` says why).
    `recomputed` and `paged` are the outputs the cover's best 0-1 solution restores by each move;
    `exact` says that solution was proven optimal for the cover (else `bound_j` is the cover
    solver's own dual bound, still valid, and the choice is its best found; also when the budget
    ran out before the cascade rows, the cover without them being all that was solved). A timed
    cover (`timed_cover`) also gives its `events`: when each restore happens.
    """

    moves: Moves
    timing: Timing
    keep_all_j: float
    bound_j: float | None
    recomputed: frozenset[int]
    paged: frozenset[int]
    infeasible: bool
    exact: bool
    rows: tuple[CoverRow, ...]
    message: str
    events: tuple[Event, ...] = ()

    @property
    def overhead_j(self) -> float | None:
        """The bound on the energy above keep-all."""
        return None if self.bound_j is None else self.bound_j - self.keep_all_j

    @property
    def restores(self) -> bool:
        """Whether the choice restores anything."""
        return bool(self.recomputed or self.paged)

    @property
    def single_move(self) -> Moves | None:
        """The one move the choice uses (paging or recomputation), or None for both or neither."""
        if bool(self.recomputed) == bool(self.paged):
            return None
        return Moves(recompute=bool(self.recomputed), page=bool(self.paged))

    @property
    def pages_nothing(self) -> bool:
        """Whether the cover was solved to its optimum by a choice that pages nothing.

        Then each cover that only prices paging further (the page-outs' stalls, the page-ins', the
        page-ins that recomputations need: item 6) has that optimum too: every such cover is at
        least the one it refines, and this choice is one of its solutions at the same cost (with
        nothing paged, its stall and page-in columns are all zero). Solving it would only spend
        the budget.
        """
        return self.exact and not self.infeasible and not self.paged


def cover_bound(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    allowance: Allowance | None = None,
    cascades: bool = True,
    avoid: frozenset[int] = frozenset(),
    first_rows: int | None = FIRST_ROWS,
    stalls: bool = False,
    no_cascade_share: float = NO_CASCADE_SHARE,
    page_in_stalls: bool = True,
    cascade_page_ins: bool = True,
    page_out_windows: bool = True,
) -> CoverBound:
    """Solve the eviction cover of one problem within `allowance` (None: to the end).

    With `cascades`, a recomputation that needs an input past that input's last reader pays
    for it: the input is held at the stage (its bytes count) or restored too (item 5). With
    `avoid`, those outputs are never restored: a search for another choice (the placement search
    uses it to step round outputs whose transfers stall), after which neither the bound nor an
    infeasibility is a proof. Each program starts from its `first_rows` stage rows of largest
    excess and takes the others as its solution breaks them (None: every row from the start).
    With `stalls` (under `overlap`), each page-out's and page-in's own stall is priced (item 6;
    the page-ins' only with `page_in_stalls`, the cascades' page-ins only with
    `cascade_page_ins`, the page-outs crowding the stages before a row only with
    `page_out_windows`, in the last of its solves). The cover without cascades is solved first, in
    `no_cascade_share` of the budget: small and fast, a bound and a choice to fall back on.
    """
    timing = Timing(timing)
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing)
    if avoid:
        rows = tuple(row.without(avoid) for row in rows)

    def result(solution: CoverSolution | None = None, infeasible: str = "", message: str = "") -> CoverBound:
        return _cover_bound(moves, timing, keep_all_j, rows, solution, infeasible, message)

    if not rows:
        return result(message="keep-all fits the RAM budget")
    short = room_shortfall(graph, rows)
    if short is not None:
        row, room = short
        return result(
            infeasible=(
                f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM: right after "
                f"computing node {row.stage} ({graph.nodes[row.stage].name}) {row.excess_bytes:,} bytes of outputs "
                f"must be out of RAM, and at most {room:,} bytes can be"
            )
        )
    too_slow = (
        f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM within "
        f"{budgets.runtime_s:.6g} s: the deadline leaves {deadline_slack_s(budgets, costs):.6g} s beyond one "
        "plain pass, less than the recomputation or the transfers that staying within the RAM budget need"
    )
    stalls = stalls and timing is Timing.OVERLAP and moves.page
    generation = _RowGeneration(graph, costs, budgets, moves, timing, rows, first_rows, stalls, page_in_stalls, page_out_windows)
    deep = cascades and has_cascades(graph, rows)
    found = generation.solve(
        cascades=False,
        allowance=_part(allowance, no_cascade_share if cascades else 1.0),
        one_move=False,
        cascade_page_ins=False,
        windows=not deep,
    )
    if found is None:
        return result(infeasible=too_slow)
    if deep:
        if allowance is not None and allowance.over():
            found = found.unproven()  # the optimum of the cover without cascades only
        else:
            # With `avoid` the answer is no proof anyway: the quicker cover with one move per
            # output (x^R_i + x^P_i <= 1 for every output, item 5) serves the search for a choice.
            deeper = generation.solve(cascades=True, allowance=allowance, one_move=bool(avoid), cascade_page_ins=cascade_page_ins)
            if deeper is None:
                return result(infeasible=too_slow)
            found = _better(found, deeper)
    return result(found)


def _cover_bound(
    moves: Moves,
    timing: Timing,
    keep_all_j: float,
    rows: tuple[CoverRow, ...],
    solution: CoverSolution | None,
    infeasible: str,
    message: str,
) -> CoverBound:
    """The answer of `cover_bound`: a proof of infeasibility, keep-all's energy, or a solution's bound.

    An `infeasible` message wins; without a solution (no row exceeds the budget) the bound is
    keep-all itself, exact.
    """
    if infeasible:
        return CoverBound(moves, timing, keep_all_j, None, frozenset(), frozenset(), True, True, rows, infeasible)
    if solution is None:
        return CoverBound(moves, timing, keep_all_j, keep_all_j, frozenset(), frozenset(), False, True, rows, message)
    return CoverBound(
        moves,
        timing,
        keep_all_j,
        keep_all_j + solution.overhead_j,
        solution.recomputed,
        solution.paged,
        False,
        solution.exact,
        rows,
        message,
    )


def _better(plain: CoverSolution, deeper: CoverSolution) -> CoverSolution:
    """The higher bound of both, with the cascade cover's choice when it has one (it is feasible there)."""
    bound_j = max(plain.overhead_j, deeper.overhead_j)
    if deeper.recomputed or deeper.paged:
        return CoverSolution(bound_j, deeper.recomputed, deeper.paged, deeper.exact)
    return CoverSolution(bound_j, plain.recomputed, plain.paged, deeper.exact)


def _part(allowance: Allowance | None, fraction: float) -> Allowance | None:
    return None if allowance is None else allowance.part(fraction)


def second_restore_bound(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, allowance: Allowance | None = None
) -> CoverBound:
    """The recompute-only cascade cover with item 7's second restores, every stage row at once.

    A bound only (its choice is not placed): the rows that tie absences across stages leave no
    stage's columns to itself, so it is solved whole rather than row by row. With nothing to tie
    (no cascade) it is the plain cover, and gives no bound of its own.
    """
    timing = Timing(timing)
    moves = Moves(recompute=True, page=False)
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing)

    def result(bound_j: float | None, infeasible: bool = False, exact: bool = True, message: str = "") -> CoverBound:
        empty: frozenset[int] = frozenset()
        return CoverBound(moves, timing, keep_all_j, bound_j, empty, empty, infeasible, exact, rows, message)

    if not rows or not has_cascades(graph, rows):
        return result(None, exact=False, message="no cascade: the plain cover's bound stands")
    # As many of item 7's rows as the solve can take in the budget (`Program.solve` declines a
    # program whose presolve would outlast it), leaving a share of it to the build.
    left = None if allowance is None else allowance.left()
    cap = None if left is None else int(SECOND_RESTORE_NONZERO_SHARE * PRESOLVE_NONZEROS_PER_UNIT * left)
    model = CoverModel(
        graph, costs, budgets, moves, timing, rows, CoverShape(cascades=True, second_restores=True, nonzero_cap=cap)
    )
    if not model.roomy:
        return result(None, exact=False, message="the cover's stage rows leave no room for second restores in the budget")
    solved = model.solve(allowance)
    if solved is None:
        return result(
            None,
            infeasible=True,
            message=(
                f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM within "
                f"{budgets.runtime_s:.6g} s: the recomputations that staying within the RAM budget needs, each "
                "counted as often as a cascade rebuilds it, outlast the deadline's slack"
            ),
        )
    return result(keep_all_j + solved.overhead_j, exact=solved.exact)


def paging_floor_j(costs: CostTable, timing: Timing) -> float:
    """A lower bound on every schedule that pages anything in.

    Keep-all plus the cheapest page-out and page-in of any output.

    A page-in reads the copy a page-out made, so such a schedule pays both transfers' energy on
    top of computing each node once (and, under `overlap`, of static power for at least one plain
    pass). A schedule that pages out but never in is no cheaper than the same schedule without its
    page-outs, which is recompute-only. So every schedule with both moves costs at least the lesser
    of this floor and the recompute-only bound; where a device's transfers are dear, that is above
    the best schedules, which then need only recompute-only's bound.
    """
    cheapest_j = min((out + into for out, into in zip(costs.page_out_j, costs.page_in_j)), default=0.0)
    return costs.keep_all_energy_j(timing) + cheapest_j


class _RowGeneration:
    """The cover's optimum found with the stage rows it needs (docs/optimiser.md, "Rows as needed").

    Each stage row has columns of its own (a_{t,i}, ap_{t,i}, h_{t,d}, r_{t,d}, q_{t,d},
    p_{t,d}, pa_{t,i}); the rows of every stage (its page-out windows among them) share only x^R
    and x^P (with stalls, z, w, the stall columns s_d and sl_d and Y), the knapsack and transfer
    rows, and x^R_i + x^P_i <= 1. So the program
    with some stage rows left out is a relaxation of the whole: its optimum is at most the
    whole's and its infeasibility the whole's. If its solution admits, for each left-out stage,
    values of that stage's columns that meet its rows, it is the whole's optimum. Whether a
    left-out stage admits it is read directly when the outputs it restores without a need cover
    the excess; else by the program of the unsure stages together, with the choice fixed, a slack
    on each covering row and only the slacks priced (a stage whose least slack is positive breaks
    the choice), or, when that program is too large for the budget, of each unsure stage alone.
    The stages that do not admit the choice join the program, which is solved again. Within a
    budget, the last program's dual bound stands (a relaxation's: still a bound), and the answer
    is not exact while some stage may break its choice. Page-out windows are added only when the
    choice without them passes one ("Page-out windows as needed").
    """

    def __init__(
        self, graph, costs, budgets, moves, timing, rows, first_rows: int | None, stalls, page_in_stalls, page_out_windows
    ):
        self.graph, self.costs, self.budgets, self.moves, self.timing = graph, costs, budgets, moves, timing
        self.by_stage = {row.stage: row for row in rows}
        ranked = by_excess(rows)
        self.first = frozenset(ranked if first_rows is None else ranked[:first_rows])
        self.levels = stall_levels(graph, costs, rows) if stalls else {}
        self.in_levels = page_in_levels(graph, costs, rows) if stalls and page_in_stalls else {}
        self.stalls, self.page_in_stalls = stalls, page_in_stalls
        self.page_out_windows = stalls and page_out_windows
        self.counted: dict[int, set[int]] = {}

    def solve(
        self, cascades: bool, allowance: Allowance | None, one_move: bool, cascade_page_ins: bool, windows: bool = True
    ) -> CoverSolution | None:
        """The cover's optimum (None: infeasible).

        With `one_move`, x^R_i + x^P_i <= 1 holds for every output (the quicker cover the placement
        search uses; no bound). With `windows`, the page-out windows of a generation that has them
        are added as needed.
        """
        if cascades and not self.counted:
            self.counted = {t: counted_at(self.graph, t) for t in self.by_stage}
        both = cascades and self.moves.recompute and self.moves.page and not one_move
        rows = tuple(self.by_stage.values())
        shape = CoverShape(
            cascades=cascades,
            either=frozenset(either_outputs(self.graph, rows, self.counted)) if both else frozenset(),
            counted=self.counted if cascades else None,
            levels=self.levels,
            in_levels=self.in_levels,
            cascade_page_ins=self.stalls and self.page_in_stalls and cascade_page_ins,
        )
        active = set(self.first)
        if not (self.page_out_windows and windows):
            return self._generate(active, shape, allowance)
        found = self._generate(active, shape, _part(allowance, WINDOWLESS_SHARE))
        if found is None or (found.exact and self._within_windows(found)):
            return found
        # The choice's page-outs crowd some row's windows, or the cover was not solved: the cover
        # with its windows, from the same rows, in what is left. It refines the cover without them,
        # so it starts held to that one's bound: a choice that meets both at that cost ends it.
        if allowance is not None and allowance.over():
            return found.unproven()
        windowed = self._generate(active, replace(shape, page_out_windows=True), allowance, floor_j=found.overhead_j)
        if windowed is None:
            return None
        # The windows serve the bound; the choice stays the one without them, the choice the
        # placement search places with or without windows.
        return replace(found, overhead_j=max(found.overhead_j, windowed.overhead_j), exact=False)

    def _generate(
        self, active: set[int], shape: CoverShape, allowance: Allowance | None, floor_j: float | None = None
    ) -> CoverSolution | None:
        """The program of `shape` over the stages of `active`, and the stages its solution breaks, until none does.

        `active` gains the stages added. With `floor_j`, a bound the program's optimum is known to
        reach (that of a cover it refines, over some of its rows), its objective is held to it.
        """
        while True:
            model = self._model(active, shape)
            if floor_j is not None:
                model.floor(floor_j)
            found = model.solve(allowance)
            if found is None or not found.exact:
                return found
            broken = self._breaks(set(self.by_stage) - active, found, shape, allowance)
            if not broken:
                return found
            if allowance is not None and allowance.over():
                return found.unproven()
            active.update(broken)

    def _within_windows(self, found: CoverSolution) -> bool:
        """Whether the choice's page-outs fit every row's windows within its time beyond a plain pass.

        Then the choice, with what it pays, meets the cover with page-out windows too (item 6): each
        row counts absent by paging some of the outputs it pages (within their levels), and fewer
        outputs need less of each window. Its time beyond a plain pass is Y, or without Y its
        recomputations' time.
        """
        beyond_s = found.beyond_s
        if beyond_s is None:
            beyond_s = sum(self.costs.compute_s[i] for i in found.recomputed)
        return not any(crowds_windows(self.costs, t, self._paged_at(t, row, found), beyond_s) for t, row in self.by_stage.items())

    def _model(self, stages, shape: CoverShape) -> CoverModel:
        rows = tuple(self.by_stage[t] for t in sorted(stages))
        return CoverModel(self.graph, self.costs, self.budgets, self.moves, self.timing, rows, shape)

    def _breaks(self, stages: set[int], found: CoverSolution, shape: CoverShape, allowance: Allowance | None) -> list[int]:
        """The left-out stages whose rows the choice of `found` breaks (or that could not be shown not to, within the budget)."""
        unsure = [t for t in sorted(stages) if not self._covered(t, found, shape)]
        if not shape.cascades or not unsure:
            return unsure  # the cover without cascades has no stage columns: nothing else can admit it
        # With the choice fixed the stages share no free column: one program with a slack on each
        # covering row, least total slack; a stage whose slack stays above 0 breaks the choice.
        # A program too large for the budget (`Program.solve` declines it) or not solved in it
        # leaves each stage to its own.
        together = self._model(unsure, replace(shape, elastic=True))
        together.fix(found)
        solved = together.program.solve(allowance)
        if not solved.infeasible and solved.values is not None:
            broken = [t for t in unsure if solved.values.get((Col.SLACK, t), 0.0) > ELASTIC_TOLERANCE]
            if solved.exact or not broken:  # a solution with no slack shows every stage admits the choice
                return broken
        broken = []
        for n, t in enumerate(unsure):
            if allowance is not None and allowance.over():  # out of budget: the rest counted as broken
                broken += unsure[n:]
                break
            alone = self._model((t,), shape)
            alone.fix(found)
            solved = alone.program.solve(allowance)
            if solved.infeasible or solved.values is None:  # (no answer within the budget: counted as broken)
                broken.append(t)
        return broken

    def _paged_at(self, t: int, row: CoverRow, found: CoverSolution) -> set[int]:
        """The outputs row t may count absent by paging under the choice of `found` (within their stall levels)."""
        return {
            i
            for i in row.by_paging
            if i in found.paged
            and found.paged_from.get(i, 0) <= t
            and (i not in self.in_levels or found.paged_until.get(i, -1) >= t)
        }

    def _covered(self, t: int, found: CoverSolution, shape: CoverShape) -> bool:
        """Whether the outputs the choice restores at row t without a need cover its excess.

        Those it pages (within their stall levels) and those it recomputes that need no dead input;
        with stalls priced, the page-outs of those it pages must also fit the windows before t
        within the choice's Y.
        """
        row, seen = self.by_stage[t], self.counted.get(t, ())
        m, deps = self.graph.output_bytes, self.graph.nodes
        free = self._paged_at(t, row, found)
        if shape.page_out_windows and found.beyond_s is not None and crowds_windows(self.costs, t, free, found.beyond_s):
            return False
        free.update(
            i for i in row.by_recompute if i in found.recomputed and (not shape.cascades or all(d in seen for d in deps[i].deps))
        )
        return sum(m[i] for i in free) >= row.excess_bytes
