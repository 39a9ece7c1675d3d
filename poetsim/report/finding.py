"""A study's finding in words, computed from its runs.

What the integrated search wins, by how much, and what is proven.

The report opens on these sentences, before any table or chart, so a reader learns the result
in a few seconds and reads the rest as evidence. Every number in them is taken from the
prepared results frame of `poetsim.report.report` (one row per run, with `ok`, `ram_fraction`,
`ram_label`, `model_label` and `platform_label`); ties are judged with `tolerances.exceeds`.
"""

from dataclasses import dataclass

import pandas as pd

from poetsim import strategies
from poetsim.status import Status
from poetsim.strategies import Kind
from poetsim.tolerances import exceeds

#: The dimensions one comparison holds fixed: every strategy at one of these is one budget point.
POINT = ["model_label", "platform_label", "runtime_x", "timing", "ram_fraction"]


def integrated_strategy() -> str | None:
    """The registry's solved strategy that both recomputes and pages: POET's own (hybrid).

    Read from the registry, so the finding follows it if the strategy is renamed.
    """
    for spec in strategies.REGISTRY.values():
        if spec.kind is Kind.SOLVED and spec.moves.recompute and spec.moves.page:
            return spec.name
    return None


@dataclass(frozen=True)
class Saving:
    """The largest saving of the integrated strategy over one other, where both have a schedule."""

    other: str
    points: int  # budget points where both have a schedule
    beats: int  # of which the integrated one is cheaper by more than rounding
    saving_pct: float  # largest (other's overhead - integrated's), in % of keep-all energy
    ours_pct: float
    theirs_pct: float
    where: str


def sentences(frame: pd.DataFrame) -> list[str]:
    """The finding: one or two sentences on who wins and by how much, one on what is proven."""
    focus = integrated_strategy()
    ok = frame[frame["ok"]]
    if ok.empty:
        return ["No run has a schedule: every budget tried is below what any strategy can meet (see the table of runs)."]
    said = _wins(frame, focus) if focus is not None and focus in set(frame["strategy"]) else [_tally(ok)]
    return [*said, _proofs(frame)]


def _wins(frame: pd.DataFrame, focus: str) -> list[str]:
    ok = frame[frame["ok"]]
    points = list(ok.groupby(POINT, dropna=False, sort=False))
    lowest = only = 0
    for _, runs in points:
        ours = runs[runs["strategy"] == focus]["overhead_pct"]
        if ours.empty:
            continue
        best = runs["overhead_pct"].min()
        lowest += not exceeds(float(ours.iloc[0]), float(best))
        only += len(runs) == 1
    first = f"{focus} has the lowest energy at {lowest} of the {len(points)} budget points where any strategy has a schedule"
    if only:
        first += f", and at {only} of them it is the only strategy with one"
    beaten = _beaten(ok, focus, points)
    first += (f"; {beaten}" if beaten else "") + "."
    savings = [s for s in (_saving(ok, focus, other) for other in _others(frame, focus)) if s is not None]
    gains = [s for s in savings if s.beats]
    ties = [s.other for s in savings if not s.beats]
    if not savings:  # no point where another strategy has a schedule too: the first sentence says it all
        return [first]
    if not gains:
        second = f"Where another strategy also has a schedule, {focus} ties it" + (f" ({', '.join(ties)})." if ties else ".")
        return [first, second]
    parts = [
        f"{s.saving_pct:.3g} % of keep-all energy against {s.other} ({s.ours_pct:.3g} % above keep-all against "
        f"{s.theirs_pct:.3g} % at {s.where})"
        for s in gains
    ]
    second = "Where both have a schedule, it saves up to " + "; up to ".join(parts)
    if ties:
        second += f"; it ties {', '.join(ties)} wherever they have one"
    return [first, second + "."]


def _others(frame: pd.DataFrame, focus: str) -> list[str]:
    """The other strategies of the study in registry order."""
    names = sorted({str(s) for s in frame["strategy"]} - {focus}, key=lambda n: (strategies.rank(n), n))
    return names


