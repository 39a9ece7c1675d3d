"""Charts of the POET paper's exhibits: poetsim's figures with the paper's numbers drawn over them.

Each builder takes one `poetsim.analysis.paper.PaperComparison` (its table of poetsim's figures
per point) and returns a function that draws the chart at a width with a footer, or None when
the table holds nothing to draw. The paper's numbers are `paper.PAPER_NUMBERS`, each cited to
the exhibit that states it; where the paper gives a curve without numbers (Figures 3 and 4) the
chart says so and draws poetsim's figures alone. Energies above keep-all use the overhead
charts' symmetric-log axis (`poetsim.report.overhead.Symlog`), so 0.005 % and 141 % share one.
"""

import altair as alt
import pandas as pd

from poetsim import strategies
from poetsim.analysis.claims import PAPER_NUMBERS, PaperComparison
from poetsim.report.framing import framed
from poetsim.report.overhead import NARROW_BELOW_PX, Axis, Symlog, label_expr
from poetsim.report.palette import platform_colours, strategy_colours
from poetsim.report.sweep_charts import NARROW_WRAP_CHARS, Draw

PAPER_COLOUR = "#333333"
#: The width of a bar's figure written beside its end ("+10.7 %" at 11 px, and its gap), px.
BAR_LABEL_PX = 50


def _wrap(width_px: float) -> int:
    return NARROW_WRAP_CHARS if width_px < NARROW_BELOW_PX else 0


def _legend(width_px: float) -> alt.Legend:
    """Beside the chart on a desktop, below it on a phone, where the room is."""
    return alt.Legend(orient="bottom" if width_px < NARROW_BELOW_PX else "right")


def _panel_px(width_px: float, across: int) -> int:
    return int(max(220, min(560, (width_px - 120) / across - 30)))


def _symlog_axis(values: list[float], title: str) -> tuple[Symlog, alt.Y]:
    scale = Symlog.for_values(pd.Series([v for v in values if v is not None and not pd.isna(v)], dtype=float))
    ticks = scale.ticks(max([scale.constant] + [v for v in values if v is not None and not pd.isna(v)]))
    y = alt.Y(
        "y:Q",
        title=title,
        scale=alt.Scale(domain=[0, ticks[-1][0] * 1.04], nice=False),
        axis=alt.Axis(values=[t for t, _ in ticks], labelExpr=label_expr(ticks), labelOverlap=False, gridColor="#eeeeee"),
    )
    return scale, y


