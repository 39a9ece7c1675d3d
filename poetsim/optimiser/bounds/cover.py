"""The eviction-cover lower bound: a small 0-1 program whose optimum no schedule can beat.

The stage MILP's LP relaxation is weak because it can keep an output "half" in RAM and pay half
of restoring it. This bound cannot: it asks only which outputs are ever restored, and by which
move. Before it was built here, the team measured it on the POET authors' 193 published cases:
never above a proven optimum, equal to it in 167 of 180 feasible cases.

Why it is a lower bound, under poetsim's own semantics (`poetsim.schedule.model`: frees come right after
a compute that reads the output, or at the stage end; a page-out is issued in a stage whose start
finds the output resident; a page-in is issued in a stage, usable from the next; every input of a
compute is resident when it runs):

1. *What must be absent.* Right after `Compute(t)` in stage t, RAM holds t's output and all of
   t's inputs. Every other output i < t that some node j > t still reads (the set `L_t`) is
   either held then or not: call it *absent at t* if its bytes are not counted. So
   `excess_t = m_t + sum(inputs of t) + sum_{i in L_t} m_i - budget` bytes of `L_t` are absent
   at t, in every schedule within the budget (held bytes of anything else only add).
2. *What absence costs.* Let j be the first reader of i after t. i is resident when j runs, so
   between `Compute(t)` and `Compute(j)` something restores it: a recomputation of i in a stage
   of (t, j], costing at least i's compute energy e_i (and its compute time c_i), or a page-in of
   i, which needs a copy on storage and hence one page-out before it: at least p_out_i + p_in_i.
   However often i is absent, at least one of these happens once. So a schedule defines
   x^R_i = 1 if it ever recomputes i, else x^P_i = 1 if it ever pages i in; its energy above
   keep-all is at least sum e_i x^R_i + (p_out_i + p_in_i) x^P_i, and x^R_i + x^P_i <= 1
   (with cascades, item 5 maps some outputs otherwise).
3. *When paging can make i absent.* If i is never recomputed, it is resident from its own stage
   on until a first page-out, issued in a stage s >= i+1 whose start finds it resident (an
   output freed before any copy exists could never come back). Within stage s it is held at
   `Compute(s)`: it can be freed mid-stage only after a reader k < s is recomputed there, and
   no reader k lies strictly between i and i+1; under `overlap` a page-out holds its buffer to
   the stage end anyway. So paging alone makes i absent only from stage i+2 on. Under `overlap`
   a page-in holds RAM from the start of the stage that issues it, and one issued in stage t
   would hold i at t; the page-in for reader j must then come in a stage of [t+1, j-1], so
   paging can make i absent at t only if t <= j-2. Under `compute-only` a page-in takes RAM
   from the next stage, so t <= j-1, which always holds. Recomputation can make i absent from
   stage i+1 on (i freed at the end of its own stage).
4. *Time.* Under `compute-only` the deadline counts every computation's time; under `overlap`
   a stage lasts max(compute, DMA / channels) >= its compute time. Either way a schedule's
   runtime is at least one plain pass plus sum c_i x^R_i, so sum c_i x^R_i <= runtime budget -
   plain pass (the knapsack row). Under `overlap` the energy includes static power x runtime,
   so x^R_i also costs static_power_w x c_i. Paging time can hide behind compute, but not
   beyond it: under `overlap` each stage also lasts at least its DMA time / channels, so the
   runtime is at least the whole DMA time / channels, and x^P_i's one page-out and one page-in
   give sum (tout_i + tin_i) x^P_i <= channels x runtime budget (the transfer row). On the
   Jetson TX2, whose eMMC moves a 2 MB tensor out and back in about 40 ms against a 139 ms
   pass, this row alone proves paging-only infeasible at 70 % RAM. Under `compute-only`
   transfers take no time, and there is no such row.
5. *Cascades* (`cascades=True`). Recomputing i in (t, j] needs each input d of i resident at
   that moment. An input d that the row of stage t does not count (d is not t, not an input of
   t and not in `L_t`: its last reader was before t) is then either held at `Compute(t)`, and
   its bytes count against the room i's absence makes, or absent at t and itself restored in
   (t, j], by recomputation (whose own dead inputs recurse) or by paging. Per stage this is
   a_{t,i} (i absent at t, to be recomputed) <= h_{t,d} + r_{t,d} + x^P_d for each such d, with
   a_{t,i} <= x^R_i, r_{t,d} <= x^R_d, and the covering row counting m_i a_{t,i} - m_d h_{t,d}.
   On ResNet-style graphs (a ReLU whose input, a BatchNorm output, nothing else reads) it is
   what makes the bound right. Here a schedule that both recomputes and pages i no longer maps
   to x^R_i alone: an absence of i that a page-in ends owes nothing to i's dead inputs, so
   counting it as a_{t,i} could demand a restore of d the schedule never makes (an 11-node case
   in tests/test_cover.py: optimum 2 J, a cover that forbade both moves 11 J). So for every
   output that a row, or a cascade's need, may restore by paging while its recomputation there
   needs a dead input (`_either`), x^R_i + x^P_i <= 1 is dropped: x^R_i says "ever
   recomputed", x^P_i "ever paged in", and in each row where paging can make i absent its
   absence is a_{t,i} (ended by a recomputation, with the rows above) or ap_{t,i} <= x^P_i
   (ended by a page-in, owing nothing), a_{t,i} + ap_{t,i} <= 1. Every schedule then satisfies
   the rows with its own x, so the bound stays valid.

6. *Stalls* (`stalls=True`, `overlap` only). *Page-outs.* A page-out of i runs in a stage s of
   [i+1, e-1], e the first stage row at which i is absent by paging (item 3), and stage s lasts
   at least tout_i / channels: at least g_i(e) = max(0, tout_i / channels - max c_s over
   [i+1, e-1]) beyond its plain compute. g_i falls as e grows, in steps (its levels); a column
   z_{i,k} per level k, with x^P_i = sum_k z_{i,k}, says which level holds i's first absence
   by paging, and then i counts by paging only in rows at or after that level's first stage.
   Several page-outs in one stage stall at least the sum of their own stalls (for c_s >= 0,
   max(0, a + b - c) >= max(0, a - c) + max(0, b - c)), so the stall time is at least
   sum_k g z. A stage's time beyond its plain compute is max(its recomputations, its DMA time /
   channels - c_s), and a sum of maxima is at least the maximum of the sums, so a column Y at
   least both the recomputation time (sum c_i x^R_i) and the stall time, within the slack,
   priced at static power, replaces the static part of x^R's price. On ResNet-18 (ImageNet,
   batch 1, Pi, 70 % RAM, 1.2x, paging-only) the plain cover's choice pages `conv1`'s and
   `relu`'s outputs, whose page-outs stall wherever they run; with stalls the bound rises from
   0.0633446 to 0.0633588 J above keep-all, the optimum.
   *Page-ins* (`page_in_stalls`). Let T be the last stage row at which i, live there (in
   `L_T`), is absent by paging. The page-in that ends that absence is a transfer of its own,
   distinct from the page-out, and runs in a stage of [T+1, j-1], j i's next reader after T
   (item 3), so it stalls at least h_i(T) = max(0, tin_i / channels - max c_s over [T+1, j-1]).
   Its levels are the runs of consecutive rows of equal h_i (`page_in_levels`), each priced at
   its h_i. A column w_{i,k,l} per pair of a page-out level k (first stage e_k) and a page-in
   level l (last row L_l) with e_k <= L_l, at most one per level (sum_l w_{i,k,l} <= z_{i,k},
   or <= x^P_i when i has no page-out levels), says i counts by paging in row t only when
   e_k <= t <= L_l. A schedule whose absences of i by paging are all at rows where i is dead
   (a cascade's inputs) picks no pair and counts i in no live row, which is what it does.
   Its stall joins the same sum: Y >= sum g z + sum h w.
   *Cascades' page-ins* (`cascade_page_ins`, with page-in stalls). A dead input d that a
   recomputation after row t needs (item 5), neither held at t nor recomputed, is paged back in.
   That recomputation comes by J, the next reader after t of the output the cascade restores,
   and a page-in is usable from the stage after it is issued and holds RAM from the start of
   it (d is not held at t), so it is issued in [t+1, J-1]: a column q_{t,d} <= the page-out
   columns of d, none when that window is empty, and a stall of at least
   max(0, tin_d / channels - max c_s over [t+1, J-1]). One page-in may serve several rows, so
   a column s_d is at least each such stall times q_{t,d}, and joins the sum once.
   *Live inputs.* A recomputation that a column a_{t,i} or r_{t,e} stands for runs in a stage
   u <= J and reads each input d then; d is resident at the start of stage u, hence counted at
   row u-1 >= t. If row t counts a live input d absent by paging (a column p_{t,d} <= d's
   paging columns there, taking their place in the row; or ap_{t,d}), the page-in that ends
   that absence is issued in [t+1, u-1], and also before d's own next reader: within
   [t+1, min(J, next reader) - 1]. When that is empty both cannot be 1; else a column sl_d is
   at least its stall times (needy + p_{t,d} - 1). The page-in a pair prices (above) may be
   the same transfer, so for such outputs the pair's price goes to sl_d too (the largest
   counts). The windows of s_d lie after d's last reader and those of sl_d and the pairs
   before it, so s_d and sl_d are different page-ins and both join the sum. On the ResNet-18
   study's hybrid point at 25 % (batch 8, Pi, 1.2x) the cover chose to rebuild a ReLU output
   from a BatchNorm output paged back in just before the ReLU's reader, or from a convolution
   output whose own page-in it hid behind a later stage; priced, the bound rises from 1.321 to
   1.661 J above keep-all.

7. *Second restores* (`second_restore_bound`, recompute-only). Items 1-2 pay each output once
   however many of its absences there are. An output o that is absent at row t, read at some
   moment of stages (t, J], and absent again at a row t' >= J at which it is still to be read
   (live, or a dead input that a later cascade rebuilds) is restored twice: once before that
   read, once after row t'. Reads inside (t, J] follow from the cascades: an output i absent
   at t is rebuilt by recomputation (the only move) before its next reader J, and so reads each
   input d in (t, J]; if d is absent at t (a column a_{t,d}, a per-row column b_{t,d} <= x^R_d in
   place of x^R_d in row t, or r_{t,d} for a dead input), it is rebuilt in (t, J] too and reads
   its own inputs there. A column n_{t,o,J} >= a_{t,i} (o an input of i) and
   n_{t,o,J} >= n_{t,d,J} + (d absent at t) - 1 (o an input of d) says o is read in (t, J]; a
   column y_{o,J} at least each of o's absences at rows t' >= J; and x2_o >= n_{t,o,J} +
   (o absent at t) + y_{o,J} - 2, priced at one more recomputation of o (its energy, and its
   time in the knapsack row). In every schedule, setting each column to what it says (n: o is
   read by some computation in stages t+1..J) meets these rows, and x2_o = 1 only where o is
   recomputed at least twice, so the bound stays valid; leaving some of these rows out (reads
   followed only from outputs whose next reader is near, `SECOND_RESTORE_WINDOW`, only so
   deep, `SECOND_RESTORE_DEPTH`, and within a time limit only as many as its solve can take,
   nearest readers first) keeps it valid too. Hand-solved case (`second_restore_case` in
   tests/test_cover.py, 9 nodes): f0 is rebuilt for a cascade and, RAM being short right
   after, rebuilt again for its own reader; the cascade cover is 3 J, the optimum and this
   cover 4 J. On the ResNet-18 study's point at 50 % (batch 8, Pi, 1.2x) the best schedule
   rebuilds the stem (`conv1`, `bn1`, `relu`) for a cascade at stage 114 and again for its own
   reader at 133; with these rows the bound rises from 1.629 to 1.837 J above keep-all (the
   schedule: 2.470 J). What is still missing there is the RAM during that cascade: this cover
   would rather hold `conv1` from stage 114 on and rebuild cheaper outputs twice, which no
   schedule can, because `conv1` held breaks the budget while stage 114 recomputes.
   With paging, an absence may end with a page-in, which reads nothing, and a schedule that both
   recomputes and pages an output maps to x^R alone (item 5), so these rows are not used there.

So every schedule within the budgets gives a 0-1 vector x that satisfies, for each stage with
`excess_t > 0`, `sum_{i in L_t} m_i (x^R_i + [paging window] x^P_i) >= excess_t`, the knapsack
row and `x^R_i + x^P_i <= 1`, at a cost no greater than its own overhead (without cascades, a
schedule that both recomputes and pages i maps to x^R_i = 1 alone, which covers every stage
x^P_i covers, at a lower cost; with them, item 5 says where both may be 1). The least cost
over such x is a lower bound on every schedule's overhead; if no x exists (an excess that even
every optional output gone cannot cover, or a knapsack row that every cover breaks), no
schedule fits: a proof of infeasibility. Moves restrict x: no x^P without paging, no x^R
without recomputation.

What the bound ignores (and why it can sit below the optimum): the RAM a recomputation holds
while it runs (its inputs and output together); the RAM a restored output holds at other
stages; paging time that outlasts compute (the timed cover, `timed_cover`, counts that; item 6
counts each page-out's and one page-in's own stall per output, not transfers crowding a stage).

The checker (`poetsim.schedule.checker`) accepts one schedule shape the stage semantics above do not
make: under `compute-only` it lets `PageOut(i)` be followed at once by `Free(i)` before any
compute, which makes i absent already at stage i+1. The MILP cannot express that either, so
the bound and the MILP agree; docs/optimiser.md notes it.
"""