def _beaten(ok: pd.DataFrame, focus: str, points) -> str:
    """Where the integrated strategy is dearer than another: a solve stopped short of the optimum."""
    lost = []
    for _, runs in points:
        ours = runs[runs["strategy"] == focus]
        if ours.empty:
            continue
        cheapest = runs.loc[runs["overhead_pct"].idxmin()]
        if exceeds(float(ours["overhead_pct"].iloc[0]), float(cheapest["overhead_pct"])):
            lost.append((ours.iloc[0], cheapest))
    if not lost:
        return ""
    unproven = sum(1 for ours, _ in lost if str(ours["status"]) == Status.FEASIBLE.value)
    return (
        f"another strategy is cheaper at {len(lost)} ({unproven} of these {focus} schedules are not proven optimal: "
        "the search stopped when its effort was spent)"
    )


def _saving(ok: pd.DataFrame, focus: str, other: str) -> Saving | None:
    pairs = []
    for _, runs in ok.groupby(POINT, dropna=False, sort=False):
        ours, theirs = runs[runs["strategy"] == focus], runs[runs["strategy"] == other]
        if ours.empty or theirs.empty:
            continue
        pairs.append((ours.iloc[0], theirs.iloc[0]))
    if not pairs:
        return None
    beats = sum(1 for o, t in pairs if exceeds(float(t["predicted_total_j"]), float(o["predicted_total_j"])))
    ours, theirs = max(pairs, key=lambda p: float(p[1]["overhead_pct"]) - float(p[0]["overhead_pct"]))
    o, t = float(ours["overhead_pct"]), float(theirs["overhead_pct"])
    return Saving(other, len(pairs), beats, t - o, o, t, where_text(theirs, ok))


def where_text(row: pd.Series, frame: pd.DataFrame) -> str:
    """'jetson-tx2, 35 % RAM, 1.5x': the point's dimensions that vary in `frame`, in words."""
    parts = []
    for column, text in (
        ("model_label", str(row["model_label"])),
        ("platform_label", str(row["platform_label"])),
        ("ram_fraction", f"{row['ram_label']} RAM"),
        ("runtime_x", "runtime ?" if pd.isna(row["runtime_x"]) else f"runtime {row['runtime_x']:g}x"),
        ("timing", f"{row['timing']} timing"),
    ):
        if column == "ram_fraction" or frame[column].nunique() > 1:
            parts.append(text)
    return ", ".join(parts)


def _tally(ok: pd.DataFrame) -> str:
    """Without the integrated strategy: which strategy is cheapest at how many budget points."""
    counts: dict[str, int] = {}
    points = list(ok.groupby(POINT, dropna=False, sort=False))
    for _, runs in points:
        best = runs["overhead_pct"].min()
        for name in runs.loc[[not exceeds(float(v), float(best)) for v in runs["overhead_pct"]], "strategy"]:
            counts[str(name)] = counts.get(str(name), 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], strategies.rank(item[0]), item[0]))
    listed = ", ".join(f"{name} at {count}" for name, count in ranked)
    return f"Lowest energy over the {len(points)} budget points with a schedule: {listed} (a tie counts for each)."


def _proofs(frame: pd.DataFrame) -> str:
    """What is proven: optimal schedules and infeasible budgets, and what is not."""
    counts = frame["status"].astype(str).value_counts()

    def count(status: Status) -> int:
        return int(counts.get(status.value, 0))

    solved = count(Status.OPTIMAL) + count(Status.FEASIBLE)
    if solved:
        text = f"Proven: {count(Status.OPTIMAL)} of the {solved} solver schedules are optimal"
    else:
        text = "No schedule here comes from the solver, so none is proven optimal"
    if count(Status.INFEASIBLE):
        text += f", and {count(Status.INFEASIBLE)} budgets are proven infeasible for their strategy"
    unproven = [f"{count(s)} {s.value} ({s.meaning})" for s in (Status.FEASIBLE, Status.NO_SOLUTION, Status.FAILED) if count(s)]
    if unproven:
        text += "; not proven: " + ", ".join(unproven)
    return text + "."
