"""Energy overhead against a budget (POET's Figures 3-5), drawn so that small numbers show.

The finding of a study is often a few hundredths of a percent (paging) beside a few percent
(recomputation) beside a third (a checkpointing rule). A linear axis flattens the first two, so
the y axis is symmetric-log (`Symlog`): linear below a constant chosen from the data, logarithmic
above, with ticks on the decades. The x axis has one position per budget swept, labelled with
it. Each colour group (strategy or platform) sits at its own small offset around the budget's
position, in a fixed order, so two that tie are side by side, never one over the other.

How sure each point is shows in its marker: a filled circle is a proven optimum or a rule's
schedule; a hollow circle is a schedule not proven optimal, with a bar down to the proven lower
bound (`bound_j` against `keep_all_energy_j`), so a 98 % gap looks like one. Runs without a
schedule are drawn in a strip above the plot, one row per status, each with its own marker:
`infeasible` (a proof) apart from `no-solution` (a timeout), `failed` and `over-budget`. With
fewer than 3 budgets on the axis, points and lines would suggest a curve that is not there:
the chart draws bars instead.
"""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import pandas as pd
from altair.typing import ChartType

from poetsim.report.key import Entry
from poetsim.report.palette import (
    OTHER_STATUS,
    STATUS_FILLED,
    STATUS_SHAPES,
    platform_colours,
    strategy_colours,
    strip_order,
    strip_status,
)
from poetsim.status import Status
from poetsim.strategies import rank

#: Height of the plot area of one panel and of one strip row, px.
PLOT_PX = 165
STRIP_ROW_PX = 15
#: The budget axis's labels (Vega's 10 px font): a character's width, the room between two flat
#: labels, and the height of a line, which upright labels stand apart by; px.
LABEL_CHAR_PX = 6
LABEL_GAP_PX = 6
LABEL_LINE_PX = 12
#: Fewer values than this on the x axis make a bar chart.
MIN_CURVE_VALUES = 3
_PROVEN = {Status.OPTIMAL.value, Status.BASELINE.value}


@dataclass(frozen=True)
class Symlog:
    """The symmetric-log transform of an overhead in %: sign(v) * log(1 + |v| / constant).

    Below `constant` it is about linear (zero stays at zero), above it logarithmic, so 0.03 %
    and 33 % are both readable on one axis.
    """

    constant: float

    @classmethod
    def for_values(cls, values: pd.Series) -> "Symlog":
        """The constant: the decade at or below the smallest positive value (1e-4 to 1)."""
        positive = values[values > 0]
        if positive.empty:
            return cls(1.0)
        exponent = math.floor(math.log10(positive.min()))
        return cls(10.0 ** min(0, max(-4, exponent)))

    def position(self, value: float) -> float:
        """Where `value` (an overhead in %) lies on the transformed axis."""
        return math.copysign(math.log1p(abs(value) / self.constant), value)

    def ticks(self, top: float) -> list[tuple[float, str]]:
        """(position, label) of 0 and every decade from the constant up to the first at or above `top`."""
        ticks = [(0.0, "0")]
        decade = self.constant
        while True:
            ticks.append((self.position(decade), f"{decade:g} %"))
            if decade >= top:
                return ticks
            decade *= 10


