"""The trace of a run: one row per event, kept as packed floats until someone asks for a table.

A replay of 300,000 instructions makes about half a million events. As tuples they would take
~170 bytes each; here a row is six doubles (48 bytes) packed onto one `bytearray`, and the pandas
DataFrame is built only when the trace is written or read (`to_frame`), never during the run.
The allocation of a computed output is not recorded: it happens when its compute starts, with
its bytes, so `to_frame` derives that `alloc` row from the compute row (page-ins, which
allocate when issued, record theirs).

Row layout: (time_s, end_s, event, node, bytes, stage), `event` indexing `EVENTS`. Node and
byte counts are exact as doubles up to 2**53.
"""

import struct
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pandas is imported only when a table is built
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
    Event("bus", "stall", "bus"),
)
(COMPUTE, RECOMPUTE, PAGE_IN, PAGE_OUT, ALLOC, FREE,
 WAIT_INPUT, WAIT_BARRIER, WAIT_RAM, WAIT_CHANNEL, WAIT_SOURCE, WAIT_BUS) = range(len(EVENTS))

#: The causes of waits, in the order summaries list them.
WAIT_CAUSES = tuple(e.cause for e in EVENTS if e.kind == "stall")

#: Columns of the trace table, one row per event. `time_s` is when it started, `end_s` when it
#: ended (equal for alloc and free); `resource` is compute, dma, ram, dma-queue or bus; `kind`
#: is compute, recompute, page_in, page_out, alloc, free or stall; `bytes` is the size of the
#: output concerned; `stage` is the stage of the instruction that caused the event; `cause`
#: says what a stall waited for (empty for other kinds).
TRACE_COLUMNS = ("time_s", "end_s", "duration_s", "resource", "node", "kind", "bytes", "stage", "cause")

_ROW = struct.Struct("6d")


class Trace:
    """Events appended during a run (`add`), turned into a DataFrame on demand (`to_frame`)."""

    __slots__ = ("_rows", "_pack")

    def __init__(self):
        self._rows = bytearray()
        self._pack = _ROW.pack

    def add(self, time_s: float, end_s: float, event: int, node: int, size_bytes: int, stage: int) -> None:
        """Record one event (`event` is a code of `EVENTS`)."""
        self._rows += self._pack(time_s, end_s, event, node, size_bytes, stage)

    def __len__(self) -> int:
        """Rows of the table, the derived allocations included."""
        return len(self._rows) // _ROW.size + self._computes()

    @property
    def nbytes(self) -> int:
        """Memory the recorded rows take."""
        return len(self._rows)

    def _computes(self) -> int:
        import numpy as np

        codes = self._recorded()[:, 2]
        return int(np.count_nonzero((codes == COMPUTE) | (codes == RECOMPUTE)))

    def _recorded(self):
        import numpy as np

        return np.frombuffer(bytes(self._rows), dtype=np.float64).reshape(-1, 6)

    def _rows_in_time_order(self):
        """Every row, derived allocations included, by start time; ties in recording order, an
        allocation just before the compute it belongs to."""
        import numpy as np

        rows = self._recorded()
        computed = (rows[:, 2] == COMPUTE) | (rows[:, 2] == RECOMPUTE)
        allocs = rows[computed].copy()
        allocs[:, 1] = allocs[:, 0]
        allocs[:, 2] = ALLOC
        every = np.concatenate((rows, allocs))
        sequence = np.concatenate((2 * np.arange(len(rows)) + 1, 2 * np.flatnonzero(computed)))
        return every[np.lexsort((sequence, every[:, 0]))]

    def to_frame(self) -> "pd.DataFrame":
        """The trace as a table (`TRACE_COLUMNS`), sorted by start time, ties in recording order."""
        import numpy as np
        import pandas as pd

        rows = self._rows_in_time_order()
        codes = rows[:, 2].astype(np.intp)
        frame = pd.DataFrame({
            "time_s": rows[:, 0],
            "end_s": rows[:, 1],
            "duration_s": rows[:, 1] - rows[:, 0],
            "resource": np.array([e.resource for e in EVENTS], dtype=object)[codes],
            "node": rows[:, 3].astype(np.int64),
            "kind": np.array([e.kind for e in EVENTS], dtype=object)[codes],
            "bytes": rows[:, 4].astype(np.int64),
            "stage": rows[:, 5].astype(np.int64),
            "cause": np.array([e.cause for e in EVENTS], dtype=object)[codes],
        })
        return frame

    def ram_curve(self) -> "pd.DataFrame":
        """RAM in use over time (time_s, ram_bytes): the running sum of alloc and free rows, from (0, 0)."""
        import numpy as np
        import pandas as pd

        rows = self._rows_in_time_order()
        ram = rows[(rows[:, 2] == ALLOC) | (rows[:, 2] == FREE)]
        change = np.where(ram[:, 2] == ALLOC, ram[:, 4], -ram[:, 4]).astype(np.int64)
        return pd.DataFrame({"time_s": np.concatenate(([0.0], ram[:, 0])),
                             "ram_bytes": np.concatenate(([0], np.cumsum(change)))})
