"""The HTML report of a sweep: one self-contained page that opens on its finding.

`build_report` reads the sweep's results (the columns of `poetsim.runs.ResultRow`, as in a
sweep's runs.csv) and writes `report.html` and, per chart, a PNG (at twice the pixel density) and
an SVG. The page opens on the headline table (strategies side by side per platform and RAM
budget, one tab per runtime budget) beside the main chart (energy above keep-all against the RAM
budget); the other charts follow, and the findings in words, the runs without a schedule and the
table of every run (sortable, filterable) are folded below. The Vega JavaScript is inline, so
the page opens without internet. The findings are computed from the data: which strategy has the
lowest energy at each RAM budget, and where each strategy has no schedule. Runs without a
schedule are listed, never dropped.
"""

import html
from pathlib import Path

import pandas as pd

from poetsim.analysis import paper
from poetsim.analysis.results import has_schedule
from poetsim.assumptions import DEVICE_ASSUMPTIONS
from poetsim.errors import UserInputError
from poetsim.folders import StudyFolder
from poetsim.report import page, tables
from poetsim.report.framing import footer_text, save_images
from poetsim.report.sweep_charts import SweepChart, pareto_chart, platform_chart, prediction_chart, ram_chart, runtime_chart
from poetsim.tolerances import exceeds

_NUMERIC = (
    "ram_budget_bytes",
    "keep_all_peak_bytes",
    "keep_all_energy_j",
    "runtime_x",
    "overhead_pct",
    "gap_overhead",
    "bound_j",
    "predicted_total_j",
    "predicted_peak_ram_bytes",
    "predicted_runtime_s",
    "simulated_total_j",
    "simulated_runtime_s",
    "simulated_peak_ram_bytes",
)
_GROUP = ["model_label", "platform_label", "runtime_x", "timing"]
#: The chart beside the headline table, and the others in the order they follow it.
MAIN_CHART = "overhead_ram"
_BUILDERS = (ram_chart, platform_chart, runtime_chart, pareto_chart, prediction_chart)


def build_report(results: pd.DataFrame, directory: Path, scenario_name: str) -> Path:
    """Write report.html and a PNG and an SVG per chart into `directory`; return the page's path.

    Charts that the results cannot support (one platform only, no simulation, ...) are left out
    and the page says why. UserInputError if the results are empty or lack strategy and status.
    """
    frame = prepare(results)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    footer = footer_text(scenario_name, frame["timing"].dropna())
    charts = [build(frame, footer) for build in _BUILDERS]
    specs = {chart.stem: chart.chart.to_dict() for chart in charts if chart.chart is not None}
    for stem, spec in specs.items():
        save_images(spec, directory, stem)
    target = StudyFolder(directory).report_html
    target.write_text(
        _page(scenario_name, frame, charts, specs, footer, _paper_section(scenario_name, results)), encoding="utf-8"
    )
    return target


def _paper_section(scenario_name: str, results: pd.DataFrame) -> str:
    """For the scenarios that reproduce the POET paper's exhibits, its claims beside poetsim's figures."""
    if scenario_name not in paper.BUILDERS:
        return ""
    return paper.render_section(paper.comparisons({scenario_name: results}))


def prepare(results: pd.DataFrame) -> pd.DataFrame:
    """The results with the columns the report reads: ok, labels, RAM as a fraction of keep-all.

    Works on a sweep's runs.csv (where failed points have only their parameters, `model` is the
    model as given and `model_name` the graph's name) and on bare `result_row` records alike.
    """
    missing = {"strategy", "status"} - set(results.columns)
    if missing:
        raise UserInputError(f"the results lack the column(s) {', '.join(sorted(missing))}: nothing to report")
    if results.empty:
        raise UserInputError("the results are empty: nothing to report")
    frame = results.reset_index(drop=True).copy()
    for column in _NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else float("nan")
    for column in ("message", "ram", "model", "platform", "timing"):
        if column not in frame:
            frame[column] = None
    frame["ok"] = has_schedule(frame["status"]) & frame["predicted_total_j"].notna()
    names = frame["model_name"] if "model_name" in frame else pd.Series(None, index=frame.index)
    # A point that failed before its graph was built has no graph name: take the one its model has elsewhere.
    known = dict(zip(frame.loc[names.notna(), "model"], names[names.notna()]))
    names = names.where(names.notna(), frame["model"].map(known))
    frame["model_label"] = names.where(names.notna(), frame["model"].map(_stem))
    frame["platform_label"] = frame["platform"].map(_stem)
    frame["ram_fraction"] = (frame["ram_budget_bytes"] / frame["keep_all_peak_bytes"]).fillna(frame["ram"].map(_percent))
    frame["ram_label"] = [_ram_label(f, r) for f, r in zip(frame["ram_fraction"], frame["ram"])]
    timings = frame["timing"].dropna().unique()
    # A scenario has one timing model; a point that failed before it was resolved has none recorded.
    frame["timing"] = frame["timing"].fillna(timings[0] if len(timings) == 1 else "unknown")
    return frame