@dataclass(frozen=True)
class Axis:
    """The budget axis: one position per budget as it is labelled, in order of value.

    Values that read the same share a position: a 35 % budget resolved to whole bytes is a
    slightly different share of each model's keep-all peak, yet one budget.
    """

    values: tuple[float, ...]  # the smallest value of each position
    labels: tuple[str, ...]
    label: Callable[[float], str] = field(compare=False)

    @classmethod
    def of(cls, values: pd.Series, label: Callable[[float], str]) -> "Axis":
        """The axis of the distinct labels of `values` (by `label`), in order of value."""
        first: dict[str, float] = {}
        for value in sorted(float(v) for v in values.dropna()):
            first.setdefault(label(value), value)
        return cls(tuple(first.values()), tuple(first), label)

    def index(self, value: float) -> int:
        """The position of `value` on the axis: that of its label."""
        return self.labels.index(self.label(float(value)))

    def shown(self, width_px: float) -> dict:
        """The x axis's tick and label properties for a panel `width_px` wide: labels that never run together.

        Labels lie flat when the widest fits its position's share of the width; else they stand
        upright, and when even upright labels are closer than a line, every k-th position is
        labelled (the first among them), the smallest k that spaces them a line apart.
        """
        count = len(self.labels)
        step = width_px / max(count, 1)
        if max((len(text) for text in self.labels), default=0) * LABEL_CHAR_PX + LABEL_GAP_PX <= step:
            return {"values": list(range(count)), "labelExpr": label_expr(list(enumerate(self.labels)))}
        every = math.ceil(LABEL_LINE_PX / step)
        shown: list[tuple[float, str]] = [(i, text) for i, text in enumerate(self.labels) if i % every == 0]
        upright = {"labelAngle": -90, "labelAlign": "right", "labelBaseline": "middle"}
        return {"values": [i for i, _ in shown], "labelExpr": label_expr(shown), **upright}


@dataclass(frozen=True)
class BudgetAxes:
    """The budget axes of a chart's panels: one for every panel, or one per row of panels.

    The axis is shared when one row of panels has every budget of the others (the same budget
    then sits at the same position in every row). Otherwise each row gets an axis of its own
    (`own`): a sweep of byte budgets gives each model different shares of its keep-all peak, and
    on one shared axis each row would use a part of it.
    """

    shared: Axis  # every budget of every panel
    axes: dict[str, Axis]  # by row of panels
    shelf: pd.Series  # the row of panels of each run, by the frame's index
    own: bool

    @classmethod
    def of(cls, values: pd.Series, shelves: pd.Series, label: Callable[[float], str]) -> "BudgetAxes":
        """The axes of `values` (by `label`), one per value of `shelves` where their axes differ."""
        names = [str(name) for name in shelves.cat.categories if (shelves == name).any()]
        axes = {name: Axis.of(values[shelves == name], label) for name in names}
        shared = Axis.of(values, label)
        if all(len(axis.labels) < len(shared.labels) for axis in axes.values()):
            return cls(shared, axes, shelves.astype(str), own=True)
        return cls(shared, dict.fromkeys(names, shared), shelves.astype(str), own=False)

    def axis_of(self, index: Any) -> Axis:
        """The axis of the run at `index` of the frame."""
        return self.axes[self.shelf[index]]

    @property
    def most_values(self) -> int:
        """The most positions of one axis."""
        return max((len(axis.values) for axis in self.axes.values()), default=1)


