"""The simulator: replay a schedule on a SimPy model of the device and measure what it takes.

The optimiser and the checker account by stages; this package runs the instruction list on a
machine with finite resources, to show what the stage accounting hides (page-ins that stall
compute, transfers that run past their stage, bus contention). Only this package imports simpy.

The machine (`machine.Machine`):
- compute engine: one operator at a time, for `costs.compute_s[k]` at full speed; the walker
  below (the runtime's one thread) holds it for the whole run;
- DMA channels (`costs.dma_channels`): a transfer holds a channel for `costs.page_in_s[i]` or
  `page_out_s[i]` (latency + bytes / bandwidth) at full speed;
- memory bus of `platform.memory_bus_bytes_per_s`, a fluid processor-sharing server (`bus`):
  an operator moves its inputs' and output's bytes over its nominal duration, a transfer its
  bytes over its bandwidth part (the latency part, taken from the platform, uses no bus). When
  the running activities' demand rates sum to D above the bandwidth B, every one of them runs at
  B / D of its nominal speed; below B nobody slows (so an operator whose own demand exceeds B
  is memory-bound and takes bytes / B even alone). Energies are the cost table's per-node
  figures and do not grow when contention stretches an activity; static power x makespan is
  added on top, so a slowed or stalled run does cost more;
- RAM: bytes against a capacity (the platform's RAM, or a smaller one given by the caller).

The replay (`replay`), with the RAM semantics of the checker's `overlap` model:
- one walker issues the instructions in order, like a single-threaded runtime: `Compute(k)`
  waits for inputs still being paged in (a stall), allocates k's output when it starts, runs
  on the engine and blocks the walker until k has finished; `PageOut` / `PageIn` start an
  asynchronous transfer and the walker goes on at once. No barrier at stage ends;
- a page-in holds its bytes from the moment it is issued and its node is usable when its
  transfer ends; it waits for the page-out it reads from if that one is still running;
- a `Free` releases at once, except that a buffer still used by a transfer in flight (a
  page-out being written to storage, a page-in still landing) is released when that transfer
  ends: max(transfer end, the Free);
- an allocation that does not fit is an error (SimulationError naming the instruction), unless
  freed buffers held by transfers in flight would make room: then the walker waits for them (a
  stall), as a runtime waiting on its DMA completion would.

With an ideal DMA (`ideal_costs`) and no bus contention the simulated makespan, energy and peak
RAM equal the checker's `overlap` figures. The peak can only be lower than the checker's when a
paged-out node is freed before a later compute of the same stage: the checker holds its bytes
to the end of the stage, the simulator only until its (instant) transfer has ended.
"""

from poetsim.simulator.replay import ideal_costs, simulate
from poetsim.simulator.result import TRACE_COLUMNS, SimulationResult, write_trace

__all__ = ["TRACE_COLUMNS", "SimulationResult", "ideal_costs", "simulate", "write_trace"]
