"""Charts of a sweep: energy overhead against the budgets (POET's Figures 3-5), the Pareto front
of RAM against energy, and predicted against simulated energy.

Each builder takes the prepared results frame of `poetsim.report.report` (one row per run, with
`ok`, `ram_fraction`, `model_label`, `platform_label`, `ram_label` and `timing` added) and returns
a `SweepChart`: the chart, or None with the reason it cannot be drawn. Points without a schedule
are drawn as hollow markers on the top edge of the overhead charts, so an infeasible budget is
seen where it lies, not silently missing; the others say in their subtitle how many they omit.
"""

from dataclasses import dataclass

import altair as alt
import pandas as pd

from poetsim import strategies
from poetsim.report.charts import framed


#: The dimensions a sweep varies, with how a panel title names one value of each.
_DIMENSIONS = {
    "model_label": lambda v: str(v),
    "platform_label": lambda v: str(v),
    "timing": lambda v: f"{v} timing",
    "runtime_x": lambda v: f"runtime {v:g}x",
    "ram_fraction": lambda v: f"RAM {100 * v:.3g} % of keep-all",
    "strategy": lambda v: str(v),
}
_X_NAMES = {"ram_fraction": "RAM budget", "runtime_x": "runtime budget"}
_PANEL_PX = (260, 200)
_HOLLOW_NOTE = "hollow markers on the top edge: no schedule (infeasible or failed; hover for the reason)"


@dataclass(frozen=True)
class SweepChart:
    """One chart of the report: the chart, or None and why it could not be drawn."""

    stem: str
    heading: str
    chart: alt.TopLevelMixin | None
    note: str = ""


