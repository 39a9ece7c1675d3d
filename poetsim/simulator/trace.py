"""The trace of a run: one row per event, kept as packed floats until someone asks for a table.

A replay of 300,000 instructions makes about half a million events. As tuples they would take
~170 bytes each; here a row is 25 bytes packed onto one `bytearray`, and the pandas DataFrame is
built only when the trace is written or read (`to_frame`), never during the run. What can be
derived is not stored: a row's byte count is its node's output size (0 for a barrier wait), and
the allocation of a computed output, made when its compute starts, is derived from the compute
row (page-ins, which allocate when issued, record theirs).

Row layout: time_s and end_s (float64), event (uint8, indexing `EVENTS`), node and stage
(uint32).
"""

import struct
from typing import NamedTuple

import numpy as np
import pandas as pd


class Event(NamedTuple):
    """What a trace row records: on which resource, what kind of event, and for a wait, why."""

    resource: str
    kind: str
    cause: str = ""


#: Every event a replay records, by code. A `stall` is a wait; its `cause` says what for:
#: `input` (a compute waits for an input still being paged in), `barrier` (the compute engine
#: waits at a stage end for the stage's transfers), `ram` (an allocation waits for RAM that
#: transfers in flight still hold), `channel` (a transfer waits for a free DMA channel),
#: `source` (a transfer waits for the transfer it copies: a page-in for its page-out, a
#: page-out for its buffer to land), `bus` (contention on the memory bus stretched an activity;
#: the row runs from its nominal end to its real end).
EVENTS = (
    Event("compute", "compute"),
    Event("compute", "recompute"),
    Event("dma", "page_in"),
    Event("dma", "page_out"),
    Event("ram", "alloc"),
    Event("ram", "free"),
    Event("compute", "stall", "input"),
    Event("compute", "stall", "barrier"),
    Event("ram", "stall", "ram"),
    Event("dma-queue", "stall", "channel"),
    Event("dma-queue", "stall", "source"),
    Event("contention", "stall", "bus"),
)
(COMPUTE, RECOMPUTE, PAGE_IN, PAGE_OUT, ALLOC, FREE, WAIT_INPUT, WAIT_BARRIER, WAIT_RAM, WAIT_CHANNEL, WAIT_SOURCE, WAIT_BUS) = (
    range(len(EVENTS))
)

#: The causes of waits, in the order summaries list them.
WAIT_CAUSES = tuple(e.cause for e in EVENTS if e.kind == "stall")

#: Columns of the trace table, one row per event. `time_s` is when it started, `end_s` when it
#: ended (equal for alloc and free); `resource` is compute, dma, ram, dma-queue or contention; `kind`
#: is compute, recompute, page_in, page_out, alloc, free or stall; `bytes` is the size of the
#: output concerned; `stage` is the stage of the instruction that caused the event; `cause`
#: says what a stall waited for (empty for other kinds).
TRACE_COLUMNS = ("time_s", "end_s", "duration_s", "resource", "node", "kind", "bytes", "stage", "cause")

_ROW = struct.Struct("<ddBII")
_DTYPE = [("time_s", "<f8"), ("end_s", "<f8"), ("event", "u1"), ("node", "<u4"), ("stage", "<u4")]


#: Packs one row: `pack_row(time_s, end_s, event, node, stage)`, `event` a code of `EVENTS`.
pack_row = _ROW.pack


class Trace:
    """Events appended during a run, turned into a DataFrame on demand (`to_frame`).

    `rows` holds the packed rows: a recorder appends `pack_row(...)` to it, written out where it
    records rather than behind a method, since it runs for every event of a run. `output_bytes`
    are the graph's output sizes, from which each row's byte count is derived.
    """

    __slots__ = ("output_bytes", "rows")

    def __init__(self, output_bytes: tuple[int, ...]):
        self.rows = bytearray()
        self.output_bytes = output_bytes

    def __len__(self) -> int:
        """Rows of the table, the derived allocations included."""
        return len(self.rows) // _ROW.size + self._computes()

    @property
    def nbytes(self) -> int:
        """Memory the recorded rows take."""
        return len(self.rows)

    def _computes(self) -> int:
        events = self._recorded()["event"]
        return int(np.count_nonzero((events == COMPUTE) | (events == RECOMPUTE)))

    def _recorded(self):
        return np.frombuffer(bytes(self.rows), dtype=np.dtype(_DTYPE))

    def _columns(self) -> dict:
        """Every row as columns, derived allocations and byte counts included, by start time.

        Ties stay in recording order, an allocation just before the compute it belongs to.
        """
        rows = self._recorded()
        computed = np.flatnonzero((rows["event"] == COMPUTE) | (rows["event"] == RECOMPUTE))
        allocs = rows[computed].copy()
        allocs["end_s"] = allocs["time_s"]
        allocs["event"] = ALLOC
        every = np.concatenate((rows, allocs))
        sequence = np.concatenate((2 * np.arange(len(rows)) + 1, 2 * computed))
        every = every[np.lexsort((sequence, every["time_s"]))]
        node = every["node"].astype(np.int64)
        sizes = np.asarray(self.output_bytes, dtype=np.int64)[node] if len(node) else np.zeros(0, np.int64)
        return {
            "time_s": every["time_s"],
            "end_s": every["end_s"],
            "event": every["event"].astype(np.intp),
            "node": node,
            "stage": every["stage"].astype(np.int64),
            "bytes": np.where(every["event"] == WAIT_BARRIER, 0, sizes),
        }

    def to_frame(self) -> pd.DataFrame:
        """The trace as a table (`TRACE_COLUMNS`), sorted by start time, ties in recording order."""
        rows = self._columns()
        codes = rows["event"]
        return pd.DataFrame(
            {
                "time_s": rows["time_s"],
                "end_s": rows["end_s"],
                "duration_s": rows["end_s"] - rows["time_s"],
                "resource": np.array([e.resource for e in EVENTS], dtype=object)[codes],
                "node": rows["node"],
                "kind": np.array([e.kind for e in EVENTS], dtype=object)[codes],
                "bytes": rows["bytes"],
                "stage": rows["stage"],
                "cause": np.array([e.cause for e in EVENTS], dtype=object)[codes],
            }
        )

    def ram_curve(self) -> pd.DataFrame:
        """RAM in use over time (time_s, ram_bytes): the running sum of alloc and free rows, from (0, 0)."""
        rows = self._columns()
        ram = (rows["event"] == ALLOC) | (rows["event"] == FREE)
        change = np.where(rows["event"][ram] == ALLOC, rows["bytes"][ram], -rows["bytes"][ram])
        return pd.DataFrame(
            {"time_s": np.concatenate(([0.0], rows["time_s"][ram])), "ram_bytes": np.concatenate(([0], np.cumsum(change)))}
        )
