"""The eviction cover with stages: when each restore happens, and what its transfers cost in time.

The plain cover (`cover`) charges one restore per output and no time for paging. Under `overlap`
timing that leaves out what often decides the optimum: a page-out must run in a stage before
the output's absence and a page-in in one after it, and a stage whose transfers outlast its
compute stalls, which costs static energy. Several outputs often have to leave RAM within a few
short stages, and their transfers then cannot all hide. This cover states each restore as an
event in a stage, so it can count those stalls; it also counts every restore an output needs
(one per stretch it is absent over), not one in all.

Why it is still a lower bound: take any schedule within the budgets that, like every MILP
solution, pages each output out at most once (a second page-out is never needed: storage keeps
its copy). Set p_{i,s} = 1 when it recomputes i in stage s, o_{i,s} for a page-out and n_{i,s}
for a page-in; set a^R_{t,i} = 1 when i is absent right after `Compute(t)` (in the sense of
`cover`) and some recomputation of i comes in (t, j], j its next reader after t; else, if i is
absent at t, a^P_{t,i} = 1. Then, by the argument of `cover`:
- a^R_{t,i} <= sum p_{i,s} over s in (t, j];
- a^P_{t,i} <= sum o_{i,s} over s in [i+1, t-1] (a page-out in stage t holds i at t under
  `overlap`; under `compute-only` s = t is allowed, as a relaxation) and a^P_{t,i} <= sum n_{i,s}
  over s in [t+1, j-1] under `overlap` ([t, j-1] under `compute-only`);
- the covering row of stage t and the cascade rows hold as in `cover`, with the restore of a
  dead input d counted among d's own events in (t, j];
- the time beyond computing t once in stage s is max(recomputation time, DMA time / channels -
  c_s) under `overlap`, so a column X_s at least both of these, summed, is at most the deadline's
  slack and costs static power; under `compute-only` the recomputation time is within the slack;
- the energy above keep-all is at least sum e_i p + p_out o + p_in n (+ static power x sum X_s).
Events of outputs the cover does not consider, and time outside the stages it considers, only
add. So the optimum of this program is a lower bound on the MILP's optimum; its best solution
also says in which stage to page and to recompute, from which `cover_plan` builds a schedule.

It is larger than the plain cover (a column per output and stage in each window), so `optimise`
solves it only where the plain cover's plan does not meet the plain bound, within a time limit;
a limit that ends it early still leaves a valid (HiGHS dual) bound.
"""

import bisect
import math
from dataclasses import replace
from time import perf_counter

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.bounds.cover import CoverBound, CoverRow, counted_at, cover_rows, deadline_slack_s
from poetsim.optimiser.milp.program import REL_GAP, Program
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing
from poetsim.tolerances import exceeds

#: A placement is a schedule, not a bound: it is solved to this gap, which is far quicker.
PLACEMENT_REL_GAP = 1e-4