import bisect
import math
from dataclasses import dataclass
from time import perf_counter

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.milp.program import FEASIBILITY_TOLERANCE, LOOSER_FEASIBILITY_TOLERANCE, PRESOLVE_NONZEROS_PER_S, Program
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing


@dataclass(frozen=True)
class CoverRow:
    """One stage whose keep-all working set exceeds the budget: which outputs can make room.

    `by_recompute` and `by_paging` are the outputs whose recomputation, or paging, can make them
    absent right after `Compute(stage)` (argument items 1 and 3 of the module docstring).
    """

    stage: int
    excess_bytes: int
    by_recompute: tuple[int, ...]
    by_paging: tuple[int, ...]


@dataclass(frozen=True)
class CoverBound:
    """The eviction cover of one problem: a proven lower bound and the choice that attains it.

    `bound_j` is a lower bound on the total energy of every schedule within the budgets (None
    when `infeasible`: then no schedule of these moves fits, and `message` says why).
    `recomputed` and `paged` are the outputs the cover's best 0-1 solution restores by each move;
    `exact` says that solution was proven optimal for the cover (else `bound_j` is the cover
    solver's own dual bound, still valid, and the choice is its best found; also when the time
    ran out before the cascade rows, the cover without them being all that was solved).
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
    solve_s: float
    message: str
    kind: str = "cover"
    events: tuple[tuple[str, int, int], ...] = ()  # timed cover: ("p" | "o" | "n", node, stage) chosen

    @property
    def overhead_j(self) -> float | None:
        """The bound on the energy above keep-all."""
        return None if self.bound_j is None else self.bound_j - self.keep_all_j


def cover_rows(graph: TrainingGraph, budgets: Budgets, moves: Moves, timing: Timing) -> tuple[CoverRow, ...]:
    """The stages with a positive excess and the outputs that can cover it, by move."""
    T, m = len(graph), graph.output_bytes
    overlap = Timing(timing) is Timing.OVERLAP
    readers = graph.consumers
    last_use = graph.last_use
    rows = []
    for t in range(T):
        inputs = set(graph.nodes[t].deps)
        needed = m[t] + sum(m[d] for d in inputs)
        optional = [i for i in range(t) if i not in inputs and last_use[i] > t]
        excess = needed + sum(m[i] for i in optional) - budgets.ram_bytes
        if excess <= 0:
            continue
        by_recompute, by_paging = [], []
        for i in optional:
            if m[i] == 0:
                continue
            if moves.recompute:
                by_recompute.append(i)
            if moves.page and t >= i + 2:
                next_reader = readers[i][bisect.bisect_right(readers[i], t)]
                if not overlap or t <= next_reader - 2:
                    by_paging.append(i)
        rows.append(CoverRow(t, excess, tuple(by_recompute), tuple(by_paging)))
    return tuple(rows)


#: A stage whose covering row's least slack (a share of its excess) passes this breaks a choice.
ELASTIC_TOLERANCE = 1e-7
#: Item 7's reads are followed from an output absent at t only when its next reader is at most
#: this many stages later, and to this many inputs deep. Fewer rows, the same bound where it
#: rises: on the ResNet-18 study's recompute-only points (Pi, 1.2x) at 50 % and 35 %, windows of
#: 16 stages and depth 8 give 1.837 and 36.39 J above keep-all in 1.8 and 5.1 s; unlimited, the
#: same in 3.7 and 18 s; a window of 8, 1.650 and 36.14 J.
SECOND_RESTORE_WINDOW = 16
SECOND_RESTORE_DEPTH = 8
#: Within a time limit, item 7's rows are added (nearest readers first) until the program has this
#: share of the nonzeros `program.PRESOLVE_NONZEROS_PER_S` allows in that time: the rest of the time
#: goes to building it.
SECOND_RESTORE_NONZERO_SHARE = 0.8
#: ... and only if the stage rows alone take at most this share of those nonzeros. The whole
#: cascade cover of recompute-only has 31,306-36,696 nonzeros on ResNet-18 (both datasets, 35-50 %)
#: and 142,515-240,284 on the zoo's 300-node graphs at 35 %, where, solved whole, it gave nothing
#: in 20 s (bert_base: no bound; ResNet-50: a bound below the cover's) or repeated it.
SECOND_RESTORE_BASE_SHARE = 0.25
#: Share of the cover's time for its first solve, without cascades.
NO_CASCADE_SHARE = 0.3
#: A cover is first solved with this many of its stage rows, those of largest excess; the rows its
#: solution breaks are added and it is solved again (`_solve_cover`). On ResNet-50 (Pi, hybrid,
#: 50 %, 1.2x) the 5 rows of largest excess already give the cascade cover's optimum: 0.4 s in
#: all, against 32 s for all 282 rows at once (`python -m benchmarks covers`).
FIRST_ROWS = 5


def restore_costs_j(costs: CostTable, timing: Timing) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per output, the least energy of one recomputation and of one page-out plus page-in."""
    static_w = costs.static_power_w if Timing(timing) is Timing.OVERLAP else 0.0
    recompute = tuple(e + static_w * c for e, c in zip(costs.compute_j, costs.compute_s))
    page = tuple(a + b for a, b in zip(costs.page_out_j, costs.page_in_j))
    return recompute, page


