"""The simulated device: one class owning the SimPy resources a schedule runs on.

- `compute`: the compute engine, a Resource of capacity 1 (one operator at a time);
- `dma`: the DMA channels to secondary storage, a Resource of capacity `dma_channels`;
- `bus`: the memory bus shared by compute and DMA (`poetsim.simulator.bus.FluidBus`);
- `ram`: activation RAM as a byte count against a capacity (`Ram`).
"""

import math

import simpy

from poetsim.simulator.bus import FluidBus


class Ram:
    """Activation RAM: bytes in use against a capacity, with the peak and the curve over time.

    `pending_bytes` are buffers already freed by the schedule but still read or written by a
    transfer in flight; they are released when that transfer ends, and an allocation that does
    not fit may wait for them (`wait_for_release`). The curve is a list of (time_s, ram_bytes)
    points, one per change.
    """

    def __init__(self, env: simpy.Environment, capacity_bytes: float):
        if not capacity_bytes > 0:
            raise ValueError(f"RAM capacity must be positive, got {capacity_bytes!r} bytes")
        self.env = env
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self.pending_bytes = 0
        self.peak_bytes = 0
        self.curve: list[tuple[float, int]] = [(0.0, 0)]
        self._released: simpy.Event | None = None

    def fits(self, size_bytes: int) -> bool:
        """Whether `size_bytes` can be allocated now."""
        return self.used_bytes + size_bytes <= self.capacity_bytes

    def could_fit(self, size_bytes: int) -> bool:
        """Whether `size_bytes` will fit once every pending release has happened."""
        return self.used_bytes - self.pending_bytes + size_bytes <= self.capacity_bytes

    def allocate(self, size_bytes: int) -> None:
        """Take `size_bytes` (the caller checked `fits`)."""
        self.used_bytes += size_bytes
        if self.used_bytes > self.peak_bytes:
            self.peak_bytes = self.used_bytes
        self.curve.append((self.env.now, self.used_bytes))

    def release(self, size_bytes: int, pending: bool) -> None:
        """Give back `size_bytes`; `pending` when they were counted in `pending_bytes`."""
        self.used_bytes -= size_bytes
        self.curve.append((self.env.now, self.used_bytes))
        if pending:
            self.pending_bytes -= size_bytes
            if self._released is not None:
                released, self._released = self._released, None
                released.succeed()

    def defer(self, size_bytes: int) -> None:
        """Mark `size_bytes` as freed by the schedule but held until a transfer ends."""
        self.pending_bytes += size_bytes

    def wait_for_release(self) -> simpy.Event:
        """An event that fires at the next pending release."""
        if self._released is None:
            self._released = self.env.event()
        return self._released


class Machine:
    """The compute engine, DMA channels, memory bus and RAM of one simulated device."""

    def __init__(self, dma_channels: int, bus_bytes_per_s: float = math.inf, ram_capacity_bytes: float = math.inf):
        if dma_channels < 1:
            raise ValueError(f"a machine needs at least one DMA channel, got {dma_channels}")
        self.env = simpy.Environment()
        self.compute = simpy.Resource(self.env, capacity=1)
        self.dma = simpy.Resource(self.env, capacity=dma_channels)
        self.bus = FluidBus(self.env, bus_bytes_per_s)
        self.ram = Ram(self.env, ram_capacity_bytes)
