"""Capuchin (Peng et al., ASPLOS 2020): evict by access gaps, swap where it hides, else recompute.

Capuchin manages GPU memory per tensor from the access pattern it measures on the first training
iteration. Its policy, as poetsim renders it on the stage model (docs/paper.md lists every
decision the paper leaves open and what poetsim chose):

1. Measure: run keep-all (nothing evicted) and take every stage's start and end time from
   poetsim's timing model. A tensor's *accesses* are the stages that compute or read it; the
   *gap* of a stretch between two consecutive accesses is the measured time from the end of the
   first access to the start of the second (Capuchin's FreeTime before transfer costs).
2. While the peak RAM is over the budget, look at the stage where the peak falls and at the
   tensors resident across it but not read in it (the only ones whose eviction lowers it).
3. Swap first: in order of decreasing gap, the first of them whose swap adds no time to the
   iteration is swapped: its transfers hide behind compute. A swap (`Mode.PAGE`) pages the
   tensor out in the earliest stage from the access before the gap on where the transfer hides
   behind that stage's compute, and back in during the latest stage before the next access
   where it hides (Capuchin's in-trigger); where no stage hides it, out with the access and in
   the stage before the next one, as `rules` places them.
4. Otherwise recompute, chosen by memory saved per second of added time (Capuchin's MSPS): the
   tensor whose recomputation (`Mode.RECOMPUTE`, with the cascade of missing inputs it needs)
   saves the most bytes per second it adds, estimated from the current plan's stage times as
   Capuchin estimates from measured ones; for that tensor, swapping is taken instead if, both
   replayed, it saves more per second (Capuchin picks the cheaper of the two for each tensor).
5. Stop when the peak fits, or when no tensor is left to evict (the schedule is then returned
   over budget, and the pipeline reports it so).

Capuchin ignores the deadline, as the paper's system does: it only adds time when it must.
"""

from dataclasses import dataclass

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.plans.plan import Accounting, Plan, account, figures, stage_times_s, to_schedule
from poetsim.optimiser.plans.rules import Decisions, Mode, PageStages, plan_from_decisions, reads
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Figures, Schedule, Timing
from poetsim.strategies import CAPUCHIN

#: Added time below this share of the iteration counts as none (float sums in another order).
HIDDEN_RTOL = 1e-12

#: A stretch of one tensor between two accesses: (node, the access before the gap, the one after).
_Stretch = tuple[int, int, int]

#: A stretch across the peak stage as `_candidates` ranks it: (measured gap in s, bytes, stretch).
_Candidate = tuple[float, int, _Stretch]


@dataclass(frozen=True)
class Eviction:
    """One decision of the policy, in the order it was taken."""

    node: int
    after_stage: int  # the access before the gap
    before_stage: int  # the access after it
    gap_s: float  # measured on the keep-all iteration
    mode: Mode
    hidden: bool  # a swap that adds no time
    added_s: float  # time the decision added to the iteration
    peak_before_bytes: int
    peak_after_bytes: int


@dataclass(frozen=True)
class CapuchinResult:
    """Capuchin's schedule, its figures, and the evictions that made it."""

    schedule: Schedule
    plan: Plan
    figures: Figures
    evictions: tuple[Eviction, ...]
    fits: bool


def capuchin_schedule(graph: TrainingGraph, costs: CostTable, ram_bytes: int, timing: Timing) -> CapuchinResult:
    """Run Capuchin's policy until the peak fits `ram_bytes` or nothing is left to evict."""
    timing = Timing(timing)
    measured = _measured_times(graph, costs, timing)
    decisions: dict[_Stretch, Mode] = {}
    moves: dict[_Stretch, tuple[int, int]] = {}
    state = _State.of(graph, costs, timing, decisions, moves)
    evictions: list[Eviction] = []
    tried: set[_Stretch] = set()
    while state.figures.peak_ram_bytes > ram_bytes:
        candidates = _candidates(graph, state, decisions, tried, measured)
        if not candidates:
            break
        step = _swap_that_hides(graph, costs, timing, state, decisions, moves, candidates)
        if step is None:
            step = _best_per_second(graph, costs, timing, state, decisions, moves, candidates)
        key, gap_s, mode, hidden, trial = step
        tried.add(key)
        if trial is None:
            continue  # neither move changes this stretch (no room to page, nothing to recompute)
        decisions[key] = mode
        moves.update(trial.moves)
        evictions.append(
            Eviction(
                key[0],
                key[1],
                key[2],
                gap_s,
                mode,
                hidden,
                trial.figures.runtime_s - state.figures.runtime_s,
                int(state.figures.peak_ram_bytes),
                int(trial.figures.peak_ram_bytes),
            )
        )
        state = trial
    schedule = to_schedule(state.plan, graph, costs, timing, {"strategy": CAPUCHIN.name, "evictions": str(len(evictions))})
    return CapuchinResult(schedule, state.plan, state.figures, tuple(evictions), state.figures.peak_ram_bytes <= ram_bytes)