def cover_bound(
    graph: TrainingGraph,
    costs: CostTable,
    budgets: Budgets,
    moves: Moves,
    timing: Timing,
    time_limit_s: float | None = None,
    cascades: bool = True,
    avoid: frozenset[int] = frozenset(),
    first_rows: int | None = FIRST_ROWS,
    stalls: bool = False,
    no_cascade_share: float = NO_CASCADE_SHARE,
    page_in_stalls: bool = True,
    cascade_page_ins: bool = True,
) -> CoverBound:
    """Solve the eviction cover of one problem (see the module docstring for why it is a bound).

    With `cascades`, a recomputation that needs an input past that input's last reader pays
    for it: the input is held at the stage (its bytes count) or restored too. With `avoid`,
    those outputs are never restored: a search for another choice (`optimise` uses it to step
    round outputs whose transfers stall), after which neither the bound nor an infeasibility
    is a proof. Each program starts from its `first_rows` stage rows of largest excess and takes
    the others as its solution breaks them (`_solve_cover`; None: every row from the start).
    With `stalls` (under `overlap`), each page-out's and page-in's own stall is priced (module
    docstring, item 6; the page-ins' only with `page_in_stalls`).
    The cover without cascades is solved first, in `no_cascade_share` of the time.
    """
    timing = Timing(timing)
    began = perf_counter()
    overlap = timing is Timing.OVERLAP
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing)
    if avoid:
        rows = tuple(
            CoverRow(
                row.stage,
                row.excess_bytes,
                tuple(i for i in row.by_recompute if i not in avoid),
                tuple(i for i in row.by_paging if i not in avoid),
            )
            for row in rows
        )

    def result(bound, recomputed=(), paged=(), infeasible=False, exact=True, message=""):
        return CoverBound(
            moves,
            timing,
            keep_all_j,
            bound,
            frozenset(recomputed),
            frozenset(paged),
            infeasible,
            exact,
            rows,
            perf_counter() - began,
            message,
        )

    if not rows:
        return result(keep_all_j, message="keep-all fits the RAM budget")
    m = graph.output_bytes
    for row in rows:
        room = sum(m[i] for i in set(row.by_recompute) | set(row.by_paging))
        if room < row.excess_bytes:
            return result(
                None,
                infeasible=True,
                message=(
                    f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM: right after "
                    f"computing node {row.stage} ({graph.nodes[row.stage].name}) {row.excess_bytes:,} bytes of outputs "
                    f"must be out of RAM, and at most {room:,} bytes can be"
                ),
            )

    def left_s(share: float = 1.0):
        return None if time_limit_s is None else share * (time_limit_s - (perf_counter() - began))

    # Without cascades first: small and fast, a bound and a choice to fall back on if the
    # cascade model (several times larger on 300-node graphs) runs out of time.
    infeasible = result(
        None,
        infeasible=True,
        message=(
            f"infeasible: no schedule {moves.phrase} fits {budgets.ram_bytes:,} bytes of RAM within "
            f"{budgets.runtime_s:.6g} s: the deadline leaves {deadline_slack_s(budgets, costs):.6g} s beyond one "
            "plain pass, less than the recomputation or the transfers that staying within the RAM budget need"
        ),
    )
    stalls = stalls and overlap and moves.page
    found = _solve_cover(
        graph,
        costs,
        timing,
        moves,
        rows,
        budgets,
        cascades=False,
        time_limit_s=left_s(no_cascade_share if cascades else 1.0),
        first_rows=first_rows,
        stalls=stalls,
        page_in_stalls=page_in_stalls,
    )
    if found is None:
        return infeasible
    # With `avoid` the answer is no proof anyway: the quicker cover with one move per output
    # (x^R_i + x^P_i <= 1 for every output, item 5) serves the search for a choice.
    deep = cascades and _has_cascades(graph, rows)
    if deep and time_limit_s is not None and left_s() <= 0:
        found = (*found[:3], False)  # the optimum of the cover without cascades only
    elif deep:
        deeper = _solve_cover(
            graph,
            costs,
            timing,
            moves,
            rows,
            budgets,
            cascades=True,
            time_limit_s=left_s(),
            one_move=bool(avoid),
            first_rows=first_rows,
            stalls=stalls,
            page_in_stalls=page_in_stalls,
            cascade_page_ins=cascade_page_ins,
        )
        if deeper is None:
            return infeasible
        bound = max(found[0], deeper[0])
        # The cascade model's choice is the better guide when it has one (it is feasible there).
        found = (bound, *deeper[1:]) if deeper[1] or deeper[2] else (bound, *found[1:3], deeper[3])
    overhead_j, recomputed, paged, exact = found
    return result(keep_all_j + overhead_j, recomputed, paged, exact=exact)


