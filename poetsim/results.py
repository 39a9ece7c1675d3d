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