def overhead_chart(
    frame: pd.DataFrame, *, x: str, label, x_title: str, colour: str, columns: str | None, rows: list[str], width_px: float
) -> tuple[ChartType, pd.DataFrame, list[tuple[str, str]], int]:
    """The chart of energy overhead (%) against `x`, its data, each group's colour, and a panel's width.

    One colour (and offset) per value of `colour`, panels across by `columns` and down by `rows`
    (those that vary), about `width_px` wide. The colours are for the key: the chart has no
    legend of its own (`key_chart` is it).

    `frame` is the report's prepared frame restricted to rows with a known `x`.
    """
    budgets = BudgetAxes.of(frame[x], panel_labels(frame, rows), label)
    groups = _group_order(colour, frame[colour])
    ok = frame[frame["ok"]]
    bounds = _bound_pct(ok)
    scale = Symlog.for_values(ok["overhead_pct"].dropna())
    ticks = scale.ticks(max(float(ok["overhead_pct"].max()) if len(ok) else 0.0, scale.constant))
    top = ticks[-1][0]
    strip = strip_order(frame.loc[~frame["ok"], "status"].astype(str))
    band = top * STRIP_ROW_PX / PLOT_PX
    step = min(0.7 / max(len(groups), 1), 0.16)
    bars = len(budgets.shared.values) < MIN_CURVE_VALUES
    data = _points(frame, x, budgets, colour, groups, scale, bounds, strip, top, band, step)
    narrow = width_px < NARROW_BELOW_PX
    # A narrow chart (a phone) stacks every panel in one column, each named by all it varies in.
    data["column"] = panel_labels(frame, ([columns] if columns else []) + (rows if narrow else []))
    data["row"] = panel_labels(frame, [] if narrow else rows)
    data["panel"] = [" · ".join(p for p in (str(c), str(r)) if p) for c, r in zip(data["column"], data["row"])]
    data["segment"] = _segments(data)
    across = 1 if narrow else _across(data, width_px)
    room = width_px - (_NARROW_FRAME_PX if narrow else _FRAME_PX)
    panel_w = int(min(520, max(150, room / across - _GAP_PX)))
    ceiling = top + (len(strip) + 0.6) * band if strip else top * 1.04
    strip_ticks = [(top + (i + 1) * band, status) for i, status in enumerate(strip)]
    y_scale = alt.Scale(domain=[0, ceiling], nice=False, zero=True)
    y_axis = alt.Axis(
        values=[p for p, _ in ticks + strip_ticks],
        labelExpr=label_expr(ticks + strip_ticks),
        labelOverlap=False,
        gridColor="#eeeeee",
        title="energy above keep-all",
    )
    y = alt.Y("y:Q", scale=y_scale, axis=y_axis)
    domain, colours = (strategy_colours if colour == "strategy" else platform_colours)(groups)
    color = alt.Color(
        "group:N", title=_GROUP_TITLES.get(colour, colour), scale=alt.Scale(domain=domain, range=colours), legend=None
    )
    tooltip: list[str | alt.Tooltip] = [
        "group:N",
        alt.Tooltip("budget:N", title=x_title.split(" (")[0]),
        "status:N",
        alt.Tooltip("overhead_pct:Q", title="above keep-all %", format=".4g"),
        alt.Tooltip("bound_pct:Q", title="proven bound %", format=".4g"),
        alt.Tooltip("gap:Q", title="unproven share of overhead", format=".1%"),
        alt.Tooltip("energy_j:Q", title="energy J", format=".6g"),
        "panel:N",
        "reason:N",
    ]
    outline = alt.Stroke("group:N", scale=alt.Scale(domain=domain, range=colours), legend=None)
    bar_px = max(4.0, 0.8 * step * panel_w / budgets.most_values)

    def panel(part: pd.DataFrame, axis: Axis) -> ChartType:
        xenc = alt.X(
            "x:Q",
            title=x_title,
            scale=alt.Scale(domain=[-0.5, len(axis.values) - 0.5], nice=False, zero=False),
            axis=alt.Axis(grid=False, labelFlush=False, labelOverlap=False, **axis.shown(panel_w)),
        )
        base = alt.Chart().encode(x=xenc, y=y, color=color, tooltip=tooltip)
        layers = _strip_frame(base, top + 0.45 * band, ceiling, y_scale, y_axis) if strip else []
        bound = alt.Y("y_bound:Q", scale=y_scale, axis=y_axis)
        layers += _bar_layers(base, bar_px, outline, bound) if bars else _point_layers(base)
        layers += [_strip_layer(base, status) for status in strip]
        return alt.layer(*layers, data=part).properties(width=panel_w, height=PLOT_PX + (ceiling - top) / top * PLOT_PX)

    groups_drawn = list(zip(domain, colours))
    if not budgets.own:
        return _facet(panel(data, budgets.shared), data, across), data, groups_drawn, panel_w
    shelves = [
        _shelf(panel(data[budgets.shelf == name], shelf_axis), data[budgets.shelf == name], narrow, first=n == 0)
        for n, (name, shelf_axis) in enumerate(budgets.axes.items())
    ]
    return alt.vconcat(*shelves, spacing=_SHELF_GAP_PX), data, groups_drawn, panel_w