def _stem(value) -> str:
    return "?" if pd.isna(value) else Path(str(value)).stem


def _percent(ram) -> float:
    text = "" if pd.isna(ram) else str(ram).strip()
    return float(text[:-1]) / 100 if text.endswith("%") else float("nan")


def _ram_label(fraction: float, ram) -> str:
    if pd.notna(fraction):
        return f"{100 * fraction:.3g} %"
    return "?" if pd.isna(ram) else str(ram)


def winners(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model, platform, runtime budget, timing and RAM budget: the lowest-energy strategies.

    Columns: the group's, ram_fraction, ram_label and `winner` (strategies joined by " = " when
    they tie). Only runs with a schedule compete; a budget where none has one is left out here
    and reported by `no_schedule_summary`.
    """
    ok = frame[frame["ok"]]
    rows = []
    for key, runs in ok.groupby(_GROUP + ["ram_fraction"], dropna=False, sort=True):
        best = runs["predicted_total_j"].min()
        tied = [s for s, j in zip(runs["strategy"], runs["predicted_total_j"]) if not exceeds(j, best)]
        rows.append(
            dict(
                zip(_GROUP + ["ram_fraction"], key),
                ram_label=runs["ram_label"].iloc[0],
                winner=" = ".join(sorted(str(s) for s in tied)),
            )
        )
    return pd.DataFrame(rows, columns=_GROUP + ["ram_fraction", "ram_label", "winner"])


def _winner_sentences(frame: pd.DataFrame) -> list[str]:
    """One sentence per group: 'hybrid at 10 %-50 %; hybrid = keep-all at 100 %'."""
    sentences = []
    for key, rows in winners(frame).groupby(_GROUP, dropna=False, sort=True):
        spans: list[list[str]] = []  # [winner, first RAM label, last RAM label]
        previous = None
        for _, row in rows.sort_values("ram_fraction").iterrows():
            if row["winner"] == previous:
                spans[-1][2] = row["ram_label"]
            else:
                spans.append([row["winner"], row["ram_label"], row["ram_label"]])
            previous = row["winner"]
        text = "; ".join(f"{w} at {a}" if a == b else f"{w} at {a} to {b}" for w, a, b in spans)
        sentences.append(f"{_group_name(key)}: lowest energy: {text} (RAM as a share of keep-all peak).")
    return sentences


def _tally(frame: pd.DataFrame) -> str:
    """Which strategy wins most budget points overall (ties count for every tied strategy)."""
    table = winners(frame)
    if table.empty:
        return "No run has a schedule, so no strategy wins anywhere."
    counts = table["winner"].str.split(" = ").explode().value_counts()
    listed = ", ".join(f"{name} at {count}" for name, count in counts.items())
    return f"Lowest energy over the {len(table)} budget point(s) with a schedule: {listed} (ties count for each tied strategy)."


def no_schedule_summary(frame: pd.DataFrame) -> list[str]:
    """Where each strategy has no schedule, per group: 'paging-only: none at or below 20 % (infeasible)'."""
    sentences = []
    for key, rows in frame.groupby(_GROUP, dropna=False, sort=True):
        for strategy, runs in rows.groupby("strategy", sort=True):
            failed = runs[~runs["ok"]].sort_values("ram_fraction")
            if failed.empty:
                continue
            statuses = ", ".join(sorted(failed["status"].astype(str).unique()))
            feasible = runs[runs["ok"]]["ram_fraction"]
            if feasible.empty:
                where = "at every RAM budget tried"
            elif failed["ram_fraction"].notna().all() and failed["ram_fraction"].max() < feasible.min():
                where = (
                    f"at RAM budgets up to {failed['ram_label'].iloc[-1]} of keep-all; "
                    f"its first schedule is at {_ram_label(feasible.min(), None)}"
                )
            else:
                where = "at RAM " + ", ".join(failed["ram_label"])
            sentences.append(f"{_group_name(key)}: {strategy} has no schedule ({statuses}) {where}.")
    return sentences


def _group_name(key) -> str:
    model, platform, runtime_x, timing = key
    runtime = "?" if pd.isna(runtime_x) else f"{runtime_x:g}x"
    return f"{model} on {platform}, runtime budget {runtime}, {timing} timing"


def _page(
    scenario_name: str,
    frame: pd.DataFrame,
    charts: list[SweepChart],
    specs: dict[str, dict],
    footer: str,
    paper_section: str = "",
) -> str:
    """The whole HTML page: the finding first, the detail folded below."""
    esc = html.escape
    drawn = {c.stem: c for c in charts if c.chart is not None}
    headline, tab_style = tables.headline_table(frame)
    main = drawn.get(MAIN_CHART)
    main_html = (
        f"<div class='chart' id='chart-{MAIN_CHART}'></div>"
        if main
        else f"<p class='note'>{esc(next(c.note for c in charts if c.stem == MAIN_CHART))}</p>"
    )
    parts = [
        f"<h1>poetsim report: {esc(scenario_name)}</h1>",
        f"<p class='lede'>{esc(_summary(frame))}</p>",
        "<div class='row'>",
        f"<section class='headline-box'><h2>Energy above keep-all, strategies side by side</h2>{headline}</section>",
        f"<section class='main-chart'>{main_html}</section>",
        "</div>",
    ]
    if paper_section:
        parts.append(paper_section)
    others = [c for c in charts if c.stem != MAIN_CHART]
    for chart in others:
        if chart.chart is not None:
            parts.append(f"<section class='chart' id='chart-{chart.stem}' aria-label='{esc(chart.heading)}'></section>")
    runtime_table = frame["runtime_x"].nunique() > 1 and "overhead_runtime" not in drawn
    if runtime_table:
        count = frame["runtime_x"].nunique()
        parts.append(
            f"<details><summary>Energy above keep-all at each runtime budget ({count} budgets: a table, "
            f"not a curve)</summary>{tables.runtime_table(frame)}</details>"
        )
    skipped = [
        f"{c.heading}: {c.note}" for c in others if c.chart is None and not (runtime_table and c.stem == "overhead_runtime")
    ]
    if skipped:
        parts.append(f"<p class='note'>Not drawn: {esc(' '.join(skipped))}</p>")
    parts += [
        "<details><summary>Findings in words</summary>",
        f"<p>{esc(_tally(frame))}</p>",
        _list(_winner_sentences(frame)),
        "<h3>Where strategies have no schedule</h3>",
        _list(no_schedule_summary(frame)) or "<p>Every run has a schedule.</p>",
        "</details>",
    ]
    if "device_ok" in frame and frame["device_ok"].notna().any():
        ran = int(frame["device_ok"].notna().sum())
        parts.append(
            f"<details open><summary>Run on the emulated device ({ran} schedules, poetsim device sweep; docs/device.md): "
            f"measured beside predicted</summary>{tables.device_runs(frame)}"
            f"<p class='note'>{esc(DEVICE_ASSUMPTIONS)}.</p></details>"
        )
    failed = int((~frame["ok"]).sum())
    if failed:
        parts.append(f"<details><summary>Runs without a schedule ({failed})</summary>{tables.failed_runs(frame)}</details>")
    parts += [
        f"<details><summary>All runs ({len(frame)}): sortable and filterable</summary>"
        f"{tables.runs_table(frame, 'all-runs')}</details>",
        f"<p class='footer'>{esc(footer)}</p>",
    ]
    return page.page(
        f"poetsim report: {scenario_name}", "\n".join(parts), {f"chart-{stem}": spec for stem, spec in specs.items()}, tab_style
    )


def _summary(frame: pd.DataFrame) -> str:
    models = ", ".join(sorted(frame["model_label"].astype(str).unique()))
    platforms = ", ".join(sorted(frame["platform_label"].astype(str).unique()))
    return (
        f"{len(frame)} runs ({_status_counts(frame)}) of {models} on {platforms}. Energies are the checked figures "
        "of each schedule (the optimiser's prediction, replayed by the independent checker)."
    )


def _status_counts(frame: pd.DataFrame) -> str:
    counts = frame["status"].astype(str).value_counts()
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def _list(items: list[str]) -> str:
    if not items:
        return ""
    return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + "</ul>"
