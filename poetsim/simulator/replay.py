"""The replay: a SimPy process that walks a schedule's instructions on the simulated `Device`.

The walker is the runtime's one thread. It issues the instructions in order: `Compute` runs on
the compute engine and blocks the walker until it ends; `PageOut` / `PageIn` start a transfer
on the DMA channels and the walker goes on at once; `Free` drops an output. The two modes
differ in what ends a stage:

- `barrier` (the default): the device executes the stage model. A stage ends when its computes
  and its transfers have all ended; the walker waits there (a `barrier` wait). Buffers freed
  while their page-out runs are released at the barrier, as the `overlap` timing model counts
  them, so with an uncontended bus and one DMA channel the simulated makespan, energy and peak
  equal the checker's `overlap` figures by construction.
- `free-running`: no barrier. Transfers run on into later stages; a compute that reads an input
  still landing waits for it (`input`); a buffer freed while a transfer still uses it is
  released when that transfer ends, and an allocation that does not fit waits for such
  releases (`ram`). Overlap usually shortens the makespan; stalls lengthen it.

In both modes the RAM capacity is the RAM budget (and never more than the device's RAM): the
simulated peak cannot exceed it. An allocation that cannot fit, even after every pending
release, is a SimulationError naming the stage and instruction.

SimPy schedules the walker, a process that sleeps whenever it blocks (at a barrier that waits
for transfers; for an input or for RAM) and at the end; the `Device` advances its clock in closed
form in between, so a run costs a few SimPy events per paging stage, not several per
instruction. Per-node times come from the `CostTable`, the numbers the optimiser and the
checker use; per-instruction energies are the checker's, since the same instructions run.
"""

import math
from dataclasses import replace
from enum import Enum
from typing import NoReturn

import simpy

from poetsim.errors import InternalError, SimulationError, parsed
from poetsim.graphs.graph import TrainingGraph
from poetsim.inputs.profiles import Platform
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import CostTable, moved_bytes
from poetsim.schedule.model import Budgets, Compute, Figures, Free, Instruction, PageIn, PageOut, Schedule, Timing
from poetsim.simulator.device import PLAIN, Buffer, Device, Transfer
from poetsim.simulator.result import MakespanDelta, SimulationResult, make_result
from poetsim.simulator.trace import COMPUTE, PAGE_IN, PAGE_OUT, RECOMPUTE, WAIT_BARRIER, WAIT_INPUT, WAIT_RAM, Trace


