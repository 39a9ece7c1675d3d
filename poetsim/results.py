"""Sweep results as pandas: loading runs.csv, strategies side by side, and the energy guard.

`check_against_baseline` is what CI runs: a point whose energy got worse beyond the tolerance,
that was feasible and no longer is, or that the baseline has and the results lack, fails.
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from poetsim import strategies
from poetsim.errors import UserInputError
from poetsim.status import Status

GRID = ["model", "platform", "ram", "runtime_x"]
#: Status words that come with a schedule.
WITH_SCHEDULE = tuple(s.value for s in Status if s.has_schedule)


def has_schedule(status: pd.Series) -> pd.Series:
    """Per row, whether its status comes with a checked schedule."""
    return status.astype(str).isin(WITH_SCHEDULE)


def load_results(path: str | Path) -> pd.DataFrame:
    """runs.csv, or the runs.csv inside a results folder."""
    path = Path(path)
    if path.is_dir():
        path = path / "runs.csv"
    if not path.exists():
        raise UserInputError(f"{path}: no such results file (run `poetsim sweep` first)")
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise UserInputError(f"{path}: not a results CSV ({' '.join(str(exc).split())})") from None
    missing = {"point_key", "status", "predicted_total_j"} - set(frame.columns)
    if missing:
        raise UserInputError(f"{path}: not a poetsim results file (missing columns {', '.join(sorted(missing))})")
    return frame


def compare_strategies(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point and strategy, ordered for reading side by side."""
    columns = GRID + ["strategy", "status", "predicted_total_j", "overhead_pct", "predicted_peak_ram_bytes",
                      "predicted_runtime_s", "simulated_total_j", "gap_overhead"]
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
    so that the CSV keeps every digit and the text stays short.
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
            else:
                row[name] = ""
        rows.append(row)
    table = pd.DataFrame(rows)
    table = table.sort_values(["model", "platform", "timing", "runtime_x", "ram_share"],
                              ascending=[True, True, True, True, False], na_position="last", kind="stable")
    return table.reset_index(drop=True)


def headline_columns(table: pd.DataFrame) -> list[str]:
    """The text columns of a headline table: its keys and one per strategy."""
    return [c for c in table.columns if c in HEADLINE_KEYS or f"{c} status" in table.columns or c in strategies.REGISTRY]


@dataclass(frozen=True)
class Change:
    """How one point moved against the baseline."""

    point_key: str
    verdict: str            # worse | better | same | now-infeasible | now-feasible | missing | new
    baseline_j: float | None
    current_j: float | None
    detail: str

    @property
    def fails(self) -> bool:
        return self.verdict in ("worse", "now-infeasible", "missing")


def check_against_baseline(current: pd.DataFrame, baseline: pd.DataFrame, rtol: float = 1e-3) -> list[Change]:
    """Compare each point's energy with the baseline's, matched by the point's key."""
    now = current.set_index("point_key")
    changes = []
    for key, base in baseline.set_index("point_key").iterrows():
        if key not in now.index:
            changes.append(Change(key, "missing", _energy(base), None, "in the baseline, not in the results"))
            continue
        row = now.loc[key]
        was_ok, is_ok = base["status"] in WITH_SCHEDULE, row["status"] in WITH_SCHEDULE
        before, after = _energy(base), _energy(row)
        if was_ok and not is_ok:
            changes.append(Change(key, "now-infeasible", before, None, f"status {base['status']} -> {row['status']}: {row.get('message', '')}"))
        elif not was_ok and is_ok:
            changes.append(Change(key, "now-feasible", None, after, f"status {base['status']} -> {row['status']}"))
        elif not was_ok:
            changes.append(Change(key, "same", None, None, f"status {row['status']} as before"))
        else:
            relative = (after - before) / before if before else 0.0
            verdict = "worse" if relative > rtol else "better" if relative < -rtol else "same"
            changes.append(Change(key, verdict, before, after, f"{100 * relative:+.4f} %"))
    for key in now.index.difference(baseline["point_key"]):
        changes.append(Change(key, "new", None, _energy(now.loc[key]), "not in the baseline"))
    return changes


def _energy(row) -> float | None:
    value = row.get("predicted_total_j")
    return None if pd.isna(value) else float(value)
