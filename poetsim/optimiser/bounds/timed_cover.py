"""The eviction cover with stages: when each transfer happens, and what it costs in time.

The plain cover (`cover`) charges one restore per output and no time for paging. Under `overlap`
timing that leaves out what often decides the optimum: a page-out runs in a stage before the
output's absence and a page-in in one after it, and a stage whose transfers outlast its compute
stalls, which costs static energy. This cover states each page-out and page-in as an event in a
stage, so it counts those stalls, and it counts a restore per stretch an output is absent over.
Recomputations keep one column per output, as in the plain cover. docs/optimiser.md ("The timed
cover") proves it a lower bound; its best solution also says in which stage to page, from which
`cover_plan.events_plan` builds a schedule.

It is larger than the plain cover (a column per output and stage in each window), so the search
solves it only where the plain cover's plan does not meet the plain bound, within a budget; a
budget that ends it early still leaves a valid (HiGHS dual) bound.
"""

import math
from dataclasses import replace
from enum import StrEnum

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance, charge, spent
from poetsim.optimiser.bounds.cover import CoverBound
from poetsim.optimiser.bounds.cover_rows import CoverRow, by_excess, counted_at, cover_rows, deadline_slack_s, next_reader
from poetsim.optimiser.bounds.events import Event, EventKind
from poetsim.optimiser.milp.program import REL_GAP, Program
from poetsim.optimiser.work import BUILD_UNITS_PER_NONZERO
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing
from poetsim.tolerances import exceeds

#: A placement is a schedule, not a bound: it is solved to this gap, which is far quicker.
PLACEMENT_REL_GAP = 1e-4
#: The simplex iterations of the timed cover's root LP per line (`work.root_units`): its windows
#: chain its rows, and its root takes several times the plain covers' (0.48 on ResNet-18's).
ROOT_ITERATIONS_PER_LINE = 0.5
#: The linear relaxation (`relaxation_bound`) starts from this many stage rows, those of largest
#: excess, and adds at most this many of the rows its solution breaks per round.
RELAXATION_FIRST_ROWS = 5
RELAXATION_ROWS_PER_ROUND = 10
#: A left-out stage breaks the relaxation's solution when what that solution can restore there
#: falls short of its excess by more than this share of it.
RELAXATION_TOLERANCE = 1e-6
#: The relaxation's simplex iterations per line, as a run is priced before it starts. 54 rounds
#: on the outside set's 32 points took 0.018-0.19 (quartiles 0.047, 0.076 and 0.10; fewer where
#: paging is fast). A run that needs more than its allowance stops at its iteration limit and
#: gives no bound, so a later round, which may take a little of the step's allowance, is priced
#: at the upper quartile, and the first, which may take most of what the search has left, at
#: the lower one: a program the price refuses is never tried, while a run that stops at its limit
#: costs only its allowance.
RELAXATION_ITERATIONS_PER_LINE = 0.1
RELAXATION_FIRST_ITERATIONS_PER_LINE = 0.05


class TimedCol(StrEnum):
    """The kinds of the timed cover's columns besides its events (`EventKind`)."""

    RECOMPUTED = "R"  # i recomputed, in no particular stage
    ABSENT_RECOMPUTED = "aR"  # (t, i): absent at t, recomputed in (t, j]
    ABSENT_PAGED = "aP"  # (t, i): absent at t, paged out before and in after
    HELD = "h"  # (t, d): dead input d held at t for a cascade
    REBUILT = "rR"  # (t, d, j): dead input d absent at t and recomputed before j
    PAGED_BACK = "rP"  # (t, d, j): dead input d absent at t and paged back in before j
    STAGE_EXTRA = "X"  # (s,): the stall of stage s, its DMA time beyond its compute (overlap)
    BEYOND = "Y"  # (): the time beyond one plain pass (overlap)
    OUTS_SO_FAR = "O"  # (i, s): i's page-outs in stages i+1..s (a running sum)
    WINDOW = "W"  # (kind, i, last, s): i's events of `kind` in stages s..last (a running sum)


#: The event kinds with a column per stage.
_STAGED = (EventKind.PAGE_OUT, EventKind.PAGE_IN)


