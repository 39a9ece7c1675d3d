"""The simulated device: compute engine, DMA channels, memory bus and RAM, in one class.

- compute engine: one operator at a time, run by the instruction walker (`replay`); an operator
  takes `costs.compute_s[k]` at full speed and moves its inputs' and output's bytes over the bus;
- DMA channels (`costs.dma_channels`): transfers are served in issue order, each on the first
  channel to become free; a transfer that must wait for the one it copies (its `source`) holds
  its channel meanwhile. A transfer is a latency phase (from the platform; no bus) and then a
  bandwidth phase that moves its bytes over the bus;
- memory bus of `bus_bytes_per_s`, shared fluidly: while the demands (bytes / nominal seconds)
  of the activities on it sum to D above the bandwidth B, each runs at B / D of its nominal
  speed. With the roofline cost table an operator alone never exceeds B (its demand is capped at
  B for measured times shorter than bytes / B), so only overlap contends;
- RAM: bytes against a capacity, with the peak; buffers freed while a transfer still uses them
  are `pending` until it ends.

How time advances. Lane events are computed in closed form: a running transfer's end (`due_s`)
is an absolute time, valid while the bus runs at full speed, and an operator ends `work_s`
after it starts. Only a window where an operator may contend with transfers (its demand plus
every channel at the fastest transfer rate issued exceeds the bus) is stepped event by event:
the operator's end, a transfer's latency ending, a transfer's end; over each step every bus
flow's end moves later by dt x (1 - speed). DMA lanes advance lazily: their events are handled
when the walker needs them (an issue, an allocation, a free, a wait, a barrier), which is exact
because nothing a transfer does between two such points depends on the walker. Transfers issued
together on an idle device with no contention possible take `transfers_at_once`. So a run costs
a few arithmetic operations per instruction, and SimPy (in `replay`) schedules the walker.
"""

import math
from collections import deque

from poetsim.errors import InternalError
from poetsim.simulator.trace import (
    ALLOC,
    FREE,
    PAGE_OUT,
    WAIT_BARRIER,
    WAIT_BUS,
    WAIT_CHANNEL,
    WAIT_INPUT,
    WAIT_RAM,
    WAIT_SOURCE,
    Trace,
    pack_row,
)

# The phases of a transfer: waiting for a channel, holding one while its source is still
# running, running (its latency, then moving its bytes from `bus_start_s` on), done.
QUEUED, WAITING, RUNNING, DONE = range(4)


class Buffer:
    """A node's output in RAM once a transfer uses it: how many transfers do, and whether it was freed.

    `landing` is the page-in still filling it (None once it has landed). A freed buffer is
    released when its last transfer ends. Outputs no transfer touches need no Buffer (`PLAIN`).
    """

    __slots__ = ("freed_stage", "landing", "node", "size_bytes", "transfers")

    def __init__(self, size_bytes: int, node: int):
        self.size_bytes = size_bytes
        self.node = node
        self.transfers = 0
        self.landing: Transfer | None = None
        self.freed_stage = -1


#: Marks a resident output that no transfer has used: freeing it releases its bytes at once.
PLAIN = object()


