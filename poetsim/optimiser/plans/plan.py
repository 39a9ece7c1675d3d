"""A plan: the decisions of a schedule per stage, and what follows from them under the model.

The MILP's binaries and the baselines' rules both come down to four sets per stage: what is
computed, what is kept in RAM for the next stage, what is paged out and what is paged in. The
frees follow: an output is freed right after its last reader in the stage when it is not kept
(and, under overlap timing, not being paged out). From a plan this module derives the
instruction list (`to_schedule`), the model's accounting of RAM, time and energy (`figures`),
and the column values of the model (`to_columns`, the MIP start). `from_columns` reads a plan
back from a solution.

Free has only upper bounds in the model, so a solver may leave a free at 0 where RAM does not
bind. Reading a solution through a plan sets every free to its largest allowed value instead:
the same objective, never more RAM, and still a solution of the model.
"""

import operator
from dataclasses import dataclass
from functools import cached_property
from itertools import compress

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.milp.rows import Formulation
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Compute, Figures, Free, Instruction, Moves, PageIn, PageOut, Schedule, Timing


@dataclass(frozen=True)
class Plan:
    """Per stage t: computed nodes (ascending, ending with t), kept for t+1, paged out, paged in."""

    computed: tuple[tuple[int, ...], ...]
    kept: tuple[frozenset[int], ...]
    paged_out: tuple[frozenset[int], ...]
    paged_in: tuple[frozenset[int], ...]

    def resident(self, t: int) -> frozenset[int]:
        """Outputs in RAM at the start of stage t."""
        return self.kept[t - 1] if t > 0 else frozenset()

    @property
    def moves(self) -> Moves:
        """The moves the plan uses: whether it recomputes anything, whether it pages anything."""
        return Moves(recompute=any(len(c) > 1 for c in self.computed), page=any(self.paged_in) or any(self.paged_out))


@dataclass(frozen=True)
class Accounting:
    """A plan judged by the model: frees per compute, RAM after each compute, stage times."""

    plan: Plan
    frees: tuple[dict[int, tuple[int, ...]], ...]  # stage -> {k: outputs freed right after k}
    start_bytes: tuple[int, ...]  # RAM at stage start (with page-ins under overlap)
    after_bytes: tuple[dict[int, int], ...]  # stage -> {k: RAM right after k is computed}
    compute_s: tuple[float, ...]
    dma_s: tuple[float, ...]
    resident_bytes: tuple[int, ...]  # the bytes of the outputs resident at each stage's start
    stage_peaks: tuple[int, ...]  # each stage's most RAM: at its start or right after a compute

    @cached_property
    def peak_bytes(self) -> int:
        """The plan's peak RAM: the most of any stage start and of any point right after a compute."""
        return max(self.stage_peaks)

    def stage_peak_bytes(self, t: int) -> int:
        """The most RAM of stage t: at its start or right after any of its computes."""
        return self.stage_peaks[t]


def account(plan: Plan, graph: TrainingGraph, costs: CostTable, timing: Timing, base: Accounting | None = None) -> Accounting:
    """Apply the model's rules (the U rows, the stage-time rows) to a plan.

    `base`, the accounting of another plan of the same graph, costs and timing (the plan a
    change was made from), lends its figures to every stage whose sets are the very objects of
    its plan's: a stage's figures follow from its own sets and the outputs resident at its
    start alone, so they are the same numbers, and a change replays only the stages it made.
    """
    overlap = Timing(timing) is Timing.OVERLAP
    # Sums by map(...) rather than generators: the same order and result, about twice as fast
    # (the greedies replay thousands of plans).
    m = costs.output_bytes.__getitem__
    seconds, in_s, out_s = costs.compute_s.__getitem__, costs.page_in_s.__getitem__, costs.page_out_s.__getitem__
    deps = graph.deps
    frees: list[dict[int, tuple[int, ...]]] = []
    afters: list[dict[int, int]] = []
    starts: list[int] = []
    residents: list[int] = []
    peaks: list[int] = []
    compute_s: list[float] = []
    dma_s: list[float] = []
    lent = _lent_runs(plan, base) if base is not None else {}
    # The bytes resident at each stage's start, kept up to date by what changes (set differences
    # run in C; summing every resident output anew would dominate the baselines' replays).
    before: frozenset[int] = frozenset()
    resident_bytes = 0
    t, stages = 0, len(plan.computed)
    while t < stages:
        if t in lent:
            assert base is not None
            stop = lent[t]
            residents.extend(base.resident_bytes[t:stop])
            starts.extend(base.start_bytes[t:stop])
            afters.extend(base.after_bytes[t:stop])
            frees.extend(base.frees[t:stop])
            compute_s.extend(base.compute_s[t:stop])
            dma_s.extend(base.dma_s[t:stop])
            peaks.extend(base.stage_peaks[t:stop])
            before, resident_bytes = plan.resident(stop - 1), base.resident_bytes[stop - 1]
            t = stop
            continue
        computed = plan.computed[t]
        now = plan.resident(t)
        resident_bytes += sum(map(m, now - before)) - sum(map(m, before - now))
        before = now
        residents.append(resident_bytes)
        ram = resident_bytes + (sum(map(m, plan.paged_in[t])) if overlap else 0)
        starts.append(ram)
        if len(computed) == 1:  # t alone: nothing recomputed in it frees an input
            after_t = ram + m(t)
            afters.append({t: after_t})
            frees.append({})
            peaks.append(max(ram, after_t))
        else:
            stage_frees = _recomputation_frees(plan, t, deps, plan.paged_out[t] if overlap else frozenset())
            after = {}
            peak = ram
            for k in computed:
                ram += m(k)
                after[k] = ram
                peak = max(peak, ram)
                ram -= sum(map(m, stage_frees.get(k, ())))
            afters.append(after)
            frees.append({k: tuple(sorted(v)) for k, v in stage_frees.items()})
            peaks.append(peak)
        compute_s.append(sum(map(seconds, computed)))
        dma_s.append(sum(map(in_s, plan.paged_in[t])) + sum(map(out_s, plan.paged_out[t])))
        t += 1
    return Accounting(
        plan, tuple(frees), tuple(starts), tuple(afters), tuple(compute_s), tuple(dma_s), tuple(residents), tuple(peaks)
    )


