"""Charts of a sweep: energy overhead against the budgets, the Pareto front, and the simulator's error.

The overhead charts are POET's Figures 3 and 4; the Pareto front is peak RAM against energy; the
last shows how far the simulator is from the prediction.

Each builder takes the prepared results frame of `poetsim.report.report` (one row per run, with
`ok`, `ram_fraction`, `model_label`, `platform_label`, `ram_label` and `timing` added) and returns
a `SweepChart`: a function that draws the chart at a given width with a given footer, or None
with the reason it is not drawn. The report draws each chart three times: wide and narrow for
the page (which picks one by the room it has, and states the footer once at its foot) and wide
with the footer for the PNG and SVG files, which travel alone. The overhead charts are made by
`poetsim.report.overhead`; runs without a schedule are drawn in their strip, so an infeasible
budget is seen where it lies. The others say in their subtitle how many runs they leave out.
"""

from collections.abc import Callable
from dataclasses import dataclass

import altair as alt
import pandas as pd

from poetsim.report.finding import integrated_strategy
from poetsim.report.framing import framed
from poetsim.report.key import Entry, colour_entries, key_chart
from poetsim.report.overhead import (
    MIN_CURVE_VALUES,
    NARROW_BELOW_PX,
    Symlog,
    label_expr,
    marker_entries,
    overhead_chart,
    panel_labels,
)
from poetsim.report.palette import strategy_colours, strip_order

#: Room for the charts: the main chart sits beside the headline table, the others span the page;
#: NARROW_PX is a phone's width less the page's margins.
MAIN_WIDTH_PX = 660
WIDE_WIDTH_PX = 1240
NARROW_PX = 350
#: Characters per line of a title or subtitle in a narrow chart.
NARROW_WRAP_CHARS = 52
#: A simulated figure this close to the prediction (relative) differs by rounding only: the
#: tolerance within which the checker must agree with the optimiser (`pipeline.CHECK_RTOL`).
ROUNDING_RTOL = 1e-6

#: Draws a chart: (footer, width in px) -> the chart.
Draw = Callable[[str, float], alt.TopLevelMixin]


@dataclass(frozen=True)
class SweepChart:
    """One chart of the report: how to draw it, or None and why it is not drawn (`note`)."""

    stem: str
    heading: str
    draw: Draw | None
    note: str = ""


def _wrap(width_px: float) -> int:
    return NARROW_WRAP_CHARS if width_px < NARROW_BELOW_PX else 0


def ram_chart(frame: pd.DataFrame) -> SweepChart:
    """Energy overhead against the RAM budget, one colour per strategy (POET's Figure 3)."""
    heading = "Energy above keep-all against the RAM budget"
    return _overhead(
        frame, "overhead_ram", heading, x="ram_fraction", columns="platform_label", rows=["model_label", "runtime_x", "timing"]
    )


def runtime_chart(frame: pd.DataFrame) -> SweepChart:
    """Energy overhead against the runtime budget, one colour per strategy (POET's Figure 4).

    With fewer than 3 runtime budgets there is no curve to draw: the headline table's tabs (one
    per runtime budget) say what the chart would, and this says so.
    """
    heading = "Energy above keep-all against the runtime budget"
    count = frame["runtime_x"].nunique()
    if count < MIN_CURVE_VALUES:
        return SweepChart(
            "overhead_runtime", heading, None, f"{count} runtime budget(s): no curve; the table's tabs compare them."
        )
    rows = ["model_label", "ram_fraction", "timing"]
    return _overhead(frame, "overhead_runtime", heading, x="runtime_x", columns="platform_label", rows=rows)


_AXES = {
    "ram_fraction": ("RAM budget (% of keep-all)", lambda v: f"{100 * v:.3g}%", "RAM budget"),
    "runtime_x": ("runtime budget (x plain pass)", lambda v: f"{v:g}x", "runtime budget"),
}


def _overhead(frame, stem, heading, *, x, columns, rows) -> SweepChart:
    title, label, name = _AXES[x]
    if frame[x].nunique() < 1:
        return SweepChart(stem, heading, None, f"No {name} is known in the results: nothing to draw.")
    placed = frame[frame[x].notna()]
    unplaced = int(frame[x].isna().sum())

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        chart, data, groups, panel_w = overhead_chart(
            placed, x=x, label=label, x_title=title, colour="strategy", columns=columns, rows=rows, width_px=width_px
        )
        statuses = strip_order(data["strip"].dropna())
        unproven = bool((data["ok"] & ~data["proven"]).any())
        few = placed[x].nunique() < MIN_CURVE_VALUES
        subtitle = (
            ("Bars: fewer than 3 budgets swept, so no curve. " if few else "")
            + "y: symmetric-log (linear near 0, logarithmic above). Strategies sit side by side at each budget, "
            "so equal results stay visible; runs without a schedule are in the grey strip on top."
        )
        if unplaced:
            subtitle += f" {unplaced} run(s) without a known {name} are not drawn."
        entries = colour_entries(groups) + marker_entries(statuses, unproven, bars=few)
        # The key starts where the plot does; on a phone it is as wide as the one panel, past which
        # the chart would be shrunk to fit.
        key_px = panel_w if width_px < NARROW_BELOW_PX else min(width_px - 40, 3 * panel_w + 100)
        key = key_chart(entries, width_px=key_px)
        return framed(alt.vconcat(key, chart, spacing=2), heading, footer, subtitle, _wrap(width_px))

    return SweepChart(stem, heading, draw)


