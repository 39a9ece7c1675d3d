"""The results schema: `ResultRow`, whose fields are the columns of runs.csv, and the file itself.

Every layer that writes or reads results goes through `ResultRow`: the pipeline fills one per
run, the sweep appends them to runs.csv, `compare`, `check` and the report read them back. A new
column is one new field here; a value that is not a field cannot be written (no silent drops),
and an older runs.csv without a newer column still loads, the column then empty.
"""

import contextlib
import csv
import errno
import fcntl
import io
import math
import os
import types
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from poetsim.errors import FolderBusyError, StorageError, UserInputError
from poetsim.inputs.files import MAX_RESULTS_BYTES, read_text
from poetsim.schedule.model import Figures
from poetsim.status import Status

#: The figures a schedule is described by, as the suffixes of the predicted_ and simulated_ columns.
FIGURE_COLUMNS = (
    "total_j",
    "compute_j",
    "recompute_j",
    "page_in_j",
    "page_out_j",
    "static_j",
    "peak_ram_bytes",
    "runtime_s",
    "recomputations",
    "page_ins",
    "page_outs",
)


@dataclass(frozen=True)
class ResultRow:
    """One strategy at one point: its parameters, what happened, and the figures of its schedule.

    Energies are joules of one training iteration; `overhead_pct` is the energy above keep-all
    (every node once, nothing paged) in percent. `predicted_*` are the checked figures of the
    schedule under the scenario's timing model; `simulated_*` are the simulator's. `bound_j` is a
    proven lower bound on this strategy's least energy at this point, `gap_overhead` the share of
    the overhead that is not proven (0 for a proven optimum; read it before trusting a figure).
    `device_*` are filled by `poetsim device sweep` (docs/device.md) and empty otherwise.
    """

    # The point: which scenario, and its coordinates in the grid.
    scenario: str = ""
    point_key: str = ""
    model: str = ""  # zoo name, or graph file name@content hash
    platform: str = ""  # shipped name, or profile file name@content hash
    ram: str = ""  # as written: 50%, 1048576B
    runtime_x: float | None = None
    strategy: str = ""
    # What happened.
    status: Status = Status.FAILED
    message: str = ""
    model_name: str | None = None  # the graph's own name
    timing: str | None = None
    ram_budget_bytes: int | None = None
    deadline_s: float | None = None
    reserved_bytes: int | None = None
    keep_all_peak_bytes: int | None = None
    keep_all_energy_j: float | None = None
    solver: str | None = None
    build_s: float | None = None
    solve_s: float | None = None
    work: float | None = None  # the optimiser's work units (the same on any machine and at any load)
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
    simulated_mode: str | None = None  # barrier or free-running (poetsim.simulator.Mode)
    schedule_bytes: int | None = None
    wall_s: float | None = None
    # The emulated device (`poetsim device sweep`): the schedule run by the runtime on QEMU's Cortex-M.
    device_ok: bool | None = None  # every check passed: gradients, reference, peak, budget, traffic, recomputations
    device_message: str | None = None  # the checks that failed, or why the device could not run the schedule
    device_target: str | None = None  # the emulated core: cortex-m4f or cortex-m0plus
    device_peak_ram_bytes: int | None = None  # the arena's measured peak
    device_page_outs: int | None = None
    device_page_out_bytes: int | None = None
    device_page_ins: int | None = None
    device_page_in_bytes: int | None = None
    device_recomputations: int | None = None
    device_gradients_equal: bool | None = None  # bitwise equal to the keep-all step's on the same device
    device_reference_error: float | None = None  # largest difference from the NumPy step, share of the tensor's scale
    device_compute_s: float | None = None  # measured: emulated instructions of the computes at the profile's clock
    device_predicted_compute_s: float | None = None  # the same computes as the profile predicts them
    device_step_s: float | None = None  # the whole step's instructions at the clock

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
        return _parse_bool(value)
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