def second_restore_bound(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, timing: Timing, time_limit_s: float | None = None
) -> CoverBound:
    """The recompute-only cascade cover with item 7's second restores, every stage row at once.

    A bound only (its choice is not placed): the rows that tie absences across stages leave no
    stage's columns to itself, so it is solved whole rather than row by row (`_solve_cover`).
    On the ResNet-18 study's point at 50 % (batch 8, Pi, 1.2x) it lifts the bound from 1.629 to
    1.837 J above keep-all in about 2 s; with nothing to tie (no cascade) it is the plain cover.
    """
    timing, began = Timing(timing), perf_counter()
    moves = Moves(recompute=True, page=False)
    keep_all_j = costs.keep_all_energy_j(timing)
    rows = cover_rows(graph, budgets, moves, timing)

    def result(bound, infeasible=False, exact=True, message=""):
        return CoverBound(
            moves,
            timing,
            keep_all_j,
            bound,
            frozenset(),
            frozenset(),
            infeasible,
            exact,
            rows,
            perf_counter() - began,
            message,
            kind="second-restore cover",
        )

    if not rows or not _has_cascades(graph, rows):
        return result(None, exact=False, message="no cascade: the plain cover's bound stands")
    # As many of item 7's rows as the solve can take in the time (`Program.solve` declines a program
    # whose presolve would outlast it), leaving a share of the time to the build.
    cap = None if time_limit_s is None else int(SECOND_RESTORE_NONZERO_SHARE * PRESOLVE_NONZEROS_PER_S * time_limit_s)
    model = _CoverModel(graph, costs, timing, moves, rows, budgets, cascades=True, second_restores=True, nonzero_cap=cap)
    if not model.roomy:
        return result(None, exact=False, message="the cover's stage rows leave no room for second restores in the time")
    left_s = None if time_limit_s is None else max(time_limit_s - (perf_counter() - began), 0.0)
    solved = model.solve(left_s)
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
    overhead_j, _, _, exact = solved[:4]
    return result(keep_all_j + overhead_j, exact=exact)


def paging_floor_j(costs: CostTable, timing: Timing) -> float:
    """A lower bound on every schedule that pages anything in: keep-all plus the cheapest page-out
    and page-in of any output.

    A page-in reads the copy a page-out made, so such a schedule pays both transfers' energy on
    top of computing each node once (and, under `overlap`, of static power for at least one plain
    pass). A schedule that pages out but never in is no cheaper than the same schedule without its
    page-outs, which is recompute-only. So every schedule with both moves costs at least the lesser
    of this floor and the recompute-only bound: on the Jetson TX2, whose eMMC spends 0.0009 J on a
    page-out and page-in of even 32 bytes, that is above the best schedules of ResNet-18 (CIFAR)
    at 50 %, which then need only recompute-only's bound.
    """
    cheapest_j = min((out + into for out, into in zip(costs.page_out_j, costs.page_in_j)), default=0.0)
    return costs.keep_all_energy_j(timing) + cheapest_j


def deadline_slack_s(budgets: Budgets, costs: CostTable) -> float:
    """Runtime budget minus one plain pass; a budget that one plain pass meets has slack >= 0."""
    slack = budgets.runtime_s - costs.plain_runtime_s
    return max(slack, 0.0) if budgets.meets_deadline(costs.plain_runtime_s) else slack