@dataclass(frozen=True)
class _State:
    plan: Plan
    figures: Figures
    accounting: Accounting
    moves: PageStages

    @classmethod
    def of(cls, graph: TrainingGraph, costs: CostTable, timing: Timing, decisions: Decisions, moves: PageStages) -> "_State":
        """The plan of `decisions` with each swap's transfers moved to the stages in `moves`, replayed.

        A move the rules no longer allow (a later decision changed where they page the node) is
        dropped by `_moved`, so the state always holds a plan the model admits.
        """
        plan = plan_from_decisions(graph, decisions)
        for key, stages in moves.items():
            plan = _moved(plan, key[0], _transfer_stages(plan, key), stages)
        return cls(plan, figures(plan, graph, costs, timing), account(plan, graph, costs, timing), moves)

    def peak_stage(self) -> int:
        """The first stage where the peak RAM is reached."""
        peaks = self.accounting.stage_peaks
        return peaks.index(max(peaks))


#: One step of the policy: the stretch, its measured gap, the mode taken, whether it is a swap that
#: adds no time, and the state it leads to (None when the move changes nothing; it is then skipped).
_Step = tuple[_Stretch, float, Mode, bool, _State | None]


def _measured_times(graph: TrainingGraph, costs: CostTable, timing: Timing) -> list[float]:
    """Start time of every stage on the keep-all iteration, and the end of the last."""
    plan = plan_from_decisions(graph, {})
    starts: list[float] = []
    clock = 0.0
    for stage_s in stage_times_s(account(plan, graph, costs, timing), costs, timing):
        starts.append(clock)
        clock += stage_s
    return [*starts, clock]


def _candidates(
    graph: TrainingGraph, state: _State, decisions: Decisions, tried: set[_Stretch], measured: list[float]
) -> list[_Candidate]:
    """Stretches across the peak stage, longest measured gap first: (gap, bytes, key)."""
    p = state.peak_stage()
    read_at = reads(state.plan, graph)
    found: list[_Candidate] = []
    for i in state.plan.resident(p):
        if p in read_at[i] or graph.output_bytes[i] == 0:
            continue
        before = [s for s in read_at[i] if s < p]
        after = [s for s in read_at[i] if s > p]
        if not before or not after:
            continue
        key = (i, before[-1], after[0])
        if key in tried or any(j == i and a < key[2] and key[1] < b for (j, a, b) in decisions):
            continue
        gap_s = measured[key[2]] - measured[key[1] + 1]
        found.append((gap_s, graph.output_bytes[i], key))
    found.sort(key=lambda c: (-c[0], -c[1], c[2]))
    return found


def _trial(
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    state: _State,
    decisions: Decisions,
    moves: PageStages,
    key: _Stretch,
    mode: Mode,
) -> _State | None:
    """The state with one more decision, or None if the plan does not change.

    Under overlap timing a swap's transfers are then moved to the stages where they hide behind
    compute (`_hiding_stages`); where none does, they stay where the rules place them.
    """
    trial = _State.of(graph, costs, timing, {**decisions, key: mode}, moves)
    if mode is Mode.PAGE and timing is Timing.OVERLAP:
        found = _transfer_stages(trial.plan, key)
        if found is not None:
            placed = _hiding_stages(trial, costs, key[0], found)
            if placed != found:
                trial = _State.of(graph, costs, timing, {**decisions, key: mode}, {**moves, key: placed})
    return None if trial.plan == state.plan else trial


def _transfer_stages(plan: Plan, key: _Stretch) -> tuple[int, int] | None:
    """Where the plan pages node i out and in across the stretch (a, b), if it does."""
    i, a, b = key
    outs = [t for t in range(a, b) if i in plan.paged_out[t]]
    ins = [t for t in range(a, b) if i in plan.paged_in[t]]
    return (outs[0], ins[-1]) if outs and ins else None


def _hiding_stages(state: _State, costs: CostTable, i: int, found: tuple[int, int]) -> tuple[int, int]:
    """The earliest page-out stage and then the latest page-in stage that hide their transfer."""
    acc, channels = state.accounting, costs.dma_channels
    out0, in0 = found

    def hides(t: int, own: int, added_s: float) -> bool:
        return acc.dma_s[t] + (0.0 if t == own else added_s) <= acc.compute_s[t] * channels

    out = next((t for t in range(out0, in0) if hides(t, out0, costs.page_out_s[i])), out0)
    page_in = next((t for t in range(in0, out, -1) if hides(t, in0, costs.page_in_s[i])), in0)
    return out, page_in


