"""The simulated iteration as a timeline: compute, DMA and bus lanes over the RAM curve.

Built from the simulator's trace (`poetsim.simulator.TRACE_COLUMNS`: time_s, end_s, resource,
node, kind, bytes, stage) and RAM curve. The lanes are the trace's resources: the compute
engine, one lane per DMA channel in use, a wait for RAM when there was one, and the memory bus.
When the trace has no bus rows the bus lane is derived from the compute and DMA rows: the bus
carries compute traffic, transfer traffic, or both at once (where contention can slow them).
Kinds the chart does not know (a newer simulator's waits, say) are drawn in neutral greys and
named in the legend, never dropped.

Short events are what a reader looks for (a recompute, a stall), and at the scale of a whole
iteration they would be thinner than a pixel: every bar other than a plain compute is drawn at
least `MIN_BAR_PX` wide, its tooltip giving the true times. The deadline is a vertical rule and
the RAM budget a horizontal one; time past the deadline and RAM above the budget are shaded red.
Times are in ms or s and RAM in KiB, MiB or GiB, whichever reads best.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from poetsim.report.framing import framed

if TYPE_CHECKING:
    from poetsim.simulator import SimulationResult

#: Kinds of timeline bars, in legend order, with Okabe-Ito colours; compute and recompute as in the grid.
KIND_COLOURS = {
    "compute": "#0072B2",
    "recompute": "#E69F00",
    "page-in": "#009E73",
    "page-out": "#D55E00",
    "wait: input": "#000000",
    "wait: RAM": "#444444",
    "wait: transfers at stage end": "#AAAAAA",
    "wait: DMA channel": "#8C564B",
    "wait: source transfer": "#F0E442",
    "bus contention": "#882255",
    "bus: compute": "#9CC3E0",
    "bus: transfers": "#8FD1BC",
    "bus: both": "#CC79A7",
}
KINDS = tuple(KIND_COLOURS)
#: The legend's word for each cause of a wait (`poetsim.simulator.trace.EVENTS`): a trace row of
#: kind `stall` is a wait, and only those for an input or for RAM are stalls the stage model lacks.
WAIT_KINDS = {
    "input": "wait: input",
    "ram": "wait: RAM",
    "barrier": "wait: transfers at stage end",
    "channel": "wait: DMA channel",
    "source": "wait: source transfer",
    "bus": "bus contention",
}
#: Colours of kinds the chart does not know, in turn.
NEUTRAL_COLOURS = ("#999999", "#666666", "#BBBBBB", "#444444")
VIOLATION_COLOUR = "#D55E00"
MIN_BAR_PX = 3.0
WIDTH_PX = 1000
# Above these sizes the timeline is coarsened to about a pixel's resolution: a chart embeds its
# data, and a 100k-row trace would make a 20 MB page that no browser draws quickly.
MAX_BARS = 3000
MAX_RAM_POINTS = 2000
_LANE_ORDER = ("compute", "waiting for RAM", "dma", "DMA queue", "bus", "bus contention")
#: The lane of each trace resource, in words.
_LANE_NAMES = {"ram": "waiting for RAM", "dma-queue": "DMA queue", "contention": "bus contention"}


@dataclass(frozen=True)
class Unit:
    """A unit to show a quantity in: its name and how many base units (s, bytes) make one."""

    name: str
    size: float

    @classmethod
    def time(cls, span_s: float) -> "Unit":
        """Milliseconds for a span under a second, else seconds."""
        return cls("ms", 1e-3) if span_s < 1 else cls("s", 1.0)

    @classmethod
    def ram(cls, peak_bytes: float) -> "Unit":
        """The largest binary unit (GiB, MiB, else KiB) that a peak of `peak_bytes` fills at least once."""
        for name, size in (("GiB", 2**30), ("MiB", 2**20)):
            if peak_bytes >= size:
                return cls(name, float(size))
        return cls("KiB", 1024.0)


def timeline_chart(
    sim_result: "SimulationResult",
    budget_ram_bytes: int | None,
    title: str,
    footer: str,
    deadline_s: float | None = None,
    width_px: float = WIDTH_PX,
    wrap_chars: int = 0,
) -> alt.VConcatChart:
    """The simulated iteration: lanes over time above the RAM curve, with the deadline and budget.

    The chart is `width_px` wide (`wrap_chars` wraps the subtitle for a narrow chart).
    """
    bars, coarsened = merged_bars(lanes(sim_result.trace))
    ram = ram_envelope(sim_result.ram_curve)
    end_s = max(sim_result.makespan_s, deadline_s or 0.0, float(bars["end_s"].max()) if len(bars) else 0.0)
    time = Unit.time(end_s)
    peak = float(ram["ram_bytes"].max()) if len(ram) else 0.0
    space = Unit.ram(max(peak, budget_ram_bytes or 0))
    bars = _drawn(bars, time, end_s, width_px)
    x = alt.X(
        "start:Q",
        title=f"time ({time.name})",
        scale=alt.Scale(domain=[0, end_s / time.size], nice=False),
        axis=alt.Axis(tickCount=16 if width_px >= 600 else 5),
    )
    kinds = list(dict.fromkeys([k for k in KINDS if k in set(bars["kind"])] + sorted(set(bars["kind"]) - set(KINDS))))
    colours = [KIND_COLOURS.get(k) or NEUTRAL_COLOURS[i % len(NEUTRAL_COLOURS)] for i, k in enumerate(kinds)]
    lane_names = sorted(set(bars["resource"]), key=_lane_rank)
    lane_chart = (
        alt.Chart(bars)
        .mark_bar(height={"band": 0.8})
        .encode(
            x=x,
            x2="end:Q",
            y=alt.Y("resource:N", sort=lane_names, title=None, axis=alt.Axis(labelFontSize=12)),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=colours),
                sort=kinds,
                legend=alt.Legend(
                    title="activity", orient="right" if width_px >= 600 else "bottom", columns=1 if width_px >= 600 else 2
                ),
            ),
            order=alt.Order("layer:Q"),
            tooltip=[
                "resource:N",
                "kind:N",
                "node:N",
                alt.Tooltip("time_s:Q", title="start s", format=".6g"),
                alt.Tooltip("end_s:Q", title="end s", format=".6g"),
                alt.Tooltip("duration_s:Q", title="duration s", format=".4g"),
                alt.Tooltip("bytes:Q", format=","),
            ],
        )
    )
    lane_layers = [lane_chart]
    if deadline_s is not None:
        lane_layers += _deadline_layers(deadline_s, sim_result.makespan_s, time)
    lanes_panel = alt.layer(*lane_layers).properties(width=width_px, height=26 * max(1, len(lane_names)))
    ram_panel = _ram_panel(ram, budget_ram_bytes, time, space, end_s, width_px)
    body = alt.vconcat(lanes_panel, ram_panel, spacing=6).resolve_scale(x="shared", color="independent")
    subtitle = _subtitle(sim_result, budget_ram_bytes, deadline_s, coarsened, time, space)
    return framed(body, title, footer, subtitle, wrap_chars)


def lanes(trace: pd.DataFrame) -> pd.DataFrame:
    """The trace's bars (no alloc or free events), kinds spelt as in the legend, lanes named.

    A wait (kind `stall`) is named by its cause (`WAIT_KINDS`), so the legend says what it waited for.

    DMA transfers are put on the first channel free at their start (greedy interval
    partitioning), so overlapping transfers are side by side instead of hiding each other. A
    trace without bus rows gets a derived bus lane (`bus_lane`).
    """
    bars = trace[~trace["kind"].isin(("alloc", "free"))].copy()
    bars["kind"] = bars["kind"].astype(str).str.replace("_", "-")
    if "cause" in bars:
        waits = bars["kind"] == "stall"
        bars = bars[~waits | (bars["end_s"] > bars["time_s"])].copy()  # a wait of no time is not a bar
        waits = bars["kind"] == "stall"
        bars.loc[waits, "kind"] = [WAIT_KINDS.get(str(c), f"wait: {c}") for c in bars.loc[waits, "cause"]]
    bars["resource"] = bars["resource"].astype(str).replace(_LANE_NAMES)
    dma = bars[bars["resource"] == "dma"].sort_values("time_s", kind="stable")
    channel_ends_s: list[float] = []
    channels = []
    for start_s, end_s in zip(dma["time_s"], dma["end_s"]):
        free = next((c for c, busy_until_s in enumerate(channel_ends_s) if busy_until_s <= start_s), None)
        if free is None:
            free = len(channel_ends_s)
            channel_ends_s.append(end_s)
        channel_ends_s[free] = end_s
        channels.append(free)
    if len(channel_ends_s) > 1:
        bars.loc[dma.index, "resource"] = [f"dma {c + 1}" for c in channels]
    if not (bars["resource"] == "bus").any():
        bars = pd.concat([bars, bus_lane(bars)], ignore_index=True)
    bars.loc[bars["resource"] == "bus", "kind"] = bars.loc[bars["resource"] == "bus", "kind"].map(
        lambda k: k if str(k).startswith("bus") else f"bus: {k}"
    )
    return bars


def bus_lane(bars: pd.DataFrame) -> pd.DataFrame:
    """The memory bus's use, derived from compute and transfer bars: who is on the bus when.

    An elementary interval is `bus: compute` when only the compute engine is busy, `bus:
    transfers` when only DMA is, `bus: both` when both are (where the simulator's fair sharing
    may stretch them). Stalls and waits use no bus.
    """
    busy = bars[bars["kind"].isin(("compute", "recompute", "page-in", "page-out")) & (bars["end_s"] > bars["time_s"])]
    edges = []
    for start_s, end_s, resource in zip(busy["time_s"], busy["end_s"], busy["resource"]):
        side = 0 if resource == "compute" else 1
        edges += [(float(start_s), 1, side), (float(end_s), -1, side)]
    edges.sort(key=lambda e: (e[0], e[1]))
    active = [0, 0]
    rows: list[dict] = []
    previous_s = None
    for time_s, change, side in edges:
        if previous_s is not None and time_s > previous_s and (active[0] or active[1]):
            kind = "bus: both" if active[0] and active[1] else "bus: compute" if active[0] else "bus: transfers"
            if rows and rows[-1]["kind"] == kind and rows[-1]["end_s"] == previous_s:
                rows[-1]["end_s"] = time_s
            else:
                rows.append({"time_s": previous_s, "end_s": time_s, "kind": kind})
        active[side] += change
        previous_s = time_s
    lane = pd.DataFrame(rows, columns=["time_s", "end_s", "kind"])
    lane["resource"] = "bus"
    lane["node"] = None
    lane["bytes"] = None
    return lane


def merged_bars(trace: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The bars, with same-lane same-kind bars less than a pixel apart merged when many; and whether any were.

    Merging keeps every busy interval visible and the colours true; only the per-node tooltip is
    lost for merged bars (their node reads "n nodes").
    """
    columns = ["time_s", "end_s", "resource", "node", "kind", "bytes"]
    bars = trace[[c for c in columns if c in trace.columns]].copy()
    for column in ("node", "bytes"):
        if column not in bars:
            bars[column] = None
    bars["node"] = bars["node"].map(lambda v: "" if pd.isna(v) else str(int(v)) if isinstance(v, float) else str(v))
    if len(bars) <= MAX_BARS:
        return bars.reset_index(drop=True), False
    tolerance_s = (bars["end_s"].max() - bars["time_s"].min()) / 1500
    bars = bars.sort_values(["resource", "kind", "time_s"])
    previous_end = bars.groupby(["resource", "kind"])["end_s"].cummax().shift()
    same_lane = (bars["resource"] == bars["resource"].shift()) & (bars["kind"] == bars["kind"].shift())
    new_bar = ~same_lane | (bars["time_s"] - previous_end > tolerance_s)
    merged = bars.groupby(new_bar.cumsum()).agg(
        time_s=("time_s", "min"),
        end_s=("end_s", "max"),
        resource=("resource", "first"),
        kind=("kind", "first"),
        node=("node", "count"),
        bytes=("bytes", "sum"),
    )
    merged["node"] = merged["node"].map(lambda n: f"{n} nodes")
    return merged.reset_index(drop=True), True


