"""The independent schedule checker: replay an instruction list and recompute what it costs.

The optimiser predicts a schedule's figures from its MILP variables; a slip in the formulation
or in turning variables into instructions would go unnoticed if the check read them too. This
module sees only the instruction list (`Schedule`), the graph and the per-node costs, and
applies the semantics stated once in the module docstring of `poetsim.schedule.model`. It runs on
every schedule of every sweep point, so it makes one pass over the instructions: O(number of
instructions + inputs read), with flat lists indexed by node id for the machine state.
"""

import math
from collections.abc import Iterable
from dataclasses import fields
from typing import NoReturn

from poetsim.errors import InternalError, ScheduleError
from poetsim.graphs.graph import TrainingGraph
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Compute, Figures, Free, Instruction, PageIn, PageOut, Schedule, Timing

# The order within a stage: page-outs, then page-ins, then computes with their frees.
_PHASE_NAMES = ("page-outs", "page-ins", "computes and frees")

# compare_figures: below this absolute difference two figures are equal whatever their ratio,
# so that a zero against a rounding residue (1e-18 J of static energy) is not a mismatch.
_ABS_FLOOR = 1e-12


def check_schedule(
    schedule: Schedule,
    graph: TrainingGraph,
    costs: CostTable,
    timing: Timing | str,
    budgets: Budgets | None = None,
) -> Figures:
    """Replay `schedule` on `graph` under `timing` and return its figures; ScheduleError if invalid.

    `timing` (a Timing or its value) is the model to account by, not necessarily the one the
    schedule was made for: the rules of validity are the same under both, only RAM and time
    accounting differ, so a schedule can be re-costed under the other model. With `budgets`, a
    peak RAM or a runtime over budget is an error too, and its message says by how much.
    """
    _check_shape(schedule, graph, costs)
    replay = _Replay(graph, costs, Timing(timing))
    replay.run(schedule.stages)
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
    check_made_for(schedule, graph)


def check_made_for(schedule: Schedule, graph: TrainingGraph) -> None:
    """ScheduleError if the schedule was not made for the graph.

    Another node count, a stage count other than one per node, or, where it names its nodes, a name that is not the graph's.
    """
    num_nodes = len(graph)
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
    names = schedule.node_names
    if names and tuple(names) != tuple(n.name for n in graph.nodes):
        first = next(i for i, (a, b) in enumerate(zip(names, (n.name for n in graph.nodes))) if a != b)
        raise ScheduleError(
            f"the schedule names node {first} '{names[first]}' but graph '{graph.name}' calls it "
            f"'{graph.nodes[first].name}': it was made for another graph"
        )


def _check_budgets(figures: Figures, budgets: Budgets) -> None:
    """Raise ScheduleError naming every figure over its budget and by how much."""
    problems = budgets.overruns(figures)
    if problems:
        raise ScheduleError("over budget: " + "; ".join(problems))