def placement(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    timing: Timing,
    plain: CoverBound,
    allowance: Allowance | None = None,
) -> CoverBound:
    """The timed cover confined to the plain cover's choice: where to place its restores.

    Not a bound (the choice is fixed); a quick way to stages for the plain choice's transfers
    and recomputations. If its events cost no more than the plain bound, they are optimal.
    """
    rows = tuple(
        replace(
            row,
            by_recompute=tuple(i for i in row.by_recompute if i in plain.recomputed),
            by_paging=tuple(i for i in row.by_paging if i in plain.paged),
        )
        for row in plain.rows
    )
    # Only the moves the choice uses: a hybrid cover whose choice pages nothing would otherwise
    # bring every output's paging events, a program many times larger.
    moves = Moves(recompute=plain.moves.recompute and bool(plain.recomputed), page=plain.moves.page and bool(plain.paged))
    found = timed_cover_bound(graph, costs, budgets, moves, timing, allowance, plain.bound_j, rows, rel_gap=PLACEMENT_REL_GAP)
    return replace(found, rows=plain.rows)


def stalled(graph: TrainingGraph, costs: CostTable, cover: CoverBound) -> frozenset[int]:
    """The outputs whose transfers, as the timed cover placed them, outlast their stage's compute."""
    dma_s: dict[int, float] = {}
    nodes: dict[int, list[int]] = {}
    for kind, i, s in (e.column for e in cover.events):
        if kind in (EventKind.PAGE_OUT, EventKind.PAGE_IN):
            dma_s[s] = dma_s.get(s, 0.0) + (costs.page_out_s if kind == EventKind.PAGE_OUT else costs.page_in_s)[i]
            nodes.setdefault(s, []).append(i)
    return frozenset(i for s, total in dma_s.items() if exceeds(total / costs.dma_channels, costs.compute_s[s]) for i in nodes[s])


def timed_cover_bound(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    allowance: Allowance | None = None,
    enough_j: float | None = None,
    rows: tuple[CoverRow, ...] | None = None,
    start: tuple[Event, ...] = (),
    rel_gap: float = REL_GAP,
) -> CoverBound:
    """Solve the stage-indexed eviction cover (module docstring).

    `enough_j`, a proven lower bound on the total energy (the plain cover's), stops the solve
    as soon as it finds events that cost no more: they are then optimal. `rows` are the plain
    cover's if given; `start` gives events of a schedule to start from (another cover's).
    """
    timing = Timing(timing)
    overlap = timing is Timing.OVERLAP
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing) if rows is None else rows
    model = _TimedModel(graph, costs, moves, overlap)
    for row in rows:
        model.add_stage(row)
    model.add_time_rows(deadline_slack_s(budgets, costs))
    enough = None if enough_j is None else (enough_j - keep_all_j) / model.energy_scale
    starts = {event.column: 1.0 for event in start}
    solved = model.program.solve(allowance, enough, starts, rel_gap, root_iterations_per_line=ROOT_ITERATIONS_PER_LINE)
    if solved.infeasible:
        return CoverBound(
            moves,
            timing,
            keep_all_j,
            None,
            frozenset(),
            frozenset(),
            True,
            True,
            rows,
            "infeasible: no placement of restores in stages covers the RAM excess within the deadline",
        )
    # Events: page-outs, page-ins, recomputations by stage, or, where recomputations have no
    # stage, the stages at which an output is absent to be recomputed.
    events = tuple(
        sorted(
            Event(EventKind.ABSENT, key[2], key[1])
            if key[0] == TimedCol.ABSENT_RECOMPUTED
            else Event(EventKind(key[0]), key[1], key[2])
            for key, value in (solved.values or {}).items()
            if key[0] in (*_STAGED, TimedCol.ABSENT_RECOMPUTED) and value > 0.5
        )
    )
    return CoverBound(
        moves,
        timing,
        keep_all_j,
        keep_all_j + solved.bound * model.energy_scale,
        frozenset(e.node for e in events if e.kind == EventKind.ABSENT),
        frozenset(e.node for e in events if e.kind == EventKind.PAGE_IN),
        False,
        solved.exact,
        rows,
        "",
        events=events,
    )