def ram_envelope(ram_curve: pd.DataFrame) -> pd.DataFrame:
    """The RAM curve, or when long, each time bin's lowest and highest points in time order.

    Keeping the extremes of every bin keeps the peak (and the dips) that the chart is read for.
    """
    curve = ram_curve[["time_s", "ram_bytes"]].sort_values("time_s", kind="stable")
    if len(curve) <= MAX_RAM_POINTS:
        return curve.reset_index(drop=True)
    bins = pd.cut(curve["time_s"], MAX_RAM_POINTS // 2, labels=False)
    grouped = curve.groupby(bins)["ram_bytes"]
    keep = pd.Index(grouped.idxmax()).union(pd.Index(grouped.idxmin()))
    return curve.loc[keep].sort_values("time_s", kind="stable").reset_index(drop=True)


def _drawn(bars: pd.DataFrame, time: Unit, end_s: float, width_px: float) -> pd.DataFrame:
    """Bars in display units, short events widened to MIN_BAR_PX and drawn above plain computes."""
    bars = bars.copy()
    bars["duration_s"] = bars["end_s"] - bars["time_s"]
    minimum_s = end_s * MIN_BAR_PX / width_px
    widen = ~bars["kind"].isin(("compute",)) & ~bars["kind"].astype(str).str.startswith("bus") & (bars["duration_s"] < minimum_s)
    shown_end_s = bars["end_s"].where(~widen, bars["time_s"] + minimum_s)
    bars["start"] = bars["time_s"] / time.size
    bars["end"] = shown_end_s / time.size
    bars["layer"] = (bars["kind"] != "compute").astype(int)
    return bars.sort_values("layer", kind="stable").reset_index(drop=True)


def _lane_rank(name: str) -> tuple[int, str]:
    base = name.split(" ")[0] if name.startswith("dma") else name
    return (_LANE_ORDER.index(base) if base in _LANE_ORDER else len(_LANE_ORDER), name)


def _deadline_layers(deadline_s: float, makespan_s: float, time: Unit) -> list:
    """The deadline as a dashed rule, and the time past it shaded when the run overran it."""
    rule = alt.Chart(pd.DataFrame({"start": [deadline_s / time.size], "label": [f"deadline {deadline_s:.6g} s"]}))
    layers = [rule.mark_rule(color=VIOLATION_COLOUR, strokeDash=[6, 3], strokeWidth=2).encode(x="start:Q", tooltip=["label:N"])]
    if makespan_s > deadline_s:
        over = pd.DataFrame(
            {
                "start": [deadline_s / time.size],
                "end": [makespan_s / time.size],
                "label": [f"{makespan_s - deadline_s:.4g} s past the deadline"],
            }
        )
        layers.insert(
            0,
            alt.Chart(over).mark_rect(color=VIOLATION_COLOUR, opacity=0.18).encode(x="start:Q", x2="end:Q", tooltip=["label:N"]),
        )
    return layers


def _ram_panel(ram: pd.DataFrame, budget_ram_bytes: int | None, time: Unit, space: Unit, end_s: float, width_px: float):
    """RAM in use over time (a step line), the budget as a dashed rule, RAM above it shaded."""
    curve = pd.DataFrame(
        {
            "start": ram["time_s"] / time.size,
            "ram": ram["ram_bytes"] / space.size,
            "time_s": ram["time_s"],
            "ram_bytes": ram["ram_bytes"],
        }
    )
    x = alt.X(
        "start:Q",
        title=f"time ({time.name})",
        scale=alt.Scale(domain=[0, end_s / time.size], nice=False),
        axis=alt.Axis(tickCount=16 if width_px >= 600 else 5),
    )
    line = (
        alt.Chart(curve)
        .mark_line(interpolate="step-after", color="#333333", strokeWidth=1.5)
        .encode(
            x=x,
            y=alt.Y("ram:Q", title=f"RAM in use ({space.name})"),
            tooltip=[
                alt.Tooltip("time_s:Q", title="time s", format=".6g"),
                alt.Tooltip("ram_bytes:Q", title="bytes", format=","),
            ],
        )
    )
    layers = [line]
    if budget_ram_bytes is not None:
        over = _over_budget(ram, budget_ram_bytes, time, space, end_s, width_px)
        if len(over):
            layers.insert(
                0,
                alt.Chart(over)
                .mark_rect(color=VIOLATION_COLOUR, opacity=0.45)
                .encode(x="start:Q", x2="end:Q", y="ram:Q", y2="budget:Q", tooltip=["label:N"]),
            )
        rule = pd.DataFrame(
            {
                "ram": [budget_ram_bytes / space.size],
                "label": [f"RAM budget {budget_ram_bytes:,} bytes"],
                "ram_bytes": [budget_ram_bytes],
            }
        )
        layers.append(
            alt.Chart(rule)
            .mark_rule(color=VIOLATION_COLOUR, strokeDash=[6, 3], strokeWidth=2)
            .encode(y="ram:Q", tooltip=["label:N"])
        )
    return alt.layer(*layers).properties(width=width_px, height=170)


def _over_budget(
    ram: pd.DataFrame, budget_ram_bytes: int, time: Unit, space: Unit, end_s: float, width_px: float
) -> pd.DataFrame:
    """The steps of the RAM curve above the budget, as rectangles between the budget and the curve."""
    starts = ram["time_s"].to_numpy()
    ends = [*starts[1:], end_s]
    rows = [
        {
            "start": s / time.size,
            "end": max(e, s + end_s * MIN_BAR_PX / width_px) / time.size,
            "ram": v / space.size,
            "budget": budget_ram_bytes / space.size,
            "label": f"{v - budget_ram_bytes:,.0f} bytes over the budget",
        }
        for s, e, v in zip(starts, ends, ram["ram_bytes"])
        if v > budget_ram_bytes
    ]
    return pd.DataFrame(rows, columns=["start", "end", "ram", "budget", "label"])


def _subtitle(sim_result, budget_ram_bytes, deadline_s, coarsened: bool, time: Unit, space: Unit) -> str:
    ram = sim_result.ram_curve["ram_bytes"]
    parts = [f"makespan {sim_result.makespan_s / time.size:.4g} {time.name}"]
    if deadline_s is not None:
        verdict = "over" if sim_result.makespan_s > deadline_s else "within"
        parts[-1] += f", {verdict} the deadline of {deadline_s / time.size:.4g} {time.name} (red dashes)"
    waits = sim_result.waits_s
    barrier = waits.get("barrier", 0.0)
    parts.append(
        f"stalls (waits for an input or for RAM, which the stage model lacks) {sim_result.stall_s / time.size:.4g} "
        f"{time.name}; waits at stage ends for transfers (the stage model counts them) {barrier / time.size:.4g} {time.name}"
    )
    if len(ram):
        peak = f"peak RAM {ram.max() / space.size:.4g} {space.name}"
        if budget_ram_bytes is not None:
            verdict = "over" if ram.max() > budget_ram_bytes else "within"
            peak += f", {verdict} the budget of {budget_ram_bytes / space.size:.4g} {space.name} (red dashes)"
        parts.append(peak)
    parts.append(f"events shorter than {MIN_BAR_PX:g} px are drawn {MIN_BAR_PX:g} px wide")
    if coarsened:
        parts.append("bars closer than a pixel are merged")
    return "; ".join(parts) + "."
