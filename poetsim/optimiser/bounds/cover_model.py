"""The eviction cover as a 0-1 program (`program.Program`), stage row by stage row.

Its columns are keyed by a kind (`Col`) and the outputs and stages they concern; which items of
the argument (docs/optimiser.md, "The eviction cover") a program states is its `CoverShape`.
`CoverModel.solve` returns a `CoverSolution`, or None when the cover is infeasible.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.bounds.columns import Col
from poetsim.optimiser.bounds.cover_rows import (
    CoverRow,
    Levels,
    cascade_deadlines,
    counted_at,
    deadline_slack_s,
    next_reader,
    page_in_stall_s,
    page_out_windows,
    restore_costs_j,
)
from poetsim.optimiser.bounds.second_restores import add_second_restores
from poetsim.optimiser.milp.program import FEASIBILITY_TOLERANCE, LOOSER_FEASIBILITY_TOLERANCE, Program
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing

#: Item 7's rows are added only if the stage rows alone take at most this share of the nonzero
#: cap: a program whose stage rows already fill it leaves item 7 too few rows to raise the bound,
#: and solved whole it only repeats the cascade cover's bound, slowly.
SECOND_RESTORE_BASE_SHARE = 0.25
#: A floor on a refining cover's objective (`CoverModel.floor`) sits this share below the bound it
#: comes from, so that the solver's tolerances cannot make the program infeasible.
FLOOR_MARGIN = 1e-7


@dataclass(frozen=True)
class CoverShape:
    """Which items of the argument a cover program states.

    `either` are the outputs that may be both recomputed and paged (`cover_rows.either_outputs`,
    empty for the one-move cover, where x^R_i + x^P_i <= 1 holds for every output: quicker to
    solve, and no bound); `counted` is `counted_at` per row's stage, built once per cover;
    `levels` and `in_levels` are the page-out and page-in stall levels (item 6), and
    `page_out_windows` bounds Y by the page-outs that crowd the stages before each row (item 6). `elastic` adds
    a priced slack to each covering row and prices nothing else (the check of a choice);
    `second_restores` adds item 7's rows until the program has `nonzero_cap` nonzeros.
    """

    cascades: bool
    either: frozenset[int] = frozenset()
    counted: Mapping[int, set[int]] | None = None
    levels: Levels = field(default_factory=dict)
    in_levels: Levels = field(default_factory=dict)
    cascade_page_ins: bool = False
    page_out_windows: bool = False
    elastic: bool = False
    second_restores: bool = False
    nonzero_cap: int | None = None


@dataclass(frozen=True)
class CoverSolution:
    """A cover program's answer: its bound on the energy above keep-all and the choice that attains it.

    `exact` says the choice is proven optimal for the program (else `overhead_j` is the solver's
    dual bound, still valid). `paged_from` is the first stage of each paged output's page-out
    level, `paged_until` the last stage of its page-in level, `stalls` the values of the
    page-in stall columns (s_d and sl_d, scaled) and `beyond_s` that of Y in seconds (None
    without it), which a check of the choice holds it to.
    """

    overhead_j: float
    recomputed: frozenset[int]
    paged: frozenset[int]
    exact: bool
    paged_from: Mapping[int, int] = field(default_factory=dict)
    paged_until: Mapping[int, int] = field(default_factory=dict)
    stalls: Mapping[tuple, float] = field(default_factory=dict)
    beyond_s: float | None = None

    def unproven(self) -> "CoverSolution":
        """The same choice and bound, no longer claimed optimal for the program."""
        return replace(self, exact=False)


class CoverModel:
    """The cover of one problem as a 0-1 program over some of its stage rows (`CoverShape` says which items).

    x^R_i and x^P_i per output and, per item, the columns of `Col`.
    """

    def __init__(
        self,
        graph: TrainingGraph,
        costs: CostTable,
        budgets: Budgets,
        moves: Moves,
        timing: Timing,
        rows: tuple[CoverRow, ...],
        shape: CoverShape,
    ):
        self.graph, self.costs, self.moves, self.shape = graph, costs, moves, shape
        self.cascades = shape.cascades
        # Item 7 (recompute-only): per-row absences b_{t,i}, and the second restores they imply.
        self.second_restores = shape.second_restores and shape.cascades and not moves.page
        self.absent_at: dict[tuple[int, int], int] = {}  # (t, i) -> a_{t,i} or b_{t,i}
        # Under `overlap` with stalls priced: a dead input paged back in for a cascade (q_{t,d})
        # runs in [t+1, J-1] and stalls there (s_d); `reach[t][d]` is that J.
        self.cascade_page_ins = shape.cascade_page_ins and shape.cascades
        self.reach: dict[int, dict[int, int]] = {}
        self.levels, self.in_levels = shape.levels, shape.in_levels
        # Per output with page-in levels: (first, last, w_{i,k,l}) per pair of a page-out level k
        # (first: its first stage, -1 when i has none) and a page-in level l (last: its last row).
        self.pairs: dict[int, list[tuple[int, int, int]]] = {}
        self.counted: Mapping[int, set[int]] = {}
        if shape.cascades:
            self.counted = (
                shape.counted if shape.counted is not None else {row.stage: counted_at(graph, row.stage) for row in rows}
            )
        self.either = shape.either
        self.recompute_j, self.page_j = restore_costs_j(costs, timing)
        self.stall_priced = bool(self.levels or self.in_levels or self.cascade_page_ins or shape.page_out_windows)
        if self.stall_priced:  # static energy is priced on Y instead
            self.recompute_j = tuple(costs.compute_j)
        self.energy_scale = (sum(costs.compute_j) / len(graph)) or 1.0
        self.time_scale = (sum(costs.compute_s) / len(graph)) or 1.0
        self.program = Program()
        self.held: dict[int, list[int]] = {}  # stage -> outputs with an h column there
        # With cascade page-ins: per row, the live inputs of its recomputations that a column
        # p_{t,d} counts absent by paging, and (needy column's key, d, t, the page-in's deadline).
        self.apart: dict[int, set[int]] = {}
        self.feeds: list[tuple[tuple, int, int, int]] = []
        for row in rows:
            self.add_stage(row)
        self.add_feed_rows()
        # Item 7's rows, unless the stage rows alone leave them too little room (then this program,
        # solved whole, would only repeat the cover's bound, slowly).
        cap = shape.nonzero_cap
        self.roomy = cap is None or len(self.program.index) <= SECOND_RESTORE_BASE_SHARE * cap
        if self.second_restores and self.roomy:
            add_second_restores(self.program, self.graph, self.absent_at, self.recompute_j, self.energy_scale, cap)
        dma_s = costs.dma_channels * budgets.runtime_s if Timing(timing) is Timing.OVERLAP else None
        self.add_restore_rows(deadline_slack_s(budgets, costs), dma_s)
        if shape.elastic:  # a slack e_t on each covering row, and it alone costs: the least shortfall
            self.program.cost = [1.0 if key[0] == Col.SLACK else 0.0 for key in self.program.columns]

    def floor(self, overhead_j: float) -> None:
        """Hold the objective to at least `overhead_j`, less a margin for the solver's tolerances."""
        terms = [(col, cost) for col, cost in enumerate(self.program.cost) if cost]
        target = overhead_j / self.energy_scale
        self.program.row(terms, target - FLOOR_MARGIN * (1 + abs(target)), math.inf)

    def page_in_prices(self) -> dict[tuple[int, int], float]:
        """The stall of each page-in level, by (output, its last row), in seconds."""
        return {(i, last): stall for i, levels in self.in_levels.items() for last, stall in levels}

    def fix(self, solution: CoverSolution) -> None:
        """Fix the program's choice columns to a solution's choice, leaving the stages' columns free.

        Every x^R_i, x^P_i, z_{i,k} and w_{i,l} takes the solution's value; each s_d and sl_d is
        held within what the choice paid for those page-ins (its `stalls`, or the price of i's
        page-in pair where the choice had no sl_i: this program moves it to sl_i), and Y within
        the solution's.
        """
        in_price = self.page_in_prices()
        paged_from, paged_until, fed = solution.paged_from, solution.paged_until, solution.stalls
        for key, col in list(self.program.columns.items()):
            kind = key[0]
            if kind == Col.BEYOND and solution.beyond_s is not None:
                self.program.row([(col, 1.0)], 0.0, solution.beyond_s / self.time_scale * (1 + 1e-9) + 1e-9)
                continue
            if kind in (Col.CASCADE_STALL, Col.LIVE_STALL):
                paid = fed.get(key, 0.0)
                if kind == Col.LIVE_STALL and key not in fed and key[1] in paged_until:
                    paid = in_price[key[1], paged_until[key[1]]] / self.time_scale
                self.program.row([(col, 1.0)], 0.0, paid + 1e-9)
                continue
            if kind == Col.RECOMPUTED:
                value = float(key[1] in solution.recomputed)
            elif kind == Col.PAGED:
                value = float(key[1] in solution.paged)
            elif kind == Col.OUT_LEVEL:
                value = float(key[1] in solution.paged and paged_from.get(key[1]) == key[2])
            elif kind == Col.PAIR:
                value = float(
                    key[1] in solution.paged and paged_until.get(key[1]) == key[3] and key[2] in (-1, paged_from.get(key[1]))
                )
            else:
                continue
            self.program.row([(col, 1.0)], value, value)

    def by_paging(self, i: int, t: int) -> list[int]:
        """The columns whose sum says i, a live output at row t, may be absent there by paging.

        x^P_i; with page-out stall levels the z_{i,k} of the levels that begin by t; with page-in
        stall levels the w_{i,k,l} of the pairs whose page-out level begins by t and whose page-in
        level ends at t or later.
        """
        out = self.paged_out_by(i, t)
        if i not in self.in_levels:
            return out
        return [col for first, last, col in self.pairs[i] if first <= t <= last]

    def paged_out_by(self, i: int, t: int) -> list[int]:
        """The columns whose sum says i is paged with its first absence by paging at or before t.

        x^P_i, or with page-out stall levels the z_{i,k} of the levels that begin by t.
        """
        x = self.x(Col.PAGED, i)  # (makes the z and w columns)
        if i not in self.levels:
            return [x]
        return [self.program.columns[Col.OUT_LEVEL, i, first] for first, _ in self.levels[i] if first <= t]

    def x(self, kind: Col, i: int) -> int:
        """x^R_i or x^P_i, priced at one restore.

        x^P_i with page-out stall levels is the sum of its z_{i,k}, and with page-in stall levels at
        least the sum of its w_{i,l}.
        """
        price = self.recompute_j if kind == Col.RECOMPUTED else self.page_j
        made = (kind, i) not in self.program.columns
        col = self.program.column((kind, i), price[i] / self.energy_scale)
        program = self.program
        if made and kind == Col.PAGED and i in self.levels:
            program.row(
                [(col, 1.0)] + [(program.column((Col.OUT_LEVEL, i, first)), -1.0) for first, _ in self.levels[i]], 0.0, 0.0
            )
        if made and kind == Col.PAGED and i in self.in_levels:  # at most one pair, within i's page-out level
            outs = (
                [(first, program.columns[Col.OUT_LEVEL, i, first]) for first, _ in self.levels[i]]
                if i in self.levels
                else [(-1, col)]
            )
            self.pairs[i] = []
            for first, level in outs:
                pairs = [
                    (first, last, program.column((Col.PAIR, i, first, last))) for last, _ in self.in_levels[i] if last >= first
                ]
                program.row([(level, 1.0)] + [(w, -1.0) for _, _, w in pairs], 0.0, math.inf)
                self.pairs[i] += pairs
        return col

    def absence(self, t: int, i: int) -> int:
        """The column that counts i, restored by recomputation with no dead input, absent at row t.

        x^R_i, or with second restores (item 7) b_{t,i} <= x^R_i, i's absence at t alone.
        """
        if not self.second_restores:
            return self.x(Col.RECOMPUTED, i)
        absent = self.program.column((Col.ABSENT_ONCE, t, i))
        self.program.row([(absent, 1.0), (self.x(Col.RECOMPUTED, i), -1.0)], -math.inf, 0.0)
        self.absent_at[t, i] = absent
        return absent

    def held_column(self, t: int, d: int) -> int:
        """h_{t,d}: dead input d held at row t (its bytes count against the row's room)."""
        if (Col.HELD, t, d) not in self.program.columns:
            self.held.setdefault(t, []).append(d)
        return self.program.column((Col.HELD, t, d))

    def add_stage(self, row: CoverRow) -> None:
        """The covering row of one stage, and its cascade rows."""
        t, m, graph, program = row.stage, self.graph.output_bytes, self.graph, self.program
        counted = self.counted.get(t, set())
        if self.cascade_page_ins:
            self.reach[t] = cascade_deadlines(graph, t, row.by_recompute, counted)
            self._feeds(row, counted)
        pageable = set(row.by_paging)
        terms = []
        paged_at: dict[int, int] = {}  # i -> the column that says i is absent at t by paging
        for i in row.by_recompute:
            dead = [d for d in graph.nodes[i].deps if d not in counted] if self.cascades else []
            either = i in self.either and i in pageable
            if not (dead or either):
                terms.append((self.absence(t, i), m[i]))
                continue
            absent = program.column((Col.ABSENT, t, i))  # absent at t, restored by recomputation
            self.absent_at[t, i] = absent
            terms.append((absent, m[i]))
            program.row([(absent, 1.0), (self.x(Col.RECOMPUTED, i), -1.0)], -math.inf, 0.0)
            if dead:
                self._needs(t, absent, dead, counted)
            if either:  # or absent at t and restored by a page-in: it needs nothing of d
                paged = paged_at[i] = self._paged_at(Col.ABSENT_PAGED, t, i)
                terms.append((paged, m[i]))
                program.row([(absent, 1.0), (paged, 1.0)], -math.inf, 1.0)
                pageable.discard(i)
        terms += self._paging_terms(t, [i for i in row.by_paging if i in pageable], paged_at)
        terms += [(program.columns[Col.HELD, t, d], -m[d]) for d in self.held.get(t, ())]
        if self.shape.page_out_windows:
            self._page_out_window_rows(t, paged_at)
        if self.shape.elastic:
            terms.append((program.column((Col.SLACK, t), upper=math.inf, integer=False), row.excess_bytes))
        program.row([(col, coef / row.excess_bytes) for col, coef in terms], 1.0, math.inf)

    def _paging_terms(self, t: int, outputs: list[int], paged_at: dict[int, int]) -> list[tuple[int, int]]:
        """The covering row's terms for outputs absent at t by paging alone, their columns put in `paged_at`.

        A live input of a recomputation has p_{t,i}; with page-out windows every other output has
        pa_{t,i} (each at most the columns of `by_paging`); else those columns count themselves.
        """
        m, terms = self.graph.output_bytes, []
        for i in outputs:
            if i in self.apart.get(t, ()):
                paged_at[i] = self._paged_at(Col.LIVE_ABSENT, t, i)
            elif self.shape.page_out_windows:
                paged_at[i] = self._paged_at(Col.PAGED_AT, t, i)
            else:
                terms += [(col, m[i]) for col in self.by_paging(i, t)]
                continue
            terms.append((paged_at[i], m[i]))
        return terms

    def _paged_at(self, kind: Col, t: int, i: int) -> int:
        """A column of `kind` that says i is absent at t by paging: at most the columns of `by_paging`."""
        col = self.program.column((kind, t, i))
        self.program.row([(col, 1.0)] + [(z, -1.0) for z in self.by_paging(i, t)], -math.inf, 0.0)
        return col

    def beyond(self) -> int:
        """Y: the time beyond one plain pass, priced at static power (item 6)."""
        price = self.costs.static_power_w * self.time_scale / self.energy_scale
        return self.program.column((Col.BEYOND,), price, upper=math.inf, integer=False)

    def _page_out_window_rows(self, t: int, paged_at: Mapping[int, int]) -> None:
        """Y >= the page-outs of the outputs absent by paging at row t within a window before t, less its compute (item 6).

        `paged_at` holds those outputs' columns (pa_{t,i}, p_{t,i} or ap_{t,i}, each 1 only if i is
        absent at t by paging). One window: the one their page-outs, all counted, pass by the most
        (every window gives a valid row; one keeps the program's size linear in the outputs).
        """
        windows = page_out_windows(self.costs, t, paged_at)
        if not windows:
            return
        window_s, part = max(windows, key=lambda window: sum(s for _, s in window[1]) - window[0])
        terms = [(paged_at[i], -seconds / self.time_scale) for i, seconds in part]
        self.program.row([(self.beyond(), 1.0), *terms], -window_s / self.time_scale, math.inf)

    def _feeds(self, row: CoverRow, counted: set[int]) -> None:
        """The live inputs a row's recomputations read, each with the deadline of its page-in (item 6).

        The live inputs d, pageable at row t, of the recomputations the row's columns a_{t,i} and
        r_{t,e} stand for, each with the deadline of the page-in that would bring d back (item 6,
        *live inputs*): the recomputation's own (i's next reader, or `reach` for e), and no later
        than d's next reader.
        """
        graph, t, pageable = self.graph, row.stage, set(row.by_paging)
        deps = [node.deps for node in graph.nodes]
        needy = [
            ((Col.ABSENT, t, i), i, next_reader(graph, i, t))
            for i in row.by_recompute
            if any(d not in counted for d in deps[i]) or (i in self.either and i in pageable)
        ]
        needy += [((Col.REBUILT, t, e), e, due) for e, due in self.reach[t].items()]
        for key, i, due in needy:
            for d in deps[i]:
                if d in pageable:
                    self.apart.setdefault(t, set()).add(d)
                    self.feeds.append((key, d, t, min(due, next_reader(graph, d, t))))

    def add_feed_rows(self) -> None:
        """sl_d >= the stall of a page-in of d within [t+1, J-1] x (needy + p_{t,d} - 1).

        A recomputation after row t reads d, which row t counts absent by paging (item 6).
        """
        program, costs = self.program, self.costs
        for key, d, t, due in self.feeds:
            needy = program.columns.get(key)
            absent = program.columns.get((Col.LIVE_ABSENT, t, d), program.columns.get((Col.ABSENT_PAGED, t, d)))
            if needy is None or absent is None:
                continue
            if due - 1 < t + 1:  # no stage to page d back in: not both
                program.row([(needy, 1.0), (absent, 1.0)], -math.inf, 1.0)
                continue
            stall_s = page_in_stall_s(costs, d, t + 1, due - 1)
            if stall_s > 0.0:
                scaled = stall_s / self.time_scale
                live = program.column((Col.LIVE_STALL, d), upper=math.inf, integer=False)
                program.row([(live, 1.0), (needy, -scaled), (absent, -scaled)], -scaled, math.inf)

    def _needs(self, t: int, needy: int, dead: list[int], counted: set[int]) -> None:
        """A recomputation after stage t needs each dead input d: held at t, or restored after t."""
        program = self.program
        for d in dead:
            first = (Col.HELD, t, d) not in program.columns
            terms = [(needy, 1.0), (self.held_column(t, d), -1.0)]
            if self.moves.recompute:
                again = program.column((Col.REBUILT, t, d))
                terms.append((again, -1.0))
                if first:
                    program.row([(again, 1.0), (self.x(Col.RECOMPUTED, d), -1.0)], -math.inf, 0.0)
                    deeper = [e for e in self.graph.nodes[d].deps if e not in counted]
                    if deeper:
                        self._needs(t, again, deeper, counted)
            if self.moves.page and t >= d + 2:  # (d is dead at t: no page-in level of its applies)
                if not self.cascade_page_ins:
                    terms += [(col, -1.0) for col in self.paged_out_by(d, t)]
                else:
                    back = self.paged_back(t, d)
                    if back is not None:
                        terms.append((back, -1.0))
            program.row(terms, -math.inf, 0.0)

    def paged_back(self, t: int, d: int) -> int | None:
        """q_{t,d}: dead input d, absent at t, paged back in for a recomputation due by J (item 6, *cascades' page-ins*).

        None when no page-in fits in [t+1, J-1].
        """
        program, key = self.program, (Col.PAGED_BACK, t, d)
        if key in program.columns:
            return program.columns[key]
        due = self.reach[t][d]
        if due - 1 < t + 1:
            return None
        back = program.column(key)
        program.row([(back, 1.0)] + [(col, -1.0) for col in self.paged_out_by(d, t)], -math.inf, 0.0)
        stall_s = page_in_stall_s(self.costs, d, t + 1, due - 1)
        if stall_s > 0.0:
            stalled = program.column((Col.CASCADE_STALL, d), upper=math.inf, integer=False)
            program.row([(stalled, 1.0), (back, -stall_s / self.time_scale)], 0.0, math.inf)
        return back

    def add_restore_rows(self, slack_s: float, dma_s: float | None) -> None:
        """The rows on restores: one move per output, and the time the restores take within the deadline.

        x^R_i + x^P_i <= 1, the recomputation time within the deadline's slack, and (under
        `overlap`, `dma_s` given) the transfer time within the deadline times the DMA channels; with
        stalls priced, Y at least the recomputation time and at least the stall time.
        """
        columns, costs = self.program.columns, self.costs
        for key, col in list(columns.items()):
            if key[0] == Col.RECOMPUTED and (Col.PAGED, key[1]) in columns and key[1] not in self.either:
                self.program.row([(col, 1.0), (columns[Col.PAGED, key[1]], 1.0)], -math.inf, 1.0)
        timed = [
            (col, costs.compute_s[key[1]] / self.time_scale)
            for key, col in columns.items()
            if key[0] in (Col.RECOMPUTED, Col.TWICE) and costs.compute_s[key[1]] > 0
        ]
        if timed:
            self.program.row(timed, -math.inf, slack_s / self.time_scale)
        moved = [
            (col, (costs.page_out_s[key[1]] + costs.page_in_s[key[1]]) / self.time_scale)
            for key, col in columns.items()
            if key[0] == Col.PAGED
        ]
        if dma_s is not None and moved:
            self.program.row(moved, -math.inf, dma_s / self.time_scale)
        stalled = self._stall_terms()
        if self.stall_priced:  # Y: the time beyond a plain pass, at least the recomputations and the stalls
            beyond = self.beyond()
            for part in (timed, stalled):
                if part:
                    self.program.row([(beyond, 1.0)] + [(col, -c) for col, c in part], 0.0, math.inf)
            self.program.row([(beyond, 1.0)], -math.inf, slack_s / self.time_scale)

    def _stall_terms(self) -> list[tuple[int, float]]:
        """The columns that stall, each with its stall in model units, for Y's row on stalls.

        A page-out level or a page-in pair costs its stall; where the pair's output also has a
        live input's stall column sl_i (maybe for the same page-in), a row holds sl_i at least at
        the pair's price instead, so the largest counts once. Cascade and live stalls count as
        they are.
        """
        columns = self.program.columns
        stall_s: dict[tuple, float] = {
            (Col.OUT_LEVEL, i, first): stall for i, levels in self.levels.items() for first, stall in levels
        }
        page_in_s = self.page_in_prices()
        stall_s.update(
            {
                (Col.PAIR, i, first, last): page_in_s[i, last]  # a pair's price: its page-in level's
                for i, pairs in self.pairs.items()
                for first, last, _ in pairs
            }
        )
        stalled: list[tuple[int, float]] = []
        for key, col in list(columns.items()):
            price = stall_s.get(key, 0.0)
            if price <= 0:
                continue
            if key[0] == Col.PAIR and (Col.LIVE_STALL, key[1]) in columns:  # (maybe the same page-in: the largest counts)
                self.program.row([(columns[Col.LIVE_STALL, key[1]], 1.0), (col, -price / self.time_scale)], 0.0, math.inf)
            else:
                stalled.append((col, price / self.time_scale))
        stalled += [(col, 1.0) for key, col in columns.items() if key[0] in (Col.CASCADE_STALL, Col.LIVE_STALL)]
        return stalled

    def solve(self, allowance: Allowance | None) -> CoverSolution | None:
        """The program's optimum within `allowance`, or None when the cover is infeasible.

        When the budget ends first, the solution holds the program's dual bound and its best choice
        so far.
        """
        tolerance = FEASIBILITY_TOLERANCE if self.cascades else LOOSER_FEASIBILITY_TOLERANCE
        solved = self.program.solve(allowance, tolerance=tolerance)
        if solved.infeasible:
            return None
        values = solved.values or {}
        chosen = [key for key, value in values.items() if key[0] in (Col.RECOMPUTED, Col.PAGED) and value > 0.5]
        return CoverSolution(
            overhead_j=solved.bound * self.energy_scale,
            recomputed=frozenset(i for kind, i in chosen if kind == Col.RECOMPUTED),
            paged=frozenset(i for kind, i in chosen if kind == Col.PAGED),
            exact=solved.exact,
            paged_from={key[1]: key[2] for key, value in values.items() if key[0] == Col.OUT_LEVEL and value > 0.5},
            paged_until={key[1]: key[3] for key, value in values.items() if key[0] == Col.PAIR and value > 0.5},
            stalls={key: value for key, value in values.items() if key[0] in (Col.CASCADE_STALL, Col.LIVE_STALL)},
            beyond_s=values[Col.BEYOND,] * self.time_scale if (Col.BEYOND,) in values else None,
        )
