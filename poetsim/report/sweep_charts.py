"""Charts of a sweep: energy overhead against the budgets (POET's Figures 3-5), the Pareto front
of RAM against energy, and how far the simulator is from the prediction.

Each builder takes the prepared results frame of `poetsim.report.report` (one row per run, with
`ok`, `ram_fraction`, `model_label`, `platform_label`, `ram_label` and `timing` added) and returns
a `SweepChart`: the chart, or None with the reason it is not drawn. The overhead charts are made
by `poetsim.report.overhead`; runs without a schedule are drawn in their strip, so an infeasible
budget is seen where it lies. The others say in their subtitle how many runs they leave out.
"""

from dataclasses import dataclass

import altair as alt
import pandas as pd

from poetsim.report.charts import framed
from poetsim.report.key import Entry, colour_entries, key_chart, shape_entries
from poetsim.report.overhead import MIN_CURVE_VALUES, marker_entries, overhead_chart, panel_labels
from poetsim.report.palette import platform_colours, strategy_colours, strategy_order, strip_order

#: Room for the charts: the main chart sits beside the headline table, the others span the page.
MAIN_WIDTH_PX = 720
WIDE_WIDTH_PX = 1240
_PLATFORM_SHAPES = ("circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "triangle-left", "triangle-right")


@dataclass(frozen=True)
class SweepChart:
    """One chart of the report: the chart, or None and why it is not drawn."""

    stem: str
    heading: str
    chart: alt.TopLevelMixin | None
    note: str = ""


def ram_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the RAM budget, one colour per strategy (POET's Figure 3)."""
    heading = "Energy above keep-all against the RAM budget"
    return _overhead(
        frame,
        footer,
        "overhead_ram",
        heading,
        x="ram_fraction",
        colour="strategy",
        columns="platform_label",
        rows=["model_label", "runtime_x", "timing"],
        width_px=MAIN_WIDTH_PX,
    )


def runtime_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the runtime budget, one colour per strategy (POET's Figure 4).

    With fewer than 3 runtime budgets there is no curve to draw: the report shows the
    runtime table (`tables.runtime_table`) instead, and this says so.
    """
    heading = "Energy above keep-all against the runtime budget"
    count = frame["runtime_x"].nunique()
    if count < 2:
        return SweepChart("overhead_runtime", heading, None, "Only one runtime budget in the results: no curve to draw.")
    if count < MIN_CURVE_VALUES:
        return SweepChart("overhead_runtime", heading, None, f"{count} runtime budgets: shown as a table, not as a curve.")
    return _overhead(
        frame,
        footer,
        "overhead_runtime",
        heading,
        x="runtime_x",
        colour="strategy",
        columns="platform_label",
        rows=["model_label", "ram_fraction", "timing"],
        width_px=WIDE_WIDTH_PX,
    )


def platform_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the RAM budget, one colour per platform (POET's Figure 5)."""
    heading = "Energy above keep-all per platform"
    if frame["platform_label"].nunique() < 2:
        return SweepChart("overhead_platform", heading, None, "Only one platform in the results: no comparison to draw.")
    return _overhead(
        frame,
        footer,
        "overhead_platform",
        heading,
        x="ram_fraction",
        colour="platform_label",
        columns="strategy",
        rows=["model_label", "runtime_x", "timing"],
        width_px=WIDE_WIDTH_PX,
    )


_AXES = {
    "ram_fraction": ("RAM budget (% of keep-all)", lambda v: f"{100 * v:.3g}%", "RAM budget"),
    "runtime_x": ("runtime budget (x plain pass)", lambda v: f"{v:g}x", "runtime budget"),
}


def _overhead(frame, footer, stem, heading, *, x, colour, columns, rows, width_px) -> SweepChart:
    title, label, name = _AXES[x]
    if frame[x].nunique() < 1:
        return SweepChart(stem, heading, None, f"No {name} is known in the results: nothing to draw.")
    placed = frame[frame[x].notna()]
    chart, data, groups, panel_w = overhead_chart(
        placed, x=x, label=label, x_title=title, colour=colour, columns=columns, rows=rows, width_px=width_px
    )
    statuses = strip_order(data["strip"].dropna())
    unproven = bool((data["ok"] & ~data["proven"]).any())
    few = placed[x].nunique() < MIN_CURVE_VALUES
    subtitle = (
        ("Bars: fewer than 3 budgets swept, so no curve. " if few else "")
        + "Symmetric-log axis: linear near 0, logarithmic above. Each colour keeps its place beside every budget, "
        "so equal results sit side by side; runs without a schedule are in the grey strip on top."
    )
    unplaced = int(frame[x].isna().sum())
    if unplaced:
        subtitle += f" {unplaced} run(s) without a known {name} are not drawn (listed below)."
    key = key_chart(
        colour_entries(groups) + marker_entries(statuses, unproven, bars=few), width_px=min(width_px - 40, 3 * panel_w + 100)
    )
    body = alt.vconcat(key, chart, spacing=2)
    return SweepChart(stem, heading, framed(body, heading, footer, subtitle))


def pareto_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Every schedule's peak RAM against its energy, with the front of the non-dominated ones."""
    heading = "Pareto front: peak RAM against energy"
    ok = frame[frame["ok"] & frame["predicted_peak_ram_bytes"].notna() & frame["keep_all_peak_bytes"].notna()]
    if ok.empty:
        return SweepChart("pareto", heading, None, "No run has a schedule with a recorded peak RAM: no front to draw.")
    data = pd.DataFrame(
        {
            "panel": panel_labels(ok, ["model_label", "platform_label", "runtime_x", "timing"]),
            "peak": ok["predicted_peak_ram_bytes"] / ok["keep_all_peak_bytes"],
            "energy_j": ok["predicted_total_j"],
            "group": ok["strategy"].astype(str),
            "ram": ok["ram_label"],
        }
    )
    data = data.sort_values(["panel", "peak", "energy_j"])
    data["front"] = _non_dominated(data)
    base = alt.Chart().encode(
        x=alt.X(
            "peak:Q", title="peak RAM (share of the keep-all peak)", axis=alt.Axis(format=".0%"), scale=alt.Scale(zero=False)
        ),
        y=alt.Y("energy_j:Q", title="energy per iteration (J)", scale=alt.Scale(zero=False)),
        tooltip=[
            alt.Tooltip("group:N", title="strategy"),
            alt.Tooltip("ram:N", title="RAM budget"),
            alt.Tooltip("peak:Q", format=".3p"),
            alt.Tooltip("energy_j:Q", format=".6g"),
            "front:N",
        ],
    )
    domain, colours = strategy_colours(data["group"])
    colour = alt.Color("group:N", scale=alt.Scale(domain=domain, range=colours), title="strategy", legend=None)
    on_front = base.transform_filter("datum.front")
    layers = [
        base.mark_point(filled=True, opacity=0.45, size=40).encode(color=colour),
        on_front.mark_line(interpolate="step-after", color="black", strokeWidth=1),
        on_front.mark_point(filled=True, size=75, stroke="black", strokeWidth=1).encode(color=colour),
    ]
    omitted = int((~frame["ok"]).sum())
    subtitle = "Black steps: schedules that no other schedule beats in both peak RAM and energy."
    if omitted:
        subtitle += f" {omitted} run(s) without a schedule are not drawn (listed below)."
    panels = data["panel"].nunique()
    width = 320 if panels == 1 else int(min(300, (WIDE_WIDTH_PX - 80) / min(3, panels) - 40))
    chart = alt.layer(*layers, data=data).properties(width=width, height=200)
    if panels > 1:
        order = [str(p) for p in data["panel"].cat.categories if p in set(data["panel"])]
        chart = chart.facet(
            facet=alt.Facet("panel:N", title=None, sort=order, header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
            columns=min(3, panels),
        ).resolve_scale(y="independent")
    key = key_chart(colour_entries(list(zip(domain, colours))), width_px=min(3, panels) * (width + 90))
    return SweepChart("pareto", heading, framed(alt.vconcat(key, chart, spacing=4), heading, footer, subtitle))


def _non_dominated(points: pd.DataFrame) -> pd.Series:
    """Per panel, True for the points that no other point matches or beats in both peak and energy.

    `points` must be sorted by panel, peak, energy: a point is on the front when its energy is
    below that of every point before it in its panel (of two identical points, the first).
    """
    running_min_j = points.groupby("panel", observed=True)["energy_j"].cummin()
    best_before_j = running_min_j.groupby(points["panel"], observed=True).shift().fillna(float("inf"))
    return points["energy_j"] < best_before_j


#: The figures set side by side with the simulator's: (label, predicted column, simulated column).
PREDICTION_FIGURES = (
    ("energy", "predicted_total_j", "simulated_total_j"),
    ("makespan", "predicted_runtime_s", "simulated_runtime_s"),
    ("peak RAM", "predicted_peak_ram_bytes", "simulated_peak_ram_bytes"),
)


def prediction_differences(frame: pd.DataFrame) -> pd.DataFrame:
    """Per simulated run and figure: the simulator's difference from the prediction, in %.

    Columns: figure, difference_pct, predicted, simulated, strategy, platform, ram, runtime.
    """
    rows = []
    simulated = frame[frame["ok"] & frame["simulated_total_j"].notna()]
    for label, predicted_column, simulated_column in PREDICTION_FIGURES:
        if predicted_column not in simulated or simulated_column not in simulated:
            continue
        both = simulated[simulated[predicted_column].notna() & simulated[simulated_column].notna()]
        for _, run in both.iterrows():
            predicted, measured = float(run[predicted_column]), float(run[simulated_column])
            rows.append(
                {
                    "figure": label,
                    "predicted": predicted,
                    "simulated": measured,
                    "difference_pct": 100 * (measured / predicted - 1) if predicted else 0.0,
                    "strategy": str(run["strategy"]),
                    "platform": str(run["platform_label"]),
                    "model": str(run["model_label"]),
                    "ram": str(run["ram_label"]),
                    "runtime": f"{run['runtime_x']:g}x",
                }
            )
    return pd.DataFrame(
        rows, columns=["figure", "predicted", "simulated", "difference_pct", "strategy", "platform", "model", "ram", "runtime"]
    )


def prediction_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Per simulated run, how far the simulator's energy, makespan and peak RAM are from the prediction (%)."""
    heading = "Simulated against predicted: difference per run"
    if "simulated_total_j" not in frame.columns or frame["simulated_total_j"].isna().all():
        return SweepChart("prediction", heading, None, "No simulated energy in the results: no comparison to draw.")
    data = prediction_differences(frame)
    if data.empty:
        return SweepChart("prediction", heading, None, "No run with a schedule was simulated: no comparison to draw.")
    figures = [label for label, _, _ in PREDICTION_FIGURES if label in set(data["figure"])]
    s_domain, s_colours = strategy_colours(data["strategy"])
    p_domain, _ = platform_colours(data["platform"])
    shapes = [_PLATFORM_SHAPES[i % len(_PLATFORM_SHAPES)] for i in range(len(p_domain))]
    points = (
        alt.Chart(data)
        .mark_point(filled=True, size=55, opacity=0.85)
        .encode(
            x=alt.X("difference_pct:Q", title="simulated minus predicted (% of the prediction)"),
            y=alt.Y("figure:N", sort=figures, title=None, axis=alt.Axis(labelFontSize=12, labelFontWeight="bold")),
            yOffset=alt.YOffset("strategy:N", sort=strategy_order(data["strategy"])),
            color=alt.Color("strategy:N", scale=alt.Scale(domain=s_domain, range=s_colours), legend=None),
            shape=alt.Shape("platform:N", scale=alt.Scale(domain=p_domain, range=shapes), legend=None),
            tooltip=[
                "figure:N",
                "strategy:N",
                "platform:N",
                "model:N",
                "ram:N",
                "runtime:N",
                alt.Tooltip("predicted:Q", format=".6g"),
                alt.Tooltip("simulated:Q", format=".6g"),
                alt.Tooltip("difference_pct:Q", title="difference %", format="+.3f"),
            ],
        )
    )
    zero = alt.Chart(pd.DataFrame({"difference_pct": [0.0]})).mark_rule(color="#666666").encode(x="difference_pct:Q")
    chart = alt.layer(zero, points).properties(width=900, height=70 * len(figures))
    worst = []
    for figure in figures:
        differences = data.loc[data["figure"] == figure, "difference_pct"]
        worst.append(f"{figure} {differences.loc[differences.abs().idxmax()]:+.3g} %")
    subtitle = f"One point per run and figure; largest differences: {', '.join(worst)}."
    unsimulated = int((frame["ok"] & frame["simulated_total_j"].isna()).sum())
    if unsimulated:
        subtitle += f" {unsimulated} run(s) with a schedule were not simulated."
    platforms = shape_entries(list(zip(p_domain, shapes)))
    platforms[0] = Entry(platforms[0].text, platforms[0].mark, line_break=True)
    key = key_chart(colour_entries(list(zip(s_domain, s_colours))) + platforms, width_px=900)
    return SweepChart("prediction", heading, framed(alt.vconcat(key, chart, spacing=4), heading, footer, subtitle))