def pareto_chart(frame: pd.DataFrame) -> SweepChart:
    """Every schedule's peak RAM against its energy above keep-all, with the front of the non-dominated ones.

    One panel per platform (and runtime budget, model, timing).

    Energy is drawn above each panel's own keep-all, on the overhead charts' symmetric-log axis,
    so panels whose energies differ by orders of magnitude (a microcontroller's millijoules, a
    Pi's hundreds of joules) share one scale; each panel's title gives its keep-all energy. The
    integrated strategy is a filled dot drawn last; every other strategy is a ring of its own
    size, so schedules that tie show as concentric rings, none hidden.
    """
    heading = "Pareto front: peak RAM against energy"
    ok = frame[frame["ok"] & frame["predicted_peak_ram_bytes"].notna() & frame["keep_all_peak_bytes"].notna()]
    if ok.empty:
        return SweepChart("pareto", heading, None, "No run has a schedule with a recorded peak RAM: no front to draw.")
    dims = ["model_label", "platform_label", "runtime_x", "timing"]
    panel = panel_labels(ok, dims)
    keep_all = ok.groupby(panel.astype(str), observed=True)["keep_all_energy_j"].max()
    titles = {p: (f"{p} · " if p else "") + f"keep-all {_joules(keep_all[p])}" for p in keep_all.index}
    data = pd.DataFrame(
        {
            "panel": [titles[str(p)] for p in panel],
            "order": panel.cat.codes,
            "peak": ok["predicted_peak_ram_bytes"] / ok["keep_all_peak_bytes"],
            "overhead_pct": ok["overhead_pct"],
            "energy_j": ok["predicted_total_j"],
            "group": ok["strategy"].astype(str),
            "ram": ok["ram_label"],
        }
    )
    data = data.sort_values(["order", "peak", "energy_j"])
    data["front"] = _non_dominated(data.assign(panel=data["order"]))
    scale = Symlog.for_values(data["overhead_pct"].dropna())
    data["y"] = [scale.position(v) for v in data["overhead_pct"]]
    ticks = scale.ticks(max(float(data["overhead_pct"].max()), scale.constant))
    order = list(dict.fromkeys(data["panel"]))
    domain, colours = strategy_colours(data["group"])
    integrated = integrated_strategy()
    focus = integrated if integrated is not None and integrated in domain else domain[0]
    rings = [g for g in domain if g != focus]
    sizes = {g: 110 + 90 * i for i, g in enumerate(rings)}
    data["size"] = data["group"].map(sizes).fillna(45)
    omitted = int((~frame["ok"]).sum())

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        narrow = width_px < NARROW_BELOW_PX
        panels = len(order)
        across = 1 if narrow else min(3, panels)
        width = int(width_px - 110) if narrow else int(min(320, (width_px - 80) / across - 70))
        base = alt.Chart().encode(
            x=alt.X(
                "peak:Q",
                title="peak RAM (share of keep-all's)",
                axis=alt.Axis(format=".0%", labelOverlap=True),
                scale=alt.Scale(zero=False, padding=8),
            ),
            y=alt.Y(
                "y:Q",
                title="energy above keep-all",
                scale=alt.Scale(domain=[0, ticks[-1][0]], nice=False),
                axis=alt.Axis(values=[t for t, _ in ticks], labelExpr=label_expr(ticks), gridColor="#eeeeee"),
            ),
            tooltip=[
                alt.Tooltip("group:N", title="strategy"),
                alt.Tooltip("ram:N", title="RAM budget"),
                alt.Tooltip("peak:Q", title="peak RAM", format=".3p"),
                alt.Tooltip("overhead_pct:Q", title="above keep-all %", format=".4g"),
                alt.Tooltip("energy_j:Q", title="energy J", format=".6g"),
                "front:N",
            ],
        )
        colour = alt.Color("group:N", scale=alt.Scale(domain=domain, range=colours), legend=None)
        layers = [base.transform_filter("datum.front").mark_line(interpolate="step-after", color="black", strokeWidth=1)]
        if rings:  # a layer with no data warns in the browser (an infinite extent)
            layers.append(
                base.transform_filter(alt.datum.group != focus)
                .mark_point(filled=False, strokeWidth=2, opacity=1)
                .encode(color=colour, size=alt.Size("size:Q", scale=None))
            )
        layers.append(
            base.transform_filter(alt.datum.group == focus).mark_point(filled=True, size=45, opacity=1).encode(color=colour)
        )
        chart = alt.layer(*layers, data=data).properties(width=width, height=170 if narrow else 190)
        if panels > 1:
            chart = chart.facet(
                facet=alt.Facet("panel:N", title=None, sort=order, header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
                columns=across,
            ).resolve_axis(x="independent", y="independent")
        entries = [Entry(focus, dict(shape="circle", filled=True, size=60, color=colours[domain.index(focus)], opacity=1))]
        entries += [
            Entry(g, dict(shape="circle", filled=False, size=70, strokeWidth=2, color=colours[domain.index(g)], opacity=1))
            for g in rings
        ]
        key = key_chart(entries, width_px=min(width_px - 40, across * (width + 90)))
        subtitle = (
            f"Black steps: schedules no other beats in both peak RAM and energy. {focus}: filled dots; the others: "
            "rings of their own size, so equal schedules show as concentric rings. Energy is above each panel's "
            "keep-all (in its title), on one symmetric-log scale."
        )
        if omitted:
            subtitle += f" {omitted} run(s) without a schedule are not drawn."
        return framed(alt.vconcat(key, chart, spacing=4), heading, footer, subtitle, _wrap(width_px))

    return SweepChart("pareto", heading, draw)


def _joules(value: float) -> str:
    """An energy at a precision that tells panels apart: '0.135 J', '702 J', '23,100 J', '10 mJ'."""
    if value < 0.1:
        return f"{1000 * value:.3g} mJ"
    return f"{value:,.0f} J" if value >= 1000 else f"{value:.3g} J"


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


def prediction_chart(frame: pd.DataFrame) -> SweepChart:
    """Per simulated run, how far the simulator's energy, makespan and peak RAM are from the prediction (%).

    Where every difference is within rounding (`ROUNDING_RTOL`) there is nothing to see in a
    chart: the note says so in a sentence, with the largest differences.
    """
    heading = "Simulated against predicted"
    if "simulated_total_j" not in frame.columns or frame["simulated_total_j"].isna().all():
        return SweepChart("prediction", heading, None, "No simulated energy in the results: the simulator was not run.")
    data = prediction_differences(frame)
    if data.empty:
        return SweepChart("prediction", heading, None, "No run with a schedule was simulated.")
    figures = [label for label, _, _ in PREDICTION_FIGURES if label in set(data["figure"])]
    worst = []
    for figure in figures:
        differences = data.loc[data["figure"] == figure, "difference_pct"]
        worst.append(f"{figure} {differences.loc[differences.abs().idxmax()]:+.2g} %")
    runs = int(data[["strategy", "platform", "model", "ram", "runtime"]].drop_duplicates().shape[0])
    unsimulated = int((frame["ok"] & frame["simulated_total_j"].isna()).sum())
    left = f" {unsimulated} run(s) with a schedule were not simulated." if unsimulated else ""
    if (data["difference_pct"].abs() <= 100 * ROUNDING_RTOL).all():
        return SweepChart(
            "prediction",
            heading,
            None,
            f"The simulator replays all {runs} simulated schedules within rounding of the prediction (largest "
            f"differences: {', '.join(worst)}; rounding is below {100 * ROUNDING_RTOL:g} %).{left}",
        )
    s_domain, s_colours = strategy_colours(data["strategy"])
    subtitle = f"One point per run and figure; largest differences: {', '.join(worst)}.{left}"

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        # Both layers encode x with one axis: layers merge their axes.
        x = alt.X(
            "difference_pct:Q",
            title="simulated minus predicted (% of the prediction)",
            axis=alt.Axis(format="~g", labelOverlap=True),
        )
        points = (
            alt.Chart(data)
            .mark_point(filled=True, size=55, opacity=1)
            .encode(
                x=x,
                y=alt.Y("figure:N", sort=figures, title=None, axis=alt.Axis(labelFontSize=12, labelFontWeight="bold")),
                yOffset=alt.YOffset("strategy:N", sort=s_domain),
                color=alt.Color("strategy:N", scale=alt.Scale(domain=s_domain, range=s_colours), legend=None),
                tooltip=[
                    "figure:N",
                    "strategy:N",
                    "platform:N",
                    "model:N",
                    "ram:N",
                    "runtime:N",
                    alt.Tooltip("predicted:Q", format=".6g"),
                    alt.Tooltip("simulated:Q", format=".6g"),
                    alt.Tooltip("difference_pct:Q", title="difference %", format="+.3g"),
                ],
            )
        )
        zero = alt.Chart(pd.DataFrame({"difference_pct": [0.0]})).mark_rule(color="#666666").encode(x=x)
        chart = alt.layer(zero, points).properties(width=int(min(900, width_px - 100)), height=70 * len(figures))
        key = key_chart(colour_entries(list(zip(s_domain, s_colours))), width_px=min(900, width_px - 40))
        return framed(alt.vconcat(key, chart, spacing=4), heading, footer, subtitle, _wrap(width_px))

    return SweepChart("prediction", heading, draw)
