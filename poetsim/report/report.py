"""The HTML report of a sweep: one self-contained page of charts, findings and the results table.

`build_report` reads the sweep's results (the columns of `poetsim.pipeline.result_row`, plus
`point_key` and `scenario` from a sweep's runs.csv) and writes `report.html` with the Vega
JavaScript inline, so the page opens without internet, and one PNG per chart. The findings are
computed from the data: which strategy has the lowest energy at each RAM budget, and where each
strategy has no schedule. Runs without a schedule are listed, never dropped.
"""

import html
import json
from pathlib import Path

import altair as alt
import pandas as pd
import vl_convert

from poetsim.errors import UserInputError
from poetsim.report.charts import footer_text
from poetsim.report.sweep_charts import SweepChart, pareto_chart, platform_chart, prediction_chart, ram_chart, runtime_chart
from poetsim.results import has_schedule

_NUMERIC = ("ram_budget_bytes", "keep_all_peak_bytes", "runtime_x", "overhead_pct", "predicted_total_j",
            "predicted_peak_ram_bytes", "simulated_total_j", "keep_all_energy_j")
_GROUP = ["model_label", "platform_label", "runtime_x", "timing"]
# Two energies this close are the same schedule's, summed in another order: a tie, not a win.
_TIE_RTOL = 1e-9
_TABLE_COLUMNS = (
    "model_label", "platform_label", "timing", "strategy", "ram", "ram_budget_bytes", "runtime_x", "status",
    "predicted_total_j", "overhead_pct", "predicted_peak_ram_bytes", "predicted_runtime_s",
    "predicted_recomputations", "predicted_page_ins", "predicted_page_outs", "simulated_total_j",
    "simulated_runtime_s", "simulated_stall_s", "gap_overhead", "solve_s", "schedule_bytes", "message",
)
_EMBED_OPTIONS = {"mode": "vega-lite", "actions": {"export": True, "source": False, "compiled": False, "editor": False}}


def build_report(results: pd.DataFrame, directory: Path, scenario_name: str) -> Path:
    """Write report.html and one PNG per chart into `directory`; return the page's path.

    Charts that the results cannot support (one platform only, no simulation, ...) are left out
    and the page says why. UserInputError if the results are empty or lack strategy and status.
    """
    frame = prepare(results)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    footer = footer_text(scenario_name, frame["timing"].dropna())
    charts = [build(frame, footer) for build in (ram_chart, runtime_chart, platform_chart, pareto_chart, prediction_chart)]
    for chart in charts:
        if chart.chart is not None:
            chart.chart.save(str(directory / f"{chart.stem}.png"))
    page = directory / "report.html"
    page.write_text(_page(scenario_name, frame, charts, footer), encoding="utf-8")
    return page


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
        tied = runs[runs["predicted_total_j"] <= best * (1 + _TIE_RTOL)]["strategy"]
        rows.append(dict(zip(_GROUP + ["ram_fraction"], key), ram_label=runs["ram_label"].iloc[0],
                         winner=" = ".join(sorted(tied.astype(str)))))
    return pd.DataFrame(rows, columns=_GROUP + ["ram_fraction", "ram_label", "winner"])


def _winner_sentences(frame: pd.DataFrame) -> list[str]:
    """One sentence per group: 'hybrid at 10 %-50 %; hybrid = keep-all at 100 %'."""
    sentences = []
    for key, rows in winners(frame).groupby(_GROUP, dropna=False, sort=True):
        spans, previous = [], None
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
    return (f"Lowest energy over the {len(table)} budget point(s) with a schedule: {listed} "
            "(ties count for each tied strategy).")


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
                where = (f"at RAM budgets up to {failed['ram_label'].iloc[-1]} of keep-all; "
                         f"its first schedule is at {_ram_label(feasible.min(), None)}")
            else:
                where = "at RAM " + ", ".join(failed["ram_label"])
            sentences.append(f"{_group_name(key)}: {strategy} has no schedule ({statuses}) {where}.")
    return sentences


def _group_name(key) -> str:
    model, platform, runtime_x, timing = key
    runtime = "?" if pd.isna(runtime_x) else f"{runtime_x:g}x"
    return f"{model} on {platform}, runtime budget {runtime}, {timing} timing"


