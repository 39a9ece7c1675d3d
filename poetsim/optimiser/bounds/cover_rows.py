"""What the eviction cover is made of.

The stages whose working set exceeds the budget, the outputs that can make room there, and the
prices and windows the cover's columns read.

Every function here follows from the schedule semantics of `poetsim.schedule.model`; the
argument that makes the cover a lower bound is in docs/optimiser.md ("The eviction cover"),
whose item numbers the docstrings cite.
"""

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from poetsim.graphs.graph import TrainingGraph
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing

#: Per output, its stall levels: (a stage, the least stall in seconds from that stage on).
Levels = dict[int, tuple[tuple[int, float], ...]]


@dataclass(frozen=True)
class CoverRow:
    """One stage whose keep-all working set exceeds the budget: which outputs can make room.

    `by_recompute` and `by_paging` are the outputs whose recomputation, or paging, can make them
    absent right after `Compute(stage)` (items 1 and 3).
    """

    stage: int
    excess_bytes: int
    by_recompute: tuple[int, ...]
    by_paging: tuple[int, ...]

    def without(self, avoid: frozenset[int]) -> "CoverRow":
        """The row with the outputs of `avoid` unable to make room."""
        return CoverRow(
            self.stage,
            self.excess_bytes,
            tuple(i for i in self.by_recompute if i not in avoid),
            tuple(i for i in self.by_paging if i not in avoid),
        )


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


def room_shortfall(graph: TrainingGraph, rows: tuple[CoverRow, ...]) -> tuple[CoverRow, int] | None:
    """The first row whose excess even every output it may restore cannot cover, with that room."""
    m = graph.output_bytes
    for row in rows:
        room = sum(m[i] for i in set(row.by_recompute) | set(row.by_paging))
        if room < row.excess_bytes:
            return row, room
    return None


def by_excess(rows) -> list[int]:
    """The stages of `rows` (CoverRows), largest excess first (ties: earlier stage first)."""
    excess = {row.stage: row.excess_bytes for row in rows}
    return sorted(excess, key=lambda t: (-excess[t], t))


def counted_at(graph: TrainingGraph, t: int) -> set[int]:
    """The outputs whose bytes the covering row of stage t counts: t, its inputs, and `L_t`."""
    return set(graph.nodes[t].deps) | {t} | {i for i in range(t) if graph.last_use[i] > t}


def next_reader(graph: TrainingGraph, i: int, t: int) -> int:
    """The first node after stage t that reads i (the cover only considers i with one)."""
    readers = graph.consumers[i]
    return readers[bisect.bisect_right(readers, t)]


def has_cascades(graph: TrainingGraph, rows: tuple[CoverRow, ...]) -> bool:
    """Whether some row's recomputation needs a dead input (else the cascade cover is the plain one)."""
    for row in rows:
        seen = counted_at(graph, row.stage)
        if any(d not in seen for i in row.by_recompute for d in graph.nodes[i].deps):
            return True
    return False


