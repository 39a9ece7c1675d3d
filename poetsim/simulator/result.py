"""What a simulation measured: the result record, its makespan breakdown, and its files.

The trace and the RAM curve are DataFrames built on first use (`SimulationResult.trace`), so a
sweep that only reads the figures never pays for building them.
"""

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from poetsim.folders import RunFolder
from poetsim.schedule.model import Budgets, Figures
from poetsim.simulator.trace import EVENTS, WAIT_CAUSES, Trace

if TYPE_CHECKING:
    from poetsim.simulator.device import Device


@dataclass(frozen=True)
class MakespanDelta:
    """The simulated makespan minus the stage model's (the checker's `overlap` runtime), by cause.

    The parts sum to the difference (to float rounding). `dma_packing_s` (barrier, several DMA
    channels): whole transfers cannot be spread evenly over the channels as the stage model's
    DMA time / channels assumes. `bus_contention_s`: the memory bus slowed activities (barrier:
    every stage's extra length; free-running: the computes' extra length). Free-running only:
    `overlap_s` (zero or negative) is the DMA-bound stages' excess over their computes that the
    device hides behind later computes instead of waiting for it; `input_wait_s` the walker's
    waits for inputs still being paged in; `ram_wait_s` its waits for RAM held by transfers in
    flight; `tail_s` the transfers still running after the last compute.
    """

    dma_packing_s: float = 0.0
    bus_contention_s: float = 0.0
    overlap_s: float = 0.0
    input_wait_s: float = 0.0
    ram_wait_s: float = 0.0
    tail_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The sum of the causes: the simulated makespan less the stage model's runtime."""
        return sum(getattr(self, f.name) for f in fields(self))


def explain_causes(causes: Mapping[str, float], at_least_s: float = 0.0) -> str:
    """The causes larger than `at_least_s` in magnitude, largest first: 'bus contention +0.3 s, overlap -1.2 s'."""
    parts = sorted(((value, name) for name, value in causes.items() if abs(value) > at_least_s), key=lambda part: -abs(part[0]))
    return ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {value:+.4g} s" for value, name in parts) or "none"


class _Table:
    """A DataFrame field that is built from the run's events on first read, unless one was given.

    It keeps the trace's tables out of the run (a sweep that reads only figures never builds
    them) while they stay fields: `dataclasses.replace(result, trace=edited)` works.
    """

    def __init__(self, build: str):
        self._build = build

    def __set_name__(self, owner, name: str) -> None:
        self._key = f"_{name}"

    def __get__(self, result, owner=None):
        if result is None:
            return self
        table = result.__dict__.get(self._key)
        if table is None:
            table = result.__dict__[self._key] = getattr(result.events, self._build)()
        return table

    def __set__(self, result, table) -> None:
        # The dataclass passes this descriptor itself as the field's default: nothing given yet.
        result.__dict__[self._key] = None if isinstance(table, _Table) else table