def _solve_cover(
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    moves: Moves,
    rows: tuple[CoverRow, ...],
    budgets: Budgets,
    cascades: bool,
    time_limit_s: float | None,
    one_move: bool = False,
    first_rows: int | None = FIRST_ROWS,
    stalls: bool = False,
    page_in_stalls: bool = True,
    cascade_page_ins: bool = True,
):
    """The cover's optimum (as `_CoverModel.solve` gives it), found with the stage rows it needs.

    Each stage row has columns of its own (a_{t,i}, ap_{t,i}, h_{t,d}, r_{t,d}, q_{t,d},
    p_{t,d}: keyed by t, in no other stage's rows); the rows of every stage share only x^R and
    x^P (with stalls, z, w, the stall columns s_d and sl_d and Y), the knapsack and transfer
    rows, and x^R_i + x^P_i <= 1; a check holds s_d and sl_d within what x paid for them, so
    that Y and the cost stay as they were. So the program with some stage rows left out is a
    relaxation of the whole, whose optimum is at most the whole's and whose infeasibility is
    the whole's. If the relaxation's solution x admits, for each left-out stage, values of that
    stage's columns that meet its rows, x with them is a solution of the whole at the same
    cost (those columns cost nothing): then it is the whole's optimum. Whether a left-out
    stage admits x is read directly when the outputs x restores without a need cover its excess
    (those it pages, those it recomputes that need no dead input); else by the program of the
    unsure stages together with x fixed, a slack on each covering row and only the slacks priced
    (a stage whose least slack is positive breaks x), or, when that program is too large for
    the time left, of each unsure stage alone. The stages that do not admit x join the program, which
    is solved again; `first_rows` None solves with every row at once. With `one_move`, x^R_i + x^P_i <= 1
    holds for every output (the quicker cover the placement search uses; no bound). With
    `stalls`, a paged output counts in a row only from the first stage of its chosen stall level
    (item 6), in the check as in the program.

    On a time limit the last program's dual bound stands (a relaxation's: still a bound) and
    the answer is not exact while some stage may break the solution.
    """
    began = perf_counter()
    counted = {row.stage: counted_at(graph, row.stage) for row in rows} if cascades else {}
    both = cascades and moves.recompute and moves.page and not one_move
    either = frozenset(_either(graph, rows, counted)) if both else frozenset()

    def left_s():
        return None if time_limit_s is None else max(time_limit_s - (perf_counter() - began), 0.0)

    levels = stall_levels(graph, costs, rows) if stalls else {}
    in_levels = page_in_levels(graph, costs, rows) if stalls and page_in_stalls else {}

    def model(stages, elastic: bool = False) -> _CoverModel:
        return _CoverModel(
            graph,
            costs,
            timing,
            moves,
            tuple(by_stage[t] for t in sorted(stages)),
            budgets,
            cascades,
            either,
            counted,
            levels,
            in_levels,
            cascade_page_ins=stalls and page_in_stalls and cascade_page_ins,
            elastic=elastic,
        )

    def breaks(stages, recomputed, paged, paged_from, paged_until, fed) -> list[int]:
        m, deps = graph.output_bytes, [node.deps for node in graph.nodes]
        unsure = []
        for t in sorted(stages):
            row, seen = by_stage[t], counted.get(t, ())
            free = {
                i
                for i in row.by_paging
                if i in paged and paged_from.get(i, 0) <= t and (i not in in_levels or paged_until.get(i, -1) >= t)
            }
            free.update(i for i in row.by_recompute if i in recomputed and (not cascades or all(d in seen for d in deps[i])))
            if sum(m[i] for i in free) < row.excess_bytes:
                unsure.append(t)
        if not cascades:
            return unsure  # the cover without cascades has no stage columns: nothing else can admit x
        if not unsure:
            return []
        # With x fixed the stages share no free column: one program with a slack on each covering
        # row, least total slack; a stage whose slack stays above 0 breaks x (alone it would be
        # infeasible). A program too large for the time left (`Program.solve` declines it: on
        # ResNet-50, Pi, 35 %, 75,718 columns) or not solved in it leaves each stage to its own.
        together = model(unsure, elastic=True)
        together.fix(recomputed, paged, paged_from, paged_until, fed)
        solved = together.program.solve(left_s())
        if not solved.infeasible and solved.values is not None:
            broken = [t for t in unsure if solved.values.get(("e", t), 0.0) > ELASTIC_TOLERANCE]
            if solved.exact or not broken:  # a solution with no slack shows every stage admits x
                return broken
        broken = []
        for n, t in enumerate(unsure):
            if time_limit_s is not None and left_s() <= 0:  # out of time: the rest counted as broken
                broken += unsure[n:]
                break
            alone = model((t,))
            alone.fix(recomputed, paged, paged_from, paged_until, fed)
            solved = alone.program.solve(left_s())
            if solved.infeasible or solved.values is None:  # (no answer within the time: counted as broken)
                broken.append(t)
        return broken

    by_stage = {row.stage: row for row in rows}
    ranked = sorted(by_stage, key=lambda t: (-by_stage[t].excess_bytes, t))
    active = set(ranked if first_rows is None else ranked[:first_rows])
    while True:
        solved = model(active).solve(left_s())
        if solved is None:
            return None
        found, (paged_from, paged_until, fed) = solved[:4], solved[4:]
        bound_j, recomputed, paged, exact = found
        if not exact:
            return found
        broken = breaks(set(by_stage) - active, frozenset(recomputed), frozenset(paged), paged_from, paged_until, fed)
        if not broken:
            return found
        if time_limit_s is not None and left_s() <= 0:
            return bound_j, recomputed, paged, False
        active.update(broken)


def _has_cascades(graph: TrainingGraph, rows: tuple[CoverRow, ...]) -> bool:
    """Whether some row's recomputation needs a dead input (else the cascade cover is the plain one)."""
    for row in rows:
        seen = counted_at(graph, row.stage)
        if any(d not in seen for i in row.by_recompute for d in graph.nodes[i].deps):
            return True
    return False


