"""Sweep results as pandas: loading runs.csv and the strategies side by side (the headline).

`load_results` refuses a file it cannot vouch for (one line, exit 2) rather than let the
energy guard (`poetsim.analysis.guard`) judge a half-read file.
"""

import csv
import io
from pathlib import Path

import pandas as pd

from poetsim import strategies
from poetsim.errors import UserInputError
from poetsim.folders import StudyFolder
from poetsim.inputs.files import MAX_RESULTS_BYTES, read_text
from poetsim.runs import COLUMNS, ResultRow, whole_rows
from poetsim.status import Status
from poetsim.units import number_text

GRID = ["model", "platform", "ram", "runtime_x"]
#: Status words that come with a schedule.
WITH_SCHEDULE = tuple(s.value for s in Status if s.has_schedule)


def has_schedule(status: pd.Series) -> pd.Series:
    """Per row, whether its status comes with a checked schedule."""
    return status.astype(str).isin(WITH_SCHEDULE)


def load_results(path: str | Path) -> pd.DataFrame:
    """runs.csv, or the runs.csv inside a results folder, checked cell by cell.

    UserInputError (one line naming the file, and the line and column where it applies) for a
    file that is not a regular UTF-8 CSV under the size cap, lacks point_key, status or
    predicted_total_j, has a row of the wrong width, a cell that does not parse as its column's
    type (`ResultRow`), or a point key twice. A last row a power cut tore is left out
    (`poetsim.runs.whole_rows`), as every reader of runs.csv does.
    """
    path = Path(path)
    if path.is_dir():
        path = StudyFolder(path).runs_csv
    if not path.exists():
        raise UserInputError(f"{path}: no such results file (run `poetsim sweep` first)")
    text, _ = whole_rows(read_text(path, "results file", MAX_RESULTS_BYTES))
    _check_cells(path, text)
    try:
        frame = pd.read_csv(io.StringIO(text), keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise UserInputError(f"{path}: not a results CSV ({' '.join(str(exc).split())})") from None
    return frame


#: Columns without which a file is not a results file.
REQUIRED_COLUMNS = ("point_key", "status", "predicted_total_j")


def _check_cells(path: Path, text: str) -> None:
    """UserInputError at the first thing in `text` that a runs.csv cannot hold."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header:
            raise UserInputError(f"{path}: empty; not a results file")
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise UserInputError(f"{path}: not a poetsim results file (missing columns {', '.join(missing)})")
        if len(set(header)) != len(header):
            raise UserInputError(f"{path}: a column is named twice in the header")
        known = [(i, name) for i, name in enumerate(header) if name in COLUMNS]
        key_at = header.index("point_key")
        seen: dict[str, int] = {}
        for cells in reader:
            line = reader.line_num
            if len(cells) != len(header):
                raise UserInputError(f"{path}: line {line} has {len(cells)} cells, the header {len(header)}")
            ResultRow.from_dict({name: cells[i] for i, name in known}, where=f"{path}, line {line}")
            key = cells[key_at]
            if not key.strip():
                raise UserInputError(f"{path}: line {line}: point_key is empty")
            if key in seen:
                raise UserInputError(
                    f"{path}: point {key} is on lines {seen[key]} and {line}; a results file holds each point once"
                )
            seen[key] = line
    except csv.Error as exc:
        raise UserInputError(f"{path}: not a results CSV (line {reader.line_num}: {exc})") from None


#: The dimensions of a headline row, in order; RAM is sorted as a number (see `ram_share`).
HEADLINE_KEYS = ["model", "platform", "timing", "runtime_x", "ram"]


def ram_share(frame: pd.DataFrame) -> pd.Series:
    """Each row's RAM budget as a share of the keep-all peak, for sorting and charts.

    From the resolved bytes where the row has them; else from a percentage as written (a point
    that failed before its budget was resolved); NaN for absolute budgets of failed points.
    """
    missing = pd.Series(float("nan"), index=frame.index)
    budget = pd.to_numeric(frame.get("ram_budget_bytes", missing), errors="coerce")
    peak = pd.to_numeric(frame.get("keep_all_peak_bytes", missing), errors="coerce")
    written = frame["ram"].map(_percent_text) if "ram" in frame else missing
    return (budget / peak).where(budget.notna() & peak.notna() & (peak > 0), written)


def _percent_text(ram) -> float:
    text = "" if pd.isna(ram) else str(ram).strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float("nan")
    except ValueError:
        return float("nan")


def cell_text(status: str, overhead_pct, gap_overhead) -> str:
    """How one strategy at one point reads in a headline table.

    A schedule shows its energy above keep-all; `*` marks one not proven optimal (its
    `gap_overhead` says how much of that overhead might still be saved). Without a schedule the
    status word stands in the cell: `infeasible` is a proof, `no-solution` a timeout.
    """
    if status in WITH_SCHEDULE and pd.notna(overhead_pct):
        mark = "*" if status == Status.FEASIBLE.value and not (pd.notna(gap_overhead) and gap_overhead <= 0) else ""
        return f"{overhead_pct:.3f} %{mark}"
    return str(status)


def headline(frame: pd.DataFrame) -> pd.DataFrame:
    """Strategies side by side: one row per model, platform, timing, runtime and RAM budget.

    Rows are sorted with RAM as a number (largest budget first); there is one text column per
    strategy, in registry order, as `cell_text` writes it, followed by the numbers behind each
    cell (`<strategy> overhead %`, `<strategy> energy J`, `<strategy> status`, `<strategy> gap`),
    so that the CSV keeps every digit and the text stays short. Rows run on the emulated device
    (`poetsim device sweep`) mark their cell with the device's verdict and add
    `<strategy> device compute / predicted`.
    """
    if frame.empty:
        return pd.DataFrame(columns=HEADLINE_KEYS)
    data = frame.copy()
    for column in HEADLINE_KEYS:
        if column not in data:
            data[column] = None
    data["ram_share"] = ram_share(data)
    data["timing"] = data["timing"].fillna("")
    for column in ("overhead_pct", "gap_overhead", "predicted_total_j"):
        data[column] = pd.to_numeric(data.get(column), errors="coerce")
    data["cell"] = [cell_text(str(s), o, g) for s, o, g in zip(data["status"], data["overhead_pct"], data["gap_overhead"])]
    on_device = "device_ok" in data and data["device_ok"].notna().any()
    if on_device:
        # Schedules run by `poetsim device sweep`: whether the device held to the prediction.
        marks = data["device_ok"].map(
            lambda v: "" if pd.isna(v) else (" [device ok]" if str(v).lower() == "true" else " [device FAILED]")
        )
        data["cell"] = data["cell"] + marks
        data["device_ratio"] = pd.to_numeric(data["device_compute_s"], errors="coerce") / pd.to_numeric(
            data["device_predicted_compute_s"], errors="coerce"
        )
    names = sorted(data["strategy"].astype(str).unique(), key=lambda n: (strategies.rank(n), n))
    keys = ["model", "platform", "timing", "runtime_x", "ram"]
    rows = []
    for key, group in data.groupby(keys, dropna=False, sort=False):
        row = dict(zip(keys, key))
        row["ram_share"] = group["ram_share"].max()
        by_strategy = group.drop_duplicates("strategy", keep="last").set_index("strategy")
        for name in names:
            if name in by_strategy.index:
                found = by_strategy.loc[name]
                row[name] = found["cell"]
                row[f"{name} overhead %"] = found["overhead_pct"]
                row[f"{name} energy J"] = found["predicted_total_j"]
                row[f"{name} status"] = found["status"]
                row[f"{name} gap"] = found["gap_overhead"]
                if on_device:
                    row[f"{name} device compute / predicted"] = found["device_ratio"]
            else:
                row[name] = ""
        rows.append(row)
    return in_study_order(pd.DataFrame(rows)).reset_index(drop=True)


def in_study_order(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` in the order every table of points reads (model, platform, timing, runtime, RAM, strategy).

    By model, platform, timing and runtime, the largest RAM budget first, then the strategies
    in registry order. Each key that `frame` has counts (a table of strategies side by side has no strategy
    column); RAM is a share of the keep-all peak (`ram_share`), runtime a number. Rows equal
    in every key keep their order; a missing value sorts last.
    """
    keys = pd.DataFrame(index=frame.index)
    for column in ("model", "platform", "timing"):
        if column in frame:
            keys[column] = frame[column].fillna("").astype(str)
    if "runtime_x" in frame:
        keys["runtime_x"] = pd.to_numeric(frame["runtime_x"], errors="coerce")
    keys["ram_share"] = frame["ram_share"] if "ram_share" in frame else ram_share(frame)
    if "strategy" in frame:
        keys["strategy"] = frame["strategy"].astype(str).map(strategies.rank)
    ascending = [column != "ram_share" for column in keys.columns]
    order = keys.sort_values(list(keys.columns), ascending=ascending, na_position="last", kind="stable").index
    return frame.loc[order]


def headline_columns(table: pd.DataFrame) -> list[str]:
    """The text columns of a headline table: its keys and one per strategy."""
    return [c for c in table.columns if c in HEADLINE_KEYS or f"{c} status" in table.columns or c in strategies.REGISTRY]


#: What the marks in a headline table mean, printed under it.
HEADLINE_NOTE = (
    "Energy above keep-all (every node computed once, nothing paged) per iteration. "
    "'*': a schedule not proven optimal; read its gap in compare.csv. "
    + "; ".join(f"'{s}': {s.meaning}" for s in (Status.INFEASIBLE, Status.NO_SOLUTION, Status.OVER_BUDGET, Status.NOT_APPLICABLE))
    + "."
)


def headline_text(table: pd.DataFrame) -> str:
    """The headline as plain text (compare.txt): every digit, aligned, with the note on its marks."""
    return _headline_shown(table).to_string(index=False) + "\n\n" + HEADLINE_NOTE


def headline_cells(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The headline's column names and rows as text, for a terminal table; HEADLINE_NOTE goes under it."""
    shown = _headline_shown(table)
    return [str(c) for c in shown.columns], [["" if pd.isna(v) else str(v) for v in row] for row in shown.itertuples(index=False)]


def _headline_shown(table: pd.DataFrame) -> pd.DataFrame:
    """The text columns of the headline, the runtime written as users write it (1.2x)."""
    shown = table[headline_columns(table)].copy()
    if "runtime_x" in shown:
        shown["runtime_x"] = shown["runtime_x"].map(lambda x: f"{number_text(x)}x" if pd.notna(x) else "")
    return shown.rename(columns={"runtime_x": "runtime"})