def _page(scenario_name: str, frame: pd.DataFrame, charts: list[SweepChart], footer: str) -> str:
    """The whole HTML page, JavaScript inline."""
    esc = html.escape
    drawn = [c for c in charts if c.chart is not None]
    parts = [
        f"<h1>poetsim report: {esc(scenario_name)}</h1>",
        f"<p class='footer'>{esc(footer)}</p>",
        f"<p>{len(frame)} run(s): {esc(_status_counts(frame))}. Energies are the checked figures of each schedule "
        "(the optimiser's prediction, replayed by the independent checker).</p>",
        "<h2>Which strategy wins where</h2>",
        f"<p>{esc(_tally(frame))}</p>",
        _list(_winner_sentences(frame)),
        "<h2>Where strategies have no schedule</h2>",
        _list(no_schedule_summary(frame)) or "<p>Every run has a schedule.</p>",
        _failed_table(frame),
        "<h2>Charts</h2>",
    ]
    parts += [f"<h3>{esc(c.heading)}</h3><div class='chart' id='chart-{c.stem}'></div>" for c in drawn]
    skipped = [f"{c.heading}: {c.note}" for c in charts if c.chart is None]
    if skipped:
        parts += ["<h3>Charts not drawn</h3>", _list(skipped)]
    parts += ["<h2>Results</h2>", _results_table(frame)]
    specs = {f"chart-{c.stem}": c.chart.to_dict() for c in drawn}
    # "</" inside a script would end it early; JSON allows the escaped form "<\/".
    specs_js = json.dumps(specs).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>poetsim report: {esc(scenario_name)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1400px; }}
.footer {{ color: #555; font-size: 90%; }}
table {{ border-collapse: collapse; font-size: 80%; }}
th, td {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td:last-child {{ text-align: left; }}
.chart {{ margin-bottom: 2em; }}
</style>
<script type="text/javascript">
{_javascript_bundle()}
</script>
</head>
<body>
{chr(10).join(parts)}
<script type="text/javascript">
const specs = {specs_js};
const embedOptions = {json.dumps(_EMBED_OPTIONS)};
for (const [id, spec] of Object.entries(specs)) {{
  vegaEmbed("#" + id, spec, embedOptions).catch(console.error);
}}
</script>
</body>
</html>
"""


def _javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script, for the Vega-Lite version altair writes.

    vl-convert names versions as "v6_4"; altair's schema version is "v6.4.1".
    """
    version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])
    return vl_convert.javascript_bundle(vl_version=version)


def _status_counts(frame: pd.DataFrame) -> str:
    counts = frame["status"].astype(str).value_counts()
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def _list(items: list[str]) -> str:
    if not items:
        return ""
    return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + "</ul>"


def _failed_table(frame: pd.DataFrame) -> str:
    """Every run without a schedule, with its reason."""
    failed = frame[~frame["ok"]]
    if failed.empty:
        return ""
    columns = ["model_label", "platform_label", "strategy", "ram", "ram_label", "runtime_x", "status", "message"]
    table = failed[columns].rename(columns={"model_label": "model", "platform_label": "platform", "ram_label": "RAM of keep-all"})
    return "<h3>Runs without a schedule</h3>" + table.to_html(index=False, na_rep="", escape=True)


def _results_table(frame: pd.DataFrame) -> str:
    columns = [c for c in _TABLE_COLUMNS if c in frame.columns]
    table = frame.sort_values(["model_label", "platform_label", "timing", "runtime_x", "ram_fraction", "strategy"])[columns]
    # Byte and count columns hold NaN for runs without a schedule, so pandas made them floats:
    # print them as whole numbers, not as 1.22688e+06.
    whole = {c: _whole for c in columns if c.endswith(("_bytes", "_recomputations", "_page_ins", "_page_outs"))}
    table = table.rename(columns={"model_label": "model", "platform_label": "platform"})
    return table.to_html(index=False, na_rep="", escape=True, formatters=whole, float_format=lambda v: f"{v:.6g}")


def _whole(value) -> str:
    return "" if pd.isna(value) else f"{value:,.0f}"
