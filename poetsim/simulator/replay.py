"""The replay: SimPy processes that walk a schedule's instruction list on a `Machine`.

One walker process issues the instructions in order, as the single-threaded runtime on a
device would: a `Compute` blocks the walker until the operator has finished, while `PageOut`
and `PageIn` start an asynchronous transfer process and the walker goes on at once, so paging
overlaps compute. Stage boundaries only order the instructions; there is no barrier at the end
of a stage, so a transfer may run on into later stages. The per-node times and energies all
come from the `CostTable`, the same numbers the optimiser and the checker use.
"""

import math
from dataclasses import replace
from typing import NoReturn

import simpy

from poetsim.costs import CostTable
from poetsim.errors import InternalError, SimulationError
from poetsim.graph import TrainingGraph
from poetsim.profiles import Platform
from poetsim.schedule import Budgets, Compute, Figures, Free, Instruction, PageIn, PageOut, Schedule
from poetsim.simulator.machine import Machine
from poetsim.simulator.result import SimulationResult, make_result

#: One trace event: (time_s, end_s, resource, node, kind, bytes, stage); see `result.TRACE_COLUMNS`.
Record = tuple[float, float, str, int, str, int, int]


class _Buffer:
    """One node's output in RAM: its size, the transfers using it, and whether it was freed.

    `arrival` is the page-in filling the buffer until it lands (None once usable);
    `freed_stage` is the stage of the `Free` that dropped it (None while live). A freed buffer
    is released when its last transfer ends.
    """

    __slots__ = ("size_bytes", "arrival", "transfers", "freed_stage")

    def __init__(self, size_bytes: int):
        self.size_bytes = size_bytes
        self.arrival: simpy.Process | None = None
        self.transfers = 0
        self.freed_stage: int | None = None