def _lent_runs(plan: Plan, base: Accounting) -> dict[int, int]:
    """The runs of stages whose figures `base` lends: first stage -> the stage after the run.

    A stage's figures are lent where its sets, and the kept set before it, are the very objects
    of `base`'s plan.
    """
    other = base.plan
    if len(other.computed) != len(plan.computed):
        return {}
    same_kept = list(map(operator.is_, plan.kept, other.kept))
    same = [
        c and k and before and i and o
        for c, k, before, i, o in zip(
            map(operator.is_, plan.computed, other.computed),
            same_kept,
            [True, *same_kept[:-1]],
            map(operator.is_, plan.paged_in, other.paged_in),
            map(operator.is_, plan.paged_out, other.paged_out),
        )
    ]
    runs, start = {}, None
    for t, lends in enumerate([*same, False]):
        if lends and start is None:
            start = t
        elif not lends and start is not None:
            runs[start], start = t, None
    return runs


def _recomputation_frees(plan: Plan, t: int, deps: tuple[tuple[int, ...], ...], held: frozenset[int]) -> dict[int, list[int]]:
    """The inputs freed in stage t right after a recomputation in it, by that recomputation.

    An input whose last reader in the stage is a recomputation (not t itself) and that the stage
    neither keeps nor is paging out (`held`) is freed right after that reader.
    """
    last_reader = {}
    for k in plan.computed[t]:
        for i in deps[k]:
            last_reader[i] = k
    kept = plan.kept[t]
    stage_frees: dict[int, list[int]] = {}
    for i, k in last_reader.items():
        if k < t and i not in kept and i not in held:
            stage_frees.setdefault(k, []).append(i)
    return stage_frees


def stage_times_s(acc: Accounting, costs: CostTable, timing: Timing) -> list[float]:
    """Each stage's duration under the timing model."""
    if Timing(timing) is Timing.OVERLAP:
        return [overlapped_s(c, d, costs) for c, d in zip(acc.compute_s, acc.dma_s)]
    return list(acc.compute_s)


def overlapped_s(compute_s: float, dma_s: float, costs: CostTable) -> float:
    """A stage's duration under overlap timing: its compute or its transfers over the DMA channels, whichever takes longer."""
    return max(compute_s, dma_s / costs.dma_channels)


def figures(
    plan: Plan,
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    acc: Accounting | None = None,
    base: Accounting | None = None,
) -> Figures:
    """The model's figures of a plan.

    Peak of U, runtime, energy by component, counts (from `acc`, the plan's accounting, when the
    caller has it; else from its accounting with `base` lending its unchanged stages, `account`).
    """
    acc = acc if acc is not None else account(plan, graph, costs, timing, base)
    runtime_s = sum(stage_times_s(acc, costs, timing))
    recomputed = [k for t, computed in enumerate(plan.computed) for k in computed if k != t]
    return Figures(
        peak_ram_bytes=acc.peak_bytes,
        runtime_s=runtime_s,
        compute_j=costs.plain_compute_j,
        recompute_j=sum(costs.compute_j[k] for k in recomputed),
        page_in_j=sum(costs.page_in_j[i] for stage in plan.paged_in for i in stage),
        page_out_j=sum(costs.page_out_j[i] for stage in plan.paged_out for i in stage),
        static_j=costs.static_power_w * runtime_s if Timing(timing) is Timing.OVERLAP else 0.0,
        recomputations=len(recomputed),
        page_ins=sum(len(s) for s in plan.paged_in),
        page_outs=sum(len(s) for s in plan.paged_out),
    )