def _show(ins: Instruction) -> str:
    """An instruction as a reader writes it: Compute(12)."""
    return f"{type(ins).__name__}({ins.node})"


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

    def run(self, stages: Iterable[tuple]) -> None:  # noqa: C901 - one pass per instruction in local variables, for speed (below)
        """Replay every stage: check and run each instruction, then close its stage.

        An instruction is checked for what it must satisfy (kind, node id, order) before it
        runs.

        This loop runs once per instruction of every checked schedule and of every simulation, so
        it is written out in one piece, the machine state in local variables: a call per
        instruction would cost more than the instruction. Within a stage, `phase` is the last
        phase seen (0 page-outs, 1 page-ins, 2 computes and frees); `paging_out` and `paging_in`
        (an ordered set: made resident in order) are made by the stage's first transfer of each
        kind, since most stages have none.
        """
        num_nodes, deps, sizes, resident, on_storage = (
            self._num_nodes,
            self._deps,
            self._bytes,
            self._resident,
            self._on_storage,
        )
        costs, overlap = self._costs, self._overlap
        compute_s, node_compute_j, channels = costs.compute_s, costs.compute_j, costs.dma_channels
        ram_bytes, peak_ram_bytes, runtime_s = self._ram_bytes, self._peak_ram_bytes, self._runtime_s
        compute_j, recompute_j, recomputations = self._compute_j, self._recompute_j, self._recomputations
        page_in_j, page_out_j, page_ins, page_outs = self._page_in_j, self._page_out_j, self._page_ins, self._page_outs
        for t, instructions in enumerate(stages):
            # Stage-start RAM: what is resident; page-ins issued under overlap add to it as they come.
            if ram_bytes > peak_ram_bytes:
                peak_ram_bytes = ram_bytes
            paging_out: set[int] | None = None
            paging_in: dict[int, None] | None = None
            phase, last_compute, deferred_free_bytes, stage_compute_s, stage_dma_s = 0, -1, 0, 0.0, 0.0
            for ins in instructions:
                kind = type(ins)
                if kind is Compute:
                    k = ins.node
                    if type(k) is not int or not 0 <= k < num_nodes:
                        self._check_node(t, ins)
                    phase = 2
                    if k > t or k <= last_compute or resident[k] or (paging_in and k in paging_in):
                        _refuse_compute(t, last_compute, ins, resident)
                    for d in deps[k]:
                        if not resident[d]:
                            _missing_input(t, ins, d, paging_in)
                    resident[k] = True
                    last_compute = k
                    ram_bytes += sizes[k]
                    if ram_bytes > peak_ram_bytes:
                        peak_ram_bytes = ram_bytes
                    stage_compute_s += compute_s[k]
                    if k == t:
                        compute_j += node_compute_j[k]
                    else:
                        recompute_j += node_compute_j[k]
                        recomputations += 1
                elif kind is Free:
                    i = ins.node
                    if type(i) is not int or not 0 <= i < num_nodes:
                        self._check_node(t, ins)
                    phase = 2
                    if not resident[i]:
                        _fail(t, ins, f"node {i} is not in RAM")
                    resident[i] = False
                    if paging_out and overlap and i in paging_out:
                        # Its page-out may run until the end of the stage, so the buffer is held until then.
                        deferred_free_bytes += sizes[i]
                    else:
                        ram_bytes -= sizes[i]
                elif kind is PageOut:
                    i = ins.node
                    if type(i) is not int or not 0 <= i < num_nodes:
                        self._check_node(t, ins)
                    if phase > 0:
                        _out_of_order(t, ins, 0, phase)
                    if not resident[i]:
                        _fail(t, ins, f"node {i} is not in RAM at the start of the stage")
                    if paging_out is None:
                        paging_out = set()
                    elif i in paging_out:
                        _fail(t, ins, f"node {i} is already being paged out in this stage")
                    paging_out.add(i)
                    stage_dma_s += costs.page_out_s[i]
                    page_out_j += costs.page_out_j[i]
                    page_outs += 1
                elif kind is PageIn:
                    i = ins.node
                    if type(i) is not int or not 0 <= i < num_nodes:
                        self._check_node(t, ins)
                    if phase > 1:
                        _out_of_order(t, ins, 1, phase)
                    phase = 1
                    if resident[i]:
                        _fail(t, ins, f"node {i} is already in RAM")
                    if not on_storage[i]:
                        _fail(t, ins, f"node {i} is not on storage (it was not paged out in an earlier stage)")
                    if paging_in is None:
                        paging_in = {}
                    elif i in paging_in:
                        _fail(t, ins, f"node {i} is already being paged in in this stage")
                    paging_in[i] = None
                    if overlap:
                        # The transfer writes into RAM during this stage, so its buffer is held from the start.
                        ram_bytes += sizes[i]
                        if ram_bytes > peak_ram_bytes:
                            peak_ram_bytes = ram_bytes
                    stage_dma_s += costs.page_in_s[i]
                    page_in_j += costs.page_in_j[i]
                    page_ins += 1
                else:
                    raise ScheduleError(f"stage {t}: unknown instruction {ins!r}")
            # The stage closes: it must have computed node t last; then its transfers land.
            if last_compute != t:
                found = "no compute" if last_compute < 0 else f"Compute({last_compute})"
                raise ScheduleError(f"stage {t}: the last compute must be Compute({t}), found {found}")
            if paging_in is not None:
                for i in paging_in:
                    resident[i] = True
                    if not overlap:
                        # The paper's accounting: a page-in occupies RAM from the next stage's start.
                        ram_bytes += sizes[i]
            if paging_out is not None:
                for i in paging_out:
                    on_storage[i] = True
                # The outputs freed while being paged out give their RAM back now.
                ram_bytes -= deferred_free_bytes
            if overlap:
                dma_s = stage_dma_s / channels  # max(compute, DMA / channels), written out
                runtime_s += dma_s if dma_s > stage_compute_s else stage_compute_s
            else:
                runtime_s += stage_compute_s
        self._ram_bytes, self._peak_ram_bytes, self._runtime_s = ram_bytes, peak_ram_bytes, runtime_s
        self._compute_j, self._recompute_j, self._recomputations = compute_j, recompute_j, recomputations
        self._page_in_j, self._page_out_j, self._page_ins, self._page_outs = page_in_j, page_out_j, page_ins, page_outs

    def _check_node(self, t: int, ins: Instruction) -> None:
        """Refuse a node id that is not an int in range (a bool passes, as isinstance says)."""
        node = ins.node
        if not isinstance(node, int) or not 0 <= node < self._num_nodes:
            _fail(t, ins, f"node id {node!r} is out of range 0..{self._num_nodes - 1}")

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


def _out_of_order(t: int, ins: Instruction, phase: int, later_phase: int) -> NoReturn:
    """Raise the ScheduleError of a transfer of `phase` after an instruction of a `later_phase`."""
    _fail(
        t,
        ins,
        f"out of order: {_PHASE_NAMES[phase]} must come before {_PHASE_NAMES[later_phase]} "
        "(the order is page-outs, page-ins, then computes and frees)",
    )


def _refuse_compute(t: int, last_compute: int, ins: Compute, resident: list[bool]) -> NoReturn:
    """Raise the ScheduleError of a compute that may not run where it is, the first reason found."""
    k = ins.node
    if k > t:
        _fail(t, ins, f"node {k} is first computed in stage {k}, so it cannot run in stage {t}")
    if k <= last_compute:
        _fail(t, ins, f"computes must be in ascending node order, but Compute({last_compute}) came earlier")
    if resident[k]:
        _fail(t, ins, f"node {k}'s output is already in RAM")
    _fail(t, ins, f"node {k} is being paged in during this stage")


def _missing_input(t: int, ins: Compute, d: int, paging_in: dict[int, None] | None) -> NoReturn:
    """Raise the ScheduleError of a compute whose input `d` is not in RAM, saying if it is still landing."""
    why = " (it is being paged in during this stage and usable only from the next)" if paging_in and d in paging_in else ""
    _fail(t, ins, f"input {d} is not in RAM{why}")


def _fail(t: int, ins: Instruction, problem: str) -> NoReturn:
    """Raise the ScheduleError of one instruction: 'stage 7, Compute(12): input 9 is not in RAM'."""
    raise ScheduleError(f"stage {t}, {_show(ins)}: {problem}")