class Transfer:
    """One page-in or page-out: its timing so far and what it waits for.

    Once running, `bus_start_s` is when its latency ends and its bytes start to move, and
    `due_s` when it will end if the bus runs at full speed from now on; contention moves `due_s`
    later. `waiters` are transfers holding a channel until this one ends.
    """

    __slots__ = (
        "buffer",
        "bus_s",
        "bus_start_s",
        "due_s",
        "event",
        "granted_s",
        "issued_s",
        "latency_s",
        "node",
        "phase",
        "rate_bytes_per_s",
        "source",
        "stage",
        "started_s",
        "waiters",
    )
    # Set as the transfer moves on: when it got a channel, when it started running, and when its
    # bytes start to move (`Device._grant` and `Device._begin`).
    granted_s: float
    started_s: float
    bus_start_s: float

    def __init__(
        self,
        event: int,
        node: int,
        stage: int,
        buffer: Buffer,
        total_s: float,
        latency_s: float,
        issued_s: float,
        source: "Transfer | None",
    ):
        self.event = event
        self.node = node
        self.stage = stage
        self.buffer = buffer
        # The cost table holds latency + bytes / bandwidth; the platform says how much is latency
        # (a measured time shorter than the latency is all latency).
        self.latency_s = latency_s if latency_s < total_s else total_s
        self.bus_s = total_s - self.latency_s
        self.rate_bytes_per_s = buffer.size_bytes / self.bus_s if self.bus_s > 0 else 0.0  # `rate`, written out
        self.issued_s = issued_s
        self.phase = QUEUED
        self.due_s = math.inf  # its end once DONE
        self.source = source
        self.waiters: list[Transfer] | None = None

    @staticmethod
    def rate(size_bytes: int, total_s: float, latency_s: float) -> float:
        """A transfer's demand on the bus: its bytes over its bandwidth part (0 if it has none)."""
        bus_s = total_s - (total_s if total_s < latency_s else latency_s)  # min(), written out
        return size_bytes / bus_s if bus_s > 0 else 0.0