def placement(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, plain: CoverBound, time_limit_s: float | None = None
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
    # bring every output's paging events (ResNet-18 CIFAR, TX2, 50 %: 6.8 s against 0.3 s).
    moves = Moves(recompute=plain.moves.recompute and bool(plain.recomputed), page=plain.moves.page and bool(plain.paged))
    found = timed_cover_bound(graph, costs, budgets, moves, timing, time_limit_s, plain.bound_j, rows, rel_gap=PLACEMENT_REL_GAP)
    return replace(found, rows=plain.rows, kind="placement")


def stalled(graph: TrainingGraph, costs: CostTable, cover: CoverBound) -> frozenset[int]:
    """The outputs whose transfers, as the timed cover placed them, outlast their stage's compute."""
    dma_s: dict[int, float] = {}
    nodes: dict[int, list[int]] = {}
    for kind, i, s in cover.events:
        if kind in ("o", "n"):
            dma_s[s] = dma_s.get(s, 0.0) + (costs.page_out_s if kind == "o" else costs.page_in_s)[i]
            nodes.setdefault(s, []).append(i)
    return frozenset(i for s, total in dma_s.items() if exceeds(total / costs.dma_channels, costs.compute_s[s]) for i in nodes[s])


def timed_cover_bound(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    time_limit_s: float | None = None,
    enough_j: float | None = None,
    rows: tuple[CoverRow, ...] | None = None,
    start: tuple[tuple[str, int, int], ...] = (),
    staged: bool = False,
    rel_gap: float = REL_GAP,
) -> CoverBound:
    """Solve the stage-indexed eviction cover (module docstring).

    `enough_j`, a proven lower bound on the total energy (the plain cover's), stops the solve
    as soon as it finds events that cost no more: they are then optimal. `rows` are the plain
    cover's if given; `start` gives events of a schedule to start from (another cover's).
    """
    timing = Timing(timing)
    began = perf_counter()
    overlap = timing is Timing.OVERLAP
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing) if rows is None else rows
    model = _TimedModel(graph, costs, moves, overlap, staged)
    for row in rows:
        model.add_stage(row)
    model.add_time_rows(deadline_slack_s(budgets, costs))
    enough = None if enough_j is None else (enough_j - keep_all_j) / model.energy_scale
    left_s = None if time_limit_s is None else time_limit_s - (perf_counter() - began)
    solved = model.program.solve(left_s, enough, {event: 1.0 for event in start}, rel_gap)
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
            perf_counter() - began,
            "infeasible: no placement of restores in stages covers the RAM excess within the deadline",
            kind="timed cover",
        )
    # Events: page-outs, page-ins, recomputations by stage ("p"), or, where recomputations have no
    # stage, the stages at which an output is absent to be recomputed ("a").
    events = tuple(
        sorted(
            (key[0] if key[0] != "aR" else "a", key[1], key[2]) if key[0] != "aR" else ("a", key[2], key[1])
            for key, value in (solved.values or {}).items()
            if key[0] in ("p", "o", "n", "aR") and value > 0.5
        )
    )
    return CoverBound(
        moves,
        timing,
        keep_all_j,
        keep_all_j + solved.bound * model.energy_scale,
        frozenset(i for kind, i, _ in events if kind in "pa"),
        frozenset(i for kind, i, _ in events if kind == "n"),
        False,
        solved.exact,
        rows,
        perf_counter() - began,
        "",
        kind="timed cover",
        events=events,
    )