class _CoverModel:
    """The cover as a 0-1 program (`program.Program`), stage by stage.

    Columns: x^R_i and x^P_i per output; with cascades, per stage t also a_{t,i} (i absent at t
    and restored by recomputation, when that recomputation needs an input d past its last reader,
    or when i is in `either`), ap_{t,i} (an output of `either` absent at t and paged back in),
    h_{t,d} (d held at t for it) and r_{t,d} (d absent at t and recomputed after). `either` is
    `_either` of all the cover's rows, whichever of them this program holds (empty for the
    one-move cover, where x^R_i + x^P_i <= 1 holds for every output as before item 5's fix:
    quicker to solve, and no bound). With `levels` (`stall_levels`, item 6), also z_{i,k} per
    page-out stall level of i, with `in_levels` (`page_in_levels`) w_{i,k,l} per pair of a
    page-out and a page-in stall level of i (item 6), and Y, the time beyond one plain pass.
    With `cascade_page_ins` (item 6), q_{t,d} (a dead input paged back in for row t's cascade)
    and s_d, p_{t,d} (a live input of a recomputation counted absent by paging at t) and sl_d:
    the stalls of those page-ins.
    """

    def __init__(
        self,
        graph,
        costs,
        timing,
        moves,
        rows,
        budgets,
        cascades,
        either=frozenset(),
        counted=None,
        levels=None,
        in_levels=None,
        cascade_page_ins=False,
        elastic=False,
        second_restores=False,
        nonzero_cap=None,
    ):
        self.graph, self.costs, self.moves, self.cascades = graph, costs, moves, cascades
        # Item 7 (recompute-only): per-row absences b_{t,i}, and the second restores they imply.
        self.second_restores = second_restores and cascades and not moves.page
        self.absent_at: dict[tuple[int, int], int] = {}  # (t, i) -> a_{t,i} or b_{t,i}
        self.nonzero_cap = nonzero_cap  # item 7's rows stop once the program has this many nonzeros
        # Under `overlap` with stalls priced: a dead input paged back in for a cascade (q_{t,d})
        # runs in [t+1, J-1] and stalls there (s_d); `reach[t][d]` is that J.
        self.cascade_page_ins = cascade_page_ins and cascades
        self.elastic = elastic
        self.reach: dict[int, dict[int, int]] = {}
        self.levels: dict[int, tuple[tuple[int, float], ...]] = levels or {}
        self.in_levels: dict[int, tuple[tuple[int, float], ...]] = in_levels or {}
        # Per output with page-in levels: (first, last, w_{i,k,l}) per pair of a page-out level k
        # (first: its first stage, -1 when i has none) and a page-in level l (last: its last row).
        self.pairs: dict[int, list[tuple[int, int, int]]] = {}
        # What each stage's row counts, which the cascade rows read (built once per cover).
        self.counted = (
            (counted if counted is not None else {row.stage: counted_at(graph, row.stage) for row in rows}) if cascades else {}
        )
        self.either = either
        self.recompute_j, self.page_j = restore_costs_j(costs, timing)
        self.stall_priced = bool(self.levels or self.in_levels or self.cascade_page_ins)
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
        self.roomy = nonzero_cap is None or len(self.program.index) <= SECOND_RESTORE_BASE_SHARE * nonzero_cap
        if self.second_restores and self.roomy:
            self.add_second_restores()
        dma_s = costs.dma_channels * budgets.runtime_s if Timing(timing) is Timing.OVERLAP else None
        self.add_restore_rows(deadline_slack_s(budgets, costs), dma_s)
        if elastic:  # a slack e_t on each covering row, and it alone costs: the least shortfall
            self.program.cost = [1.0 if key[0] == "e" else 0.0 for key in self.program.columns]

    def page_in_prices(self) -> dict[tuple[int, int], float]:
        """The stall of each page-in level, by (output, its last row), in seconds."""
        return {(i, last): stall for i, levels in self.in_levels.items() for last, stall in levels}

    def fix(
        self,
        recomputed: frozenset[int],
        paged: frozenset[int],
        paged_from: dict[int, int],
        paged_until: dict[int, int],
        fed: dict[int, float],
    ) -> None:
        """Fix every x^R_i, x^P_i, z_{i,k} and w_{i,l} to a choice (`paged_from`: the first stage
        of each paged output's page-out level, `paged_until` the last stage of its page-in level),
        and hold each s_d and sl_d within what the choice paid for those page-ins (`fed`, scaled,
        or the price of i's page-in pair where the choice had no sl_i: this program moves it to
        sl_i); the columns of the stages stay free."""
        in_price = self.page_in_prices()
        for key, col in list(self.program.columns.items()):
            if key[0] in ("s", "sl"):
                paid = fed.get(key, 0.0)
                if key[0] == "sl" and key not in fed and key[1] in paged_until:
                    paid = in_price[key[1], paged_until[key[1]]] / self.time_scale
                self.program.row([(col, 1.0)], 0.0, paid + 1e-9)
                continue
            if key[0] in "RP":
                value = float(key[1] in (recomputed if key[0] == "R" else paged))
            elif key[0] == "z":
                value = float(key[1] in paged and paged_from.get(key[1]) == key[2])
            elif key[0] == "w":
                value = float(key[1] in paged and paged_until.get(key[1]) == key[3] and key[2] in (-1, paged_from.get(key[1])))
            else:
                continue
            self.program.row([(col, 1.0)], value, value)

    def by_paging(self, i: int, t: int) -> list[int]:
        """The columns whose sum says i, a live output at row t, may be absent there by paging:
        x^P_i; with page-out stall levels the z_{i,k} of the levels that begin by t; with page-in
        stall levels the w_{i,k,l} of the pairs whose page-out level begins by t and whose
        page-in level ends at t or later."""
        out = self.paged_out_by(i, t)
        if i not in self.in_levels:
            return out
        return [col for first, last, col in self.pairs[i] if first <= t <= last]

    def paged_out_by(self, i: int, t: int) -> list[int]:
        """The columns whose sum says i is paged with its first absence by paging at or before t:
        x^P_i, or with page-out stall levels the z_{i,k} of the levels that begin by t."""
        x = self.x("P", i)  # (makes the z and w columns)
        if i not in self.levels:
            return [x]
        return [self.program.columns["z", i, first] for first, _ in self.levels[i] if first <= t]

    def x(self, kind: str, i: int) -> int:
        """x^R_i ("R") or x^P_i ("P"), priced at one restore; x^P_i with page-out stall levels is
        the sum of its z_{i,k}, and with page-in stall levels at least the sum of its w_{i,l}."""
        price = self.recompute_j if kind == "R" else self.page_j
        made = (kind, i) not in self.program.columns
        col = self.program.column((kind, i), price[i] / self.energy_scale)
        program = self.program
        if made and kind == "P" and i in self.levels:
            program.row([(col, 1.0)] + [(program.column(("z", i, first)), -1.0) for first, _ in self.levels[i]], 0.0, 0.0)
        if made and kind == "P" and i in self.in_levels:  # at most one pair, within i's page-out level
            outs = [(first, program.columns["z", i, first]) for first, _ in self.levels[i]] if i in self.levels else [(-1, col)]
            self.pairs[i] = []
            for first, level in outs:
                pairs = [(first, last, program.column(("w", i, first, last))) for last, _ in self.in_levels[i] if last >= first]
                program.row([(level, 1.0)] + [(w, -1.0) for _, _, w in pairs], 0.0, math.inf)
                self.pairs[i] += pairs
        return col

    def absence(self, t: int, i: int) -> int:
        """The column that counts i, restored by recomputation with no dead input, absent at row t:
        x^R_i, or with second restores (item 7) b_{t,i} <= x^R_i, i's absence at t alone."""
        if not self.second_restores:
            return self.x("R", i)
        absent = self.program.column(("b", t, i))
        self.program.row([(absent, 1.0), (self.x("R", i), -1.0)], -math.inf, 0.0)
        self.absent_at[t, i] = absent
        return absent

    def add_second_restores(self) -> None:
        """Item 7: n_{t,o,J} (o is read in stages t+1..J), y_{o,J} (o is absent at some row from J
        on) and x2_o >= n_{t,o,J} + (o absent at t) + y_{o,J} - 2, one more recomputation of o.
        Only the n columns from which some x2 row can be reached are made."""
        program, graph = self.program, self.graph
        readers, deps = graph.consumers, [node.deps for node in graph.nodes]
        absent = dict(self.absent_at)  # (t, o) -> o not in RAM at row t and restored after it
        absent.update({(key[1], key[2]): col for key, col in program.columns.items() if key[0] == "r"})
        rows_of: dict[int, list[int]] = {}
        for t, o in absent:
            rows_of.setdefault(o, []).append(t)
        useful: dict[tuple[int, int, int, int], bool] = {}

        def worth(t: int, o: int, due: int, depth: int) -> bool:
            """Whether o, read in (t, due] at `depth`, leads to an x2 row: absent at t, and absent
            again from `due` on or with an input, within the depth, that is."""
            key = (t, o, due, depth)
            if key not in useful:
                useful[key] = (
                    depth <= SECOND_RESTORE_DEPTH
                    and (t, o) in absent
                    and (any(row >= due for row in rows_of.get(o, ())) or any(worth(t, d, due, depth + 1) for d in deps[o]))
                )
            return useful[key]

        def reads(t: int, o: int, due: int, terms: list[int], depth: int = 1) -> None:
            if not worth(t, o, due, depth):
                return
            key = ("n", t, o, due)
            fresh = key not in program.columns
            col = program.column(key)
            program.row([(col, 1.0)] + [(term, -1.0) for term in terms], 1.0 - len(terms), math.inf)
            if fresh:  # o is absent at t and restored by recomputation in (t, due]: it reads its inputs
                gone = absent[t, o]
                twice(o, due, [col, gone])
                for d in deps[o]:
                    reads(t, d, due, [col, gone], depth + 1)

        def twice(o: int, due: int, terms: list[int]) -> None:
            """x2_o >= sum(terms) + y_{o,due} - len(terms): o is absent again at a row from `due` on."""
            key = ("y", o, due)
            if key not in program.columns:
                later = [absent[t, o] for t in rows_of.get(o, ()) if t >= due]
                if not later:
                    return
                for col in later:
                    program.row([(program.column(key), 1.0), (col, -1.0)], 0.0, math.inf)
            again = program.column(("x2", o), self.recompute_j[o] / self.energy_scale)
            program.row(
                [(again, 1.0), (program.columns[key], -1.0)] + [(term, -1.0) for term in terms], -float(len(terms)), math.inf
            )

        roots = sorted((readers[i][bisect.bisect_right(readers[i], t)] - t, t, i) for t, i in self.absent_at)
        for window, t, i in roots:  # nearest readers first: i is rebuilt by its next reader, reading its inputs
            if self.nonzero_cap is not None and len(program.index) > self.nonzero_cap:
                break
            col, due = self.absent_at[t, i], t + window
            twice(i, due, [col])
            if window > SECOND_RESTORE_WINDOW:
                break
            for d in deps[i]:
                reads(t, d, due, [col])

    def held_column(self, t: int, d: int) -> int:
        if ("h", t, d) not in self.program.columns:
            self.held.setdefault(t, []).append(d)
        return self.program.column(("h", t, d))

    def add_stage(self, row: CoverRow) -> None:
        """The covering row of one stage, and its cascade rows."""
        t, m, graph, program = row.stage, self.graph.output_bytes, self.graph, self.program
        counted = self.counted.get(t, set())
        if self.cascade_page_ins:
            self.reach[t] = cascade_deadlines(graph, t, row.by_recompute, counted)
        if self.cascade_page_ins:
            self._feeds(row, counted)
        pageable = set(row.by_paging)
        terms = []
        for i in row.by_recompute:
            dead = [d for d in graph.nodes[i].deps if d not in counted] if self.cascades else []
            either = i in self.either and i in pageable
            if not (dead or either):
                terms.append((self.absence(t, i), m[i]))
                continue
            absent = program.column(("a", t, i))  # absent at t, restored by recomputation
            self.absent_at[t, i] = absent
            terms.append((absent, m[i]))
            program.row([(absent, 1.0), (self.x("R", i), -1.0)], -math.inf, 0.0)
            if dead:
                self._needs(t, absent, dead, counted)
            if either:  # or absent at t and restored by a page-in: it needs nothing of d
                paged = program.column(("ap", t, i))
                terms.append((paged, m[i]))
                program.row([(paged, 1.0)] + [(z, -1.0) for z in self.by_paging(i, t)], -math.inf, 0.0)
                program.row([(absent, 1.0), (paged, 1.0)], -math.inf, 1.0)
                pageable.discard(i)
        for i in row.by_paging:
            if i not in pageable:
                continue
            if i in self.apart.get(t, ()):
                apart = program.column(("p", t, i))  # i absent at t by paging
                program.row([(apart, 1.0)] + [(z, -1.0) for z in self.by_paging(i, t)], -math.inf, 0.0)
                terms.append((apart, m[i]))
            else:
                terms += [(col, m[i]) for col in self.by_paging(i, t)]
        terms += [(program.columns["h", t, d], -m[d]) for d in self.held.get(t, ())]
        if self.elastic:
            terms.append((program.column(("e", t), upper=math.inf, integer=False), row.excess_bytes))
        program.row([(col, coef / row.excess_bytes) for col, coef in terms], 1.0, math.inf)

    def _feeds(self, row: CoverRow, counted: set[int]) -> None:
        """The live inputs d, pageable at row t, of the recomputations the row's columns a_{t,i}
        and r_{t,e} stand for, each with the deadline of the page-in that would bring d back
        (item 6, *live inputs*): the recomputation's own (i's next reader, or `reach` for e),
        and no later than d's next reader."""
        graph, t, pageable = self.graph, row.stage, set(row.by_paging)
        readers, deps = graph.consumers, [node.deps for node in graph.nodes]
        needy = [
            (("a", t, i), i, readers[i][bisect.bisect_right(readers[i], t)])
            for i in row.by_recompute
            if any(d not in counted for d in deps[i]) or (i in self.either and i in pageable)
        ]
        needy += [(("r", t, e), e, due) for e, due in self.reach[t].items()]
        for key, i, due in needy:
            for d in deps[i]:
                if d in pageable:
                    self.apart.setdefault(t, set()).add(d)
                    own = readers[d][bisect.bisect_right(readers[d], t)]
                    self.feeds.append((key, d, t, min(due, own)))

    def add_feed_rows(self) -> None:
        """sl_d >= the stall of a page-in of d within [t+1, J-1] x (needy + p_{t,d} - 1): a
        recomputation after row t reads d, which row t counts absent by paging (item 6)."""
        program, costs = self.program, self.costs
        for key, d, t, due in self.feeds:
            needy = program.columns.get(key)
            absent = program.columns.get(("p", t, d), program.columns.get(("ap", t, d)))
            if needy is None or absent is None:
                continue
            if due - 1 < t + 1:  # no stage to page d back in: not both
                program.row([(needy, 1.0), (absent, 1.0)], -math.inf, 1.0)
                continue
            stall_s = page_in_stall_s(costs, d, t + 1, due - 1)
            if stall_s > 0.0:
                scaled = stall_s / self.time_scale
                live = program.column(("sl", d), upper=math.inf, integer=False)
                program.row([(live, 1.0), (needy, -scaled), (absent, -scaled)], -scaled, math.inf)

    def _needs(self, t: int, needy: int, dead: list[int], counted: set[int]) -> None:
        """A recomputation after stage t needs each dead input d: held at t, or restored after t."""
        program = self.program
        for d in dead:
            first = ("h", t, d) not in program.columns
            terms = [(needy, 1.0), (self.held_column(t, d), -1.0)]
            if self.moves.recompute:
                again = program.column(("r", t, d))
                terms.append((again, -1.0))
                if first:
                    program.row([(again, 1.0), (self.x("R", d), -1.0)], -math.inf, 0.0)
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
        """q_{t,d}: dead input d, absent at t, paged back in for a recomputation due by J (item 6,
        *cascades' page-ins*); None when no page-in fits in [t+1, J-1]."""
        program, key = self.program, ("q", t, d)
        if key in program.columns:
            return program.columns[key]
        due = self.reach[t][d]
        if due - 1 < t + 1:
            return None
        back = program.column(key)
        program.row([(back, 1.0)] + [(col, -1.0) for col in self.paged_out_by(d, t)], -math.inf, 0.0)
        stall_s = page_in_stall_s(self.costs, d, t + 1, due - 1)
        if stall_s > 0.0:
            stalled = program.column(("s", d), upper=math.inf, integer=False)
            program.row([(stalled, 1.0), (back, -stall_s / self.time_scale)], 0.0, math.inf)
        return back

    def add_restore_rows(self, slack_s: float, dma_s: float | None) -> None:
        """x^R_i + x^P_i <= 1, the recomputation time within the deadline's slack, and (under
        `overlap`, `dma_s` given) the transfer time within the deadline times the DMA channels."""
        columns = self.program.columns
        for key, col in list(columns.items()):
            if key[0] == "R" and ("P", key[1]) in columns and key[1] not in self.either:
                self.program.row([(col, 1.0), (columns["P", key[1]], 1.0)], -math.inf, 1.0)
        timed = [
            (col, self.costs.compute_s[key[1]] / self.time_scale)
            for key, col in columns.items()
            if key[0] in ("R", "x2") and self.costs.compute_s[key[1]] > 0
        ]
        if timed:
            self.program.row(timed, -math.inf, slack_s / self.time_scale)
        costs = self.costs
        moved = [
            (col, (costs.page_out_s[key[1]] + costs.page_in_s[key[1]]) / self.time_scale)
            for key, col in columns.items()
            if key[0] == "P"
        ]
        if dma_s is not None and moved:
            self.program.row(moved, -math.inf, dma_s / self.time_scale)
        stall_s: dict[tuple, float] = {("z", i, first): stall for i, levels in self.levels.items() for first, stall in levels}
        page_in_s = self.page_in_prices()
        stall_s.update(
            {
                ("w", i, first, last): page_in_s[i, last]  # a pair's price: its page-in level's
                for i, pairs in self.pairs.items()
                for first, last, _ in pairs
            }
        )
        stalled = []
        for key, col in list(columns.items()):
            price = stall_s.get(key, 0.0)
            if price <= 0:
                continue
            if key[0] == "w" and ("sl", key[1]) in columns:  # (maybe the same page-in: the largest counts)
                self.program.row([(columns["sl", key[1]], 1.0), (col, -price / self.time_scale)], 0.0, math.inf)
            else:
                stalled.append((col, price / self.time_scale))
        stalled += [(col, 1.0) for key, col in columns.items() if key[0] in ("s", "sl")]
        if self.stall_priced:  # Y: the time beyond a plain pass, at least the recomputations and the stalls
            beyond = self.program.column(
                ("Y",), costs.static_power_w * self.time_scale / self.energy_scale, upper=math.inf, integer=False
            )
            for part in (timed, stalled):
                if part:
                    self.program.row([(beyond, 1.0)] + [(col, -c) for col, c in part], 0.0, math.inf)
            self.program.row([(beyond, 1.0)], -math.inf, slack_s / self.time_scale)

    def solve(self, time_limit_s: float | None):
        """(overhead bound in J, recomputed, paged, exact, the first stage of each paged output's
        page-out level, the last stage of its page-in level), or None when the cover is infeasible."""
        tolerance = FEASIBILITY_TOLERANCE if self.cascades else LOOSER_FEASIBILITY_TOLERANCE
        solved = self.program.solve(time_limit_s, tolerance=tolerance)
        if solved.infeasible:
            return None
        values = solved.values or {}
        chosen = [key for key, value in values.items() if key[0] in "RP" and value > 0.5]
        paged_from = {key[1]: key[2] for key, value in values.items() if key[0] == "z" and value > 0.5}
        paged_until = {key[1]: key[3] for key, value in values.items() if key[0] == "w" and value > 0.5}
        fed = {key: value for key, value in values.items() if key[0] in ("s", "sl")}
        return (
            solved.bound * self.energy_scale,
            [i for kind, i in chosen if kind == "R"],
            [i for kind, i in chosen if kind == "P"],
            solved.exact,
            paged_from,
            paged_until,
            fed,
        )