class Device:
    """The compute engine, DMA channels, memory bus and RAM of one simulated device.

    `now` is the walker's clock (the compute engine's). Totals kept for the result: busy times,
    bytes on the bus, time lost to contention, waits by cause (see `trace.EVENTS`), peak RAM.
    """

    def __init__(self, trace: Trace, dma_channels: int, bus_bytes_per_s: float, ram_capacity_bytes: float, waits_for_ram: bool):
        self.trace = trace
        self._rows = trace.rows  # events are appended here as they happen (`trace.pack_row`)
        self.now = 0.0
        self.bus_bytes_per_s = bus_bytes_per_s
        # An operator whose bus demand is within this margin cannot slow anything, whatever
        # transfers run beside it: the bus minus every channel busy at the fastest rate issued so far.
        self._contention_margin = bus_bytes_per_s
        self._max_transfer_rate = 0.0
        self._channels: list[Transfer | None] = [None] * dma_channels
        self._queue: deque[Transfer] = deque()
        self.in_flight = 0
        # Each node's latest page-out while it runs or queues: what a page-in of the node copies
        # (`source`). Dropped when it ends, so ended transfers do not live on until the run ends.
        self.storing: dict[int, Transfer] = {}
        # No transfer on a channel is due before this: a lower bound (ends only move later), made
        # exact by `advance_dma`, which callers skip while it is after `now`: most of the time.
        self._due_bound_s = math.inf
        self.ram_capacity_bytes = ram_capacity_bytes
        self.waits_for_ram = waits_for_ram
        self.ram_bytes = 0
        self.pending_bytes = 0
        self.peak_ram_bytes = 0
        self.pending_at_peak_bytes = 0
        self.compute_busy_s = self.dma_busy_s = self.bus_moved_bytes = self.compute_stretch_s = 0.0
        self.waits_s = {event: 0.0 for event in (WAIT_INPUT, WAIT_BARRIER, WAIT_RAM, WAIT_CHANNEL, WAIT_SOURCE, WAIT_BUS)}
        self.last_end_s = 0.0
        self.walker_waits = 0  # how often the walker has blocked (for an input or RAM)

    # --- the compute engine -------------------------------------------------------------------

    def compute(self, event: int, node: int, stage: int, size_bytes: int, work_s: float, moved_bytes: int) -> bool:
        """Allocate an operator's output and run it from `now` for `work_s` at full speed.

        False (nothing done) if its output does not fit in RAM, even after waiting for pending
        releases when the device `waits_for_ram`. The operator moves `moved_bytes` over the bus.
        """
        ram_bytes = self.ram_bytes + size_bytes
        if ram_bytes > self.ram_capacity_bytes or (self.pending_bytes and self._due_bound_s <= self.now):
            if not self.allocate(size_bytes, node, stage, traced=False):
                return False
        else:  # the common case of `allocate` (it fits, no release is due), written out: it runs once per operator
            self.ram_bytes = ram_bytes
            if ram_bytes > self.peak_ram_bytes:
                self.peak_ram_bytes = ram_bytes
                self.pending_at_peak_bytes = self.pending_bytes
        start = end = self.now
        if work_s > 0:
            end = start + work_s
            if self.in_flight:
                rate = moved_bytes / work_s
                if rate > self._contention_margin:
                    bus_bytes_per_s = self.bus_bytes_per_s
                    end = self._contended(work_s, bus_bytes_per_s if bus_bytes_per_s < rate else rate)
                    if end > start + work_s:  # a bus wait (`record_wait`, written out: a narrow bus makes many)
                        self.compute_stretch_s += end - (start + work_s)
                        self.waits_s[WAIT_BUS] += end - (start + work_s)
                        self._rows += pack_row(start + work_s, end, WAIT_BUS, node, stage)
        self.now = end
        self.compute_busy_s += end - start
        self.bus_moved_bytes += moved_bytes
        self._rows += pack_row(start, end, event, node, stage)
        return True

    def _contended(self, work_s: float, rate_bytes_per_s: float) -> float:  # noqa: C901 - the bus event loop, in one frame for speed
        """Step the operator and the transfers event by event while they share the bus; its end.

        Events: the operator's end, a transfer's latency ending (its demand joins the bus), a
        transfer's end. Between two, every activity on the bus runs at speed B / demand (at most 1).
        """
        if self._due_bound_s <= self.now:
            self.advance_dma(self.now)
        now, left_s, bandwidth, channels = self.now, work_s, self.bus_bytes_per_s, self._channels
        while True:
            demand = rate_bytes_per_s
            for tr in channels:
                if tr is not None and tr.phase == RUNNING and tr.bus_start_s <= now:
                    demand += tr.rate_bytes_per_s
            speed = 1.0 if demand <= bandwidth else bandwidth / demand
            next_s, which, ends = now + left_s / speed, None, False
            for tr in channels:
                if tr is None or tr.phase != RUNNING:
                    continue
                if tr.bus_start_s > now:
                    event_s, is_end = tr.bus_start_s, False
                else:
                    event_s, is_end = now + (tr.due_s - now) / speed, True
                if event_s < next_s:
                    next_s, which, ends = now if now > event_s else event_s, tr, is_end
            if speed < 1.0:  # the work the slowdown leaves undone until next_s moves every end later
                lag_s = (next_s - now) * (1.0 - speed)
                for tr in channels:
                    if tr is not None and tr.phase == RUNNING and tr.bus_start_s <= now:
                        tr.due_s += lag_s
            if which is None:
                self.now = next_s
                return next_s
            left_s -= (next_s - now) * speed
            now = next_s
            if ends:
                which.due_s = now
                self._finish(which)

    # --- the DMA channels ---------------------------------------------------------------------

    def issue(self, transfer: Transfer) -> None:
        """Queue a transfer at `now`; it starts on a free channel at once if there is one."""
        if self._due_bound_s <= self.now:
            self.advance_dma(self.now)
        self.in_flight += 1
        transfer.buffer.transfers += 1
        if transfer.event == PAGE_OUT:
            self.storing[transfer.node] = transfer
        if transfer.rate_bytes_per_s > self._max_transfer_rate:
            self._max_transfer_rate = transfer.rate_bytes_per_s
            self._contention_margin = self.bus_bytes_per_s - len(self._channels) * transfer.rate_bytes_per_s
        channels = self._channels
        if None in channels:  # the first free channel
            channels[channels.index(None)] = transfer
            self._grant(transfer, self.now)
        else:
            self._queue.append(transfer)

    def transfers_at_once(self, transfers: list[tuple[int, int, float]], stage: int) -> float:
        """Run transfers issued together at `now` on an idle device and uncontended bus; when the last ends.

        Each (event, node, seconds) starts on the first channel free, as `issue` would place it,
        but in closed form: the barrier mode's transfers when no operator can contend with them.
        """
        start_s = self.now
        free_at = [start_s] * len(self._channels)
        for event, node, seconds in transfers:
            c = free_at.index(min(free_at))
            begin_s = free_at[c]
            free_at[c] = end_s = begin_s + seconds
            if begin_s > start_s:
                self.record_wait(start_s, begin_s, WAIT_CHANNEL, node, stage)
            self._rows += pack_row(begin_s, end_s, event, node, stage)
            self.dma_busy_s += seconds
            self.bus_moved_bytes += self.trace.output_bytes[node]
        end_s = max(free_at)
        self.last_end_s = max(self.last_end_s, end_s)
        return end_s

    def advance_dma(self, until_s: float) -> None:
        """Finish every transfer due by `until_s` (the bus is at full speed meanwhile)."""
        if self._due_bound_s > until_s:
            return
        channels = self._channels
        while True:
            first, bound_s = None, math.inf
            for tr in channels:
                if tr is not None:
                    if tr.due_s <= until_s and (first is None or tr.due_s < first.due_s):
                        first = tr
                    if tr.due_s < bound_s:
                        bound_s = tr.due_s
            if first is None:
                self._due_bound_s = bound_s
                return
            self._finish(first)

    def _finish_next(self) -> float:
        """Finish the transfer due first, whenever it is, and return its end."""
        first = None
        for tr in self._channels:
            if tr is not None and (first is None or tr.due_s < first.due_s):
                first = tr
        if first is None or first.due_s == math.inf:
            # Sources are issued before the transfers that wait for them, so one always runs.
            raise InternalError("transfers are in flight but none is running")
        self._finish(first)
        return first.due_s

    def wait_for(self, transfer: Transfer, node: int, stage: int) -> None:
        """The walker waits until `transfer` has ended (an input still landing)."""
        if transfer.phase != DONE and self._due_bound_s <= self.now:
            self.advance_dma(self.now)
        while transfer.phase != DONE:
            self._finish_next()
        if transfer.due_s > self.now:
            self.record_wait(self.now, transfer.due_s, WAIT_INPUT, node, stage)
            self.now = transfer.due_s
            self.walker_waits += 1

    def drain(self) -> float:
        """Run every transfer to its end; the time the last one ended (or the last end so far)."""
        while self.in_flight:
            self._finish_next()
        self._due_bound_s = math.inf  # exact: no transfer is left
        return self.last_end_s

    def _finish(self, tr: Transfer) -> None:
        """`tr` ends at its `due_s`: release what it held, wake its waiters, start the next on its channel."""
        at_s = tr.due_s
        tr.phase = DONE
        self.in_flight -= 1
        if at_s > self.last_end_s:
            self.last_end_s = at_s
        self.dma_busy_s += at_s - tr.started_s
        buffer = tr.buffer
        self._rows += pack_row(tr.started_s, at_s, tr.event, tr.node, tr.stage)
        nominal_end_s = tr.bus_start_s + tr.bus_s
        if at_s > nominal_end_s:  # a bus wait (`record_wait`, written out: a narrow bus makes many)
            self.waits_s[WAIT_BUS] += at_s - nominal_end_s
            self._rows += pack_row(nominal_end_s, at_s, WAIT_BUS, tr.node, tr.stage)
        buffer.transfers -= 1
        if buffer.landing is tr:
            buffer.landing = None
        if buffer.freed_stage >= 0 and not buffer.transfers:
            self.pending_bytes -= buffer.size_bytes
            self.release(buffer.size_bytes, buffer.node, buffer.freed_stage, at_s)
        if tr.waiters:
            for waiter in tr.waiters:
                self._begin(waiter, at_s)
            tr.waiters = None
        tr.source = None
        if tr.event == PAGE_OUT and self.storing.get(tr.node) is tr:
            del self.storing[tr.node]
        c = self._channels.index(tr)
        following = self._queue.popleft() if self._queue else None
        self._channels[c] = following
        if following is not None:
            self._grant(following, at_s)

    def _grant(self, tr: Transfer, at_s: float) -> None:
        """Give `tr` a channel at `at_s`; it starts unless its source is still running."""
        tr.granted_s = at_s
        if at_s > tr.issued_s:
            self.record_wait(tr.issued_s, at_s, WAIT_CHANNEL, tr.node, tr.stage)
        source = tr.source
        if source is not None and source.phase != DONE:
            tr.phase = WAITING
            if source.waiters is None:
                source.waiters = []
            source.waiters.append(tr)
        else:
            self._begin(tr, at_s)

    def _begin(self, tr: Transfer, at_s: float) -> None:
        """Start `tr` at `at_s`: its latency, then its bytes over the bus."""
        if tr.phase == WAITING:
            self.record_wait(tr.granted_s, at_s, WAIT_SOURCE, tr.node, tr.stage)
        tr.phase, tr.started_s = RUNNING, at_s
        tr.bus_start_s = at_s + tr.latency_s
        tr.due_s = tr.bus_start_s + tr.bus_s
        if tr.due_s < self._due_bound_s:
            self._due_bound_s = tr.due_s
        self.bus_moved_bytes += tr.buffer.size_bytes

    # --- RAM ----------------------------------------------------------------------------------

    def allocate(self, size_bytes: int, node: int, stage: int, traced: bool) -> bool:
        """Take `size_bytes` at `now`; False if they do not fit even after the waits allowed.

        Releases due by now are handled first, so that the peak is exact. `traced`: record an
        alloc row (a compute's allocation is implied by its compute row, see `trace`).
        """
        if self.pending_bytes and self._due_bound_s <= self.now:
            self.advance_dma(self.now)
        if self.ram_bytes + size_bytes > self.ram_capacity_bytes and not (
            self.waits_for_ram and self._wait_for_ram(size_bytes, node, stage)
        ):
            return False
        self.ram_bytes += size_bytes
        if self.ram_bytes > self.peak_ram_bytes:
            self.peak_ram_bytes = self.ram_bytes
            self.pending_at_peak_bytes = self.pending_bytes
        if traced:
            self._rows += pack_row(self.now, self.now, ALLOC, node, stage)
        return True

    def _wait_for_ram(self, size_bytes: int, node: int, stage: int) -> bool:
        """Wait for freed buffers that transfers still hold until `size_bytes` fit; False if they never will."""
        if self.ram_bytes - self.pending_bytes + size_bytes > self.ram_capacity_bytes:
            return False
        since_s = self.now
        while self.ram_bytes + size_bytes > self.ram_capacity_bytes:
            end_s = self._finish_next()
            if end_s > self.now:
                self.now = end_s
        self.record_wait(since_s, self.now, WAIT_RAM, node, stage)
        self.walker_waits += 1
        return True

    def release(self, size_bytes: int, node: int, stage: int, at_s: float) -> None:
        """Give back `size_bytes` at `at_s`."""
        self.ram_bytes -= size_bytes
        self._rows += pack_row(at_s, at_s, FREE, node, stage)

    def hold(self, buffer: Buffer, stage: int) -> None:
        """Free `buffer` at `stage`, its bytes held until the transfers using it end."""
        buffer.freed_stage = stage
        self.pending_bytes += buffer.size_bytes

    # --- waits --------------------------------------------------------------------------------

    def record_wait(self, since_s: float, until_s: float, event: int, node: int, stage: int) -> None:
        """Count a wait from `since_s` to `until_s` under its cause (`event`) and trace it."""
        self.waits_s[event] += until_s - since_s
        self._rows += pack_row(since_s, until_s, event, node, stage)
