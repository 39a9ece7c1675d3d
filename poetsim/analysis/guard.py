"""The energy regression guard (`poetsim check`, run by CI): each point of a baseline judged against new results.

`check_against_baseline` says what fails. Like is compared with like: the rule-made baselines
that `poetsim compare` adds (`COMPARE_BASELINES`) are judged only where both files hold that
strategy, so a folder that was compared is not reported as having new points.
"""

import math
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from poetsim.analysis import COMPARE_BASELINES, GUARD_ATOL_J, GUARD_RTOL
from poetsim.errors import UserInputError
from poetsim.status import Status


class Verdict(str, Enum):
    """How one point moved against the baseline: the first problem found, or how it passed."""

    SAME = "same"
    BETTER = "better"
    NOW_FEASIBLE = "now-feasible"
    NEW = "new"
    NOT_COMPARED = "not-compared"
    WORSE = "worse"
    LOST_SCHEDULE = "lost-schedule"
    LOST_PROOF = "lost-proof"
    FAILED = "failed"
    BAD_FIGURE = "bad-figure"
    SIMULATED_WORSE = "simulated-worse"
    PEAK_RAM_UP = "peak-ram-up"
    SIMULATED_PEAK_RAM_UP = "simulated-peak-ram-up"
    MISSING = "missing"

    def __str__(self) -> str:
        """The verdict as runs are labelled with it: 'lost-proof'."""
        return self.value

    @property
    def fails(self) -> bool:
        """Whether a point with this verdict fails the guard (`poetsim check` exits 1)."""
        return self not in _PASSING

    @property
    def improved(self) -> bool:
        """Whether the point got better: less energy, or a schedule where there was none."""
        return self in (Verdict.BETTER, Verdict.NOW_FEASIBLE)


_PASSING = frozenset({Verdict.SAME, Verdict.BETTER, Verdict.NOW_FEASIBLE, Verdict.NEW, Verdict.NOT_COMPARED})


@dataclass(frozen=True)
class Change:
    """How one point moved against the baseline.

    `verdict` is the first problem found, or how the point passed; `detail` lists every problem
    of the point, so that one line says all. `strategy` is the point's, where the files say it.
    """

    point_key: str
    verdict: Verdict
    baseline_j: float | None
    current_j: float | None
    detail: str
    strategy: str | None = None

    @property
    def fails(self) -> bool:
        """Whether this point fails the guard."""
        return self.verdict.fails


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

    Points only in the results are `new` and pass. Points of a strategy that `poetsim compare`
    adds (keep-all, checkpoint-sqrt) and that only one file holds at all are `not-compared`
    and pass: one file was compared and the other not. UserInputError when the baseline itself
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
    one_sided = _added_by_compare(baseline) ^ _added_by_compare(current)
    changes = []
    for key, base in baseline.set_index("point_key").iterrows():
        if key in now.index:
            changes.append(_judge(key, base, now.loc[key], rtol, atol_j))
        elif base.get("strategy") in one_sided:
            changes.append(_not_compared(key, base, in_baseline=True))
        else:
            changes.append(
                Change(key, Verdict.MISSING, _number(base, "predicted_total_j"), None, "in the baseline, not in the results")
            )
    for key in now.index.difference(baseline["point_key"]):
        row = now.loc[key]
        if row.get("strategy") in one_sided:
            changes.append(_not_compared(key, row, in_baseline=False))
        else:
            changes.append(
                Change(key, Verdict.NEW, None, _number(row, "predicted_total_j"), f"not in the baseline (status {row['status']})")
            )
    return changes


def _added_by_compare(frame: pd.DataFrame) -> set[str]:
    """The strategies `poetsim compare` adds that `frame` holds at all."""
    if "strategy" not in frame.columns:
        return set()
    return set(COMPARE_BASELINES) & set(frame["strategy"].dropna().astype(str))


def _not_compared(key: str, row, in_baseline: bool) -> Change:
    """A point of a strategy that `poetsim compare` added to one file only: not judged."""
    energy = _number(row, "predicted_total_j")
    side = "baseline" if in_baseline else "results"
    detail = f"{row['strategy']} only in the {side}: `poetsim compare` adds it, and the other file was not compared"
    baseline_j, current_j = (energy, None) if in_baseline else (None, energy)
    return Change(key, Verdict.NOT_COMPARED, baseline_j, current_j, detail, str(row["strategy"]))


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
    problems: list[tuple[Verdict, str]] = []
    if after in (Status.FAILED, Status.INVALID):
        problems.append((Verdict.FAILED, f"status {before} -> {after}: {message}"))
    elif before.has_schedule and not after.has_schedule:
        problems.append((Verdict.LOST_SCHEDULE, f"status {before} -> {after}: {message}"))
    elif before.is_proven and not after.is_proven:
        problems.append((Verdict.LOST_PROOF, f"status {before} -> {after}"))
    energy_before, energy_after = _number(base, "predicted_total_j"), _number(row, "predicted_total_j")
    passed, note = Verdict.SAME, f"status {after} as before"
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
            Verdict.WORSE,
            "energy",
            "J",
            f"{rtol:g} x the baseline's {overhead:.6g} J above keep-all, at least {atol_j:g} J",
        )
        problems += _rise(
            base,
            row,
            "simulated_total_j",
            slack,
            Verdict.SIMULATED_WORSE,
            "simulated energy",
            "J",
            "the same slack as the predicted energy",
        )
        for column, verdict, label in (
            ("predicted_peak_ram_bytes", Verdict.PEAK_RAM_UP, "peak RAM"),
            ("simulated_peak_ram_bytes", Verdict.SIMULATED_PEAK_RAM_UP, "simulated peak RAM"),
        ):
            peak = _number(base, column)
            if peak is not None:
                problems += _rise(base, row, column, rtol * peak, verdict, label, "bytes", f"{rtol:g} x the baseline's")
        passed = Verdict.BETTER if rise < -slack else Verdict.SAME
        note = f"energy {rise:+.6g} J (slack {slack:.3g} J)"
    elif after.has_schedule and not before.has_schedule:
        passed, note = Verdict.NOW_FEASIBLE, f"status {before} -> {after}"
    if problems:
        return Change(key, problems[0][0], energy_before, energy_after, "; ".join(text for _, text in problems))
    return Change(key, passed, energy_before, energy_after, note)


def _bad_figure(row, column: str, label: str) -> list[tuple[Verdict, str]]:
    value = _number(row, column)
    if value is None:
        return [(Verdict.BAD_FIGURE, f"{label} missing for status {row['status']}")]
    if not math.isfinite(value) or value <= 0:
        return [(Verdict.BAD_FIGURE, f"{label} is {_show(value)}")]
    return []


def _rise(base, row, column: str, slack: float, verdict: Verdict, label: str, unit: str, why: str) -> list[tuple[Verdict, str]]:
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