def figure5_chart(comparison: PaperComparison) -> Draw | None:
    """Hybrid's and Capuchin's energy above keep-all per RAM budget, under the paper's figures.

    The paper's Capuchin band (+73 % to +141 %) and its POET line (1 %) are drawn beneath.
    """
    table = comparison.table
    if table.empty:
        return None
    capuchin, poet = PAPER_NUMBERS["fig5_capuchin"], PAPER_NUMBERS["fig5_poet"]
    order = list(table["ram"].astype(str))
    rows = [
        {"ram": str(r["ram"]), "strategy": name, "overhead_pct": r[f"{name}_overhead_pct"]}
        for _, r in table.iterrows()
        for name in (strategies.HYBRID.name, strategies.CAPUCHIN.name)
        if r[f"{name}_overhead_pct"] is not None and not pd.isna(r[f"{name}_overhead_pct"])
    ]
    data = pd.DataFrame(rows, columns=["ram", "strategy", "overhead_pct"])
    scale, y = _symlog_axis([*data["overhead_pct"], capuchin.high, poet.high], "energy above keep-all")
    data["y"] = [scale.position(v) for v in data["overhead_pct"]]
    band = pd.DataFrame(
        [{"y": scale.position(capuchin.low), "y2": scale.position(capuchin.high), "text": f"paper: Capuchin {capuchin.text}"}]
    )
    line = pd.DataFrame([{"y": scale.position(poet.high), "text": f"paper: POET {poet.text}"}])
    domain, colours = strategy_colours([strategies.HYBRID.name, strategies.CAPUCHIN.name])

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        x = alt.X("ram:N", sort=order, title="RAM budget (% of keep-all's peak)", axis=alt.Axis(labelAngle=0))
        colour = alt.Color("strategy:N", scale=alt.Scale(domain=domain, range=colours), title="poetsim", legend=_legend(width_px))
        points = alt.Chart(data).encode(x=x, y=y, color=colour, tooltip=["strategy:N", "ram:N", "overhead_pct:Q"])
        layers = [
            # Every layer encodes y with the points' axis: layers merge their axes, and one left
            # at the defaults would let Vega drop every other decade's label.
            alt.Chart(band)
            .mark_rect(color=strategies.colour(strategies.CAPUCHIN.name), opacity=0.18)
            .encode(x=alt.value(0), x2=alt.value("width"), y=y, y2="y2:Q"),
            alt.Chart(band)
            .transform_calculate(y="datum.y2")
            .mark_text(align="left", dx=4, dy=10, fontSize=12, color=PAPER_COLOUR)
            .encode(x=alt.value(0), y=y, text="text:N"),
            alt.Chart(line)
            .mark_rule(strokeDash=[6, 3], color=strategies.colour(strategies.HYBRID.name), strokeWidth=2)
            .encode(y=y),
            alt.Chart(line)
            .mark_text(align="left", dx=4, dy=-6, fontSize=12, color=PAPER_COLOUR)
            .encode(x=alt.value(0), y=y, text="text:N"),
            points.mark_line(strokeWidth=2),
            points.mark_point(filled=True, size=60, opacity=1),
        ]
        chart = alt.layer(*layers).properties(width=_panel_px(width_px, 1), height=260)
        subtitle = (
            "Lines: poetsim's hybrid (POET) and Capuchin at each RAM budget. Shaded band and dashed line: the "
            f"paper's numbers ({capuchin.source}). Symmetric-log axis."
        )
        return framed(chart, comparison.title, footer, subtitle, _wrap(width_px))

    return draw


def table3_chart(comparison: PaperComparison) -> Draw | None:
    """POET against POFO: peak memory and throughput differences, the paper's bar beside poetsim's.

    One pair of bars at each budget.
    """
    table = comparison.table.dropna(subset=["peak_difference_pct"]) if not comparison.table.empty else comparison.table
    if table.empty:
        return None
    peak, speed = PAPER_NUMBERS["table3_peak"], PAPER_NUMBERS["table3_throughput"]
    rows = [
        {"metric": "peak memory", "source": f"paper ({peak.exhibit})", "value": peak.low},
        {"metric": "throughput", "source": f"paper ({speed.exhibit})", "value": speed.low},
    ]
    for _, r in table.iterrows():
        label = f"poetsim at {r['ram']}, {r['runtime_x']:g}x"
        rows.append({"metric": "peak memory", "source": label, "value": float(r["peak_difference_pct"])})
        rows.append({"metric": "throughput", "source": label, "value": float(r["throughput_difference_pct"])})
    data = pd.DataFrame(rows)
    data["text"] = [f"{v:+.3g} %" for v in data["value"]]
    sources = list(dict.fromkeys(data["source"]))
    palette = [PAPER_COLOUR] + [strategies.colour(strategies.HYBRID.name)] * (len(sources) - 1)

    low, high = min(0.0, float(data["value"].min())), max(0.0, float(data["value"].max()))

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        plot_px = _panel_px(width_px, 1) - 120
        # Room for the figure beside the end of each bar: left of the negative ones, right of the others.
        pad = (high - low) * BAR_LABEL_PX / max(plot_px - 2 * BAR_LABEL_PX, BAR_LABEL_PX)
        domain = [low - (pad if low < 0 else 0.0), high + (pad if high > 0 else 0.0)]
        base = alt.Chart().encode(
            y=alt.Y("source:N", sort=sources, title=None, axis=alt.Axis(labelLimit=200)),
            x=alt.X("value:Q", title="POET minus POFO (% of POFO's)", scale=alt.Scale(domain=domain, nice=False)),
        )
        bars = base.mark_bar(height=14).encode(
            color=alt.Color("source:N", scale=alt.Scale(domain=sources, range=palette), legend=None),
            tooltip=["metric:N", "source:N", alt.Tooltip("value:Q", format="+.3g")],
        )
        right = (
            base.transform_filter("datum.value >= 0")
            .mark_text(align="left", dx=4, fontSize=11, color="#222222")
            .encode(text="text:N")
        )
        left = (
            base.transform_filter("datum.value < 0")
            .mark_text(align="right", dx=-4, fontSize=11, color="#222222")
            .encode(text="text:N")
        )
        zero = base.mark_rule(color="#666666").encode(x=alt.datum(0), y=alt.value(0), y2=alt.value("height"))
        chart = (
            alt.layer(zero, bars, right, left, data=data)
            .properties(width=plot_px, height=22 * len(sources))
            .facet(row=alt.Row("metric:N", title=None, header=alt.Header(labelFontSize=12, labelFontWeight="bold")))
        )
        subtitle = (
            f"Grey: the paper's numbers ({peak.source}); blue: poetsim's hybrid against POFO at each budget. "
            "Peak memory: negative is leaner; throughput: positive is faster."
        )
        return framed(chart, comparison.title, footer, subtitle, _wrap(width_px))

    return draw


