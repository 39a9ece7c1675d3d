"""The simulator: replay a schedule on a model of the device and measure what it takes.

The optimiser and the checker account by stages; this package runs the instruction list on a
device with finite resources, to confirm the stage accounting or show what it hides. Only this
package imports simpy.

- `device.Device`: one compute engine, `dma_channels` DMA channels serving transfers in issue
  order, a memory bus shared fluidly by operators and transfers, and RAM with a hard capacity
  (the RAM budget). Per-node times come from the cost table (roofline compute time, latency +
  bytes / bandwidth transfers); the platform splits a transfer into latency (no bus) and
  bandwidth (on the bus).
- `replay.simulate`: a SimPy process walks the instructions in one of two modes (`Mode`):
  `barrier` (default: a stage ends when its computes and transfers have ended, as the `overlap`
  timing model assumes) or `free-running` (no barrier: transfers run on into later stages).
  The schedule is checked by `poetsim.schedule.checker` first; an invalid one is never run.
- `result.SimulationResult`: the figures, the checker's `overlap` figures beside them, the
  makespan difference by cause, waits by cause, and the trace (a DataFrame built on demand).
- `comparison.compare`: the optimiser's prediction against the simulation, for comparison.json.

Agreement by construction: in `barrier` mode, with a bus that never contends and one DMA
channel, the simulated makespan, energy and peak RAM equal the checker's `overlap` figures.
"""

from poetsim.simulator.replay import Mode, simulate
from poetsim.simulator.result import MakespanDelta, SimulationResult, write_trace
from poetsim.simulator.trace import TRACE_COLUMNS, WAIT_CAUSES

__all__ = ["TRACE_COLUMNS", "WAIT_CAUSES", "MakespanDelta", "Mode", "SimulationResult", "simulate", "write_trace"]