class Replay:
    """The state of one replay: where each output is, what happened when, and the totals.

    `records` gets one tuple per event (see `Record`); energies are charged per instruction
    from the cost table and do not grow when contention slows an activity down.
    """

    def __init__(self, schedule: Schedule, graph: TrainingGraph, costs: CostTable, machine: Machine,
                 platform: Platform | None = None):
        _check_shape(schedule, graph, costs)
        self._schedule = schedule
        self._machine = machine
        self._env = machine.env
        self._ram = machine.ram
        self._bus = machine.bus
        self._costs = costs
        self._deps = tuple(node.deps for node in graph.nodes)
        self._bytes = graph.output_bytes
        # A compute reads its inputs and writes its output over the bus.
        self._compute_bus_bytes = tuple(
            self._bytes[k] + sum(self._bytes[d] for d in deps) for k, deps in enumerate(self._deps)
        )
        self._page_in_phases = _phases(costs.page_in_s, platform.storage.page_in.latency_s if platform else 0.0)
        self._page_out_phases = _phases(costs.page_out_s, platform.storage.page_out.latency_s if platform else 0.0)
        num_nodes = len(graph)
        self._buffers: list[_Buffer | None] = [None] * num_nodes
        self._stored: list[simpy.Process | None] = [None] * num_nodes  # latest page-out of each node
        self._computed = [False] * num_nodes
        self.records: list[Record] = []
        self.compute_j = self.recompute_j = self.page_in_j = self.page_out_j = 0.0
        self.recomputations = self.page_ins = self.page_outs = 0
        self.stall_s = self.compute_busy_s = self.dma_busy_s = 0.0
        self.makespan_s = 0.0

    def run(self) -> None:
        """Replay the whole schedule; SimulationError names the first instruction that cannot run."""
        walker = self._env.process(self._walk())
        self._env.run()
        if not walker.processed:
            raise InternalError("the simulation ended with the instruction walker still waiting")

    def _walk(self):
        """Process: issue every instruction in order; computes block, transfers do not."""
        num_nodes = len(self._buffers)
        compute, free, page_out, page_in = self._compute, self._free, self._page_out, self._page_in
        # The walker is the runtime's one thread: it holds the engine for the whole run rather
        # than per operator, which changes no time (nobody else asks for the engine) and saves
        # two events per compute, about a fifth of the simulator's run time.
        with self._machine.compute.request() as engine:
            yield engine
            for t, stage in enumerate(self._schedule.stages):
                for ins in stage:
                    kind = type(ins)
                    if not 0 <= ins.node < num_nodes:
                        self._fail(t, ins, f"node id {ins.node} is out of range 0..{num_nodes - 1}")
                    if kind is Compute:
                        yield from compute(t, ins)
                    elif kind is Free:
                        free(t, ins)
                    elif kind is PageOut:
                        page_out(t, ins)
                    elif kind is PageIn:
                        yield from page_in(t, ins)
                    else:
                        raise SimulationError(f"stage {t}: unknown instruction {ins!r}")
        self.makespan_s = max(self.makespan_s, self._env.now)

    def _compute(self, t: int, ins: Compute):
        """Wait for inputs still being paged in, allocate the output, run on the engine and the bus."""
        env, k, buffers = self._env, ins.node, self._buffers
        if buffers[k] is not None:
            self._fail(t, ins, f"node {k}'s output is already in RAM")
        arrivals = None
        for d in self._deps[k]:
            buffer = buffers[d]
            if buffer is None:
                self._fail(t, ins, f"input {d} is missing: it is neither in RAM nor being paged in")
            if buffer.arrival is not None:
                arrivals = [buffer.arrival] if arrivals is None else arrivals + [buffer.arrival]
        if arrivals:
            waited_from = env.now
            yield env.all_of(arrivals)
            self._stall(waited_from, "compute", k, t)
        size = self._bytes[k]
        if not self._ram.fits(size):
            yield from self._wait_for_ram(t, ins, size)
        self._allocate(t, k, size)
        buffers[k] = _Buffer(size)
        start = env.now
        yield from self._bus.carry(self._costs.compute_s[k], self._compute_bus_bytes[k])
        end = env.now
        self.compute_busy_s += end - start
        if self._computed[k]:
            self.recompute_j += self._costs.compute_j[k]
            self.recomputations += 1
            self.records.append((start, end, "compute", k, "recompute", size, t))
        else:
            self._computed[k] = True
            self.compute_j += self._costs.compute_j[k]
            self.records.append((start, end, "compute", k, "compute", size, t))

    def _page_out(self, t: int, ins: PageOut) -> None:
        """Start copying a resident output to storage; a page-in of it will wait for this copy."""
        i = ins.node
        buffer = self._buffers[i]
        if buffer is None:
            self._fail(t, ins, f"node {i} is not in RAM, so there is nothing to page out")
        buffer.transfers += 1
        self._stored[i] = self._env.process(self._transfer(t, i, buffer, "page_out", buffer.arrival))
        self.page_out_j += self._costs.page_out_j[i]
        self.page_outs += 1

    def _page_in(self, t: int, ins: PageIn):
        """Allocate the buffer at once, then copy into it once the page-out it reads has finished."""
        i = ins.node
        if self._buffers[i] is not None:
            self._fail(t, ins, f"node {i} is already in RAM or being paged in")
        source = self._stored[i]
        if source is None:
            self._fail(t, ins, f"node {i} was never paged out, so there is nothing on storage to page in")
        size = self._bytes[i]
        if not self._ram.fits(size):
            yield from self._wait_for_ram(t, ins, size)
        self._allocate(t, i, size)
        buffer = _Buffer(size)
        buffer.transfers = 1
        self._buffers[i] = buffer
        buffer.arrival = self._env.process(self._transfer(t, i, buffer, "page_in", source))
        self.page_in_j += self._costs.page_in_j[i]
        self.page_ins += 1

    def _free(self, t: int, ins: Free) -> None:
        """Drop an output; its bytes are held until any transfer still using them has ended."""
        i = ins.node
        buffer = self._buffers[i]
        if buffer is None:
            self._fail(t, ins, f"node {i} is not in RAM")
        self._buffers[i] = None
        buffer.freed_stage = t
        if buffer.transfers:
            self._ram.defer(buffer.size_bytes)
        else:
            self._release(buffer, i, pending=False)

    def _transfer(self, t: int, node: int, buffer: _Buffer, kind: str, after: simpy.Process | None):
        """Process: one page-in or page-out on a DMA channel, after the transfer it depends on."""
        env = self._env
        if after is not None:
            yield after
        latency_s, bus_s = (self._page_in_phases if kind == "page_in" else self._page_out_phases)[node]
        with self._machine.dma.request() as request:
            yield request
            start = env.now
            if latency_s > 0:
                yield env.timeout(latency_s)  # set-up time: the channel is held, the bus is not used
            yield from self._bus.carry(bus_s, buffer.size_bytes)
        end = env.now
        self.dma_busy_s += end - start
        self.records.append((start, end, "dma", node, kind, buffer.size_bytes, t))
        if kind == "page_in":
            buffer.arrival = None
        buffer.transfers -= 1
        if buffer.freed_stage is not None and not buffer.transfers:
            self._release(buffer, node, pending=True)
        self.makespan_s = max(self.makespan_s, end)

    def _wait_for_ram(self, t: int, ins: Instruction, size_bytes: int):
        """Wait for freed buffers held by transfers in flight; an overdraft if even they are not enough."""
        ram = self._ram
        if not ram.could_fit(size_bytes):
            free_bytes = ram.capacity_bytes - ram.used_bytes
            held = f", even counting the {ram.pending_bytes:,} bytes that transfers in flight will release" if ram.pending_bytes else ""
            self._fail(t, ins, f"RAM overdraft: needs {size_bytes:,} bytes but only {free_bytes:,.0f} of "
                               f"{ram.capacity_bytes:,.0f} bytes are free{held}")
        waited_from = self._env.now
        while not ram.fits(size_bytes):
            yield ram.wait_for_release()
        self._stall(waited_from, "ram", ins.node, t)

    def _allocate(self, t: int, node: int, size_bytes: int) -> None:
        self._ram.allocate(size_bytes)
        now = self._env.now
        self.records.append((now, now, "ram", node, "alloc", size_bytes, t))

    def _release(self, buffer: _Buffer, node: int, pending: bool) -> None:
        self._ram.release(buffer.size_bytes, pending)
        now = self._env.now
        self.records.append((now, now, "ram", node, "free", buffer.size_bytes, buffer.freed_stage))

    def _stall(self, since_s: float, resource: str, node: int, t: int) -> None:
        """Record the walker's wait since `since_s` (compute waiting for DMA, or for RAM)."""
        now = self._env.now
        if now > since_s:
            self.stall_s += now - since_s
            self.records.append((since_s, now, resource, node, "stall", 0, t))

    def _fail(self, t: int, ins: Instruction, problem: str) -> NoReturn:
        raise SimulationError(f"stage {t}, {type(ins).__name__}({ins.node}) at {self._env.now:.6g} s: {problem}")