#: Panels narrower than this are not worth having: more panels wrap onto another row.
_MIN_PANEL_PX = 170
#: Room beside the panels for the row headers and the y axis, and between two panels, px.
_FRAME_PX = 150
_GAP_PX = 20
#: A chart asked to fit less than this is laid out for a phone: one panel per row, no row headers.
NARROW_BELOW_PX = 600
_NARROW_FRAME_PX = 100


def _across(data: pd.DataFrame, width_px: float) -> int:
    """How many panels side by side: every column value when rows vary too, else as many as fit."""
    columns, rows = data["column"].nunique(), data["row"].nunique()
    if columns > 1 and rows > 1:
        return columns
    fit = max(1, int((width_px - _FRAME_PX) // (_MIN_PANEL_PX + _GAP_PX)))
    return min(max(columns, rows, 1), fit, 5)


_GROUP_TITLES = {"strategy": "strategy", "platform_label": "platform"}


def _group_order(colour: str, values: pd.Series) -> list[str]:
    return (strategy_colours if colour == "strategy" else platform_colours)(values.astype(str))[0]


def _bound_pct(ok: pd.DataFrame) -> pd.Series:
    """The proven lower bound on each run's overhead, in %, within [0, its overhead]."""
    bound = 100 * (ok["bound_j"] / ok["keep_all_energy_j"] - 1)
    return bound.clip(lower=0).where(bound.notna(), 0.0).clip(upper=ok["overhead_pct"])


def _points(frame, x, budgets: BudgetAxes, colour, groups, scale, bounds, strip, top, band, step) -> pd.DataFrame:
    """One row per run: where it is drawn, and what its tooltip says."""
    rows = []
    for index, run in frame.iterrows():
        group = str(run[colour])
        status = str(run["status"])
        offset = (groups.index(group) - (len(groups) - 1) / 2) * step
        ok = bool(run["ok"])
        proven = ok and (status in _PROVEN or (status == Status.FEASIBLE.value and run["gap_overhead"] <= 0))
        strip_row = None if ok else strip_status(status)
        overhead = float(run["overhead_pct"]) if ok else None
        bound = float(bounds[index]) if ok and not proven else (overhead if ok else None)
        axis = budgets.axis_of(index)
        position = axis.index(run[x])
        rows.append(
            {
                "x": position + offset,
                "budget": axis.labels[position],
                "group": group,
                "y": scale.position(overhead) if ok else top + (strip.index(strip_row) + 1) * band,
                "y_bound": scale.position(bound) if ok else None,
                "ok": ok,
                "proven": proven,
                "strip": strip_row,
                "status": status,
                "overhead_pct": overhead,
                "bound_pct": bound if ok else None,
                "gap": float(run["gap_overhead"]) if ok and pd.notna(run["gap_overhead"]) else None,
                "energy_j": float(run["predicted_total_j"]) if ok else None,
                "reason": _short(run["message"]),
            }
        )
    return pd.DataFrame(rows, index=frame.index)


def _segments(data: pd.DataFrame) -> pd.Series:
    """Which line each schedule is on: one per panel and group, broken at a budget without a schedule.

    A line across such a budget would claim a value there.
    """
    order = data.assign(position=data["x"].round().astype(int)).sort_values(["panel", "group", "position"])
    segments, previous, number = {}, None, 0
    for index, row in order.iterrows():
        key = (row["panel"], row["group"])
        if not row["ok"]:
            previous = None
            continue
        if previous is None or previous[0] != key or row["position"] != previous[1] + 1:
            number += 1
        segments[index] = number
        previous = (key, row["position"])
    return pd.Series(segments, dtype="float64").reindex(data.index)


#: How a panel names one value of each dimension a sweep varies.
DIMENSIONS: dict[str, Callable[[Any], str]] = {
    "model_label": str,
    "platform_label": str,
    "timing": lambda v: f"{v} timing",
    "runtime_x": lambda v: f"runtime {v:g}x",
    "ram_fraction": lambda v: f"RAM {100 * v:.3g} %",
    "strategy": str,
}


def panel_labels(frame: pd.DataFrame, dims: list[str]) -> pd.Series:
    """A label per row from those of `dims` that vary in `frame` (as an ordered categorical)."""
    varying = [d for d in dims if d in frame.columns and frame[d].nunique() > 1]
    if not varying:
        return pd.Series(pd.Categorical([""] * len(frame)), index=frame.index)

    def label(row: pd.Series) -> str:
        return " · ".join("?" if pd.isna(row[d]) else DIMENSIONS[d](row[d]) for d in varying)

    labels = frame[varying].apply(label, axis=1)
    order = frame[varying].copy()
    if "strategy" in order:
        order["strategy"] = order["strategy"].map(lambda s: (rank(str(s)), str(s)))
    ordered = labels.loc[order.sort_values(varying, na_position="last").index].unique()
    return pd.Series(pd.Categorical(labels, categories=ordered, ordered=True), index=frame.index)


def label_expr(ticks: list[tuple[float, str]]) -> str:
    """A Vega expression naming each tick value.

    The labels are made by poetsim from numbers and status words, and written as JSON strings,
    so nothing from the data reaches the expression.
    """
    expr = "''"
    for value, text in reversed(ticks):
        expr = f"abs(datum.value - {value!r}) < 1e-9 ? {json.dumps(str(text))} : {expr}"
    return expr


def _strip_frame(base, edge, ceiling, y_scale, y_axis) -> list:
    """A light band behind the strip, and the line between it and the plot (one mark per panel).

    They share the plot's y scale and axis: a layer with an axis of its own would overrule it.
    """
    one = base.transform_aggregate(runs="count()").encode(
        x=alt.value(0), x2=alt.value("width"), color=alt.value("#f4f4f4"), tooltip=alt.value(None)
    )
    at_edge = alt.Y(datum=edge, scale=y_scale, axis=y_axis)
    shade = one.mark_rect().encode(y=at_edge, y2=alt.Y2(datum=ceiling))
    line = one.mark_rule(strokeDash=[4, 3]).encode(y=at_edge, color=alt.value("#999999"))
    return [shade, line]


def _point_layers(base) -> list:
    """Lines through the schedules of each group, bars down to the bound, filled or hollow circles."""
    ok = base.transform_filter("datum.ok")
    unproven = base.transform_filter("datum.ok && !datum.proven")
    return [
        ok.mark_line(strokeWidth=1.3, opacity=0.7).encode(detail="segment:N", order="x:Q"),
        unproven.mark_rule(strokeWidth=2, opacity=0.55).encode(y2="y_bound:Q"),
        base.transform_filter("datum.proven").mark_point(shape="circle", filled=True, size=55, opacity=1),
        unproven.mark_point(shape="circle", filled=False, size=55, strokeWidth=2, fill="white", fillOpacity=1, opacity=1),
    ]


def _bar_layers(base, width_px: float, outline: alt.Stroke, bound: alt.Y) -> list:
    """Bars from zero, for too few budgets: filled when proven, outlined when not, the bound a tick.

    The tick's y (`bound`) has the plot's scale and axis: layers merge their axes, and one left at
    the defaults would let Vega drop every other decade's label.
    """
    ok = base.transform_filter("datum.ok")
    unproven = ok.transform_filter("!datum.proven")
    return [
        ok.transform_filter("datum.proven").mark_bar(width=width_px).encode(y2=alt.datum(0)),
        unproven.mark_bar(width=width_px, fill="white", strokeWidth=2).encode(y2=alt.datum(0), stroke=outline),
        unproven.mark_tick(thickness=2, size=width_px, orient="horizontal").encode(y=bound),
    ]


def _strip_layer(base, status: str):
    shape = STATUS_SHAPES.get(status, "triangle-up")
    mark = dict(shape=shape, size=45 if shape != "cross" else 60, filled=STATUS_FILLED[status], opacity=1, strokeWidth=1.5)
    if status == Status.INFEASIBLE.value:
        mark["angle"] = 45
    return base.transform_filter(alt.datum.strip == status).mark_point(**mark)


def _present(labels: pd.Series) -> list[str]:
    """The panel labels `labels` holds, in their order."""
    return [str(c) for c in labels.cat.categories if c in set(labels)]


_HEADER = alt.Header(labelFontSize=12, labelFontWeight="bold")
_ROW_HEADER = alt.Header(labelFontSize=12, labelFontWeight="bold", labelAngle=-90)
#: Room between two rows of panels drawn as charts of their own (`_shelf`), px.
_SHELF_GAP_PX = 16


def _facet(chart, data: pd.DataFrame, across: int):
    """Panels across by `column` and down by `row` when both vary.

    When only one does, they are wrapped `across` to a row; otherwise there is one panel.
    """
    columns, rows = _present(data["column"]), _present(data["row"])
    # Every panel draws its own x axis (the scale stays shared), so no panel is left without labels.
    if len(columns) > 1 and len(rows) > 1:
        return chart.facet(
            column=alt.Column("column:N", title=None, sort=columns, header=_HEADER),
            row=alt.Row("row:N", title=None, sort=rows, header=_ROW_HEADER),
        ).resolve_axis(x="independent")
    if len(columns) > 1 or len(rows) > 1:
        field, order = ("column", columns) if len(columns) > 1 else ("row", rows)
        faceted = chart.facet(facet=alt.Facet(f"{field}:N", title=None, sort=order, header=_HEADER), columns=across)
        return faceted.resolve_axis(x="independent")
    return chart


def _shelf(chart, part: pd.DataFrame, narrow: bool, first: bool):
    """One row of panels with a budget axis of its own: its panels named as `_facet` names them.

    On a phone its panels stand one above the other, each named by all it varies in; else they
    lie across with the row's name beside them, the column names above the first row only.
    """
    columns = _present(part["column"])
    if narrow:
        return chart.facet(facet=alt.Facet("column:N", title=None, sort=columns, header=_HEADER), columns=1).resolve_axis(
            x="independent"
        )
    row = alt.Row("row:N", title=None, sort=_present(part["row"]), header=_ROW_HEADER)
    if columns == [""]:
        return chart.facet(row=row)
    column = alt.Column("column:N", title=None, sort=columns, header=_HEADER if first else alt.Header(labels=False))
    return chart.facet(column=column, row=row).resolve_axis(x="independent")


#: What each marker of the key says.
_MEANINGS = {
    **{s.value: f"{s} ({s.meaning})" for s in Status if not s.has_schedule},
    OTHER_STATUS: "another status without a schedule",
}


def marker_entries(statuses: list[str], unproven: bool, bars: bool = False) -> list[Entry]:
    """Key entries of what each marker means: proven, not proven with its bound, each strip status."""
    entries = [Entry("proven optimum or a rule's schedule", _key_mark("filled"), line_break=True)]
    if unproven:
        entries.append(
            Entry("not proven optimal: the " + ("tick" if bars else "bar") + " marks the proven lower bound", _key_mark("hollow"))
        )
    return entries + [Entry(_MEANINGS[status], _key_mark(status)) for status in statuses]


def _key_mark(marker: str) -> dict:
    grey = "#555555"
    if marker == "filled":
        return dict(shape="circle", filled=True, size=55, color=grey, opacity=1)
    if marker == "hollow":
        return dict(shape="circle", filled=False, size=55, strokeWidth=2, color=grey, opacity=1)
    shape = STATUS_SHAPES.get(marker, "triangle-up")
    mark = dict(
        shape=shape, filled=STATUS_FILLED[marker], size=60 if shape == "cross" else 45, color=grey, opacity=1, strokeWidth=1.5
    )
    if marker == Status.INFEASIBLE.value:
        mark["angle"] = 45
    return mark


def _short(message) -> str:
    """A one-line reason short enough for a tooltip."""
    text = "" if pd.isna(message) else " ".join(str(message).split())
    return text if len(text) <= 160 else text[:157] + "..."
