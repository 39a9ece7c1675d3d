"""The tables of POFO's dynamic program over the memory axis, and the trees they choose.

`Tables` fills, on demand, one array per call over m (the memory slots the call may use): the
least time of that part of the schedule, INF where it cannot fit. Every part is timed and
counted by replaying its stages with poetsim's accounting (`Tables.run` mirrors
`poetsim.optimiser.plans.plan.account`), and what an enclosing call holds meanwhile is subtracted from
the m its children see, so a table's value is exactly the checker's runtime of the schedule its
choices make. `poetsim.optimiser.baselines.pofo` states the space and turns a tree into a plan.
"""

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.baselines.chain import Chain
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Timing

INF = math.inf

#: Page-ins a parent puts in a call's last stage: (RAM slots, DMA seconds); (0, 0.0) for none.
Extra = tuple[int, float]

_Value = TypeVar("_Value")


def cache_method(method: Callable[..., _Value]) -> Callable[..., _Value]:
    """Memoise a method of a Tables object on its arguments (one cache per object).

    The cache lives in the object's `__dict__`, so it goes with the object; the arguments must
    be positional and hashable.
    """
    name = f"_cache_{method.__name__}"

    def cached(self: "Tables", *args: Hashable) -> _Value:
        store = self.__dict__.setdefault(name, {})
        if args not in store:
            store[args] = method(self, *args)
        return store[args]

    cached.__doc__ = method.__doc__
    return cached


# -- the schedules of the space, as decision trees ------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """The loss, computed after the last block's forward."""


@dataclass(frozen=True)
class TopAll:
    """F_all(s) in the first forward pass, `offload` paging the step's input out and back in."""

    s: int
    offload: bool
    rest: "Top"


@dataclass(frozen=True)
class TopCk:
    """F_ck(s..j) in the first forward pass; `backward` recomputes blocks s..j from the checkpoint."""

    s: int
    j: int
    offload: bool
    rest: "Top"
    backward: "Rec"


@dataclass(frozen=True)
class RecAll:
    """Recompute block s keeping what its backward reads; `rest` handles s+1..e first (None if s == e)."""

    s: int
    e: int
    rest: "Rec | None"


@dataclass(frozen=True)
class RecCk:
    """Recompute blocks s..k-1 without keeping, checkpoint block k-1's output, solve k..e, then s..k-1."""

    s: int
    k: int
    e: int
    right: "Rec"
    left: "Rec"


Top = Turn | TopAll | TopCk
Rec = RecAll | RecCk


@dataclass(frozen=True)
class Stage:
    """One stage of a window: what it computes, pages out, and pages in for a later step.

    `computes` are ascending, the stage's own node last (recomputations run before it);
    `in_slots` and `in_dma_s` are the RAM and DMA time of page-ins that land in the stage for a
    later step, which count only under overlap timing.
    """

    computes: tuple[int, ...]
    page_outs: frozenset[int] = frozenset()
    in_slots: int = 0
    in_dma_s: float = 0.0


@dataclass(frozen=True)
class Window:
    """A window of stages replayed: its peak (slots), time, and its last stage's peak and compute."""

    peak: int
    time_s: float
    last_peak: int
    last_compute_s: float


@dataclass(frozen=True)
class Option:
    """One choice of a table entry: its value over the memory axis and how its last stage bends."""

    value: np.ndarray
    last_need: int
    last_compute_s: float
    tag: tuple