def _moved(plan: Plan, i: int, found: tuple[int, int] | None, stages: tuple[int, int]) -> Plan:
    """The plan with node i's page-out moved later and its page-in earlier (kept in between).

    The stages were chosen on an earlier plan; a later decision may have changed where the rules
    page the node (a recomputation of it in the page-out's stage puts the page-out a stage later).
    Stages that no longer lie within the rules' transfers are dropped, and the rules' stay.
    """
    if found is None or found == stages:
        return plan
    (out0, in0), (out, page_in) = found, stages
    if not out0 <= out < page_in <= in0:
        return plan
    kept, paged_out, paged_in = list(plan.kept), list(plan.paged_out), list(plan.paged_in)
    paged_out[out0] -= {i}
    paged_out[out] |= {i}
    paged_in[in0] -= {i}
    paged_in[page_in] |= {i}
    for t in range(out0, out):
        kept[t] |= {i}
    for t in range(page_in, in0):
        kept[t] |= {i}
    return Plan(plan.computed, tuple(kept), tuple(paged_out), tuple(paged_in))


def _swap_that_hides(
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    state: _State,
    decisions: Decisions,
    moves: PageStages,
    candidates: list[_Candidate],
) -> _Step | None:
    """The longest-gap stretch whose swap adds no time, as a step; None if no swap hides.

    The stage loads of the current plan say which swaps can hide (`_swap_may_hide`), so only
    those are replayed; the first whose replay adds no more than float noise is taken.
    """
    tolerance = HIDDEN_RTOL * state.figures.runtime_s
    for gap_s, _, key in candidates:
        if not _swap_may_hide(state, costs, timing, key):
            continue
        trial = _trial(graph, costs, timing, state, decisions, moves, key, Mode.PAGE)
        if trial is not None and trial.figures.runtime_s - state.figures.runtime_s <= tolerance:
            return key, gap_s, Mode.PAGE, True, trial
    return None


def _swap_may_hide(state: _State, costs: CostTable, timing: Timing, key: _Stretch) -> bool:
    """Whether a swap of the stretch can hide behind compute under the current plan's stage loads.

    It can if some stage after the evicted access has room for the page-out and a later one
    before the back-access room for the page-in. Under compute-only timing a transfer takes no
    time, so every swap can.
    """
    if timing is Timing.COMPUTE_ONLY:
        return True
    i, a, b = key
    acc, channels = state.accounting, costs.dma_channels
    out0 = a if i in state.plan.resident(a) else a + 1

    def room(t: int, added_s: float) -> bool:
        return acc.dma_s[t] + added_s <= acc.compute_s[t] * channels

    out = next((t for t in range(out0, b - 1) if room(t, costs.page_out_s[i])), None)
    return out is not None and any(room(t, costs.page_in_s[i]) for t in range(b - 1, out, -1))


def _recompute_added_s(graph: TrainingGraph, costs: CostTable, timing: Timing, state: _State, key: _Stretch) -> float:
    """Capuchin's estimate of a recomputation's cost, in seconds added to the iteration.

    The compute time of the tensor and of the inputs it needs that are not resident at the
    back-access is added to that stage; under overlap timing the stage already lasts as long as
    its DMA, so only what the compute adds beyond that counts.
    """
    i, _, b = key
    plan, acc = state.plan, state.accounting
    available = (plan.resident(b) - {i}) | {k for k in plan.computed[b] if k < i}
    needed: set[int] = set()
    stack = [i]
    while stack:
        v = stack.pop()
        if v not in needed and v not in available:
            needed.add(v)
            stack.extend(graph.nodes[v].deps)
    extra_s = sum(costs.compute_s[v] for v in needed)
    if timing is Timing.COMPUTE_ONLY:
        return extra_s
    dma_s = acc.dma_s[b] / costs.dma_channels
    return max(acc.compute_s[b] + extra_s, dma_s) - max(acc.compute_s[b], dma_s)


def _best_per_second(
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    state: _State,
    decisions: Decisions,
    moves: PageStages,
    candidates: list[_Candidate],
) -> _Step:
    """The stretch whose recomputation saves most bytes per added second, as a step.

    The added time is estimated from the current plan's stage times, as Capuchin estimates it
    from measured ones; that tensor is then swapped instead if, both replayed, swapping saves
    more per second. A move that adds no time counts as infinitely good, one that changes
    nothing as worse than any other.
    """
    tolerance = HIDDEN_RTOL * state.figures.runtime_s

    def per_second(size: int, added_s: float) -> float:
        return float("inf") if added_s <= tolerance else size / added_s

    def replayed(trial: _State | None, size: int) -> float:
        return -1.0 if trial is None else per_second(size, trial.figures.runtime_s - state.figures.runtime_s)

    _, gap_s, size, key = max(
        (
            (per_second(size, _recompute_added_s(graph, costs, timing, state, key)), gap_s, size, key)
            for gap_s, size, key in candidates
        ),
        key=lambda c: c[0],
    )
    recompute = _trial(graph, costs, timing, state, decisions, moves, key, Mode.RECOMPUTE)
    swap = _trial(graph, costs, timing, state, decisions, moves, key, Mode.PAGE)
    if replayed(swap, size) > replayed(recompute, size):
        return key, gap_s, Mode.PAGE, False, swap
    return key, gap_s, Mode.RECOMPUTE, False, recompute
