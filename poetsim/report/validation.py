"""The closed loop's chart (`poetsim validate-run`): predicted against measured step time and peak, across RAM budgets.

Three panels: the step time across RAM budgets (as a share of the keep-all peak; predicted:
hollow points on a dashed line, measured: filled points), measured against predicted step time
(the diagonal and a +-15 % band; a point is a schedule's fastest timed run, its bar reaches the
median run), and the activation peak across budgets (predicted and
measured, with the budget as a grey tick). Strategies keep the registry's colours.
Its page, validation.html, opens offline on a heading, what ran and a row per budget and
strategy, with the chart below; validation.png and validation.svg carry the chart alone.
It reads a `poetsim.pytorch.validate.Validation` by its fields alone, so that drawing stays in
this package and this package never imports the PyTorch layer above it.
"""

import html
from pathlib import Path

import altair as alt
import pandas as pd

from poetsim import strategies
from poetsim.report import page
from poetsim.report.framing import footer_text, framed, save_images

#: The band around the diagonal of measured against predicted step time, percent either way.
BAND_PCT = 15
#: The page draws the panels side by side where the chart's element is at least this wide
#: (their width), else one above another, the subtitle wrapped at STACKED_WRAP_CHARS.
WIDE_PX = 1180
STACKED_WRAP_CHARS = 60


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


def validation_chart(validation, footer: str | None = None, stacked: bool = False) -> alt.VConcatChart:
    """Three panels, framed with a title and `footer` (default: poetsim's, see `validation_footer`; "" for none).

    Side by side, or `stacked` one above another with the legends below them (a phone's layout).
    """
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
    footer = validation_footer(validation) if footer is None else footer
    title = f"{validation.graph_name}: predicted (hollow) and measured (filled) across RAM budgets"
    subtitle = (
        f"Measured: the fastest timed run. Middle: measured against predicted step time, the band is +-{BAND_PCT} %, "
        "a bar reaches the median run. Grey ticks: the RAM budget. "
        "Every gradient was compared bit for bit with a plain loss.backward()."
    )
    if stacked:
        return framed(alt.vconcat(*panels), title, footer, subtitle, wrap_chars=STACKED_WRAP_CHARS).configure_legend(
            orient="bottom", direction="horizontal", columns=3
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
    band = line.assign(low=line["predicted"] * (1 - BAND_PCT / 100), high=line["predicted"] * (1 + BAND_PCT / 100))
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
            shape=alt.Shape("budget_pct:N", title="RAM budget %", sort="descending"),
            tooltip=["strategy", "budget_pct", alt.Tooltip("predicted:Q", format=".4g"), alt.Tooltip("measured:Q", format=".4g")],
        )
    )
    layers = [shaded, diagonal, points] if bars is None else [shaded, diagonal, bars, points]
    return alt.layer(*layers).properties(width=260, height=220, title="measured vs predicted")


def _timing_name(timing) -> str:
    """A timing model's name as users write it."""
    return str(getattr(timing, "value", timing))


def validation_footer(validation) -> str:
    """What ran where, and the cost and timing model's assumptions."""
    return footer_text(_what_ran(validation), [_timing_name(validation.timing)])


def _what_ran(validation) -> str:
    return (
        f"{validation.graph_name} executed on this host ({validation.platform_name} profile), "
        f"{validation.threads} thread(s), deadline {validation.runtime_x:g}x, "
        f"{'durable' if validation.durable else 'page-cached'} swap files"
    )


def save_validation_page(validation, directory: Path) -> list[Path]:
    """validation.html: what ran, a row per budget and strategy, the chart, and the assumptions at its foot.

    The page opens offline (JavaScript inline) and states the footer once, below everything;
    validation.png and validation.svg, which travel alone, carry it. Without a point that ran
    (every one infeasible, over budget or skipped) there is no chart: the page says so, and
    no image is written. Returns the paths written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ran = any(row.measured_runtime_s is not None for row in validation.rows)
    footer = validation_footer(validation)
    paths: list[Path] = []
    specs = {}
    if ran:
        paths += save_images(validation_chart(validation).to_dict(), directory, "validation")
        specs["chart-validation"] = page.responsive(
            validation_chart(validation, footer="").to_dict(validate=False),
            validation_chart(validation, footer="", stacked=True).to_dict(validate=False),
            WIDE_PX,
        )
    body = [
        f"<h1>{html.escape(validation.graph_name)}: prediction against measurement</h1>",
        f"<p class='lede'>{html.escape(_verdict(validation))}</p>",
        f"<p>{html.escape(_what_ran(validation))}; {html.escape(_timing_name(validation.timing))} timing. "
        "Every schedule that ran had its gradients compared bit for bit with a plain loss.backward().</p>",
        _rows_table(validation),
        "<div class='scroll'><div class='chart' id='chart-validation'></div></div>"
        if ran
        else "<p>No schedule ran: at every budget each strategy was infeasible, over the budget or skipped.</p>",
        f"<p class='footer'>{html.escape(footer)}</p>",
    ]
    target = directory / "validation.html"
    title = f"poetsim validate-run: {validation.graph_name}"
    target.write_text(page.page(title, "\n".join(body), specs), encoding="utf-8")
    return [target, *paths]


def _verdict(validation) -> str:
    """What the runs show, in one sentence: step times within the band, gradients and peaks as predicted."""
    ran = [row for row in validation.rows if row.measured_runtime_s is not None]
    if not ran:
        return "No schedule ran."
    within = sum(abs(row.runtime_difference_pct) <= BAND_PCT for row in ran)
    equal = sum(bool(row.gradients_equal) for row in ran)
    peaks = sum(bool(row.peak_equal) for row in ran)
    return (
        f"{within} of {len(ran)} measured step times are within {BAND_PCT} % of the prediction; gradients are bitwise "
        f"equal to plain PyTorch's in {equal} of {len(ran)} runs, and the activation peak is as predicted in {peaks}."
    )


def _rows_table(validation) -> str:
    """Every budget and strategy: status, predicted and measured step time and peak, and the gradients."""
    head = (
        "<tr><th class='text'>strategy</th><th class='text'>RAM</th><th class='text'>status</th><th>step s, predicted</th>"
        "<th>step s, measured</th><th>difference</th><th>peak bytes, predicted</th><th>peak bytes, measured</th>"
        "<th class='text'>gradients</th></tr>"
    )
    cells = []
    for row in validation.rows:
        if row.measured_runtime_s is None:
            figures = f"<td class='text' colspan='6'>{html.escape(row.message)}</td>"
        else:
            figures = (
                f"<td>{row.predicted_runtime_s:.4g}</td><td>{row.measured_runtime_s:.4g}</td>"
                f"<td>{row.runtime_difference_pct:+.1f} %</td><td>{row.predicted_peak_bytes:,}</td>"
                f"<td>{row.measured_peak_bytes:,}</td>"
                f"<td class='text'>{'bitwise equal' if row.gradients_equal else 'DIFFERENT'}</td>"
            )
        cells.append(
            f"<tr><td class='text'>{html.escape(row.strategy)}</td><td class='text'>{html.escape(row.ram)}</td>"
            f"<td class='text'>{html.escape(row.status)}</td>{figures}</tr>"
        )
    return f"<div class='scroll'><table>{head}{''.join(cells)}</table></div>"