def figure4_chart(comparison: PaperComparison) -> Draw | None:
    """Each strategy's energy above keep-all against the runtime budget, a panel per platform and RAM.

    The paper's Figure 4 is a curve without numbers: nothing of the paper's is drawn.
    """
    table = comparison.table
    if table.empty or table["overhead_pct"].dropna().empty:
        return None
    data = table.dropna(subset=["overhead_pct"]).copy()
    scale, y = _symlog_axis(list(data["overhead_pct"]), "energy above keep-all")
    data["y"] = [scale.position(v) for v in data["overhead_pct"]]
    data["panel"] = [f"{p} · RAM {r}" for p, r in zip(data["platform"], data["ram"])]
    panels = list(dict.fromkeys(data["panel"]))
    domain, colours = strategy_colours(data["strategy"])
    # As on the overhead charts: one position per budget, evenly spaced and labelled with it, and
    # each strategy at its own small offset beside it, so ties stay visible.
    budgets = Axis.of(data["runtime_x"], lambda v: f"{v:g}x")
    step = min(0.7 / max(len(domain), 1), 0.16)
    offsets = {name: (i - (len(domain) - 1) / 2) * step for i, name in enumerate(domain)}
    data["x"] = [budgets.index(v) + offsets[s] for v, s in zip(data["runtime_x"], data["strategy"])]

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        across = 1 if width_px < NARROW_BELOW_PX else min(2, len(panels))
        panel_px = _panel_px(width_px, across)
        base = alt.Chart().encode(
            x=alt.X(
                "x:Q",
                title="runtime budget (x plain pass)",
                scale=alt.Scale(domain=[-0.5, len(budgets.values) - 0.5], nice=False, zero=False),
                axis=alt.Axis(grid=False, labelFlush=False, labelOverlap=False, **budgets.shown(panel_px)),
            ),
            y=y,
            color=alt.Color(
                "strategy:N", scale=alt.Scale(domain=domain, range=colours), title="poetsim", legend=_legend(width_px)
            ),
            tooltip=["strategy:N", "runtime_x:Q", "status:N", alt.Tooltip("overhead_pct:Q", format=".4g")],
        )
        chart = (
            alt.layer(base.mark_line(strokeWidth=2), base.mark_point(filled=True, size=50, opacity=1), data=data)
            .properties(width=panel_px, height=200)
            .facet(facet=alt.Facet("panel:N", title=None, sort=panels), columns=across)
            .resolve_axis(x="independent")
        )
        subtitle = (
            "poetsim's strategies at each runtime budget (side by side where they tie). The paper's Figure 4 is a "
            "curve without numbers in its text, so none of the paper's is drawn. Symmetric-log axis."
        )
        return framed(chart, comparison.title, footer, subtitle, _wrap(width_px))

    return draw