def ram_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the RAM budget, one line per strategy (POET's Figure 3)."""
    heading = "Energy overhead against the RAM budget (Figure 3 style)"
    return _overhead_chart(frame, footer, "overhead_ram", heading, x="ram_fraction", x_title="RAM budget / keep-all peak",
                           x_format=".0%", colour="strategy", panel_by=["model_label", "platform_label", "runtime_x", "timing"])


def runtime_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the runtime budget, one line per strategy (POET's Figure 4)."""
    heading = "Energy overhead against the runtime budget (Figure 4 style)"
    return _overhead_chart(frame, footer, "overhead_runtime", heading, x="runtime_x",
                           x_title="runtime budget (x one plain forward+backward pass)", x_format="~g",
                           colour="strategy", panel_by=["model_label", "platform_label", "ram_fraction", "timing"])


def platform_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Energy overhead against the RAM budget, one line per platform (POET's Figure 5)."""
    heading = "Energy overhead per platform (Figure 5 style)"
    if frame["platform_label"].nunique() < 2:
        return SweepChart("overhead_platform", heading, None, "Only one platform in the results: no comparison to draw.")
    return _overhead_chart(frame, footer, "overhead_platform", heading, x="ram_fraction", x_title="RAM budget / keep-all peak",
                           x_format=".0%", colour="platform_label", panel_by=["strategy", "model_label", "runtime_x", "timing"])


def _overhead_chart(frame, footer, stem, heading, *, x, x_title, x_format, colour, panel_by) -> SweepChart:
    """Lines of energy overhead (%) against `x`, coloured by `colour`, one panel per other setting."""
    if frame[x].nunique() < 2:
        return SweepChart(stem, heading, None, f"Only one {_X_NAMES[x]} in the results: no curve to draw.")
    placed = frame[frame[x].notna()]
    unplaced = int(frame[x].isna().sum())
    ok = placed[placed["ok"]]
    top = ok["overhead_pct"].max() if len(ok) else 0.0
    top_pct = top + max(0.08 * top, 1.0)  # a band above every feasible point for the hollow markers
    data = pd.DataFrame({
        "panel": _panels(placed, panel_by), "x": placed[x], "group": placed[colour].astype(str),
        "y": placed["overhead_pct"].where(placed["ok"], top_pct), "overhead_pct": placed["overhead_pct"], "ok": placed["ok"],
        "status": placed["status"].astype(str), "reason": placed["message"].map(_short),
        "strategy": placed["strategy"].astype(str), "platform": placed["platform_label"].astype(str),
    }).sort_values(["panel", "group", "x"])
    colour_scale = _colour_scale(colour, data["group"])
    base = alt.Chart().encode(
        x=alt.X("x:Q", title=x_title, axis=alt.Axis(format=x_format), scale=alt.Scale(zero=False)),
        y=alt.Y("y:Q", title="energy overhead over keep-all (%)"),
        color=alt.Color("group:N", scale=colour_scale, title=colour.replace("_label", "")),
        tooltip=["strategy:N", "platform:N", alt.Tooltip("x:Q", title=_X_NAMES[x], format=".4g"),
                 alt.Tooltip("overhead_pct:Q", title="overhead %", format=".4g"), "status:N", "reason:N"],
    )
    feasible = base.transform_filter("datum.ok")
    layers = [feasible.mark_line(), feasible.mark_point(filled=True, size=40),
              base.transform_filter("!datum.ok").mark_point(filled=False, size=70, shape="diamond", strokeWidth=1.5)]
    subtitle = _HOLLOW_NOTE
    if unplaced:
        subtitle += f"; {unplaced} run(s) without a known {_X_NAMES[x]} are not drawn (listed in the text)"
    return SweepChart(stem, heading, framed(_faceted(layers, data), heading, footer, subtitle))


def pareto_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """Every schedule's peak RAM against its energy, with the front of the non-dominated ones."""
    heading = "Pareto front: peak RAM against energy"
    ok = frame[frame["ok"] & frame["predicted_peak_ram_bytes"].notna() & frame["keep_all_peak_bytes"].notna()]
    if ok.empty:
        return SweepChart("pareto", heading, None, "No run has a schedule with a recorded peak RAM: no front to draw.")
    panel_by = ["model_label", "platform_label", "runtime_x", "timing"]
    data = pd.DataFrame({
        "panel": _panels(ok, panel_by), "peak": ok["predicted_peak_ram_bytes"] / ok["keep_all_peak_bytes"],
        "energy_j": ok["predicted_total_j"], "group": ok["strategy"].astype(str), "ram": ok["ram_label"],
    })
    data = data.sort_values(["panel", "peak", "energy_j"])
    data["front"] = _non_dominated(data)
    base = alt.Chart().encode(
        x=alt.X("peak:Q", title="peak RAM / keep-all peak", axis=alt.Axis(format=".0%"), scale=alt.Scale(zero=False)),
        y=alt.Y("energy_j:Q", title="energy per iteration (J)", scale=alt.Scale(zero=False)),
        tooltip=["group:N", alt.Tooltip("ram:N", title="RAM budget"), alt.Tooltip("peak:Q", format=".3p"),
                 alt.Tooltip("energy_j:Q", format=".6g"), "front:N"],
    )
    colour = alt.Color("group:N", scale=_colour_scale("strategy", data["group"]), title="strategy")
    on_front = base.transform_filter("datum.front")
    layers = [base.mark_point(filled=True, opacity=0.45, size=35).encode(color=colour),
              on_front.mark_line(interpolate="step-after", color="black", strokeWidth=1),
              on_front.mark_point(filled=True, size=70, stroke="black", strokeWidth=1).encode(color=colour)]
    omitted = int((~frame["ok"]).sum())
    subtitle = "black steps: schedules no other schedule beats in both peak RAM and energy"
    if omitted:
        subtitle += f"; {omitted} run(s) without a schedule are not drawn (listed in the text)"
    chart = _faceted(layers, data)
    if data["panel"].nunique() > 1:
        chart = chart.resolve_scale(y="independent")
    return SweepChart("pareto", heading, framed(chart, heading, footer, subtitle))


def _non_dominated(points: pd.DataFrame) -> pd.Series:
    """Per panel, True for the points that no other point matches or beats in both peak and energy.

    `points` must be sorted by panel, peak, energy: a point is on the front when its energy is
    below that of every point before it in its panel (of two identical points, the first).
    """
    running_min_j = points.groupby("panel", observed=True)["energy_j"].cummin()
    best_before_j = running_min_j.groupby(points["panel"], observed=True).shift().fillna(float("inf"))
    return points["energy_j"] < best_before_j


def prediction_chart(frame: pd.DataFrame, footer: str) -> SweepChart:
    """The optimiser's (checked) energy against the simulator's, with the y = x line."""
    heading = "Predicted against simulated energy"
    if "simulated_total_j" not in frame.columns or frame["simulated_total_j"].isna().all():
        return SweepChart("prediction", heading, None, "No simulated energy in the results: no comparison to draw.")
    both = frame[frame["ok"] & frame["simulated_total_j"].notna()]
    data = pd.DataFrame({
        "predicted_j": both["predicted_total_j"], "simulated_j": both["simulated_total_j"],
        "difference_pct": 100 * (both["simulated_total_j"] / both["predicted_total_j"] - 1),
        "group": both["strategy"].astype(str), "platform": both["platform_label"].astype(str), "ram": both["ram_label"],
    })
    low = min(data["predicted_j"].min(), data["simulated_j"].min())
    high = max(data["predicted_j"].max(), data["simulated_j"].max())
    # Energies of different platforms differ by orders of magnitude; a log scale keeps all readable.
    scale = alt.Scale(type="log") if low > 0 and high / low > 10 else alt.Scale(zero=False)
    diagonal = alt.Chart(pd.DataFrame({"predicted_j": [low, high], "simulated_j": [low, high]})).mark_line(
        color="#999999", strokeDash=[4, 4]).encode(x="predicted_j:Q", y="simulated_j:Q")
    points = alt.Chart(data).mark_point(filled=True, size=50).encode(
        x=alt.X("predicted_j:Q", title="predicted energy (J)", scale=scale),
        y=alt.Y("simulated_j:Q", title="simulated energy (J)", scale=scale),
        color=alt.Color("group:N", scale=_colour_scale("strategy", data["group"]), title="strategy"),
        shape=alt.Shape("platform:N", title="platform"),
        tooltip=["group:N", "platform:N", "ram:N", alt.Tooltip("predicted_j:Q", format=".6g"),
                 alt.Tooltip("simulated_j:Q", format=".6g"), alt.Tooltip("difference_pct:Q", format="+.3f")],
    )
    worst = data.loc[data["difference_pct"].abs().idxmax()]
    subtitle = (f"dashed: y = x; largest difference {worst['difference_pct']:+.3g} % "
                f"({worst['group']} on {worst['platform']} at RAM {worst['ram']})")
    unsimulated = int((frame["ok"] & frame["simulated_total_j"].isna()).sum())
    if unsimulated:
        subtitle += f"; {unsimulated} run(s) with a schedule were not simulated"
    chart = alt.layer(diagonal, points).properties(width=420, height=340)
    return SweepChart("prediction", heading, framed(chart, heading, footer, subtitle))


def _panels(frame: pd.DataFrame, dims: list[str]) -> pd.Series:
    """A panel label per row from the dimensions that vary in `frame` ('' when none do).

    The labels are an ordered categorical, in the order of the dimensions' values (strategies in
    registry order), so that "runtime 10x" comes after "runtime 2x".
    """
    varying = [d for d in dims if d in frame.columns and frame[d].nunique() > 1]
    if not varying:
        return pd.Series("", index=frame.index)
    labels = frame[varying].apply(
        lambda row: " · ".join("?" if pd.isna(row[d]) else _DIMENSIONS[d](row[d]) for d in varying), axis=1)
    order = frame[varying].copy()
    if "strategy" in order:
        order["strategy"] = order["strategy"].map(_strategy_rank)
    ordered = labels.loc[order.sort_values(varying, na_position="last").index].unique()
    return pd.Series(pd.Categorical(labels, categories=ordered, ordered=True), index=frame.index)


def _faceted(layers: list, data: pd.DataFrame) -> alt.TopLevelMixin:
    """The layers over `data`, one panel per distinct `panel` value (no facet for a single one)."""
    width, height = _PANEL_PX
    chart = alt.layer(*layers, data=data)
    if data["panel"].nunique() <= 1:
        return chart.properties(width=width + 120, height=height + 60)
    order = [str(p) for p in data["panel"].cat.categories if p in set(data["panel"])]
    return chart.properties(width=width, height=height).facet(
        facet=alt.Facet("panel:N", title=None, sort=order, header=alt.Header(labelLimit=width + 40)),
        columns=min(3, len(order)))


def _strategy_rank(strategy) -> tuple[int, str]:
    return (strategies.rank(str(strategy)), str(strategy))


def _colour_scale(colour: str, values: pd.Series) -> alt.Scale:
    domain = sorted(values.unique(), key=_strategy_rank)
    if colour != "strategy":
        return alt.Scale(domain=domain, scheme="tableau10")
    return alt.Scale(domain=domain, range=[strategies.colour(v) for v in domain])


def _short(message) -> str:
    """A one-line reason short enough for a tooltip."""
    text = "" if pd.isna(message) else " ".join(str(message).split())
    return text if len(text) <= 160 else text[:157] + "..."