def relaxation_bound(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    allowance: Allowance | None = None,
    first_allowance: Allowance | None = None,
) -> float | None:
    """A lower bound on the total energy from the timed cover's linear relaxation (None: none within the allowance).

    The timed cover is usually too large for its root to fit a point's effort, while its linear
    relaxation over a few stage rows solves in seconds and bounds what transfers crowding a stage
    cost (with each transfer's own stall stated, `add_time_rows`). A stage row's columns are its
    own, so the relaxation over some of the stage rows is a relaxation of the whole: every round's
    optimum is a bound. It starts from the rows of largest excess; a left-out stage whose excess
    the solution's recomputations and transfers cannot cover (its cascades aside, so the check only
    ever says too little) joins, and the relaxation is solved again, while the allowance lasts. An
    infeasible relaxation gives no bound here: the covers prove that nothing fits.

    `first_allowance`, if given, is the first round's instead of `allowance` (which the rounds
    after it share): the first round alone gives most of the bound.
    """
    timing = Timing(timing)
    overlap = timing is Timing.OVERLAP
    keep_all_j = costs.keep_all_energy_j(timing)
    by_stage = {row.stage: row for row in cover_rows(graph, budgets, moves, timing)}
    if not by_stage:
        return keep_all_j
    ranked = by_excess(by_stage.values())
    chosen = set(ranked[:RELAXATION_FIRST_ROWS])
    best = None
    while True:
        model = _TimedModel(graph, costs, moves, overlap)
        for t in sorted(chosen):
            model.add_stage(by_stage[t])
        model.add_time_rows(deadline_slack_s(budgets, costs), own_stalls=True)
        first = best is None
        solved = model.program.solve(
            first_allowance if first and first_allowance is not None else allowance,
            root_iterations_per_line=RELAXATION_FIRST_ITERATIONS_PER_LINE if first else RELAXATION_ITERATIONS_PER_LINE,
            linear=True,
        )
        if solved.infeasible or not solved.exact or solved.values is None:
            return best
        bound_j = keep_all_j + solved.bound * model.energy_scale
        best = bound_j if best is None else max(best, bound_j)
        left_out = [by_stage[t] for t in ranked if t not in chosen]
        charge(allowance, BUILD_UNITS_PER_NONZERO * sum(len(r.by_recompute) + len(r.by_paging) for r in left_out))
        broken = _short_rows(graph, model.late, left_out, solved.values)
        if not broken or spent(allowance):
            return best
        chosen.update(broken[:RELAXATION_ROWS_PER_ROUND])