def figure3_chart(comparison: PaperComparison) -> Draw | None:
    """Per point, hybrid's energy above keep-all against the best single-move strategy's.

    Below the diagonal, the integrated search saves energy; on it, they tie.
    """
    table = comparison.table
    if table.empty:
        return None
    rows = []
    for r in table.itertuples(index=False):
        singles = [
            getattr(r, f"{name}_overhead_pct")
            for name in ("paging_only", "recompute_only")
            if getattr(r, f"{name}_overhead_pct") is not None and not pd.isna(getattr(r, f"{name}_overhead_pct"))
        ]
        if singles and r.hybrid_overhead_pct is not None and not pd.isna(r.hybrid_overhead_pct):
            rows.append(
                {"platform": r.platform, "model": r.model, "ram": r.ram, "single": min(singles), "hybrid": r.hybrid_overhead_pct}
            )
    if not rows:
        return None
    data = pd.DataFrame(rows)
    scale, y = _symlog_axis(list(data["single"]) + list(data["hybrid"]), "hybrid: energy above keep-all")
    data["x"] = [scale.position(v) for v in data["single"]]
    data["y"] = [scale.position(v) for v in data["hybrid"]]
    top = float(max(data["x"].max(), data["y"].max()))
    ticks = scale.ticks(max(float(data["single"].max()), float(data["hybrid"].max()), scale.constant))
    diagonal = pd.DataFrame({"x": [0.0, ticks[-1][0]], "y": [0.0, ticks[-1][0]]})
    domain, colours = platform_colours(data["platform"])
    shapes = ["circle", "square", "triangle-up", "diamond", "cross"]
    only = int(
        sum(
            1
            for r in table.itertuples(index=False)
            if r.hybrid_overhead_pct is not None
            and not pd.isna(r.hybrid_overhead_pct)
            and all(pd.isna(getattr(r, f"{n}_overhead_pct")) for n in ("paging_only", "recompute_only"))
        )
    )

    def draw(footer: str, width_px: float) -> alt.TopLevelMixin:
        side = min(_panel_px(width_px, 1), 420)
        x = alt.X(
            "x:Q",
            title="best of paging-only and recompute-only: energy above keep-all",
            scale=alt.Scale(domain=[0, max(top, ticks[-1][0]) * 1.04], nice=False),
            # Flat labels: the first decade's may run into "0", and only it is left out.
            axis=alt.Axis(values=[t for t, _ in ticks], labelExpr=label_expr(ticks), labelOverlap="greedy", gridColor="#eeeeee"),
        )
        points = (
            alt.Chart(data)
            .mark_point(filled=False, size=70, strokeWidth=2, opacity=1)
            .encode(
                x=x,
                y=y,
                color=alt.Color("platform:N", scale=alt.Scale(domain=domain, range=colours), legend=_legend(width_px)),
                shape=alt.Shape(
                    "platform:N", scale=alt.Scale(domain=domain, range=shapes[: len(domain)]), legend=_legend(width_px)
                ),
                tooltip=[
                    "model:N",
                    "platform:N",
                    "ram:N",
                    alt.Tooltip("single:Q", format=".4g"),
                    alt.Tooltip("hybrid:Q", format=".4g"),
                ],
            )
        )
        # The diagonal has the points' axes: layers merge theirs.
        line = alt.Chart(diagonal).mark_line(color="#999999", strokeDash=[4, 3]).encode(x=x, y=y)
        chart = alt.layer(line, points).properties(width=side, height=side)
        subtitle = (
            "One mark per model, platform and RAM budget where both hybrid and a single move have a schedule; "
            "on the dashed diagonal they tie, below it hybrid saves energy. The paper's Figure 3 gives curves "
            "without numbers in its text, so none of the paper's is drawn."
            + (f" At {only} more points only hybrid has a schedule." if only else "")
        )
        return framed(chart, comparison.title, footer, subtitle, _wrap(width_px))

    return draw


#: The chart of each exhibit, by the comparison's key.
BUILDERS = {"fig3": figure3_chart, "fig4": figure4_chart, "fig5": figure5_chart, "table3": table3_chart}
