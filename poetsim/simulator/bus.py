"""The memory bus as a fluid processor-sharing server, shared by the compute engine and the DMA.

Every activity on the bus (an operator running, the bandwidth part of a transfer) has a nominal
duration and a number of bytes it moves, hence a demand rate = bytes / nominal duration. While
the demand rates of the active flows sum to at most the bus bandwidth B, everybody runs at
nominal speed. When they sum to D > B, every active flow runs at the same fraction B / D of its
nominal speed, so the bus carries exactly B bytes per second and nobody is favoured.

A flow is a SimPy process waiting on a timeout until its work is due at the current speed.
When a flow starts or ends and the speed changes, the bus stretches (or shrinks) every flow's
time left by old speed / new speed and interrupts the others, which wait for the new due time. No interrupt is
sent while the bus is not oversubscribed, so an uncontended run costs one timeout per flow.
"""

import math

import simpy


class _Flow:
    """One activity on the bus: its process, its demand rate and when it will be done at the current speed."""

    __slots__ = ("process", "rate_bytes_per_s", "due_s")

    def __init__(self, process: simpy.Process, rate_bytes_per_s: float, due_s: float):
        self.process = process
        self.rate_bytes_per_s = rate_bytes_per_s
        self.due_s = due_s


class FluidBus:
    """A memory bus of `bytes_per_s` shared fairly by the flows on it; `math.inf` never contends.

    `moved_bytes` counts every byte carried, for the bus utilisation of a run.
    """

    def __init__(self, env: simpy.Environment, bytes_per_s: float):
        if not bytes_per_s > 0:
            raise ValueError(f"bus bandwidth must be positive, got {bytes_per_s!r} bytes/s")
        self.env = env
        self.bytes_per_s = bytes_per_s
        self.moved_bytes = 0.0
        self._flows: list[_Flow] = []
        self._demand_bytes_per_s = 0.0
        self._speed = 1.0  # the fraction of its nominal speed every flow runs at now

    def carry(self, nominal_s: float, size_bytes: float):
        """Process step (`yield from`): move `size_bytes` in `nominal_s`, or longer under contention."""
        if nominal_s <= 0:
            return
        env = self.env
        self.moved_bytes += size_bytes
        if size_bytes <= 0 or self.bytes_per_s == math.inf:
            yield env.timeout(nominal_s)
            return
        flow = _Flow(env.active_process, size_bytes / nominal_s, env.now + nominal_s / self._speed)
        self._flows.append(flow)
        self._demand_bytes_per_s += flow.rate_bytes_per_s
        self._respeed(flow)
        while True:
            try:
                yield env.timeout(max(flow.due_s - env.now, 0.0))
                break
            except simpy.Interrupt:
                continue  # the speed changed: wait until the new due time
        self._flows.remove(flow)
        # Summed afresh when the bus empties, so that rounding does not accumulate over a run.
        self._demand_bytes_per_s = self._demand_bytes_per_s - flow.rate_bytes_per_s if self._flows else 0.0
        self._respeed(flow)

    def _respeed(self, caller: _Flow) -> None:
        """Set the speed for the current demand; if it changed, move every due time and wake the others."""
        demand = self._demand_bytes_per_s
        speed = 1.0 if demand <= self.bytes_per_s else self.bytes_per_s / demand
        if speed == self._speed:
            return
        # A flow's work left is (due - now) x old speed; at the new speed it takes that / new speed.
        stretch = self._speed / speed
        self._speed = speed
        now = self.env.now
        for flow in self._flows:
            flow.due_s = now + (flow.due_s - now) * stretch
            if flow is not caller:
                flow.process.interrupt()
