"""The independent schedule checker: replay an instruction list and recompute what it costs.

The optimiser predicts a schedule's figures from its MILP variables; a slip in the formulation
or in turning variables into instructions would go unnoticed if the check read them too. This
module sees only the instruction list (`Schedule`), the graph and the per-node costs, and
applies the semantics stated once in the module docstring of `poetsim.schedule`. It runs on
every schedule of every sweep point, so it makes one pass over the instructions: O(number of
instructions + inputs read), with flat lists indexed by node id for the machine state.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, NoReturn

from poetsim.costs import CostTable
from poetsim.errors import InternalError, ScheduleError
from poetsim.graph import TrainingGraph
from poetsim.schedule import Budgets, Compute, Figures, Free, Instruction, PageIn, PageOut, Schedule, Timing

# The order within a stage: page-outs, then page-ins, then computes with their frees.
_PHASE: dict[type[Instruction], int] = {PageOut: 0, PageIn: 1, Compute: 2, Free: 2}
_PHASE_NAMES = ("page-outs", "page-ins", "computes and frees")

# compare_figures: below this absolute difference two figures are equal whatever their ratio,
# so that a zero against a rounding residue (1e-18 J of static energy) is not a mismatch.
_ABS_FLOOR = 1e-12


def check_schedule(
    schedule: Schedule,
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing,
    budgets: Budgets | None = None,
) -> Figures:
    """Replay `schedule` on `graph` under `timing` and return its figures; ScheduleError if invalid.

    `timing` is the model to account by, not necessarily the one the schedule was made for:
    the rules of validity are the same under both, only RAM and time accounting differ, so a
    schedule can be re-costed under the other model. With `budgets`, a peak RAM or a runtime
    over budget is an error too, and its message says by how much.
    """
    _check_shape(schedule, graph, costs)
    replay = _Replay(graph, costs, Timing(timing))
    for t, stage in enumerate(schedule.stages):
        replay.run_stage(t, stage)
    figures = replay.figures()
    if budgets is not None:
        _check_budgets(figures, budgets)
    return figures


def compare_figures(predicted: Figures, checked: Figures, rtol: float = 1e-6) -> list[str]:
    """Names of the figures that differ by more than `rtol` (relative), in declaration order.

    Used to hold the optimiser's prediction against the checker's replay: an empty list means
    they agree. Differences below a tiny absolute floor never count, so zeros compare equal to
    rounding residues.
    """
    return [
        f.name
        for f in fields(Figures)
        if not math.isclose(getattr(predicted, f.name), getattr(checked, f.name), rel_tol=rtol, abs_tol=_ABS_FLOOR)
    ]


def _check_shape(schedule: Schedule, graph: TrainingGraph, costs: CostTable) -> None:
    """Reject a schedule or cost table made for another graph before replaying anything."""
    num_nodes = len(graph)
    if len(costs) != num_nodes or tuple(costs.output_bytes) != graph.output_bytes:
        raise InternalError(f"the cost table ({len(costs)} nodes) was not derived from graph '{graph.name}' ({num_nodes} nodes)")
    if schedule.num_nodes != num_nodes:
        raise ScheduleError(f"the schedule is for {schedule.num_nodes} nodes but graph '{graph.name}' has {num_nodes}")
    num_stages = len(schedule.stages)
    if num_stages < num_nodes:
        raise ScheduleError(
            f"node {num_stages} is never computed: the schedule has {num_stages} stages for {num_nodes} nodes "
            "(stage t computes node t for the first time)"
        )
    if num_stages > num_nodes:
        raise ScheduleError(
            f"the schedule has {num_stages} stages for {num_nodes} nodes "
            "(stage t computes node t for the first time, so there is one stage per node)"
        )


def _check_budgets(figures: Figures, budgets: Budgets) -> None:
    """Raise ScheduleError naming every figure over its budget and by how much."""
    problems = budgets.overruns(figures)
    if problems:
        raise ScheduleError("over budget: " + "; ".join(problems))


def _show(ins: Instruction) -> str:
    """An instruction as a reader writes it: Compute(12)."""
    return f"{type(ins).__name__}({ins.node})"


@dataclass(slots=True)
class _StageState:
    """What one stage has done so far: its phase, its transfers, its deferred frees, its times."""

    t: int
    phase: int = 0
    last_compute: int = -1
    # Created by the stage's first page-out / page-in: most stages have neither.
    paging_out: set[int] | None = None
    paging_in: dict[int, None] | None = None  # an ordered set: made resident in order
    deferred_free_bytes: int = 0
    compute_s: float = 0.0
    dma_s: float = 0.0


class _Replay:
    """The machine while a schedule is replayed: where each output is, RAM in use, totals so far.

    `resident[i]` means i's output is in RAM and usable by a compute now; `on_storage[i]` means
    a copy is on storage that a page-in may fetch (from the stage after its page-out on; paging
    never erases it, as in the MILP's storage persistence).
    """

    def __init__(self, graph: TrainingGraph, costs: CostTable, timing: Timing):
        self._num_nodes = len(graph)
        self._deps = graph.deps
        self._bytes = graph.output_bytes
        self._costs = costs
        self._compute_s, self._node_compute_j = costs.compute_s, costs.compute_j  # read once per compute
        self._overlap = timing is Timing.OVERLAP
        self._resident = [False] * self._num_nodes
        self._on_storage = [False] * self._num_nodes
        self._ram_bytes = 0
        self._peak_ram_bytes = 0
        self._runtime_s = 0.0
        self._compute_j = 0.0
        self._recompute_j = 0.0
        self._page_in_j = 0.0
        self._page_out_j = 0.0
        self._recomputations = 0
        self._page_ins = 0
        self._page_outs = 0
        # Each handler takes the instruction kind it is listed under, hence `Any` for the instruction.
        handlers: dict[type[Instruction], Callable[[_StageState, Any], None]] = {
            PageOut: self._page_out, PageIn: self._page_in, Compute: self._compute, Free: self._free,
        }
        self._dispatch = {kind: (_PHASE[kind], handler) for kind, handler in handlers.items()}

    def run_stage(self, t: int, instructions) -> None:
        """Replay stage t: check what every instruction must satisfy (kind, node id, order), run
        each, then close the stage. The loop runs once per instruction of every checked schedule
        (and of every simulation), so the common case is written out here: computes and frees,
        the last phase, are never out of order and are run without a lookup of their handler."""
        stage = _StageState(t)
        # Stage-start RAM: what is resident; page-ins issued under overlap add to it as they come.
        if self._ram_bytes > self._peak_ram_bytes:
            self._peak_ram_bytes = self._ram_bytes
        num_nodes, compute, free = self._num_nodes, self._compute, self._free
        for ins in instructions:
            kind = type(ins)
            if kind is Compute or kind is Free:
                node = ins.node
                if type(node) is not int or not 0 <= node < num_nodes:
                    self._check_node(stage, ins)
                stage.phase = 2
                if kind is Compute:
                    compute(stage, ins)
                else:
                    free(stage, ins)
            else:
                self._run_transfer(stage, ins)
        self._end_stage(stage)

    def _run_transfer(self, stage: _StageState, ins) -> None:
        """Check and run an instruction other than a compute or a free: a page-out or a page-in."""
        entry = self._dispatch.get(type(ins))
        if entry is None:
            raise ScheduleError(f"stage {stage.t}: unknown instruction {ins!r}")
        phase, handler = entry
        self._check_node(stage, ins)
        if phase < stage.phase:
            _fail(
                stage, ins,
                f"out of order: {_PHASE_NAMES[phase]} must come before {_PHASE_NAMES[stage.phase]} "
                "(the order is page-outs, page-ins, then computes and frees)",
            )
        stage.phase = phase
        handler(stage, ins)

    def _check_node(self, stage: _StageState, ins: Instruction) -> None:
        """Refuse a node id that is not an int in range (a bool passes, as isinstance says)."""
        node = ins.node
        if not isinstance(node, int) or not 0 <= node < self._num_nodes:
            _fail(stage, ins, f"node id {node!r} is out of range 0..{self._num_nodes - 1}")

    def figures(self) -> Figures:
        """The totals of the replay so far as a Figures record."""
        return Figures(
            peak_ram_bytes=self._peak_ram_bytes,
            runtime_s=self._runtime_s,
            compute_j=self._compute_j,
            recompute_j=self._recompute_j,
            page_in_j=self._page_in_j,
            page_out_j=self._page_out_j,
            static_j=self._costs.static_power_w * self._runtime_s if self._overlap else 0.0,
            recomputations=self._recomputations,
            page_ins=self._page_ins,
            page_outs=self._page_outs,
        )

    def _page_out(self, stage: _StageState, ins: PageOut) -> None:
        i = ins.node
        if not self._resident[i]:
            _fail(stage, ins, f"node {i} is not in RAM at the start of the stage")
        if stage.paging_out is None:
            stage.paging_out = set()
        elif i in stage.paging_out:
            _fail(stage, ins, f"node {i} is already being paged out in this stage")
        stage.paging_out.add(i)
        stage.dma_s += self._costs.page_out_s[i]
        self._page_out_j += self._costs.page_out_j[i]
        self._page_outs += 1

    def _page_in(self, stage: _StageState, ins: PageIn) -> None:
        i = ins.node
        if self._resident[i]:
            _fail(stage, ins, f"node {i} is already in RAM")
        if not self._on_storage[i]:
            _fail(stage, ins, f"node {i} is not on storage (it was not paged out in an earlier stage)")
        if stage.paging_in is None:
            stage.paging_in = {}
        elif i in stage.paging_in:
            _fail(stage, ins, f"node {i} is already being paged in in this stage")
        stage.paging_in[i] = None
        if self._overlap:
            # The transfer writes into RAM during this stage, so its buffer is held from the start.
            self._allocate(self._bytes[i])
        stage.dma_s += self._costs.page_in_s[i]
        self._page_in_j += self._costs.page_in_j[i]
        self._page_ins += 1

    def _compute(self, stage: _StageState, ins: Compute) -> None:
        k, t = ins.node, stage.t
        paging_in = stage.paging_in
        if k > t or k <= stage.last_compute or self._resident[k] or (paging_in and k in paging_in):
            _refuse_compute(stage, ins, self._resident)
        resident = self._resident
        for d in self._deps[k]:
            if not resident[d]:
                why = ""
                if paging_in and d in paging_in:
                    why = " (it is being paged in during this stage and usable only from the next)"
                _fail(stage, ins, f"input {d} is not in RAM{why}")
        resident[k] = True
        stage.last_compute = k
        ram_bytes = self._ram_bytes = self._ram_bytes + self._bytes[k]
        if ram_bytes > self._peak_ram_bytes:
            self._peak_ram_bytes = ram_bytes
        stage.compute_s += self._compute_s[k]
        if k == t:
            self._compute_j += self._node_compute_j[k]
        else:
            self._recompute_j += self._node_compute_j[k]
            self._recomputations += 1

    def _free(self, stage: _StageState, ins: Free) -> None:
        i = ins.node
        if not self._resident[i]:
            _fail(stage, ins, f"node {i} is not in RAM")
        self._resident[i] = False
        if stage.paging_out and self._overlap and i in stage.paging_out:
            # Its page-out may run until the end of the stage, so the buffer is held until then.
            stage.deferred_free_bytes += self._bytes[i]
        else:
            self._ram_bytes -= self._bytes[i]

    def _end_stage(self, stage: _StageState) -> None:
        """Check the stage computed node t last, then land transfers and add the stage's time."""
        t = stage.t
        if stage.last_compute != t:
            found = "no compute" if stage.last_compute < 0 else f"Compute({stage.last_compute})"
            raise ScheduleError(f"stage {t}: the last compute must be Compute({t}), found {found}")
        if stage.paging_in is not None or stage.paging_out is not None:
            self._land(stage)
        if self._overlap:
            dma_s = stage.dma_s / self._costs.dma_channels  # max(compute, DMA / channels), written out
            self._runtime_s += dma_s if dma_s > stage.compute_s else stage.compute_s
        else:
            self._runtime_s += stage.compute_s

    def _land(self, stage: _StageState) -> None:
        """At the end of a stage that pages: its page-ins are resident, its page-outs on storage,
        and the outputs it freed while paging them out give their RAM back."""
        for i in stage.paging_in or ():
            self._resident[i] = True
            if not self._overlap:
                # The paper's accounting: a page-in occupies RAM from the next stage's start.
                self._ram_bytes += self._bytes[i]
        for i in stage.paging_out or ():
            self._on_storage[i] = True
        self._ram_bytes -= stage.deferred_free_bytes

    def _allocate(self, size_bytes: int) -> None:
        self._ram_bytes += size_bytes
        self._note_peak()

    def _note_peak(self) -> None:
        if self._ram_bytes > self._peak_ram_bytes:
            self._peak_ram_bytes = self._ram_bytes


def _refuse_compute(stage: _StageState, ins: Compute, resident: list[bool]) -> NoReturn:
    """Raise the ScheduleError of a compute that may not run where it is, the first reason found."""
    k, t = ins.node, stage.t
    if k > t:
        _fail(stage, ins, f"node {k} is first computed in stage {k}, so it cannot run in stage {t}")
    if k <= stage.last_compute:
        _fail(stage, ins, f"computes must be in ascending node order, but Compute({stage.last_compute}) came earlier")
    if resident[k]:
        _fail(stage, ins, f"node {k}'s output is already in RAM")
    _fail(stage, ins, f"node {k} is being paged in during this stage")


def _fail(stage: _StageState, ins: Instruction, problem: str) -> NoReturn:
    """Raise the ScheduleError of one instruction: 'stage 7, Compute(12): input 9 is not in RAM'."""
    raise ScheduleError(f"stage {stage.t}, {_show(ins)}: {problem}")