@dataclass(frozen=True, eq=False)  # eq=False: the DataFrames do not compare to a single bool
class SimulationResult:
    """What replaying a schedule on the simulated device measured.

    `figures` is in the checker's terms, with `runtime_s` = the makespan and `peak_ram_bytes` =
    the simulated peak; its per-instruction energies are the checker's (the same instructions
    ran) and `static_j` is static power x the makespan. `stage_model` is the checker's `overlap`
    figures of the same schedule, and `delta` breaks the makespan difference down by cause.
    `waits_s` sums every wait by cause (`trace.WAIT_CAUSES`); `stall_s` is the part the stage
    model does not have: waits for inputs still landing and for RAM held by transfers.
    `pending_at_peak_bytes` is how much of the peak is freed buffers that transfers still held.
    Busy fractions are of the makespan: the compute engine's, the DMA channels' (over all
    channels), the memory bus's (bytes moved / (bandwidth x makespan); 0 for an unlimited bus).
    `over_budget` / `over_deadline` compare with the budgets given (False without budgets);
    `deadline_note` says, when the deadline is missed, which causes made the makespan longer.
    `events` is the raw trace; `trace` and `ram_curve` are its tables.
    """

    mode: str
    figures: Figures
    stage_model: Figures
    delta: MakespanDelta
    waits_s: dict[str, float]
    stall_s: float
    compute_busy: float
    dma_busy: float
    bus_busy: float
    ram_capacity_bytes: float
    pending_at_peak_bytes: int
    over_budget: bool
    over_deadline: bool
    deadline_note: str
    events: Trace
    #: One row per event (`trace.TRACE_COLUMNS`), sorted by start time; built on first read.
    trace: pd.DataFrame = field(default=_Table("to_frame"), repr=False)
    #: RAM in use over time: (time_s, ram_bytes), one point per allocation or release; built on first read.
    ram_curve: pd.DataFrame = field(default=_Table("ram_curve"), repr=False)

    @property
    def makespan_s(self) -> float:
        """The simulated iteration's length, the figures' runtime."""
        return self.figures.runtime_s

    def summary(self) -> dict:
        """The scalar figures, for summary.json and reports."""
        return {
            "mode": self.mode,
            "makespan_s": self.makespan_s,
            "stall_s": self.stall_s,
            "waits_s": self.waits_s,
            "compute_busy": self.compute_busy,
            "dma_busy": self.dma_busy,
            "bus_busy": self.bus_busy,
            "ram_capacity_bytes": self.ram_capacity_bytes if math.isfinite(self.ram_capacity_bytes) else None,
            "pending_at_peak_bytes": self.pending_at_peak_bytes,
            "over_budget": self.over_budget,
            "over_deadline": self.over_deadline,
            "deadline_note": self.deadline_note,
            "figures": _figures(self.figures),
            "stage_model": _figures(self.stage_model),
            "makespan_delta_s": {**asdict(self.delta), "total_s": self.delta.total_s},
            "trace_rows": len(self.events),
        }


def _figures(figures: Figures) -> dict:
    return {**asdict(figures), "total_j": figures.total_j}


def make_result(
    mode: str,
    figures: Figures,
    stage_model: Figures,
    delta: MakespanDelta,
    device: "Device",
    dma_channels: int,
    budgets: Budgets | None,
) -> SimulationResult:
    """Turn the device's totals into the result: busy fractions, waits by cause, budget flags."""
    makespan_s = figures.runtime_s
    waits_s = {EVENTS[event].cause: seconds for event, seconds in device.waits_s.items()}
    waits_s = {cause: waits_s.get(cause, 0.0) for cause in WAIT_CAUSES}
    bus_bytes_per_s = device.bus_bytes_per_s
    over_deadline = budgets is not None and not budgets.meets_deadline(makespan_s)
    note = ""
    if budgets is not None and over_deadline:
        note = (
            f"makespan {makespan_s:.6g} s is {makespan_s - budgets.runtime_s:.4g} s over the deadline; against the "
            f"stage model's {stage_model.runtime_s:.6g} s: {explain_causes(asdict(delta), 1e-12 * makespan_s)}"
        )
    return SimulationResult(
        mode=mode,
        figures=figures,
        stage_model=stage_model,
        delta=delta,
        waits_s=waits_s,
        stall_s=waits_s["input"] + waits_s["ram"],
        compute_busy=_share(device.compute_busy_s, makespan_s),
        dma_busy=_share(device.dma_busy_s, dma_channels * makespan_s),
        bus_busy=(_share(device.bus_moved_bytes, bus_bytes_per_s * makespan_s) if math.isfinite(bus_bytes_per_s) else 0.0),
        ram_capacity_bytes=device.ram_capacity_bytes,
        pending_at_peak_bytes=device.pending_at_peak_bytes,
        over_budget=budgets is not None and figures.peak_ram_bytes > budgets.ram_bytes,
        over_deadline=over_deadline,
        deadline_note=note,
        events=device.trace,
    )


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def write_trace(result: SimulationResult, directory: Path) -> None:
    """Write trace.csv (one row per event, `trace.TRACE_COLUMNS`) and summary.json into `directory`.

    The RAM curve is not written separately: it is the running sum of the alloc (+) and free (-)
    rows of the trace.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    result.trace.to_csv(RunFolder(directory).trace_csv, index=False)
    RunFolder(directory).summary_json.write_text(json.dumps(result.summary(), indent=1) + "\n")