def stall_levels(graph: TrainingGraph, costs: CostTable, rows: tuple[CoverRow, ...]) -> dict[int, tuple[tuple[int, float], ...]]:
    """Per output some row may page and whose page-out can stall: its stall levels (item 6).

    Each level is (its first stage e, g_i(e) in seconds), where g_i(e) = max(0, tout_i / channels
    - the largest plain compute time of stages i+1..e-1), the least stall of a page-out that
    makes i absent from stage e on; e runs over the first stage that may page i (i+2) and the
    stages where g_i falls, down to the level of 0 s. Outputs whose page-out never stalls get none.
    """
    pageable = sorted({i for row in rows for i in row.by_paging})
    compute_s, T = costs.compute_s, len(graph)
    found: dict[int, tuple[tuple[int, float], ...]] = {}
    for i in pageable:
        need_s = costs.page_out_s[i] / costs.dma_channels
        longest = 0.0
        levels: list[tuple[int, float]] = []
        for e in range(i + 2, T):
            longest = max(longest, compute_s[e - 1])
            stall = max(0.0, need_s - longest)
            if not levels or stall < levels[-1][1]:
                levels.append((e, stall))
            if stall == 0.0:
                break
        if levels and levels[0][1] > 0.0:
            found[i] = tuple(levels)
    return found