class Energies:
    """A plan's energy by stage, to price a change of it from the stages the change made alone.

    A stage's energy follows from its own computed, paged-out and paged-in sets: its recomputations,
    its transfers and, under overlap timing, the static energy of its duration. A change made from
    the plan shares every other set object with it (the kept sets do not enter energy), so its
    energy is the plan's plus the difference over the stages whose sets are other objects. The
    sums run in another order than `figures`', so they agree to rounding only: `cannot_beat` says
    no only with a margin far above it.
    """

    def __init__(self, plan: Plan, costs: CostTable, timing: Timing, total_j: float):
        self.plan, self.costs, self.total_j = plan, costs, total_j
        self.static_w = costs.static_power_w if Timing(timing) is Timing.OVERLAP else 0.0
        self.stage_j = [self._stage_j(c, i, o) for c, i, o in zip(plan.computed, plan.paged_in, plan.paged_out)]

    def _stage_j(self, computed: tuple[int, ...], paged_in: frozenset[int], paged_out: frozenset[int]) -> float:
        costs = self.costs
        compute_j = sum(map(costs.compute_j.__getitem__, computed[:-1]))
        transfer_j = sum(map(costs.page_in_j.__getitem__, paged_in)) + sum(map(costs.page_out_j.__getitem__, paged_out))
        if not self.static_w:
            return compute_j + transfer_j
        compute_s = sum(map(costs.compute_s.__getitem__, computed))
        dma_s = sum(map(costs.page_in_s.__getitem__, paged_in)) + sum(map(costs.page_out_s.__getitem__, paged_out))
        return compute_j + transfer_j + self.static_w * overlapped_s(compute_s, dma_s, costs)

    def of(self, changed: Plan) -> float:
        """The energy of `changed`, a change of the plan, to rounding."""
        own, stages = self.plan, range(len(self.stage_j))
        made = set(compress(stages, map(operator.is_not, changed.computed, own.computed)))
        made.update(compress(stages, map(operator.is_not, changed.paged_in, own.paged_in)))
        made.update(compress(stages, map(operator.is_not, changed.paged_out, own.paged_out)))
        total = self.total_j
        for t in sorted(made):
            total += self._stage_j(changed.computed[t], changed.paged_in[t], changed.paged_out[t]) - self.stage_j[t]
        return total

    def cannot_beat(self, changed: Plan, best_j: float) -> bool:
        """Whether `changed` certainly costs no less than `best_j`: its energy (`of`) above it by more than rounding."""
        return self.of(changed) > best_j + SCREEN_MARGIN * abs(best_j)


#: The share of an energy by which a change's energy from `Energies.of` must pass a figure for
#: `Energies.cannot_beat` to say so: far above the rounding of sums over a few thousand terms.
SCREEN_MARGIN = 1e-9


def to_schedule(plan: Plan, graph: TrainingGraph, costs: CostTable, timing: Timing, meta: dict | None = None) -> Schedule:
    """The instruction list of a plan, in the order poetsim.schedule.model prescribes."""
    acc = account(plan, graph, costs, timing)
    stages = []
    for t, computed in enumerate(plan.computed):
        stage: list[Instruction] = [PageOut(i) for i in sorted(plan.paged_out[t])]
        stage += [PageIn(i) for i in sorted(plan.paged_in[t])]
        freed: set[int] = set()
        for k in computed:
            stage.append(Compute(k))
            stage += [Free(i) for i in acc.frees[t].get(k, ())]
            freed.update(acc.frees[t].get(k, ()))
        present = (plan.resident(t) | set(computed)) - freed
        stage += [Free(i) for i in sorted(present - plan.kept[t])]
        stages.append(tuple(stage))
    return Schedule(
        graph_name=graph.name,
        num_nodes=len(graph),
        timing=Timing(timing),
        stages=tuple(stages),
        meta=tuple(sorted((meta or {}).items())),
    )