def either_outputs(graph: TrainingGraph, rows: tuple[CoverRow, ...], counted_by_stage: dict[int, set[int]]) -> set[int]:
    """The outputs for which the cascade cover drops x^R_i + x^P_i <= 1 (item 5).

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
        while stack:  # the dead inputs the cascade rows reach, and whether paging may restore them
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            deeper = [e for e in deps[d] if e not in counted]
            if deeper and t >= d + 2:
                found.add(d)
            stack.extend(deeper)
    return found


def cascade_deadlines(graph: TrainingGraph, t: int, restorable: Iterable[int], counted: set[int]) -> dict[int, int]:
    """Per dead input d that a cascade of row t may need.

    The latest stage J by which it is needed, the largest next reader after t of the outputs of
    `restorable` whose cascade reaches d (a recomputation of i absent at t comes by i's next reader;
    its inputs before it).
    """
    deps = [node.deps for node in graph.nodes]
    reach: dict[int, int] = {}
    for i in restorable:
        due = next_reader(graph, i, t)
        stack, seen = [d for d in deps[i] if d not in counted], set()
        while stack:
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            reach[d] = max(reach.get(d, 0), due)
            stack.extend(e for e in deps[d] if e not in counted)
    return reach


def stall_levels(graph: TrainingGraph, costs: CostTable, rows: tuple[CoverRow, ...]) -> Levels:
    """Per output some row may page and whose page-out can stall: its stall levels (item 6).

    Each level is (its first stage e, g_i(e) in seconds), where g_i(e) = max(0, tout_i / channels
    - the largest plain compute time of stages i+1..e-1), the least stall of a page-out that
    makes i absent from stage e on; e runs over the first stage that may page i (i+2) and the
    stages where g_i falls, down to the level of 0 s. Outputs whose page-out never stalls get none.
    """
    pageable = sorted({i for row in rows for i in row.by_paging})
    compute_s, T = costs.compute_s, len(graph)
    found: Levels = {}
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


def page_in_levels(graph: TrainingGraph, costs: CostTable, rows: tuple[CoverRow, ...]) -> Levels:
    """Per output some row may page and whose page-in can stall: its page-in stall levels (item 6).

    If T is the last row at which i is absent by paging (among the rows that may page it), the
    page-in that ends that absence runs in a stage of [T+1, j-1], j i's next reader after T, so
    it stalls at least h_i(T) = max(0, tin_i / channels - the largest plain compute time there).
    Each level is (its last row L, the least h_i(T) over the rows T it holds): the runs of
    consecutive rows with one h_i, in stage order. Outputs whose page-in never stalls get none.
    """
    by_output: dict[int, list[int]] = {}
    for row in rows:
        for i in row.by_paging:
            by_output.setdefault(i, []).append(row.stage)
    found: Levels = {}
    for i, stages in sorted(by_output.items()):
        levels: list[tuple[int, float]] = []
        for t in sorted(stages):
            stall = page_in_stall_s(costs, i, t + 1, next_reader(graph, i, t) - 1)
            if levels and levels[-1][1] == stall:
                levels[-1] = (t, stall)
            else:
                levels.append((t, stall))
        if any(stall > 0.0 for _, stall in levels):
            found[i] = tuple(levels)
    return found


def page_out_windows(costs: CostTable, t: int, outputs: Iterable[int]) -> list[tuple[float, list[tuple[int, float]]]]:
    """The windows of stages before row t that the page-outs of `outputs`, absent there by paging, crowd (item 6).

    Each output i absent at t by paging was paged out in a stage of [i+1, t-1], so the DMA time of
    those with i >= a-1 falls in [a, t-1]. One window per start a = i+1, as (the plain compute time
    of [a, t-1], per output its page-out time over the channels), where those times pass it.
    """
    times = sorted((i, costs.page_out_s[i] / costs.dma_channels) for i in outputs)
    compute_s = costs.compute_s
    windows = []
    for n, (first, _) in enumerate(times):
        part = times[n:]
        window_s = sum(compute_s[first + 1 : t])
        if sum(s for _, s in part) > window_s:
            windows.append((window_s, part))
    return windows


def crowds_windows(costs: CostTable, t: int, outputs: Iterable[int], beyond_s: float) -> bool:
    """Whether the page-outs of `outputs`, absent at row t by paging, pass a window before t by more than `beyond_s`."""
    return any(sum(s for _, s in part) > window_s + beyond_s for window_s, part in page_out_windows(costs, t, outputs))


def page_in_stall_s(costs: CostTable, i: int, first: int, last: int) -> float:
    """The least stall of a page-in of i issued in a stage of [first, last] (nonempty).

    Its time over the channels less the longest plain compute there.
    """
    return max(0.0, costs.page_in_s[i] / costs.dma_channels - max(costs.compute_s[first : last + 1]))


def restore_costs_j(costs: CostTable, timing: Timing) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per output, the least energy of one recomputation and of one page-out plus page-in."""
    static_w = costs.static_power_w if Timing(timing) is Timing.OVERLAP else 0.0
    recompute = tuple(e + static_w * c for e, c in zip(costs.compute_j, costs.compute_s))
    page = tuple(a + b for a, b in zip(costs.page_out_j, costs.page_in_j))
    return recompute, page


def deadline_slack_s(budgets: Budgets, costs: CostTable) -> float:
    """Runtime budget minus one plain pass; a budget that one plain pass meets has slack >= 0."""
    slack = budgets.runtime_s - costs.plain_runtime_s
    return max(slack, 0.0) if budgets.meets_deadline(costs.plain_runtime_s) else slack
