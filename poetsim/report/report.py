"""The HTML report of a sweep: one self-contained page that opens on its finding.

`build_report` reads the sweep's results (the columns of `poetsim.runs.ResultRow`, as in a
sweep's runs.csv) and writes `report.html`, a PNG (at twice the pixel density) and an SVG per
chart, and, when the sweep kept its schedules, `schedules.html` (`poetsim.report.schedules`). The
page opens on the finding in words (`poetsim.report.finding`), then the main chart (energy above
keep-all against the RAM budget) beside the headline table; then how far down each strategy
reaches, linked to its schedule; the Pareto front; how close the simulator is to the prediction
(a sentence when the difference is rounding); and, folded, every run. Each figure appears once
and the model's assumptions once, at the foot. Charts come in a wide and a narrow layout, so the
page fits a desktop and a phone. The Vega JavaScript is inline, so the page opens without
internet. Runs without a schedule are listed, never dropped.
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
from poetsim.report.finding import sentences
from poetsim.report.framing import footer_text, save_images
from poetsim.report.reach import reach_table
from poetsim.report.schedules import write_schedule_views
from poetsim.report.sweep_charts import (
    MAIN_WIDTH_PX,
    NARROW_PX,
    WIDE_WIDTH_PX,
    SweepChart,
    pareto_chart,
    prediction_chart,
    ram_chart,
    runtime_chart,
)
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
#: The chart beside the headline table, and the others in the order they follow it; with one RAM
#: budget, the runtime chart takes the main chart's place.
MAIN_CHART = "overhead_ram"
_BUILDERS = (ram_chart, runtime_chart, pareto_chart, prediction_chart)
#: A chart's wide layout is kept down to this share of its width (the browser scales it to fit);
#: below, the narrow layout is drawn.
_WIDE_MIN_SHARE = 0.75


def build_report(results: pd.DataFrame, directory: Path, scenario_name: str, sweep_dir: Path | None = None) -> Path:
    """Write report.html and a PNG and an SVG per chart into `directory`; return the page's path.

    `sweep_dir` is the sweep's folder (scenario.yaml and points/): when given, the chosen points'
    schedules are replayed into schedules.html beside the report. Charts that the results cannot
    support are left out and the page says why. UserInputError if the results are empty or lack
    strategy and status.
    """
    frame = prepare(results)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    footer = footer_text(scenario_name, frame["timing"].dropna())
    charts = [build(frame) for build in _BUILDERS]
    if frame["ram_fraction"].nunique() < 2 and any(c.stem == "overhead_runtime" and c.draw for c in charts):
        # One RAM budget makes the RAM chart a column of bars: the runtime chart says the same, and more.
        note = "one RAM budget swept; the runtime chart shows these runs."
        charts = [SweepChart(c.stem, c.heading, None, note) if c.stem == MAIN_CHART else c for c in charts]
    specs = {}
    for chart in charts:
        if chart.draw is None:
            # A chart of an earlier report of this folder would contradict this one: it goes.
            for stale in (directory / f"{chart.stem}.png", directory / f"{chart.stem}.svg"):
                stale.unlink(missing_ok=True)
            continue
        wide_px = MAIN_WIDTH_PX if chart is _main(charts) else WIDE_WIDTH_PX
        save_images(chart.draw(footer, wide_px).to_dict(), directory, chart.stem)
        specs[f"chart-{chart.stem}"] = page.responsive(
            chart.draw("", wide_px).to_dict(validate=False),
            chart.draw("", NARROW_PX).to_dict(validate=False),
            _WIDE_MIN_SHARE * wide_px,
        )
    (directory / "schedules.html").unlink(missing_ok=True)
    views = write_schedule_views(frame, sweep_dir, directory, scenario_name, footer)
    target = StudyFolder(directory).report_html
    body = _body(scenario_name, frame, charts, footer, views.links, views.note, _paper_section(scenario_name, results))
    target.write_text(
        page.page(f"poetsim report: {scenario_name}", body, specs, tables.headline_table(frame)[1]), encoding="utf-8"
    )
    return target


def _paper_section(scenario_name: str, results: pd.DataFrame) -> str:
    """For the scenarios that reproduce the POET paper's exhibits, its claims judged on these results."""
    if scenario_name not in paper.BUILDERS:
        return ""
    return paper.render_claims(paper.comparisons({scenario_name: results}), link="../paper.html")


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
    they tie). Only runs with a schedule compete; a budget where none has one is left out.
    """
    ok = frame[frame["ok"]]
    rows = []
    for key, runs in ok.groupby([*_GROUP, "ram_fraction"], dropna=False, sort=True):
        best = runs["predicted_total_j"].min()
        tied = [s for s, j in zip(runs["strategy"], runs["predicted_total_j"]) if not exceeds(j, best)]
        rows.append(
            dict(
                zip([*_GROUP, "ram_fraction"], key),
                ram_label=runs["ram_label"].iloc[0],
                winner=" = ".join(sorted(str(s) for s in tied)),
            )
        )
    return pd.DataFrame(rows, columns=[*_GROUP, "ram_fraction", "ram_label", "winner"])


def _body(
    scenario_name: str,
    frame: pd.DataFrame,
    charts: list[SweepChart],
    footer: str,
    links: dict[str, str],
    schedules_note: str,
    paper_section: str = "",
) -> str:
    """The page's body: the finding first, each figure once, the assumptions once at the foot."""
    esc = html.escape
    headline, _ = tables.headline_table(frame)
    main = _main(charts)
    main_html = (
        f"<div class='chart' id='chart-{main.stem}' aria-label='{esc(main.heading)}'></div>"
        if main.draw
        else f"<p class='note'>{esc(main.note)}</p>"
    )
    schedule_link = (
        f"<a href='{esc(next(iter(links.values())).split('#')[0])}'>Schedules</a>: the timeline and node-by-stage grid "
        "of the tightest budget each strategy meets (or click a cell of the table below)."
        if links
        else esc(schedules_note or "No schedule view.")
    )
    parts = [
        f"<h1>poetsim report: {esc(scenario_name)}</h1>",
        f"<p class='scope'>{esc(_scope(frame))}</p>",
        "<div class='finding' id='finding'>" + "".join(f"<p>{esc(s)}</p>" for s in sentences(frame)) + "</div>",
        f"<p class='note'>{schedule_link} <a href='#runs'>Every run</a>.</p>",
        "<div class='row'>",
        f"<section class='main-chart'>{main_html}</section>",
        f"<section class='headline-box'><h2>Energy above keep-all, strategies side by side</h2>{headline}</section>",
        "</div>",
        "<section id='reach'><h2>Tightest RAM budget each strategy meets</h2>"
        "<p class='note'>The smallest RAM budget (share of keep-all's peak) at which each strategy has a schedule, "
        "and its energy above keep-all there; <i>none</i>: no schedule at any budget tried. "
        + ("Click a cell for its schedule." if links else "")
        + f"</p>{reach_table(frame, links)}"
        + (f"<p class='note'>{esc(schedules_note)}</p>" if links and schedules_note else "")
        + "</section>",
    ]
    for chart in charts:
        if chart.stem == main.stem:
            continue
        if chart.draw is not None:
            parts.append(f"<section class='chart' id='chart-{chart.stem}' aria-label='{esc(chart.heading)}'></section>")
        elif chart.stem == "prediction":  # a difference that is only rounding is a sentence, not a chart
            parts.append(f"<section id='note-{chart.stem}'><h2>{esc(chart.heading)}</h2><p>{esc(chart.note)}</p></section>")
        else:
            parts.append(f"<p class='note' id='note-{chart.stem}'>{esc(chart.heading)}: {esc(chart.note)}</p>")
    if paper_section:
        parts.append(paper_section)
    parts += []
    if "device_ok" in frame and frame["device_ok"].notna().any():
        ran = int(frame["device_ok"].notna().sum())
        parts.append(
            f"<details open><summary>Run on the emulated device ({ran} schedules, poetsim device sweep; docs/device.md): "
            f"measured beside predicted</summary>{tables.device_runs(frame)}"
            f"<p class='note'>{esc(DEVICE_ASSUMPTIONS)}.</p></details>"
        )
    parts += [
        f"<details id='runs'><summary>All runs ({len(frame)}): sortable and filterable</summary>"
        f"{tables.runs_table(frame, 'all-runs')}</details>",
        f"<div class='footer'><p>{esc(footer)}</p></div>",
    ]
    return "\n".join(parts)


