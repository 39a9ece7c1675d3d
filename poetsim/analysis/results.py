"""Sweep results as pandas: loading runs.csv, strategies side by side, and the energy guard.

`check_against_baseline` is what CI runs (`poetsim check`); its docstring says what fails.
`load_results` refuses a file it cannot vouch for (one line, exit 2) rather than let a guard
judge a half-read file.
"""

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from poetsim import strategies
from poetsim.analysis import GUARD_ATOL_J, GUARD_RTOL
from poetsim.errors import UserInputError
from poetsim.inputs.files import MAX_RESULTS_BYTES, read_text
from poetsim.runs import COLUMNS, ResultRow
from poetsim.status import Status

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
    type (`ResultRow`), or a point key twice.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "runs.csv"
    if not path.exists():
        raise UserInputError(f"{path}: no such results file (run `poetsim sweep` first)")
    text = read_text(path, "results file", MAX_RESULTS_BYTES)
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


def compare_strategies(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point and strategy, ordered for reading side by side."""
    columns = GRID + [
        "strategy",
        "status",
        "predicted_total_j",
        "overhead_pct",
        "predicted_peak_ram_bytes",
        "predicted_runtime_s",
        "simulated_total_j",
        "gap_overhead",
    ]
    present = [c for c in columns if c in frame.columns]
    table = frame[present].copy()
    table["_order"] = table["strategy"].map(strategies.rank)
    return table.sort_values(GRID + ["_order"]).drop(columns="_order").reset_index(drop=True)


#: The dimensions of a headline row, in order; RAM is sorted as a number (see `ram_share`).
HEADLINE_KEYS = ["model", "platform", "timing", "runtime_x", "ram"]


def ram_share(frame: pd.DataFrame) -> pd.Series:
    """Each row's RAM budget as a share of the keep-all peak, for sorting and charts.

    From the resolved bytes where the row has them; else from a percentage as written (a point
    that failed before its budget was resolved); NaN for absolute budgets of failed points.
    """
    budget = pd.to_numeric(frame.get("ram_budget_bytes"), errors="coerce")
    peak = pd.to_numeric(frame.get("keep_all_peak_bytes"), errors="coerce")
    written = frame["ram"].map(_percent_text) if "ram" in frame else pd.Series(float("nan"), index=frame.index)
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
    table = pd.DataFrame(rows)
    table = table.sort_values(
        ["model", "platform", "timing", "runtime_x", "ram_share"],
        ascending=[True, True, True, True, False],
        na_position="last",
        kind="stable",
    )
    return table.reset_index(drop=True)


def headline_columns(table: pd.DataFrame) -> list[str]:
    """The text columns of a headline table: its keys and one per strategy."""
    return [c for c in table.columns if c in HEADLINE_KEYS or f"{c} status" in table.columns or c in strategies.REGISTRY]


#: Verdicts that fail the guard, and those that pass it.
FAILING = (
    "worse",
    "lost-schedule",
    "lost-proof",
    "failed",
    "bad-figure",
    "simulated-worse",
    "peak-ram-up",
    "simulated-peak-ram-up",
    "missing",
)
PASSING = ("same", "better", "now-feasible", "new")


@dataclass(frozen=True)
class Change:
    """How one point moved against the baseline.

    `verdict` is the first problem found (see FAILING) or how it passed (PASSING); `detail`
    lists every problem of the point, so that one line says all.
    """

    point_key: str
    verdict: str
    baseline_j: float | None
    current_j: float | None
    detail: str

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def check_against_baseline(
    current: pd.DataFrame,
    baseline: pd.DataFrame,
    rtol: float = GUARD_RTOL,
    atol_j: float = GUARD_ATOL_J,
    baseline_name: str = "baseline",
) -> list[Change]:
    """Judge every point of the baseline against the current results, matched by point key.

    A point fails when:

    - it is missing from the results;
    - its status is now `failed` or `invalid`;
    - it had a schedule and has none (optimal -> no-solution, feasible -> infeasible, a rule's
      baseline -> over-budget);
    - a proven status is no longer proven (optimal -> feasible; infeasible -> no-solution);
    - it has a schedule whose predicted energy is missing, zero, negative or not finite (or a
      simulated energy, where the baseline had one);
    - its predicted or simulated energy rose by more than the slack, where
      slack = max(rtol x (baseline energy - baseline keep-all energy), atol_j):
      the tolerance is a share of the energy the schedule spends above keep-all, the figure
      the optimiser minimises, not of the total (of which the overhead may be 0.03 %);
    - its predicted or simulated peak RAM rose by more than rtol x the baseline's peak.

    Points only in the results are `new` and pass. UserInputError when the baseline itself
    cannot be judged against: a repeated key, a schedule row without a positive, finite energy
    and keep-all energy.
    """
    if rtol < 0 or atol_j < 0 or not math.isfinite(rtol) or not math.isfinite(atol_j):
        raise UserInputError(f"--rtol and --atol must be finite and at least 0, got {rtol} and {atol_j}")
    _check_baseline(baseline, baseline_name)
    if current["point_key"].duplicated().any():
        key = current["point_key"][current["point_key"].duplicated()].iloc[0]
        raise UserInputError(f"results: point {key} appears twice; a results file holds each point once")
    now = current.set_index("point_key")
    changes = []
    for key, base in baseline.set_index("point_key").iterrows():
        if key not in now.index:
            changes.append(
                Change(key, "missing", _number(base, "predicted_total_j"), None, "in the baseline, not in the results")
            )
        else:
            changes.append(_judge(key, base, now.loc[key], rtol, atol_j))
    for key in now.index.difference(baseline["point_key"]):
        changes.append(
            Change(
                key,
                "new",
                None,
                _number(now.loc[key], "predicted_total_j"),
                f"not in the baseline (status {now.loc[key]['status']})",
            )
        )
    return changes


def _check_baseline(baseline: pd.DataFrame, name: str) -> None:
    if "keep_all_energy_j" not in baseline.columns:
        raise UserInputError(f"{name}: no keep_all_energy_j column; the guard measures energy above keep-all")
    repeated = baseline["point_key"][baseline["point_key"].duplicated()]
    if len(repeated):
        raise UserInputError(f"{name}: point {repeated.iloc[0]} appears twice; a baseline holds each point once")
    for _, row in baseline.iterrows():
        if Status.parse(str(row["status"])).has_schedule:
            for column in ("predicted_total_j", "keep_all_energy_j"):
                value = _number(row, column)
                if value is None or not math.isfinite(value) or value <= 0:
                    raise UserInputError(
                        f"{name}: point {row['point_key']}: {column} is {_show(value)} for status "
                        f"{row['status']}; the baseline cannot be judged against"
                    )


def _judge(key: str, base, row, rtol: float, atol_j: float) -> Change:
    """The Change of one point present in both."""
    before, after = Status.parse(str(base["status"])), Status.parse(str(row["status"]))
    message = str(row.get("message", "")) if pd.notna(row.get("message", "")) else ""
    problems: list[tuple[str, str]] = []
    if after in (Status.FAILED, Status.INVALID):
        problems.append(("failed", f"status {before} -> {after}: {message}"))
    elif before.has_schedule and not after.has_schedule:
        problems.append(("lost-schedule", f"status {before} -> {after}: {message}"))
    elif before.is_proven and not after.is_proven:
        problems.append(("lost-proof", f"status {before} -> {after}"))
    energy_before, energy_after = _number(base, "predicted_total_j"), _number(row, "predicted_total_j")
    passed, note = "same", f"status {after} as before"
    energy_bad = _bad_figure(row, "predicted_total_j", "energy") if after.has_schedule else []
    problems += energy_bad
    if after.has_schedule and _number(base, "simulated_total_j") is not None:
        problems += _bad_figure(row, "simulated_total_j", "simulated energy")
    keep_all = _number(base, "keep_all_energy_j")
    if before.has_schedule and after.has_schedule and not energy_bad:
        # Both energies are there: the baseline's by `_check_baseline`, the results' by `_bad_figure`.
        assert energy_before is not None and energy_after is not None and keep_all is not None
        overhead = max(0.0, energy_before - keep_all)
        slack = max(rtol * overhead, atol_j)
        rise = energy_after - energy_before
        problems += _rise(
            base,
            row,
            "predicted_total_j",
            slack,
            "worse",
            "energy",
            "J",
            f"{rtol:g} x the baseline's {overhead:.6g} J above keep-all, at least {atol_j:g} J",
        )
        problems += _rise(
            base,
            row,
            "simulated_total_j",
            slack,
            "simulated-worse",
            "simulated energy",
            "J",
            "the same slack as the predicted energy",
        )
        for column, verdict, label in (
            ("predicted_peak_ram_bytes", "peak-ram-up", "peak RAM"),
            ("simulated_peak_ram_bytes", "simulated-peak-ram-up", "simulated peak RAM"),
        ):
            peak = _number(base, column)
            if peak is not None:
                problems += _rise(base, row, column, rtol * peak, verdict, label, "bytes", f"{rtol:g} x the baseline's")
        passed = "better" if rise < -slack else "same"
        note = f"energy {rise:+.6g} J (slack {slack:.3g} J)"
    elif after.has_schedule and not before.has_schedule:
        passed, note = "now-feasible", f"status {before} -> {after}"
    if problems:
        return Change(key, problems[0][0], energy_before, energy_after, "; ".join(text for _, text in problems))
    return Change(key, passed, energy_before, energy_after, note)


def _bad_figure(row, column: str, label: str) -> list[tuple[str, str]]:
    value = _number(row, column)
    if value is None:
        return [("bad-figure", f"{label} missing for status {row['status']}")]
    if not math.isfinite(value) or value <= 0:
        return [("bad-figure", f"{label} is {_show(value)}")]
    return []


def _rise(base, row, column: str, slack: float, verdict: str, label: str, unit: str, why: str) -> list[tuple[str, str]]:
    """A problem if `column` rose by more than `slack` (or, for a peak, went missing) since the baseline.

    A missing or impossible energy is `_bad_figure`'s to report.
    """
    before, after = _number(base, column), _number(row, column)
    if before is None or not math.isfinite(before):
        return []
    if after is None or not math.isfinite(after):
        return [] if unit == "J" else [(verdict, f"{label} {_show(before)} -> {_show(after)}")]
    if after - before > slack:
        return [
            (
                verdict,
                (
                    f"{label} {before:.9g} -> {after:.9g} {unit}: up {after - before:.6g} {unit}, "
                    f"more than the slack of {slack:.6g} {unit} ({why})"
                ),
            )
        ]
    return []


def _number(row, column: str) -> float | None:
    """A cell as a float; None when the column is absent or the cell empty."""
    value = row.get(column) if hasattr(row, "get") else None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _show(value: float | None) -> str:
    return "missing" if value is None else f"{value:.9g}"
