"""The closed loop's chart (`poetsim validate-run`): predicted against measured step time and peak, across RAM budgets.

Three panels: the step time across RAM budgets (as a share of the keep-all peak; predicted:
hollow points on a dashed line, measured: filled points), measured against predicted step time
(the diagonal and a +-15 % band; a point is a schedule's fastest timed run, its bar reaches the
median run), and the activation peak across budgets (predicted and
measured, with the budget as a grey tick). Strategies keep the registry's colours.
Written as HTML with the JavaScript inline (opens offline) and PNG, like every poetsim chart.
It reads a `poetsim.pytorch.validate.Validation` by its fields alone, so that drawing stays in
this package and this package never imports the PyTorch layer above it.
"""

from pathlib import Path

import altair as alt
import pandas as pd

from poetsim import strategies
from poetsim.report.charts import footer_text, framed, save_chart


def validation_frame(validation) -> pd.DataFrame:
    """One row per executed point and figure: strategy, budget, figure, source, value."""
    records = []
    for row in validation.rows:
        if row.measured_runtime_s is None:
            continue
        budget = row.ram_percent if row.ram_percent is not None else 100.0 * row.ram_budget_bytes / validation.keep_all_peak_bytes
        for figure, predicted, measured in (
            ("step time (s)", row.predicted_runtime_s, row.measured_runtime_s),
            ("activation peak (MB)", row.predicted_peak_bytes / 1e6, row.measured_peak_bytes / 1e6),
        ):
            sources = [("predicted", predicted), ("measured", measured)]
            if figure.startswith("step") and row.measured_median_s is not None:
                sources.append(("median", row.measured_median_s))
            for source, value in sources:
                records.append(
                    {
                        "strategy": row.strategy,
                        "budget_pct": budget,
                        "figure": figure,
                        "source": source,
                        "value": value,
                        "budget_mb": row.ram_budget_bytes / 1e6,
                    }
                )
    return pd.DataFrame(records)


def validation_chart(validation) -> alt.VConcatChart:
    """Three panels, framed with a title and poetsim's footer (see the module docstring)."""
    frame = validation_frame(validation)
    names = sorted(frame["strategy"].unique(), key=strategies.rank)
    colour = alt.Color(
        "strategy:N", scale=alt.Scale(domain=names, range=[strategies.colour(n) for n in names]), sort=names, title="strategy"
    )
    x = alt.X("budget_pct:Q", title="RAM budget (% of the keep-all peak)", scale=alt.Scale(reverse=True, zero=False))
    panels = [
        _across_budgets(frame, "step time (s)", x, colour),
        _scatter(frame, colour),
        _across_budgets(frame, "activation peak (MB)", x, colour),
    ]
    scenario = (
        f"{validation.graph_name} executed on this host ({validation.platform_name} profile), "
        f"{validation.threads} thread(s), deadline {validation.runtime_x:g}x, "
        f"{'durable' if validation.durable else 'page-cached'} swap files"
    )
    footer = footer_text(scenario, [_timing_name(validation.timing)])
    title = f"{validation.graph_name}: predicted (hollow) and measured (filled) across RAM budgets"
    subtitle = (
        "Measured: the fastest timed run. Middle: measured against predicted step time, the band is +-15 %, "
        "a bar reaches the median run. Grey ticks: the RAM budget. "
        "Every gradient was compared bit for bit with a plain loss.backward()."
    )
    return framed(alt.hconcat(*panels), title, footer, subtitle)


def _across_budgets(frame: pd.DataFrame, figure: str, x, colour) -> alt.LayerChart | alt.FacetChart:
    data = frame[frame["figure"] == figure]
    base = alt.Chart(data).encode(
        x=x,
        y=alt.Y("value:Q", title=figure),
        color=colour,
        tooltip=["strategy", "budget_pct", "source", alt.Tooltip("value:Q", format=".4g")],
    )
    predicted = base.transform_filter(alt.datum.source == "predicted")
    measured = base.transform_filter(alt.datum.source == "measured")
    layers = [
        predicted.mark_line(strokeDash=[4, 3], opacity=0.6),
        predicted.mark_point(filled=False, size=70),
        measured.mark_point(filled=True, size=40),
    ]
    if figure.startswith("activation"):
        budgets = data.drop_duplicates("budget_pct")
        layers.insert(
            0,
            alt.Chart(budgets).mark_tick(color="#999999", thickness=2, size=18, orient="horizontal").encode(x=x, y="budget_mb:Q"),
        )
    return alt.layer(*layers).properties(width=300, height=220, title=figure)


def _scatter(frame: pd.DataFrame, colour) -> alt.LayerChart | alt.FacetChart:
    """Measured against predicted step time, one point per run, with y = x and a +-15 % band."""
    times = frame[frame["figure"] == "step time (s)"]
    wide = times.pivot_table(index=["strategy", "budget_pct"], columns="source", values="value").reset_index()
    top = float(max(wide["predicted"].max(), wide["measured"].max())) * 1.1
    line = pd.DataFrame({"predicted": [0.0, top]})
    band = line.assign(low=line["predicted"] * 0.85, high=line["predicted"] * 1.15)
    axis_x = alt.X("predicted:Q", title="predicted step time (s)", scale=alt.Scale(domain=[0, top]))
    axis_y = alt.Y("measured:Q", title="measured step time (s)", scale=alt.Scale(domain=[0, top]))
    bars = (
        alt.Chart(wide).mark_rule(opacity=0.5).encode(x=axis_x, y=axis_y, y2="median:Q", color=colour)
        if "median" in wide
        else None
    )
    shaded = alt.Chart(band).mark_area(color="#dddddd", opacity=0.6, clip=True).encode(x=axis_x, y="low:Q", y2="high:Q")
    diagonal = alt.Chart(line.assign(measured=line["predicted"])).mark_line(color="#777777", clip=True).encode(x=axis_x, y=axis_y)
    points = (
        alt.Chart(wide)
        .mark_point(filled=True, size=45)
        .encode(
            x=axis_x,
            y=axis_y,
            color=colour,
            shape=alt.Shape("budget_pct:O", title="RAM budget %"),
            tooltip=["strategy", "budget_pct", alt.Tooltip("predicted:Q", format=".4g"), alt.Tooltip("measured:Q", format=".4g")],
        )
    )
    layers = [shaded, diagonal, points] if bars is None else [shaded, diagonal, bars, points]
    return alt.layer(*layers).properties(width=260, height=220, title="measured vs predicted")


def _timing_name(timing) -> str:
    """A timing model's name as users write it."""
    return str(getattr(timing, "value", timing))


def save_validation_chart(validation, directory: Path) -> list[Path]:
    """validation.html (JavaScript inline) and validation.png in `directory`."""
    return save_chart(validation_chart(validation), Path(directory), "validation")