def _main(charts: list[SweepChart]) -> SweepChart:
    """The chart beside the headline table: the RAM chart, or the runtime chart when it stands in."""
    by_stem = {c.stem: c for c in charts}
    ram = by_stem[MAIN_CHART]
    return by_stem["overhead_runtime"] if ram.draw is None and by_stem["overhead_runtime"].draw else ram


def _scope(frame: pd.DataFrame) -> str:
    """What the study swept, in one line: models, platforms, budgets, strategies, runs."""
    models = ", ".join(sorted(frame["model_label"].astype(str).unique()))
    platforms = ", ".join(sorted(frame["platform_label"].astype(str).unique()))
    fractions = frame["ram_fraction"].dropna()
    if fractions.nunique() > 1:
        ram = f"RAM budgets {_ram_label(fractions.max(), None)} to {_ram_label(fractions.min(), None)} of keep-all's peak"
    elif len(fractions):
        ram = f"RAM budget {_ram_label(fractions.max(), None)} of keep-all's peak"
    else:
        ram = "RAM budgets as written"
    runtimes = ", ".join(f"{r:g}x" for r in sorted(frame["runtime_x"].dropna().unique()))
    return (
        f"{models} on {platforms}; {ram}; runtime budget {runtimes}; {frame['strategy'].nunique()} strategies; "
        f"{len(frame)} runs. Energies are the checked figures of each schedule."
    )