def page_in_levels(
    graph: TrainingGraph, costs: CostTable, rows: tuple[CoverRow, ...]
) -> dict[int, tuple[tuple[int, float], ...]]:
    """Per output some row may page and whose page-in can stall: its page-in stall levels (item 6).

    If T is the last row at which i is absent by paging (among the rows that may page it), the
    page-in that ends that absence runs in a stage of [T+1, j-1], j i's next reader after T, so
    it stalls at least h_i(T) = max(0, tin_i / channels - the largest plain compute time there).
    Each level is (its last row L, the least h_i(T) over the rows T it holds): the runs of
    consecutive rows with one h_i, in stage order. Outputs whose page-in never stalls get none.
    """
    readers = graph.consumers
    by_output: dict[int, list[int]] = {}
    for row in rows:
        for i in row.by_paging:
            by_output.setdefault(i, []).append(row.stage)
    found: dict[int, tuple[tuple[int, float], ...]] = {}
    for i, stages in sorted(by_output.items()):
        levels: list[tuple[int, float]] = []
        for t in sorted(stages):
            j = readers[i][bisect.bisect_right(readers[i], t)]
            stall = page_in_stall_s(costs, i, t + 1, j - 1)
            if levels and levels[-1][1] == stall:
                levels[-1] = (t, stall)
            else:
                levels.append((t, stall))
        if any(stall > 0.0 for _, stall in levels):
            found[i] = tuple(levels)
    return found


def _either(graph: TrainingGraph, rows: tuple[CoverRow, ...], counted_by_stage: dict[int, set[int]]) -> set[int]:
    """The outputs for which the cascade cover drops x^R_i + x^P_i <= 1 (module docstring, item 5).

    Those that a stage's row, or a cascade's need there, may restore by paging while their
    recomputation there would need a dead input: a schedule may page such an output there and
    recompute it elsewhere, and the page-in owes nothing to the dead inputs. `counted_by_stage`
    is `counted_at` of each row's stage.
    """
    deps = [node.deps for node in graph.nodes]
    found: set[int] = set()
    for row in rows:
        t, counted = row.stage, counted_by_stage[row.stage]
        found.update(i for i in row.by_paging if any(d not in counted for d in deps[i]))
        seen: set[int] = set()
        stack = [d for i in row.by_recompute for d in deps[i] if d not in counted]
        while stack:  # the dead inputs the rows of `_needs` reach, and whether paging may restore them
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            deeper = [e for e in deps[d] if e not in counted]
            if deeper and t >= d + 2:
                found.add(d)
            stack.extend(deeper)
    return found


def counted_at(graph: TrainingGraph, t: int) -> set[int]:
    """The outputs whose bytes the covering row of stage t counts: t, its inputs, and `L_t`."""
    return set(graph.nodes[t].deps) | {t} | {i for i in range(t) if graph.last_use[i] > t}


def cascade_deadlines(graph: TrainingGraph, t: int, restorable, counted: set[int]) -> dict[int, int]:
    """Per dead input d that a cascade of row t may need: the latest stage J by which it is
    needed, the largest next reader after t of the outputs of `restorable` whose cascade reaches d
    (a recomputation of i absent at t comes by i's next reader; its inputs before it)."""
    readers, deps = graph.consumers, [node.deps for node in graph.nodes]
    reach: dict[int, int] = {}
    for i in restorable:
        due = readers[i][bisect.bisect_right(readers[i], t)]
        stack, seen = [d for d in deps[i] if d not in counted], set()
        while stack:
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            reach[d] = max(reach.get(d, 0), due)
            stack.extend(e for e in deps[d] if e not in counted)
    return reach


def page_in_stall_s(costs: CostTable, i: int, first: int, last: int) -> float:
    """The least stall of a page-in of i issued in a stage of [first, last] (nonempty): its time
    over the channels less the longest plain compute there."""
    return max(0.0, costs.page_in_s[i] / costs.dma_channels - max(costs.compute_s[first : last + 1]))