def _paging_windows(i: int, t: int, j: int, late: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The stages (first, last) where i's page-out and its page-in can run for i to be absent at t, read next at j."""
    return (i + 1, t - late), (t + late, j - 1)


def _short_rows(graph: TrainingGraph, late: int, rows: list[CoverRow], values: dict[tuple, float]) -> list[int]:
    """The stages of `rows` whose excess `values` cannot cover, the shortest (as a share of the excess) first.

    What stage t can restore of i is at most i's recomputation plus the least of its page-outs
    before t and its page-ins after t (`_paging_windows`), and at most 1.
    """
    recomputed: dict[int, float] = {}
    transfers: dict[tuple[EventKind, int], dict[int, float]] = {}
    for key, value in values.items():
        if key[0] == TimedCol.RECOMPUTED:
            recomputed[key[1]] = value
        elif key[0] in _STAGED:
            transfers.setdefault((key[0], key[1]), {})[key[2]] = value

    def moved(kind: EventKind, i: int, first: int, last: int) -> float:
        return sum(v for s, v in transfers.get((kind, i), {}).items() if first <= s <= last)

    short = []
    for row in rows:
        t = row.stage
        restorable = {i: recomputed.get(i, 0.0) for i in row.by_recompute}
        for i in row.by_paging:
            j = next_reader(graph, i, t)
            (out_first, out_last), (in_first, in_last) = _paging_windows(i, t, j, late)
            paged = min(moved(EventKind.PAGE_OUT, i, out_first, out_last), moved(EventKind.PAGE_IN, i, in_first, in_last))
            restorable[i] = restorable.get(i, 0.0) + paged
        covered = sum(graph.output_bytes[i] * min(1.0, share) for i, share in restorable.items())
        shortfall = (row.excess_bytes - covered) / row.excess_bytes
        if shortfall > RELAXATION_TOLERANCE:
            short.append((-shortfall, t))
    return [t for _, t in sorted(short)]


class _TimedModel:
    """The stage-indexed cover as a mixed 0-1 program (`program.Program`).

    Columns: transfers (`EventKind.PAGE_OUT` or `PAGE_IN`, i, s); the rest by `TimedCol`.
    """

    def __init__(self, graph: TrainingGraph, costs: CostTable, moves: Moves, overlap: bool):
        self.graph, self.costs, self.moves = graph, costs, moves
        self.late = 1 if overlap else 0  # overlap: a transfer in stage t holds i at t
        self.overlap = overlap
        self.energy_scale = (sum(costs.compute_j) / len(graph)) or 1.0
        self.time_scale = (sum(costs.compute_s) / len(graph)) or 1.0
        self.program = Program()
        self.held: dict[int, list[int]] = {}
        self.recomputed: list[tuple[int, float]] = []  # (x^R_i, i's compute time)
        self.transfers_at: dict[int, list[tuple[int, float]]] = {}
        self.outs_of: dict[int, list[int]] = {}
        self.prefix_end: dict[int, int] = {}  # i -> last stage with a running sum
        self.suffix_start: dict[tuple[EventKind, int, int], int] = {}  # (kind, i, last) -> first such stage

    def event(self, kind: EventKind, i: int, s: int) -> int:
        """The column of one page-out or page-in of i in stage s."""
        key = (kind, i, s)
        if key in self.program.columns:
            return self.program.columns[key]
        c = self.costs
        out = kind == EventKind.PAGE_OUT
        col = self.program.column(key, (c.page_out_j if out else c.page_in_j)[i] / self.energy_scale)
        self.transfers_at.setdefault(s, []).append((col, (c.page_out_s if out else c.page_in_s)[i]))
        if out:
            self.outs_of.setdefault(i, []).append(col)
        return col

    def recompute(self, absent: int, i: int) -> None:
        """The row absent <= x^R_i: an absence by recomputation needs i recomputed.

        Recomputations have one column per output, in no stage, as in the plain cover: a relaxation
        of one column per stage, so its bound holds, and is found far sooner.
        """
        if (TimedCol.RECOMPUTED, i) not in self.program.columns:
            col = self.program.column((TimedCol.RECOMPUTED, i), self.costs.compute_j[i] / self.energy_scale)
            self.recomputed.append((col, self.costs.compute_s[i]))
        self.program.row([(absent, 1.0), (self.program.columns[TimedCol.RECOMPUTED, i], -1.0)], -math.inf, 0.0)

    def within(self, absent: int, kind: EventKind, i: int, first: int, last: int) -> None:
        """The row absent <= the sum of i's transfers of `kind` in stages first..last (0 if there are none)."""
        if first > last:
            self.program.row([(absent, 1.0)], -math.inf, 0.0)
            return
        total = self._prefix(i, last) if kind == EventKind.PAGE_OUT else self._suffix(kind, i, first, last)
        self.program.row([(absent, 1.0), (total, -1.0)], -math.inf, 0.0)

    def _prefix(self, i: int, last: int) -> int:
        """A column equal to i's page-outs in stages i+1..last (page-out windows all start at i+1).

        Running sums keep each window one term: summing the events of every window instead
        makes millions of nonzeros on 300-node graphs.
        """
        program = self.program
        s = self.prefix_end.get(i, i)
        while s < last:
            s += 1
            col = program.column((TimedCol.OUTS_SO_FAR, i, s), upper=math.inf, integer=False)
            terms = [(col, 1.0), (self.event(EventKind.PAGE_OUT, i, s), -1.0)]
            if s > i + 1:
                terms.append((program.columns[TimedCol.OUTS_SO_FAR, i, s - 1], -1.0))
            program.row(terms, 0.0, 0.0)
        self.prefix_end[i] = max(s, self.prefix_end.get(i, i))
        return program.columns[TimedCol.OUTS_SO_FAR, i, last]

    def _suffix(self, kind: EventKind, i: int, first: int, last: int) -> int:
        """A column equal to i's events of `kind` in stages first..last (windows sharing their end)."""
        program = self.program
        s = self.suffix_start.get((kind, i, last), last + 1)
        while s > first:
            s -= 1
            col = program.column((TimedCol.WINDOW, kind, i, last, s), upper=math.inf, integer=False)
            terms = [(col, 1.0), (self.event(kind, i, s), -1.0)]
            if s < last:
                terms.append((program.columns[TimedCol.WINDOW, kind, i, last, s + 1], -1.0))
            program.row(terms, 0.0, 0.0)
        self.suffix_start[kind, i, last] = min(s, self.suffix_start.get((kind, i, last), last + 1))
        return program.columns[TimedCol.WINDOW, kind, i, last, first]

    def paged_around(self, absent: int, i: int, t: int, j: int) -> None:
        """Absent at t by paging: a page-out before t and a page-in after it, before reader j."""
        for kind, (first, last) in zip((EventKind.PAGE_OUT, EventKind.PAGE_IN), _paging_windows(i, t, j, self.late)):
            self.within(absent, kind, i, first, last)

    def add_stage(self, row: CoverRow) -> None:
        """The covering row of stage t, its absences, and their cascades."""
        t, m, graph, program = row.stage, self.graph.output_bytes, self.graph, self.program
        counted = counted_at(graph, t)
        terms = []
        by_recompute = set(row.by_recompute)
        for i in row.by_recompute:
            j = next_reader(graph, i, t)
            absent = program.column((TimedCol.ABSENT_RECOMPUTED, t, i))
            terms.append((absent, m[i]))
            self.recompute(absent, i)
            dead = [d for d in graph.nodes[i].deps if d not in counted]
            self._needs(t, j, absent, dead, counted)
        for i in row.by_paging:
            j = next_reader(graph, i, t)
            absent = program.column((TimedCol.ABSENT_PAGED, t, i))
            terms.append((absent, m[i]))
            self.paged_around(absent, i, t, j)
            if i in by_recompute:
                program.row([(absent, 1.0), (program.columns[TimedCol.ABSENT_RECOMPUTED, t, i], 1.0)], -math.inf, 1.0)
        terms += [(program.columns[TimedCol.HELD, t, d], -m[d]) for d in self.held.get(t, ())]
        program.row([(col, coef / row.excess_bytes) for col, coef in terms], 1.0, math.inf)

    def _needs(self, t: int, j: int, needy: int, dead: list[int], counted: set[int]) -> None:
        """A recomputation in (t, j] needs each dead input d: held at t, or restored in (t, j]."""
        program = self.program
        for d in dead:
            if (TimedCol.HELD, t, d) not in program.columns:
                self.held.setdefault(t, []).append(d)
            terms = [(needy, 1.0), (program.column((TimedCol.HELD, t, d)), -1.0)]
            if self.moves.recompute:
                made = (TimedCol.REBUILT, t, d, j) not in program.columns
                again = program.column((TimedCol.REBUILT, t, d, j))
                terms.append((again, -1.0))
                if made:
                    self.recompute(again, d)
                    deeper = [e for e in self.graph.nodes[d].deps if e not in counted]
                    self._needs(t, j, again, deeper, counted)
            if self.moves.page and t >= d + 2:
                made = (TimedCol.PAGED_BACK, t, d, j) not in program.columns
                back = program.column((TimedCol.PAGED_BACK, t, d, j))
                terms.append((back, -1.0))
                if made:
                    self.paged_around(back, d, t, j)
            program.row(terms, -math.inf, 0.0)

    def add_time_rows(self, slack_s: float, own_stalls: bool = False) -> None:
        """Page out at most once; stage time beyond computing once (overlap); the deadline's slack.

        `own_stalls` adds, per stage, that its stall is at least the sum of each transfer's own
        stall (its DMA time beyond the stage's compute): `max(0, sum_k a_k - c) >= sum_k max(0,
        a_k - c)` for 0-1 transfers, so the 0-1 program implies it, while its linear relaxation,
        which could otherwise spread one transfer over several stages that each hide a part of
        it, does not.
        """
        program, scale = self.program, self.time_scale
        for outs in self.outs_of.values():
            if len(outs) > 1:
                program.row([(col, 1.0) for col in outs], -math.inf, 1.0)
        if not self.overlap:
            timed = [(col, c / scale) for col, c in self.recomputed if c > 0]
            if timed:
                program.row(timed, -math.inf, slack_s / scale)
            return
        static_cost = self.costs.static_power_w * scale / self.energy_scale
        per_channel = 1.0 / self.costs.dma_channels
        # The time beyond one pass, Y, is at least all recomputation time and at least all stall
        # time (sum_s max(a_s, b_s) >= max(sum a_s, sum b_s)).
        total = program.column((TimedCol.BEYOND,), static_cost, upper=math.inf, integer=False)
        stalls = []
        for s, transfers in sorted(self.transfers_at.items()):
            col = program.column((TimedCol.STAGE_EXTRA, s), upper=math.inf, integer=False)
            stalls.append((col, -1.0))
            compute_s = self.costs.compute_s[s]
            program.row([(col, 1.0)] + [(x, -d * per_channel / scale) for x, d in transfers], -compute_s / scale, math.inf)
            own = [(x, (compute_s - d * per_channel) / scale) for x, d in transfers if d * per_channel > compute_s]
            if own_stalls and own:
                program.row([(col, 1.0), *own], 0.0, math.inf)
        program.row([(total, 1.0), *stalls], 0.0, math.inf)
        recomputed = [(col, -c / scale) for col, c in self.recomputed if c > 0]
        program.row([(total, 1.0), *recomputed], 0.0, math.inf)
        program.row([(total, 1.0)], -math.inf, slack_s / scale)