def _parse_bool(value: object) -> bool:
    """A boolean cell: True or False as written by csv (or 1 and 0), or a bool itself."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError(f"'{value}' is not true or false")


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


def whole_rows(text: str) -> tuple[str, bool]:
    """The text of a runs.csv without a last row a power cut tore, and whether it had one.

    A row is written with its newline in one write, so a last line without a newline was cut
    short; so was a last row, newline and all, with fewer cells than the header.
    """
    torn = bool(text) and not text.endswith("\n")
    if torn:
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        ends = [reader.line_num]  # the physical line each record ends on, the header's first
        last: list[str] = []
        for row in reader:
            last = row
            ends.append(reader.line_num)
    except csv.Error:
        return text, torn  # not a CSV: left for the reader to refuse
    if header and len(ends) > 1 and len(last) != len(header):
        return "".join(text.splitlines(keepends=True)[: ends[-2]]), True
    return text, torn


class RunsFile:
    """runs.csv: append-only, one complete row per write, readable while a sweep runs.

    Each row (with the header, for a new file) is appended by a single `os.write` on a file
    opened in append mode, then fsynced, so a sweep killed at any moment keeps every row it
    had. Should the write fail or fall short (a full disk), the file is cut back to its size
    before the write, so a torn row is never left behind by poetsim itself; a row torn by a
    power cut is ignored by readers and removed by `tidy`, and its point runs again.

    Only one process may write (see `FolderLock`); any number may read.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def records(self) -> list[dict[str, str]]:
        """The complete rows on disk as text, in order; a torn last line is left out.

        UserInputError when the file is not a runs.csv this poetsim can extend: not UTF-8, a
        header with unknown columns or without point_key and status, a row of the wrong width.
        """
        return self._read()[1]

    def done_keys(self) -> set[str]:
        """Keys of the points that need not run again: every complete row but `failed` ones."""
        return {r["point_key"] for r in self.records() if r.get("status") != Status.FAILED.value}

    def tidy(self) -> int:
        """Make the file ready for appending; returns how many rows were dropped.

        Drops `failed` rows (their points run again), later repeats of a key (left by older
        versions that let two sweeps write at once) and a torn last line, and brings an older
        header up to `COLUMNS` (its new columns empty). The new file replaces the old one
        atomically (written beside it, fsynced, renamed), so a kill leaves one or the other.
        Nothing is written when nothing changes. Hold the folder's `FolderLock` first.
        """
        if not self.path.exists():
            return 0
        header, records, torn = self._read()
        kept, seen = [], set()
        for record in records:
            if record.get("status") == Status.FAILED.value or record["point_key"] in seen:
                continue
            seen.add(record["point_key"])
            kept.append(record)
        dropped = len(records) - len(kept)
        if not dropped and not torn and tuple(header) == COLUMNS:
            return 0
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        _replace_atomically(self.path, buffer.getvalue().encode("utf-8"))
        return dropped

    def rewrite(self, rows: dict[int, ResultRow], key_order: Sequence[str] = ()) -> None:
        """Replace the complete rows at the given positions (in `records` order), atomically.

        With `key_order`, the rows are then put in that order of their point keys (a key it does
        not list goes after those it does, in the order it had); nothing is written when no row
        is replaced and they are in that order already. The other rows keep their text exactly;
        the header becomes `COLUMNS`. Hold the folder's `FolderLock` first.
        """
        records = self.records()
        for position, row in rows.items():
            records[position] = {name: str(_cell(getattr(row, name))) for name in COLUMNS}
        if key_order:
            rank = {key: n for n, key in enumerate(key_order)}
            ordered = sorted(records, key=lambda record: rank.get(record["point_key"], len(rank)))
            if not rows and ordered == records:
                return
            records = ordered
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        _replace_atomically(self.path, buffer.getvalue().encode("utf-8"))

    def append(self, row: ResultRow) -> None:
        """Write one row (and the header for a new file) in a single write, then fsync.

        StorageError (the file cut back to its size before) when the disk refuses it.
        """
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise StorageError.from_os_error(exc, "open", self.path) from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                writer.writeheader()
            writer.writerow({name: _cell(getattr(row, name)) for name in COLUMNS})
            data = buffer.getvalue().encode("utf-8")
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(
                        errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (only {written} of {len(data)} bytes written)", str(self.path)
                    )
                os.fsync(fd)
            except OSError as exc:
                _cut_back(fd, size)
                raise StorageError.from_os_error(exc, "write", self.path) from None
        finally:
            os.close(fd)

    def _read(self) -> tuple[list[str], list[dict[str, str]], bool]:
        """Header, complete rows and whether a torn last line was left out."""
        if not self.path.exists():
            return list(COLUMNS), [], False
        text, torn = whole_rows(read_text(self.path, "results file", MAX_RESULTS_BYTES))
        try:
            lines = list(csv.reader(io.StringIO(text, newline="")))
        except csv.Error as exc:
            raise UserInputError(f"{self.path}: not a results CSV ({exc})") from None
        if not lines:
            return list(COLUMNS), [], torn
        header, body = lines[0], lines[1:]
        unknown = [c for c in header if c not in COLUMNS]
        if unknown or not {"point_key", "status"} <= set(header):
            what = f"unknown column(s) {', '.join(unknown[:5])}" if unknown else "no point_key or status column"
            raise UserInputError(f"{self.path}: not a runs.csv this poetsim can extend ({what})")
        records = []
        for number, cells in enumerate(body, start=2):
            if len(cells) != len(header):
                raise UserInputError(f"{self.path}: line {number} has {len(cells)} cells, the header {len(header)}")
            records.append(dict(zip(header, cells)))
        return header, records, torn


def _cut_back(fd: int, size: int) -> None:
    """Truncate a file to `size` after a failed append; best effort (the disk may refuse that too)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write `data` beside `path`, fsync it, rename it over `path`, fsync the folder."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        _fsync_folder(path.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StorageError.from_os_error(exc, "rewrite", path) from None


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FolderLock:
    """An exclusive lock on a results folder, held by the one process that writes into it.

    `flock` on `LOCK_FILE` in the folder: the kernel releases it when its holder ends in any
    way (SIGKILL included), so a stale lock never blocks a later sweep. The holder's pid is
    written into the file so that a second writer can say who holds it.
    """

    LOCK_FILE = ".poetsim.lock"

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._fd: int | None = None

    def __enter__(self) -> "FolderLock":
        """Take the lock, or raise FolderBusyError naming the process that holds it."""
        path = self.directory / self.LOCK_FILE
        try:  # held open read-only: flock needs no more, and the disk may then turn read-only under it
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise StorageError.from_os_error(exc, "create the lock file", path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise FolderBusyError(
                f"{self.directory}: another poetsim (pid {holder}) is writing into this folder; "
                "wait for it to end, or choose another --out"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StorageError.from_os_error(exc, "lock", path) from None
        self._fd = fd
        with contextlib.suppress(OSError):  # the pid is a courtesy to the next writer; the lock itself holds
            path.write_text(f"{os.getpid()}\n", encoding="ascii")
        return self

    def __exit__(self, *exc) -> None:
        """Release the lock."""
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases the lock
            self._fd = None
