"""The results schema: `ResultRow`, whose fields are the columns of runs.csv, and the file itself.

Every layer that writes or reads results goes through `ResultRow`: the pipeline fills one per
run, the sweep appends them to runs.csv, `compare`, `check` and the report read them back. A new
column is one new field here; a value that is not a field cannot be written (no silent drops),
and an older runs.csv without a newer column still loads, the column then empty.
"""

import csv
import io
import math
import os
import types
import typing
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from poetsim.errors import UserInputError
from poetsim.schedule import Figures
from poetsim.status import Status

#: The figures a schedule is described by, as the suffixes of the predicted_ and simulated_ columns.
FIGURE_COLUMNS = ("total_j", "compute_j", "recompute_j", "page_in_j", "page_out_j", "static_j",
                  "peak_ram_bytes", "runtime_s", "recomputations", "page_ins", "page_outs")


@dataclass(frozen=True)
class ResultRow:
    """One strategy at one point: its parameters, what happened, and the figures of its schedule.

    Energies are joules of one training iteration; `overhead_pct` is the energy above keep-all
    (every node once, nothing paged) in percent. `predicted_*` are the checked figures of the
    schedule under the scenario's timing model; `simulated_*` are the simulator's. `bound_j` is a
    proven lower bound on this strategy's least energy at this point, `gap_overhead` the share of
    the overhead that is not proven (0 for a proven optimum; read it before trusting a figure).
    """

    # The point: which scenario, and its coordinates in the grid.
    scenario: str = ""
    point_key: str = ""
    model: str = ""                        # zoo name, or graph file name@content hash
    platform: str = ""                     # shipped name, or profile file name@content hash
    ram: str = ""                          # as written: 50%, 1048576B
    runtime_x: float | None = None
    strategy: str = ""
    # What happened.
    status: Status = Status.FAILED
    message: str = ""
    model_name: str | None = None          # the graph's own name
    timing: str | None = None
    ram_budget_bytes: int | None = None
    deadline_s: float | None = None
    reserved_bytes: int | None = None
    keep_all_peak_bytes: int | None = None
    keep_all_energy_j: float | None = None
    solver: str | None = None
    build_s: float | None = None
    solve_s: float | None = None
    bound_j: float | None = None
    gap_total: float | None = None
    gap_overhead: float | None = None
    overhead_pct: float | None = None
    # The checked prediction (the optimiser's model, replayed by the independent checker).
    predicted_total_j: float | None = None
    predicted_compute_j: float | None = None
    predicted_recompute_j: float | None = None
    predicted_page_in_j: float | None = None
    predicted_page_out_j: float | None = None
    predicted_static_j: float | None = None
    predicted_peak_ram_bytes: int | None = None
    predicted_runtime_s: float | None = None
    predicted_recomputations: int | None = None
    predicted_page_ins: int | None = None
    predicted_page_outs: int | None = None
    # The simulated device.
    simulated_total_j: float | None = None
    simulated_compute_j: float | None = None
    simulated_recompute_j: float | None = None
    simulated_page_in_j: float | None = None
    simulated_page_out_j: float | None = None
    simulated_static_j: float | None = None
    simulated_peak_ram_bytes: int | None = None
    simulated_runtime_s: float | None = None
    simulated_recomputations: int | None = None
    simulated_page_ins: int | None = None
    simulated_page_outs: int | None = None
    simulated_stall_s: float | None = None
    simulated_over_budget: bool | None = None
    simulated_over_deadline: bool | None = None
    simulated_mode: str | None = None      # barrier or free-running (poetsim.simulator.Mode)
    schedule_bytes: int | None = None
    wall_s: float | None = None

    def to_dict(self) -> dict:
        """The row as plain values (the status as its word), for JSON."""
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict, where: str = "row") -> "ResultRow":
        """A row from text or plain values; missing fields are empty, unknown ones an error.

        UserInputError names `where` and the field whose value does not parse.
        """
        unknown = sorted(set(data) - set(COLUMNS))
        if unknown:
            raise UserInputError(f"{where}: unknown column(s) {', '.join(unknown)}")
        values = {}
        for name, kind in _TYPES.items():
            if name in data:
                try:
                    values[name] = _parse(data[name], kind)
                except ValueError as exc:
                    raise UserInputError(f"{where}: column {name}: {exc}") from None
        return cls(**values)

    @staticmethod
    def figure_columns(prefix: str, figures: Figures | None) -> dict:
        """`{prefix}_{figure}` values of `figures` (all None without figures)."""
        return {f"{prefix}_{name}": (getattr(figures, name) if figures is not None else None) for name in FIGURE_COLUMNS}


#: Columns of runs.csv, in order: the fields of ResultRow.
COLUMNS = tuple(f.name for f in fields(ResultRow))
_TYPES = typing.get_type_hints(ResultRow)


def _parse(value, kind):
    """A CSV cell (or a plain value) as the field's type; '' and None are None."""
    base = _base(kind)
    if value is None or (isinstance(value, str) and value.strip() == ""):
        if _optional(kind):
            return None
        if base is str:
            return ""
        raise ValueError("is empty")
    if base is Status:
        return Status.parse(str(value))
    if base is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError(f"'{value}' is not true or false")
    if base is int:
        number = float(value)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"'{value}' is not a whole number")
        return int(number)
    if base is float:
        number = float(value)
        if math.isnan(number):
            raise ValueError(f"'{value}' is not a number")
        return number
    return str(value)


def _optional(kind) -> bool:
    return isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)


def _base(kind):
    if isinstance(kind, types.UnionType):
        return next(k for k in typing.get_args(kind) if k is not type(None))
    return kind


def _cell(value) -> str | int | float | bool:
    if value is None:
        return ""
    if isinstance(value, Status):
        return value.value
    return value


class RunsFile:
    """runs.csv: append-only, one complete row per write, readable while a sweep runs.

    Each row is appended with a single `write` on a file opened in append mode and flushed to
    disk at once, so a sweep killed at any moment keeps every row it had; a torn last line (a
    kill mid-write) is dropped when the file is read for resuming, and that point is rerun.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def done_keys(self) -> set[str]:
        """Keys of the rows already on disk (after dropping a torn last line)."""
        self._drop_torn_tail()
        if not self.path.exists():
            return set()
        with self.path.open(newline="", encoding="utf-8") as handle:
            return {row["point_key"] for row in csv.DictReader(handle)}

    def append(self, row: ResultRow) -> None:
        """Write one row (and the header for a new file) in a single write, then fsync."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        if not self.path.exists() or self.path.stat().st_size == 0:
            writer.writeheader()
        writer.writerow({name: _cell(getattr(row, name)) for name in COLUMNS})
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, buffer.getvalue().encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def _drop_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])