def from_schedule(schedule: Schedule, graph: TrainingGraph) -> Plan | None:
    """The plan of an instruction list (what each stage computes, keeps, pages), or None if it is not one of a plan's shape.

    A compute of a resident output, a page-in of one computed in the same stage. The plan frees each
    output as early as the model allows, so its RAM is never above the schedule's; the checker is
    the judge of the schedule itself.
    """
    if schedule.num_nodes != len(graph) or len(schedule.stages) != len(graph):
        return None
    resident: set[int] = set()
    computed, kept, paged_out, paged_in = [], [], [], []
    for stage in schedule.stages:
        comp, outs, ins = [], set(), set()
        for ins_ in stage:
            if isinstance(ins_, Compute):
                if ins_.node in resident:
                    return None
                comp.append(ins_.node)
                resident.add(ins_.node)
            elif isinstance(ins_, PageOut):
                outs.add(ins_.node)
            elif isinstance(ins_, PageIn):
                ins.add(ins_.node)
            else:
                resident.discard(ins_.node)
        if ins & set(comp):
            return None
        resident |= ins
        computed.append(tuple(sorted(comp)))
        kept.append(frozenset(resident))
        paged_out.append(frozenset(outs))
        paged_in.append(frozenset(ins))
    return Plan(tuple(computed), tuple(kept), tuple(paged_out), tuple(paged_in))


def from_columns(form: Formulation, values) -> Plan:
    """The plan of a solution (binaries rounded at 0.5)."""
    T = form.num_nodes

    def chosen(name: str) -> list[set[int]]:
        sets: list[set[int]] = [set() for _ in range(T + 1)]
        fam = form.family(name)
        for n, (t, i) in enumerate(fam.keys):
            if values[fam.start + n] > 0.5:
                sets[t].add(i)
        return sets

    recomputed, in_ram, page_in, page_out = chosen("R"), chosen("S_ram"), chosen("M_in"), chosen("M_out")
    return Plan(
        computed=tuple(tuple(sorted(recomputed[t] | {t})) for t in range(T)),
        kept=tuple(frozenset(in_ram[t + 1]) for t in range(T)),
        paged_out=tuple(frozenset(page_out[t]) for t in range(T)),
        paged_in=tuple(frozenset(page_in[t]) for t in range(T)),
    )


def to_columns(form: Formulation, plan: Plan, graph: TrainingGraph, costs: CostTable) -> list[float]:
    """The model's column values of a plan (a MIP start); KeyError if the plan leaves its windows."""
    values = [0.0] * form.num_columns
    acc = account(plan, graph, costs, form.timing)
    _put_moves(form, plan, acc, values)
    _put_ram(form, costs, acc, values)
    extra = form.family("Extra").column
    for (t,), col in extra.items():
        stage_s = overlapped_s(acc.compute_s[t], acc.dma_s[t], costs)
        values[col] = max(0.0, stage_s - costs.compute_s[t]) / form.time_scale_s
    return values


def _put_moves(form: Formulation, plan: Plan, acc: Accounting, values: list[float]) -> None:
    """Set the 0-1 columns of the plan's moves in `values`: R, S_ram, M_in, M_out and Free (and S_ssd).

    S_ssd is set by `_put_storage`. A key outside the model's windows raises KeyError.
    """

    def put(name: str, key: tuple) -> None:
        values[form.family(name).column[key]] = 1.0

    for t, computed in enumerate(plan.computed):
        for k in computed:
            if k != t:
                put("R", (t, k))
        for i in plan.resident(t):
            put("S_ram", (t, i))
        for i in plan.paged_in[t]:
            put("M_in", (t, i))
        for i in plan.paged_out[t]:
            put("M_out", (t, i))
        for k, freed in acc.frees[t].items():
            for i in freed:
                put("Free", (t, i, k))
    _put_storage(form, plan, values)


def _put_storage(form: Formulation, plan: Plan, values: list[float]) -> None:
    """Set the S_ssd columns in `values`: an output is on storage from the stage after its page-out on.

    The model has such a column only where storage can serve a later page-in; elsewhere none is set.
    """
    on_storage: set[int] = set()
    ssd = form.family("S_ssd").column
    for t in range(len(plan.computed)):
        for i in on_storage:
            if (t, i) in ssd:
                values[ssd[t, i]] = 1.0
        on_storage |= plan.paged_out[t]


def _put_ram(form: Formulation, costs: CostTable, acc: Accounting, values: list[float]) -> None:
    """Set the U columns in `values`: the RAM in use after each compute, in the model's units.

    U exists after every compute the model allows, computed or not, so the U rows are replayed:
    RAM starts each stage at its start, is set after each compute the plan makes, and falls by
    the outputs freed after it.
    """
    u_family = form.family("U")
    ram, stage = 0, -1
    for n, (t, k) in enumerate(u_family.keys):
        if t != stage:
            stage, ram = t, acc.start_bytes[t]
        if k in acc.after_bytes[t]:
            ram = acc.after_bytes[t][k]
        values[u_family.start + n] = ram / form.mem_scale_bytes
        ram -= sum(costs.output_bytes[i] for i in acc.frees[t].get(k, ()))