class Tables:
    """POFO's tables over the memory axis m (slots available to a call), filled on demand.

    `opt(s, e)`: backward of blocks s..e by recomputation (rotor), with block s's input, block e's
    output (if its group reads it) and the gradients into block e resident. `top(s, bar, extra)`:
    the first forward pass from block s on, the loss, and the backward of s..end; `bar` says
    whether the step's input includes the previous block's kept tensors (POFO's x-bar), and
    `extra` is the RAM and DMA time of the parent's page-ins that land in the call's last stage.
    """

    def __init__(
        self, graph: TrainingGraph, costs: CostTable, chain: Chain, timing: Timing, limit_bytes: int, slots: int | None
    ) -> None:
        self.graph, self.costs, self.chain, self.timing = graph, costs, chain, timing
        self.overlap = timing is Timing.OVERLAP
        self.n = len(chain.blocks)
        self.slot_bytes = 1 if slots is None else max(1, math.ceil(limit_bytes / slots))
        self.size = [math.ceil(b / self.slot_bytes) for b in graph.output_bytes]
        self.inputs_slots = sum(self.size[i] for i in chain.inputs)
        self.budget = limit_bytes // self.slot_bytes
        self.axis = np.arange(self.budget + 1)
        self._opt_typed: dict = {}
        self._opt: dict = {}
        self._top: dict = {}
        self._options: dict = {}
        self.deps = chain.deps

    def out(self, k: int) -> int | None:
        """Block k's output (None for k < 0)."""
        return self.chain.input_of(k + 1) if k >= 0 else None

    def output(self, k: int) -> int:
        """Block k's output, for a block that exists (k >= 0)."""
        return self.chain.blocks[k].output

    def held_input(self, s: int) -> frozenset[int]:
        """Block s's input if the previous block's group reads it (so it stays resident), else nothing."""
        return frozenset({self.output(s - 1)}) if self.keeps(s - 1) else frozenset()

    def keeps(self, k: int) -> bool:
        """Whether block k's group reads block k's output (false for k < 0, no block).

        Such an output stays resident until that group runs, so a call that starts from it holds
        it without counting it (`cin`).
        """
        return self.chain.keeps(k)

    def slots_of(self, tensors: Iterable[int]) -> int:
        """The memory slots `tensors` take, each tensor rounded up to whole slots.

        Rounding each tensor up, and the limit down (`budget`), keeps the program from accepting
        a schedule over the limit in bytes.
        """
        return sum(self.size[v] for v in tensors)

    def stage_time(self, compute_s: float, dma_s: float) -> float:
        """A stage's seconds: its compute, or under overlap timing the longer of compute and DMA per channel.

        The same rule as poetsim's accounting, so the times the program adds up equal the
        checker's runtime.
        """
        return max(compute_s, dma_s / self.costs.dma_channels) if self.overlap else compute_s

    def last_reader(self, computes: Iterable[int]) -> dict[int, int]:
        """Per tensor that `computes` read, the last of them that reads it.

        A counted tensor may leave RAM once its last reader has run, unless it is needed later.
        """
        return {d: k for k in computes for d in self.deps[k]}

    def extra_delta(self, last_compute_s: float, extra: Extra) -> float:
        """Added time of a last stage when `extra` page-ins land in it."""
        return self.stage_time(last_compute_s, extra[1]) - self.stage_time(last_compute_s, 0.0)

    # --- replaying windows with poetsim's accounting (poetsim.optimiser.plans.plan.account) ---

    def run(self, stages: list[Stage], start: frozenset[int], keep: frozenset[int]) -> Window:
        """Replay stages from the counted tensors `start`: the window's peak, time and last stage.

        A counted tensor leaves after its last read in the window unless it is in `keep` (needed
        later) or is paged out (then at the end of its stage). Tensors not counted (held by an
        enclosing call) are read but never freed.
        """
        last_read = {d: index for index, stage in enumerate(stages) for d in self.last_reader(stage.computes)}

        def needed_after(v: int, index: int) -> bool:
            return v in keep or last_read.get(v, -1) > index

        resident = set(start)
        peak, time_s, last_peak, last_compute = 0, 0.0, 0, 0.0
        for index, stage in enumerate(stages):
            ram = self.slots_of(resident) + (stage.in_slots if self.overlap else 0)
            stage_peak = ram
            main = stage.computes[-1]
            reader = self.last_reader(stage.computes)
            held = stage.page_outs if self.overlap else frozenset()
            for k in stage.computes:
                resident.add(k)
                ram += self.size[k]
                stage_peak = max(stage_peak, ram)
                if k != main:
                    for d in self.deps[k]:
                        if d in resident and reader[d] == k and not needed_after(d, index) and d not in held:
                            resident.discard(d)
                            ram -= self.size[d]
            resident = {v for v in resident if v not in stage.page_outs and needed_after(v, index)}
            compute_s = sum(self.costs.compute_s[k] for k in stage.computes)
            dma_s = sum(self.costs.page_out_s[v] for v in stage.page_outs) + stage.in_dma_s
            time_s += self.stage_time(compute_s, dma_s)
            peak = max(peak, stage_peak)
            last_peak, last_compute = stage_peak, compute_s
        return Window(peak, time_s, last_peak, last_compute)

    def chain_run(self, computes: list[int], start: frozenset[int], keep: frozenset[int]) -> tuple[int, int, float]:
        """Recomputations at the head of a stage: (peak, slots left, seconds).

        A counted input leaves after its last reader here unless it is in `keep`; the slots left
        are what stays counted after the recomputations.
        """
        last = self.last_reader(computes)
        resident, peak = set(start), self.slots_of(start)
        ram = peak
        for k in computes:
            resident.add(k)
            ram += self.size[k]
            peak = max(peak, ram)
            for d in self.deps[k]:
                if d in resident and last[d] == k and d not in keep:
                    resident.discard(d)
                    ram -= self.size[d]
        return peak, ram, sum(self.costs.compute_s[k] for k in computes)

    # --- the recursion of the backward by recomputation (rotor) ---

    def cin(self, s: int) -> frozenset[int]:
        """Block s's input, if the call counts it (it does unless the previous group reads it)."""
        x = self.out(s - 1)
        return frozenset() if x is None or self.keeps(s - 1) else frozenset({x})

    def base(self, e: int) -> frozenset[int]:
        """What a call for blocks ..e finds resident besides its input.

        That is block e's output if its group reads it, and the gradients into block e: both are
        made before the call and read by block e's group.
        """
        blk = self.chain.blocks[e]
        return blk.gradients_in | (frozenset({blk.output}) if blk.keeps_output else frozenset())

    @cached_property
    def _last_types(self) -> dict:
        """Per block s and last-stage type, the window of block s's group.

        'B' is the group with block s's recomputation in its first stage (as when a call
        recomputes block s alone), 'N' the group alone; their last stages differ only for
        one-stage groups.
        """
        result = {}
        for s in range(self.n):
            result[s, "B"] = self._base_window(s)
            result[s, "N"] = self._group_window(s)
        return result

    def _base_window(self, s: int) -> Window:
        blk = self.chain.blocks[s]
        rec = self.chain.needed(blk.saved - {blk.output}, [s])
        stages = [Stage((*rec, blk.grads[0])), *(Stage((g,)) for g in blk.grads[1:])]
        return self.run(stages, self.base(s) | self.cin(s), self.chain.gradients_out(s))

    def _group_window(self, s: int) -> Window:
        blk = self.chain.blocks[s]
        start = blk.saved | blk.gradients_in | (self.cin(s) if blk.reads_input else frozenset())
        return self.run([Stage((g,)) for g in blk.grads], start, self.chain.gradients_out(s))

    @cache_method
    def recompute_all(self, s: int) -> tuple[int, float, int]:
        """F_all(s) inside a backward: (peak over the call's count, seconds, slots held meanwhile).

        The peak is the recomputation's, over what the call counts; the slots held are what the
        parent keeps (block s's saved tensors, and its input where its group reads it) while
        blocks s+1.. are solved.
        """
        blk = self.chain.blocks[s]
        x_in = self.out(s - 1)
        kept_in = frozenset({x_in}) if x_in is not None and blk.reads_input else frozenset()
        rec = self.chain.needed(blk.saved | {blk.output}, [s])
        peak, _, rec_s = self.chain_run(rec, self.cin(s), blk.saved | {blk.output} | kept_in)
        return peak, rec_s, self.slots_of(blk.saved) + self.slots_of(self.cin(s) & kept_in)

    @cache_method
    def recompute_stretch(self, s: int, k: int) -> tuple[int, float, int]:
        """Blocks s..k-1 recomputed without keeping: (peak over the call's count, seconds, slots held meanwhile).

        The stretch runs from block s's input to block k-1's output, the new checkpoint; the slots
        held are the input and that output where block k-1's group reads it, kept while blocks
        k.. are solved.
        """
        x_in, x_k = self.out(s - 1), self.output(k - 1)
        checkpoint = frozenset({x_in}) if x_in is not None else frozenset()
        peak, _, rec_s = self.chain_run(self.chain.needed({x_k}, range(s, k)), self.cin(s), checkpoint | {x_k})
        return peak, rec_s, self.slots_of(self.cin(s)) + (self.size[x_k] if self.keeps(k - 1) else 0)

    def opt_typed(self, s: int, e: int) -> dict[str, tuple[np.ndarray, np.ndarray, list]]:
        """Per last-stage type, the least time over m of the backward of s..e, and its choices."""
        key = (s, e)
        if key in self._opt_typed:
            return self._opt_typed[key]
        base_slots = self.slots_of(self.base(e))
        options: dict[str, list] = {"B": [], "N": []}
        if s == e:
            window = self._last_types[s, "B"]
            options["B"].append((self.feasible(window.peak, window.time_s), ("all",)))
        else:
            peak, rec_s, held = self.recompute_all(s)
            window = self._last_types[s, "N"]
            value = self.feasible(max(base_slots + peak, window.peak), rec_s + window.time_s)
            options["N"].append((value + self.shift(self.opt(s + 1, e), held), ("all",)))
            for k in range(s + 1, e + 1):
                peak, rec_s, held = self.recompute_stretch(s, k)
                head = self.feasible(base_slots + peak, rec_s) + self.shift(self.opt(k, e), held)
                for kind, table in self.opt_typed(s, k - 1).items():
                    options[kind].append((head + table[0], ("ck", k)))
        tables = {kind: self.best(entries) for kind, entries in options.items()}
        self._opt_typed[key] = tables
        return tables

    def opt(self, s: int, e: int, extra: Extra = (0, 0.0)) -> np.ndarray:
        """The least time over m of the backward of s..e, with `extra` page-ins in its last stage."""
        key = (s, e, extra)
        if key not in self._opt:
            result = np.full(self.budget + 1, INF)
            for kind, (value, _, _) in self.opt_typed(s, e).items():
                last = self._last_types[s, kind]
                bent = np.where(self.axis >= last.last_peak + extra[0], value + self.extra_delta(last.last_compute_s, extra), INF)
                result = np.minimum(result, bent)
            self._opt[key] = result
        return self._opt[key]

    # --- the first forward pass, with offloading (POFO's recursion) ---

    def forward_window(self, s: int, bar: bool, keep: frozenset[int], moving: frozenset[int]) -> Window:
        """Block s's first computation with the step's input resident (part of it paged out)."""
        outs = self.chain.page_out_stages(s, moving, s) if moving else {}
        stages = [Stage((v,), frozenset(outs.get(v, ()))) for v in self.chain.blocks[s].nodes]
        return self.run(stages, self.chain.bundle(s, bar), keep)

    @cache_method
    def forward_block(self, b: int) -> Window:
        """Block b's first computation from its input, keeping only its output (inside F_ck)."""
        stages = [Stage((v,)) for v in self.chain.blocks[b].nodes]
        return self.run(stages, frozenset({self.output(b - 1)}), frozenset({self.output(b)}))

    def page_in(self, tensors: frozenset[int]) -> tuple[int, float]:
        """The extra RAM and DMA time a page-in of `tensors` puts in the stage that issues it."""
        if not self.overlap or not tensors:
            return (0, 0.0)
        return (self.slots_of(tensors), sum(self.costs.page_in_s[v] for v in tensors))

    def top_options(self, s: int, bar: bool) -> list[Option]:
        """Every choice of step s, each over m, without the parent's page-ins."""
        key = (s, bar)
        if key in self._options:
            return self._options[key]
        options = []
        if s == self.n:
            blk = self.chain.blocks[-1]
            keep = (frozenset({blk.output}) if blk.keeps_output else frozenset()) | (blk.saved if bar else frozenset())
            keep |= frozenset({self.chain.turn}) if self.chain.turn_is_gradient else frozenset()
            window = self.run([Stage((self.chain.turn,))], self.chain.bundle(s, bar), keep)
            options.append(Option(self.feasible(window.peak, window.time_s), window.last_peak, window.last_compute_s, ("turn",)))
        else:
            blk = self.chain.blocks[s]
            after = (self.chain.blocks[s - 1].saved if bar and s > 0 else frozenset()) | self.held_input(s)
            for offload in (False, True):
                kept = self.chain.retained(s, bar, checkpoint=False)
                if offload and not kept:
                    continue
                fwd = self.forward_window(
                    s, bar, blk.saved | {blk.output} | (frozenset() if offload else kept), kept if offload else frozenset()
                )
                group = self.run(
                    [Stage((g,)) for g in blk.grads], kept | blk.saved | blk.gradients_in, after | self.chain.gradients_out(s)
                )
                rest = self.top(s + 1, True, self.page_in(kept) if offload else (0, 0.0))
                value = self.feasible(max(fwd.peak, group.peak), fwd.time_s + group.time_s)
                value = value + self.shift(rest, 0 if offload else self.slots_of(kept))
                options.append(Option(value, group.last_peak, group.last_compute_s, ("all", offload)))
            kept = self.chain.retained(s, bar, checkpoint=True)
            outer = self.slots_of(after - self.cin(s) - {self.out(s - 1)}) + self.slots_of(self.held_input(s))
            for offload in (False, True):
                if offload and not kept:
                    continue
                held = 0 if offload else self.slots_of(kept)
                first = self.forward_window(
                    s, bar, frozenset({blk.output}) | (frozenset() if offload else kept), kept if offload else frozenset()
                )
                peak, time_s = first.peak, first.time_s
                for j in range(s, self.n):
                    if j > s:
                        later = self.forward_block(j)
                        peak, time_s = max(peak, held + later.peak), time_s + later.time_s
                    rest = self.top(j + 1, False, self.page_in(kept) if offload else (0, 0.0))
                    head = self.feasible(peak, time_s) + self.shift(rest, held)
                    for kind, (value, _, _) in self.opt_typed(s, j).items():
                        last = self._last_types[s, kind]
                        options.append(
                            Option(
                                head + self.shift(value, outer),
                                last.last_peak + outer,
                                last.last_compute_s,
                                ("ck", j, offload, kind),
                            )
                        )
        self._options[key] = options
        return options

    def top(self, s: int, bar: bool, extra: Extra = (0, 0.0)) -> np.ndarray:
        """The least time over m of step s onwards, with `extra` page-ins in its last stage."""
        key = (s, bar, extra)
        if key not in self._top:
            entries = []
            for option in self.top_options(s, bar):
                bent = np.where(
                    self.axis >= option.last_need + extra[0], option.value + self.extra_delta(option.last_compute_s, extra), INF
                )
                entries.append((bent, option.tag))
            self._top[key] = self.best(entries)
        return self._top[key][0]

    # --- arrays over m ---

    def feasible(self, need: int, time_s: float) -> np.ndarray:
        """`time_s` over m where `need` slots fit, INF below.

        The table of a part with one peak: it takes `time_s` given at least `need` slots.
        """
        return np.where(self.axis >= need, time_s, INF)

    def shift(self, table: np.ndarray, held: int) -> np.ndarray:
        """table[m - held] over m: a child that runs while `held` slots stay taken."""
        result = np.full(self.budget + 1, INF)
        if held <= self.budget:
            result[held:] = table[: self.budget + 1 - held]
        return result

    def best(self, entries: list) -> tuple[np.ndarray, np.ndarray, list]:
        """The element-wise least of the entries' arrays, which entry gave it, and their tags."""
        if not entries:
            return np.full(self.budget + 1, INF), np.full(self.budget + 1, -1), []
        stack = np.vstack([value for value, _ in entries])
        choice = np.argmin(stack, axis=0)
        return stack[choice, self.axis], choice, [tag for _, tag in entries]

    # --- solving and reading the choices back ---

    def solve(self) -> tuple[Top | None, float]:
        """The best tree within the limit and its makespan, or (None, inf) if nothing fits."""
        m = self.budget - self.inputs_slots
        if m < 0:
            return None, INF
        value = self.top(0, False)[m]
        if not math.isfinite(value):
            return None, INF
        inputs_s = sum(self.stage_time(self.costs.compute_s[i], 0.0) for i in self.chain.inputs)
        return self.read_top(0, False, (0, 0.0), m), inputs_s + float(value)

    def read_top(self, s: int, bar: bool, extra: Extra, m: int) -> Top:
        """The tree of step s onwards that the tables chose at m slots.

        `extra` must be the parent's page-ins, as when the table was filled: they change the
        choices. Each child is read at m less what the call holds while the child runs, as the
        tables shifted it.
        """
        self.top(s, bar, extra)
        _, choice, tags = self._top[s, bar, extra]
        tag = tags[choice[m]]
        if tag[0] == "turn":
            return Turn()
        kind, *rest = tag
        if kind == "all":
            (offload,) = rest
            kept = self.chain.retained(s, bar, checkpoint=False)
            child_m = m - (0 if offload else self.slots_of(kept))
            return TopAll(s, offload, self.read_top(s + 1, True, self.page_in(kept) if offload else (0, 0.0), child_m))
        j, offload, last_kind = rest
        kept = self.chain.retained(s, bar, checkpoint=True)
        child_m = m - (0 if offload else self.slots_of(kept))
        after = (self.chain.blocks[s - 1].saved if bar and s > 0 else frozenset()) | self.held_input(s)
        outer = self.slots_of(after - self.cin(s) - {self.out(s - 1)}) + self.slots_of(self.held_input(s))
        rest_tree = self.read_top(j + 1, False, self.page_in(kept) if offload else (0, 0.0), child_m)
        return TopCk(s, j, offload, rest_tree, self.read_rec(s, j, last_kind, m - outer))

    def read_rec(self, s: int, e: int, kind: str, m: int) -> Rec:
        """The backward tree of blocks s..e whose last stage is of type `kind`, chosen at m slots.

        Each child is read at m less the slots the call holds while it runs
        (`recompute_all`, `recompute_stretch`), as the tables shifted it.
        """
        _, choice, tags = self.opt_typed(s, e)[kind]
        tag = tags[choice[m]]
        if tag[0] == "all":
            if s == e:
                return RecAll(s, e, None)
            blk = self.chain.blocks[s]
            x_in = self.out(s - 1)
            kept_in = frozenset({x_in}) if x_in is not None and blk.reads_input else frozenset()
            held = self.slots_of(blk.saved) + self.slots_of(self.cin(s) & kept_in)
            return RecAll(s, e, self.read_rec_any(s + 1, e, m - held))
        k = tag[1]
        x_k = self.output(k - 1)
        held = self.slots_of(self.cin(s)) + (self.size[x_k] if self.keeps(k - 1) else 0)
        return RecCk(s, k, e, self.read_rec_any(k, e, m - held), self.read_rec(s, k - 1, kind, m))

    def read_rec_any(self, s: int, e: int, m: int) -> Rec:
        """The choice of the cheaper last-stage type at m (no page-ins in the last stage)."""
        tables = self.opt_typed(s, e)
        kind = min(tables, key=lambda t: tables[t][0][m])
        return self.read_rec(s, e, kind, m)