class Mode(str, Enum):
    """How the simulated device ends a stage (module doc)."""

    BARRIER = "barrier"
    FREE_RUNNING = "free-running"

    @classmethod
    def of(cls, value: "Mode | str") -> "Mode":
        """The replay mode named `value`; ValueError naming the modes otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown replay mode {value!r} (use {' or '.join(m.value for m in cls)})") from None


def simulate(
    schedule: Schedule,
    graph: TrainingGraph,
    costs: CostTable,
    platform: Platform | None = None,
    *,
    mode: Mode | str = Mode.BARRIER,
    budgets: Budgets | None = None,
    ram_capacity_bytes: int | None = None,
    bus_bytes_per_s: float | None = None,
) -> SimulationResult:
    """Replay `schedule` on a model of the device and measure what it really takes.

    The schedule is first checked by `poetsim.schedule.checker` under the `overlap` model (ScheduleError
    naming the instruction if it is invalid: an invalid schedule is never run); those figures
    are the result's `stage_model`. The device is `platform` (its RAM, memory bus and transfer
    latencies) with per-node costs from `costs`. The RAM capacity is the budget's
    (`budgets.ram_bytes`), capped by `ram_capacity_bytes` (default: the platform's RAM); without
    budgets it is that physical capacity. `bus_bytes_per_s` replaces the platform's bus
    (`math.inf`: no contention). Without a platform the bus never contends, transfers have no
    latency part and RAM is unlimited unless a capacity or budget is given.
    """
    mode = parsed(Mode.of, mode, "mode")
    stage_model = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    physical_bytes: float = platform.ram_bytes if platform else math.inf
    if ram_capacity_bytes is not None:
        physical_bytes = ram_capacity_bytes
    capacity_bytes = min(physical_bytes, budgets.ram_bytes) if budgets is not None else physical_bytes
    if bus_bytes_per_s is None:
        bus_bytes_per_s = platform.memory_bus_bytes_per_s if platform else math.inf
    if not capacity_bytes > 0:
        raise SimulationError(f"the RAM capacity must be positive, got {capacity_bytes!r} bytes")
    if not bus_bytes_per_s > 0:
        raise SimulationError(f"the memory bus bandwidth must be positive, got {bus_bytes_per_s!r} bytes/s")
    replay = _Replay(schedule, graph, costs, platform, mode, capacity_bytes, bus_bytes_per_s)
    env = simpy.Environment()
    walker = env.process(replay.walk_barrier(env) if mode is Mode.BARRIER else replay.walk_free_running(env))
    env.run()
    if not walker.processed:
        raise InternalError("the simulation ended with the instruction walker still waiting")
    return replay.result(stage_model, budgets)


class _Replay:
    """The walker's state: where each output is, the device, and per-stage sums for the breakdown."""

    def __init__(
        self,
        schedule: Schedule,
        graph: TrainingGraph,
        costs: CostTable,
        platform: Platform | None,
        mode: Mode,
        capacity_bytes: float,
        bus_bytes_per_s: float,
    ):
        self.schedule, self.costs, self.mode = schedule, costs, mode
        self.deps = graph.deps
        self.sizes = costs.output_bytes  # equal to the graph's (the checker made sure), without a copy
        self.moved = costs.moved_bytes or moved_bytes(graph)
        storage = platform.storage if platform else None
        self.page_in_latency_s = storage.page_in.latency_s if storage else 0.0
        self.page_out_latency_s = storage.page_out.latency_s if storage else 0.0
        self.trace = Trace(self.sizes)
        self.device = Device(
            self.trace, costs.dma_channels, bus_bytes_per_s, capacity_bytes, waits_for_ram=mode is Mode.FREE_RUNNING
        )
        self.buffers: list = [None] * len(graph)
        self.walker_end_s = 0.0
        self.dma_packing_s = 0.0  # barrier: stages' extra length from whole transfers on channels
        self.dma_excess_s = 0.0  # free-running: sum over stages of max(0, DMA / channels - compute)

    # --- the two walkers ----------------------------------------------------------------------

    def walk_barrier(self, env: simpy.Environment):
        """Process: run each stage to its barrier; the walker sleeps there while transfers finish.

        Most stages only compute and free; a stage that pages leads with its transfers
        (`_paging_stage`).
        """
        device, sizes, compute_s, moved = self.device, self.sizes, self.costs.compute_s, self.moved
        for t, stage in enumerate(self.schedule.stages):
            if type(stage[0]) in (PageOut, PageIn):  # every stage computes node t, so it is not empty
                end_s = self._paging_stage(t, stage)
                if end_s > device.now:
                    device.record_wait(device.now, end_s, WAIT_BARRIER, t, t)
                    device.now = end_s
                    yield env.timeout(end_s - env.now)
                continue
            for ins in stage:
                k = ins.node
                if type(ins) is Compute:
                    if not device.compute(COMPUTE if k == t else RECOMPUTE, k, t, sizes[k], compute_s[k], moved[k]):
                        self._overdraft(ins, t)
                else:
                    device.release(sizes[k], k, t, device.now)
        self.walker_end_s = device.now
        yield env.timeout(device.now - env.now)

    def walk_free_running(self, env: simpy.Environment):  # noqa: C901 - a step per instruction, in one frame for speed
        """Process: issue every instruction in order with no barrier; wait only for inputs and RAM."""
        device, sizes, buffers, deps = self.device, self.sizes, self.buffers, self.deps
        compute_s, moved, channels = self.costs.compute_s, self.moved, self.costs.dma_channels
        waits = 0
        for t, stage in enumerate(self.schedule.stages):
            stage_compute_s = stage_dma_s = 0.0
            for ins in stage:
                cls = type(ins)
                if cls is Compute:
                    k = ins.node
                    if device.in_flight:
                        for d in deps[k]:
                            buffer = buffers[d]
                            if buffer is not PLAIN and buffer.landing is not None:
                                device.wait_for(buffer.landing, k, t)
                    if not device.compute(COMPUTE if k == t else RECOMPUTE, k, t, sizes[k], compute_s[k], moved[k]):
                        self._overdraft(ins, t)
                    buffers[k] = PLAIN
                    stage_compute_s += compute_s[k]
                elif cls is Free:
                    i = ins.node
                    buffer, buffers[i] = buffers[i], None
                    if buffer is not PLAIN and buffer.transfers:
                        device.advance_dma(device.now)  # transfers that ended by now no longer hold it
                    if buffer is PLAIN or not buffer.transfers:
                        device.release(sizes[i], i, t, device.now)
                    else:
                        device.hold(buffer, t)
                elif isinstance(ins, PageOut):
                    stage_dma_s += self._page_out(ins, t)
                else:
                    assert isinstance(ins, PageIn)  # the checker has run: no other kind is left
                    stage_dma_s += self._page_in(ins, t)
            if stage_dma_s > channels * stage_compute_s:
                self.dma_excess_s += stage_dma_s / channels - stage_compute_s
            if device.walker_waits != waits:  # the walker blocked in this stage: SimPy's clock catches up
                waits = device.walker_waits
                yield env.timeout(device.now - env.now)
        self.walker_end_s = device.now
        device.drain()
        yield env.timeout(max(device.now, device.last_end_s) - env.now)

    # --- a paging stage in barrier mode -------------------------------------------------------

    def _paging_stage(self, t: int, stage: tuple) -> float:
        """Run a stage that leads with transfers, up to its barrier; when its last transfer ends.

        The transfers all start at the stage's beginning. When no operator of the stage can
        contend with them on the bus, their times are known at once (`_transfers_at_once`);
        otherwise they run on the device's DMA lanes beside the operators. Outputs freed while
        the stage pages them out are released at the barrier.
        """
        device, sizes = self.device, self.sizes
        leading = 1
        while type(stage[leading]) in (PageOut, PageIn):  # a Compute(t) follows them
            leading += 1
        transfers = stage[:leading]
        if self._may_contend(stage, transfers):
            for ins in transfers:
                if type(ins) is PageOut:
                    self._page_out(ins, t)
                else:
                    self._page_in(ins, t)
            lanes_end_s = None
        else:
            lanes_end_s = self._transfers_at_once(transfers, t)
        held: list[int] = []
        stage_compute_s = self._beside_transfers(t, stage[leading:], transfers, held)
        if lanes_end_s is None:
            end_s = device.drain()
            for ins in transfers:  # nothing uses their buffers after the barrier: let them go now
                self.buffers[ins.node] = None
        else:
            end_s = lanes_end_s
        if held:
            barrier_s = device.now if device.now > end_s else end_s
            for i in held:
                device.release(sizes[i], i, t, barrier_s)
        if self.costs.dma_channels > 1:
            self._count_packing(stage_compute_s, transfers)
        return end_s

    def _beside_transfers(self, t: int, rest: tuple, transfers: tuple, held: list[int]) -> float:
        """Run the computes and frees that follow a paging stage's transfers; their compute time.

        A freed output that the stage pages out joins `held` (its RAM returns at the barrier);
        any other is released at once.
        """
        device, sizes, compute_s, moved = self.device, self.sizes, self.costs.compute_s, self.moved
        stage_compute_s = 0.0
        for ins in rest:
            k = ins.node
            if type(ins) is Compute:
                if not device.compute(COMPUTE if k == t else RECOMPUTE, k, t, sizes[k], compute_s[k], moved[k]):
                    self._overdraft(ins, t, held=held)
                stage_compute_s += compute_s[k]
            else:
                for paging in transfers:  # they are few: a scan beats a set
                    if paging.node == k and type(paging) is PageOut:
                        held.append(k)
                        break
                else:
                    device.release(sizes[k], k, t, device.now)
        return stage_compute_s

    def _may_contend(self, stage: tuple, transfers: tuple) -> bool:
        """Whether an operator of `stage` and the stage's transfers may together ask more of the bus than it has.

        The transfers are taken with every channel busy at the stage's fastest transfer rate:
        exact for one channel.
        """
        bandwidth = self.device.bus_bytes_per_s
        if bandwidth == math.inf:
            return False
        fastest, sizes, costs = 0.0, self.sizes, self.costs
        for ins in transfers:
            i = ins.node
            if type(ins) is PageIn:
                rate = Transfer.rate(sizes[i], costs.page_in_s[i], self.page_in_latency_s)
            else:
                rate = Transfer.rate(sizes[i], costs.page_out_s[i], self.page_out_latency_s)
            if rate > fastest:
                fastest = rate
        spare = bandwidth - costs.dma_channels * fastest
        compute_s, moved = costs.compute_s, self.moved
        for ins in stage:
            if type(ins) is Compute:
                k = ins.node
                if moved[k] > spare * compute_s[k] and compute_s[k] > 0:
                    return True
        return False

    def _transfers_at_once(self, transfers: tuple, t: int) -> float:
        """Allocate the stage's page-ins and run its transfers on an uncontended bus; when the last ends."""
        device, timed = self.device, []
        for ins in transfers:
            i = ins.node
            if type(ins) is PageIn:
                if not device.allocate(self.sizes[i], i, t, traced=True):
                    self._overdraft(ins, t)
                timed.append((PAGE_IN, i, self.costs.page_in_s[i]))
            else:
                timed.append((PAGE_OUT, i, self.costs.page_out_s[i]))
        return device.transfers_at_once(timed, t)

    def _count_packing(self, stage_compute_s: float, transfers: tuple) -> None:
        """Add the stage's extra length from whole transfers on several channels (stage model: DMA / channels)."""
        channels = self.costs.dma_channels
        transfers_s = [self._transfer_s(ins) for ins in transfers]
        packed_s = _list_schedule_s(transfers_s, channels)
        self.dma_packing_s += max(stage_compute_s, packed_s) - max(stage_compute_s, sum(transfers_s) / channels)

    def _transfer_s(self, ins: PageIn | PageOut) -> float:
        return (self.costs.page_in_s if type(ins) is PageIn else self.costs.page_out_s)[ins.node]

    # --- one instruction ----------------------------------------------------------------------

    def _page_out(self, ins: PageOut, t: int) -> float:
        """Start copying an output to storage (after it has landed, if it is still being paged in)."""
        i = ins.node
        buffer = self.buffers[i]
        if buffer is PLAIN or buffer is None:  # barrier mode keeps none between stages (`_paging_stage`)
            buffer = self.buffers[i] = Buffer(self.sizes[i], i)
        total_s = self.costs.page_out_s[i]
        transfer = Transfer(PAGE_OUT, i, t, buffer, total_s, self.page_out_latency_s, self.device.now, buffer.landing)
        self.device.issue(transfer)
        return total_s

    def _page_in(self, ins: PageIn, t: int) -> float:
        """Allocate the buffer at once, then copy into it once the page-out it reads has ended."""
        i, device = ins.node, self.device
        size = self.sizes[i]
        if not device.allocate(size, i, t, traced=True):
            self._overdraft(ins, t)
        buffer = self.buffers[i] = Buffer(size, i)
        total_s = self.costs.page_in_s[i]
        buffer.landing = Transfer(PAGE_IN, i, t, buffer, total_s, self.page_in_latency_s, device.now, device.storing.get(i))
        device.issue(buffer.landing)
        return total_s

    def _overdraft(self, ins: Instruction, t: int, held: list[int] | tuple = ()) -> NoReturn:
        """Raise the SimulationError of an allocation that cannot fit, saying what holds the RAM."""
        device, size_bytes = self.device, self.sizes[ins.node]
        free_bytes = device.ram_capacity_bytes - device.ram_bytes
        reasons = []
        page_in_bytes = self._page_in_bytes_before(ins, t)
        if page_in_bytes:
            reasons.append(f"{page_in_bytes:,} bytes are this stage's page-ins, which hold their buffers from their issue")
        if held:
            held_bytes = sum(self.sizes[i] for i in held)
            reasons.append(f"{held_bytes:,} bytes are outputs this stage pages out, held until it ends")
        why = f" ({'; '.join(reasons)})" if reasons else ""
        raise SimulationError(
            f"stage {t}, {type(ins).__name__}({ins.node}) at {device.now:.6g} s: RAM overdraft: needs "
            f"{size_bytes:,} bytes but only {free_bytes:,.0f} of {device.ram_capacity_bytes:,.0f} bytes are free{why}"
        )

    def _page_in_bytes_before(self, ins: Instruction, t: int) -> int:
        """The bytes of stage t's page-ins issued before `ins`, a compute or a page-in.

        They hold their buffers from their issue. This is worked out only for an error message,
        from the stage's transfers (the checker has made sure they lead the stage and page each
        node in at most once).
        """
        page_in_bytes = 0
        for issued in self.schedule.stages[t]:
            if issued is ins or type(issued) not in (PageOut, PageIn):
                break
            if type(issued) is PageIn:
                page_in_bytes += self.sizes[issued.node]
        return page_in_bytes

    # --- the result ---------------------------------------------------------------------------

    def result(self, stage_model: Figures, budgets: Budgets | None) -> SimulationResult:
        """The figures of the finished run and the makespan difference from `stage_model` by cause."""
        device = self.device
        makespan_s = max(self.walker_end_s, device.last_end_s)
        figures = replace(
            stage_model,
            peak_ram_bytes=device.peak_ram_bytes,
            runtime_s=makespan_s,
            static_j=self.costs.static_power_w * makespan_s,
        )
        predicted_s = stage_model.runtime_s
        if self.mode is Mode.BARRIER:
            # Stages last max(compute, DMA) on an idle bus, plus packing; whatever is left is the bus.
            delta = MakespanDelta(
                dma_packing_s=self.dma_packing_s, bus_contention_s=makespan_s - predicted_s - self.dma_packing_s
            )
        else:
            delta = MakespanDelta(
                bus_contention_s=device.compute_stretch_s,
                overlap_s=0.0 - self.dma_excess_s,
                input_wait_s=device.waits_s[WAIT_INPUT],
                ram_wait_s=device.waits_s[WAIT_RAM],
                tail_s=makespan_s - self.walker_end_s,
            )
        return make_result(self.mode.value, figures, stage_model, delta, device, self.costs.dma_channels, budgets)


def _list_schedule_s(transfers_s: list[float], channels: int) -> float:
    """How long transfers issued together take on `channels` channels, each to the first one free."""
    free_at = [0.0] * channels
    for s in transfers_s:
        c = free_at.index(min(free_at))
        free_at[c] += s
    return max(free_at)
