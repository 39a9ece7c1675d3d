"""What a simulation measured: the result record, built once at the end, and its files."""

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from poetsim.schedule import Budgets, Figures

#: Columns of `SimulationResult.trace`, one row per event. `time_s` is when it started, `end_s`
#: when it ended (equal for alloc and free); `resource` is compute, dma or ram; `kind` is compute,
#: recompute, page_in, page_out, alloc, free or stall; `bytes` is the size of the output concerned
#: (0 for a stall); `stage` is the stage of the instruction that caused the event.
TRACE_COLUMNS = ("time_s", "end_s", "duration_s", "resource", "node", "kind", "bytes", "stage")


@dataclass(frozen=True, eq=False)  # eq=False: DataFrames do not compare to a single bool
class SimulationResult:
    """What replaying a schedule on the simulated device measured.

    `figures` is in the checker's terms, with `runtime_s` = the makespan and `peak_ram_bytes` =
    the simulated peak. `stall_s` is the time the instruction walker waited for a page-in to
    land or for RAM held by a transfer in flight. Busy fractions are of the makespan: the
    compute engine's, the DMA channels' (over all channels) and the memory bus's (bytes moved
    over bandwidth x makespan; 0 for an unlimited bus). `over_budget` / `over_deadline` compare
    the simulated peak and makespan with the budgets given (False without budgets).
    """

    figures: Figures
    makespan_s: float
    stall_s: float
    compute_busy: float
    dma_busy: float
    bus_busy: float
    trace: pd.DataFrame
    ram_curve: pd.DataFrame
    over_budget: bool
    over_deadline: bool

    def summary(self) -> dict:
        """The scalar figures, for summary.json and reports."""
        return {
            "makespan_s": self.makespan_s,
            "stall_s": self.stall_s,
            "compute_busy": self.compute_busy,
            "dma_busy": self.dma_busy,
            "bus_busy": self.bus_busy,
            "over_budget": self.over_budget,
            "over_deadline": self.over_deadline,
            "figures": {**asdict(self.figures), "total_j": self.figures.total_j},
            "trace_rows": len(self.trace),
        }


def make_result(figures: Figures, records: list, ram_curve: list, *, stall_s: float, compute_busy_s: float,
                dma_busy_s: float, dma_channels: int, bus_moved_bytes: float, bus_bytes_per_s: float,
                budgets: Budgets | None) -> SimulationResult:
    """Turn the records of a run into the result: DataFrames, busy fractions and budget flags."""
    makespan_s = figures.runtime_s
    trace = pd.DataFrame.from_records(records, columns=[c for c in TRACE_COLUMNS if c != "duration_s"])
    trace.insert(2, "duration_s", trace["end_s"] - trace["time_s"])
    trace = trace.sort_values("time_s", kind="stable", ignore_index=True)
    bus_capacity_bytes = bus_bytes_per_s * makespan_s
    return SimulationResult(
        figures=figures,
        makespan_s=makespan_s,
        stall_s=stall_s,
        compute_busy=_share(compute_busy_s, makespan_s),
        dma_busy=_share(dma_busy_s, dma_channels * makespan_s),
        bus_busy=_share(bus_moved_bytes, bus_capacity_bytes) if math.isfinite(bus_bytes_per_s) else 0.0,
        trace=trace,
        ram_curve=pd.DataFrame.from_records(ram_curve, columns=["time_s", "ram_bytes"]),
        over_budget=budgets is not None and figures.peak_ram_bytes > budgets.ram_bytes,
        over_deadline=budgets is not None and not budgets.meets_deadline(makespan_s),
    )


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def write_trace(result: SimulationResult, directory: Path) -> None:
    """Write trace.csv (one row per event, `TRACE_COLUMNS`) and summary.json into `directory`.

    The RAM curve is not written separately: it is the running sum of the alloc (+) and free (-)
    rows of the trace.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    result.trace.to_csv(directory / "trace.csv", index=False)
    (directory / "summary.json").write_text(json.dumps(result.summary(), indent=1) + "\n")