def _phases(transfer_s: tuple[float, ...], latency_s: float) -> tuple[tuple[float, float], ...]:
    """Split each transfer time into its latency (no bus) and its bandwidth part (on the bus).

    The cost table holds latency + bytes / bandwidth; the platform says how much is latency.
    A measured transfer time shorter than the latency is all latency.
    """
    return tuple((min(latency_s, s), s - min(latency_s, s)) for s in transfer_s)


def _check_shape(schedule: Schedule, graph: TrainingGraph, costs: CostTable) -> None:
    """Reject a schedule or cost table made for another graph before replaying anything."""
    if len(costs) != len(graph) or tuple(costs.output_bytes) != graph.output_bytes:
        raise InternalError(f"the cost table ({len(costs)} nodes) was not derived from graph '{graph.name}' ({len(graph)} nodes)")
    if schedule.num_nodes != len(graph):
        raise SimulationError(f"the schedule is for {schedule.num_nodes} nodes but graph '{graph.name}' has {len(graph)}")


def simulate(schedule: Schedule, graph: TrainingGraph, costs: CostTable, platform: Platform | None = None, *,
             ram_capacity_bytes: int | None = None, bus_bytes_per_s: float | None = None,
             budgets: Budgets | None = None) -> SimulationResult:
    """Replay `schedule` on a model of the device and measure what it really takes.

    The device is `platform` (its RAM, memory bus and transfer latencies), with per-node times
    and energies from `costs`. `ram_capacity_bytes` replaces the platform's RAM (e.g. the budget,
    or the RAM left beside the training state) and `bus_bytes_per_s` its bus (`math.inf`: no
    contention). Without a platform the bus never contends, transfers have no latency part and
    RAM is unlimited unless a capacity is given. With `budgets`, the result flags a peak over the
    RAM budget and a makespan over the deadline (flags, not errors). SimulationError names the
    first instruction that cannot run: a missing input, a page-in of something never paged out,
    or an allocation that does not fit in the capacity.
    """
    if ram_capacity_bytes is None:
        ram_capacity_bytes = platform.ram_bytes if platform else math.inf
    if bus_bytes_per_s is None:
        bus_bytes_per_s = platform.memory_bus_bytes_per_s if platform else math.inf
    if not ram_capacity_bytes > 0:
        raise SimulationError(f"the RAM capacity must be positive, got {ram_capacity_bytes!r} bytes")
    if not bus_bytes_per_s > 0:
        raise SimulationError(f"the memory bus bandwidth must be positive, got {bus_bytes_per_s!r} bytes/s")
    machine = Machine(costs.dma_channels, bus_bytes_per_s, ram_capacity_bytes)
    replay = Replay(schedule, graph, costs, machine, platform)
    replay.run()
    figures = Figures(
        peak_ram_bytes=machine.ram.peak_bytes,
        runtime_s=replay.makespan_s,
        compute_j=replay.compute_j,
        recompute_j=replay.recompute_j,
        page_in_j=replay.page_in_j,
        page_out_j=replay.page_out_j,
        static_j=costs.static_power_w * replay.makespan_s,
        recomputations=replay.recomputations,
        page_ins=replay.page_ins,
        page_outs=replay.page_outs,
    )
    return make_result(
        figures, replay.records, machine.ram.curve, stall_s=replay.stall_s, compute_busy_s=replay.compute_busy_s,
        dma_busy_s=replay.dma_busy_s, dma_channels=costs.dma_channels, bus_moved_bytes=machine.bus.moved_bytes,
        bus_bytes_per_s=bus_bytes_per_s, budgets=budgets,
    )


def ideal_costs(costs: CostTable) -> CostTable:
    """The same costs with an ideal DMA: transfers take no time (energies unchanged).

    On such a machine, without bus contention, the simulation reproduces the checker's
    `overlap` figures: it is how the simulator is validated against the prediction.
    """
    zeros = (0.0,) * len(costs)
    return replace(costs, page_in_s=zeros, page_out_s=zeros)