class _TimedModel:
    """The stage-indexed cover as a mixed 0-1 program (`program.Program`).

    Columns: events ("p" | "o" | "n", i, s); absences ("aR" | "aP", t, i); cascade columns
    ("h", t, d) (d held at t) and ("rR" | "rP", t, d, j) (d absent at t and restored before j);
    ("X", s) the time stage s takes beyond computing s once (overlap only).
    """

    def __init__(self, graph: TrainingGraph, costs: CostTable, moves: Moves, overlap: bool, staged: bool):
        self.graph, self.costs, self.moves, self.staged = graph, costs, moves, staged
        self.late = 1 if overlap else 0  # overlap: a transfer in stage t holds i at t
        self.overlap = overlap
        self.energy_scale = (sum(costs.compute_j) / len(graph)) or 1.0
        self.time_scale = (sum(costs.compute_s) / len(graph)) or 1.0
        self.program = Program()
        self.held: dict[int, list[int]] = {}
        self.recomputes_at: dict[int, list[tuple[int, float]]] = {}
        self.transfers_at: dict[int, list[tuple[int, float]]] = {}
        self.outs_of: dict[int, list[int]] = {}
        self.prefix_end: dict[int, int] = {}  # i -> last stage with a running sum
        self.suffix_start: dict[tuple[str, int, int], int] = {}  # (kind, i, last) -> first such stage

    def event(self, kind: str, i: int, s: int) -> int:
        """The column of one recomputation ("p"), page-out ("o") or page-in ("n") of i in stage s."""
        key = (kind, i, s)
        if key in self.program.columns:
            return self.program.columns[key]
        c = self.costs
        price = {"p": c.compute_j, "o": c.page_out_j, "n": c.page_in_j}[kind][i]
        col = self.program.column(key, price / self.energy_scale)
        if kind == "p":
            self.recomputes_at.setdefault(s, []).append((col, c.compute_s[i]))
        else:
            self.transfers_at.setdefault(s, []).append((col, (c.page_out_s if kind == "o" else c.page_in_s)[i]))
            if kind == "o":
                self.outs_of.setdefault(i, []).append(col)
        return col

    def within(self, absent: int, kind: str, i: int, first: int, last: int) -> None:
        """absent <= the sum of i's events of `kind` in stages first..last (0 if there are none).

        Recomputations that are not `staged` are one column per output, as in the plain cover.
        """
        if kind == "p" and not self.staged:
            if ("R", i) not in self.program.columns:
                self.recomputes_at.setdefault(-1, []).append(
                    (self.program.column(("R", i), self.costs.compute_j[i] / self.energy_scale), self.costs.compute_s[i])
                )
            self.program.row([(absent, 1.0), (self.program.columns["R", i], -1.0)], -math.inf, 0.0)
            return
        if first > last:
            self.program.row([(absent, 1.0)], -math.inf, 0.0)
            return
        total = self._prefix(i, last) if kind == "o" else self._suffix(kind, i, first, last)
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
            col = program.column(("O", i, s), upper=math.inf, integer=False)
            terms = [(col, 1.0), (self.event("o", i, s), -1.0)]
            if s > i + 1:
                terms.append((program.columns["O", i, s - 1], -1.0))
            program.row(terms, 0.0, 0.0)
        self.prefix_end[i] = max(s, self.prefix_end.get(i, i))
        return program.columns["O", i, last]

    def _suffix(self, kind: str, i: int, first: int, last: int) -> int:
        """A column equal to i's events of `kind` in stages first..last (windows sharing their end)."""
        program = self.program
        s = self.suffix_start.get((kind, i, last), last + 1)
        while s > first:
            s -= 1
            col = program.column(("W", kind, i, last, s), upper=math.inf, integer=False)
            terms = [(col, 1.0), (self.event(kind, i, s), -1.0)]
            if s < last:
                terms.append((program.columns["W", kind, i, last, s + 1], -1.0))
            program.row(terms, 0.0, 0.0)
        self.suffix_start[kind, i, last] = min(s, self.suffix_start.get((kind, i, last), last + 1))
        return program.columns["W", kind, i, last, first]

    def paged_around(self, absent: int, i: int, t: int, j: int) -> None:
        """Absent at t by paging: a page-out before t and a page-in after it, before reader j."""
        self.within(absent, "o", i, i + 1, t - self.late)
        self.within(absent, "n", i, t + self.late, j - 1)

    def add_stage(self, row: CoverRow) -> None:
        """The covering row of stage t, its absences, and their cascades."""
        t, m, graph, program = row.stage, self.graph.output_bytes, self.graph, self.program
        counted = counted_at(graph, t)
        terms = []
        by_recompute = set(row.by_recompute)
        for i in row.by_recompute:
            j = _next_reader(graph, i, t)
            absent = program.column(("aR", t, i))
            terms.append((absent, m[i]))
            self.within(absent, "p", i, t + 1, j)
            dead = [d for d in graph.nodes[i].deps if d not in counted]
            self._needs(t, j, absent, dead, counted)
        for i in row.by_paging:
            j = _next_reader(graph, i, t)
            absent = program.column(("aP", t, i))
            terms.append((absent, m[i]))
            self.paged_around(absent, i, t, j)
            if i in by_recompute:
                program.row([(absent, 1.0), (program.columns["aR", t, i], 1.0)], -math.inf, 1.0)
        terms += [(program.columns["h", t, d], -m[d]) for d in self.held.get(t, ())]
        program.row([(col, coef / row.excess_bytes) for col, coef in terms], 1.0, math.inf)

    def _needs(self, t: int, j: int, needy: int, dead: list[int], counted: set[int]) -> None:
        """A recomputation in (t, j] needs each dead input d: held at t, or restored in (t, j]."""
        program = self.program
        for d in dead:
            if ("h", t, d) not in program.columns:
                self.held.setdefault(t, []).append(d)
            terms = [(needy, 1.0), (program.column(("h", t, d)), -1.0)]
            if self.moves.recompute:
                made = ("rR", t, d, j) not in program.columns
                again = program.column(("rR", t, d, j))
                terms.append((again, -1.0))
                if made:
                    self.within(again, "p", d, t + 1, j)
                    deeper = [e for e in self.graph.nodes[d].deps if e not in counted]
                    self._needs(t, j, again, deeper, counted)
            if self.moves.page and t >= d + 2:
                made = ("rP", t, d, j) not in program.columns
                back = program.column(("rP", t, d, j))
                terms.append((back, -1.0))
                if made:
                    self.paged_around(back, d, t, j)
            program.row(terms, -math.inf, 0.0)

    def add_time_rows(self, slack_s: float) -> None:
        """Page out at most once; stage time beyond computing once (overlap); the deadline's slack."""
        program, scale = self.program, self.time_scale
        for outs in self.outs_of.values():
            if len(outs) > 1:
                program.row([(col, 1.0) for col in outs], -math.inf, 1.0)
        if not self.overlap:
            timed = [(col, c / scale) for cols in self.recomputes_at.values() for col, c in cols if c > 0]
            if timed:
                program.row(timed, -math.inf, slack_s / scale)
            return
        static_cost = self.costs.static_power_w * scale / self.energy_scale
        per_channel = 1.0 / self.costs.dma_channels
        if self.staged:
            extra = []
            for s in sorted(set(self.recomputes_at) | set(self.transfers_at)):
                col = program.column(("X", s), static_cost, upper=math.inf, integer=False)
                extra.append((col, 1.0))
                if s in self.recomputes_at:
                    program.row([(col, 1.0)] + [(p, -c / scale) for p, c in self.recomputes_at[s]], 0.0, math.inf)
                if s in self.transfers_at:
                    program.row(
                        [(col, 1.0)] + [(x, -d * per_channel / scale) for x, d in self.transfers_at[s]],
                        -self.costs.compute_s[s] / scale,
                        math.inf,
                    )
            if extra:
                program.row(extra, -math.inf, slack_s / scale)
            return
        # Recomputations in no stage: the time beyond one pass, Y, is at least all recomputation
        # time and at least all stall time (sum_s max(a_s, b_s) >= max(sum a_s, sum b_s)).
        total = program.column(("Y",), static_cost, upper=math.inf, integer=False)
        stalls = []
        for s, transfers in sorted(self.transfers_at.items()):
            col = program.column(("X", s), upper=math.inf, integer=False)
            stalls.append((col, -1.0))
            program.row(
                [(col, 1.0)] + [(x, -d * per_channel / scale) for x, d in transfers], -self.costs.compute_s[s] / scale, math.inf
            )
        program.row([(total, 1.0)] + stalls, 0.0, math.inf)
        recomputed = [(col, -c / scale) for cols in self.recomputes_at.values() for col, c in cols if c > 0]
        program.row([(total, 1.0)] + recomputed, 0.0, math.inf)
        program.row([(total, 1.0)], -math.inf, slack_s / scale)


def _next_reader(graph: TrainingGraph, i: int, t: int) -> int:
    """The first node after stage t that reads i (the cover only considers i with one)."""
    readers = graph.consumers[i]
    return readers[bisect.bisect_right(readers, t)]
