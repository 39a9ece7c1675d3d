"""The closed loop's chart: predicted against measured step time and peak, across RAM budgets.

Two panels share the x axis (the RAM budget as a share of the keep-all peak): the step time
(predicted: hollow points on a dashed line; measured: filled points) and the activation peak
(predicted and measured, with the budget as a grey rule). Strategies keep the registry's colours.
Written as HTML with the JavaScript inline (opens offline) and PNG, like every poetsim chart.
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
            for source, value in (("predicted", predicted), ("measured", measured)):
                records.append({"strategy": row.strategy, "budget_pct": budget, "figure": figure, "source": source,
                                "value": value, "budget_mb": row.ram_budget_bytes / 1e6})
    return pd.DataFrame(records)


def validation_chart(validation) -> alt.VConcatChart:
    """The two panels, framed with a title and poetsim's footer."""
    frame = validation_frame(validation)
    names = sorted(frame["strategy"].unique(), key=strategies.rank)
    colour = alt.Color("strategy:N", scale=alt.Scale(domain=names, range=[strategies.colour(n) for n in names]),
                       sort=names, title="strategy")
    x = alt.X("budget_pct:Q", title="RAM budget (% of the keep-all peak)", scale=alt.Scale(reverse=True))
    panels = []
    for figure in ("step time (s)", "activation peak (MB)"):
        data = frame[frame["figure"] == figure]
        base = alt.Chart(data).encode(x=x, y=alt.Y("value:Q", title=figure), color=colour,
                                      tooltip=["strategy", "budget_pct", "source", alt.Tooltip("value:Q", format=".4g")])
        predicted = base.transform_filter(alt.datum.source == "predicted")
        measured = base.transform_filter(alt.datum.source == "measured")
        layers = [predicted.mark_line(strokeDash=[4, 3], opacity=0.6), predicted.mark_point(filled=False, size=70),
                  measured.mark_point(filled=True, size=40)]
        if figure.startswith("activation"):
            budgets = data.drop_duplicates("budget_pct")
            layers.insert(0, alt.Chart(budgets).mark_tick(color="#999999", thickness=2, size=30)
                          .encode(x=x, y="budget_mb:Q"))
        panels.append(alt.layer(*layers).properties(width=420, height=220, title=figure))
    scenario = (f"{validation.graph_name} executed on this host ({validation.platform_name} profile), "
                f"{validation.threads} thread(s), deadline {validation.runtime_x:g}x, "
                f"{'durable' if validation.durable else 'page-cached'} swap files")
    footer = footer_text(scenario, [_timing_name(validation.timing)])
    title = f"{validation.graph_name}: predicted (hollow) and measured (filled) across RAM budgets"
    subtitle = "Grey ticks: the RAM budget. Every gradient was compared bit for bit with a plain loss.backward()."
    return framed(alt.hconcat(*panels), title, footer, subtitle)


def _timing_name(timing) -> str:
    """A timing model's name as users write it."""
    return str(getattr(timing, "value", timing))


def save_validation_chart(validation, directory: Path) -> list[Path]:
    """validation.html (JavaScript inline) and validation.png in `directory`."""
    return save_chart(validation_chart(validation), Path(directory), "validation")
