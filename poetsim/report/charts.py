"""Charts of one run: the schedule as a stage-by-node grid and the simulated timeline.

The grid is POET's Figure 2 (Patil et al., ICML 2022): for every stage (x) and node (y), what
happens to that node's output. It is derived from the instruction list alone, by the semantics in
the module docstring of `poetsim.schedule`, so it shows what a device would do, not what the
optimiser's variables claim. The timeline shows the simulator's compute and DMA lanes above the
RAM curve, with the budget as a rule, so a stall or a RAM peak can be traced to its instruction.

Altair embeds its data in every file, so data is aggregated before charting: the grid as runs
of equal cells, the timeline as merged bars and a peak-preserving RAM envelope.
"""

import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from poetsim.assumptions import ASSUMPTIONS
from poetsim.errors import ScheduleError, UserInputError
from poetsim.graph import TrainingGraph
from poetsim.schedule import Compute, Free, PageIn, PageOut, Schedule

if TYPE_CHECKING:  # for annotations only: importing them would pull simpy and the solver stack into reporting
    from poetsim.pipeline import Run
    from poetsim.simulator import SimulationResult

#: What can happen to a node's output in a stage, in order of precedence: a cell shows the first
#: that applies (a node recomputed in a stage where it was also resident at the start is shown
#: as recomputed).
STATES = ("compute", "recompute", "page-in", "page-out", "in RAM", "on storage", "nothing")
_STATE_COLOURS = ("#1f4e9c", "#f28e2b", "#2ca02c", "#d62728", "#9ecae1", "#c9b38f", "#f4f4f4")

#: Kinds of timeline bars; compute and recompute share the grid's colours so both charts read alike.
KINDS = ("compute", "recompute", "page-in", "page-out", "stall")
_KIND_COLOURS = ("#1f4e9c", "#f28e2b", "#2ca02c", "#d62728", "#7f7f7f")


# Above these sizes the timeline is coarsened to about a pixel's resolution: a chart embeds its
# data, and a 100k-row trace would make a 20 MB page that no browser draws quickly.
_MAX_BARS = 3000
_MAX_RAM_POINTS = 2000
_FOOTER_WIDTH_CHARS = 120


def footer_text(scenario: str, timings: Iterable[str]) -> str:
    """The footer every chart carries: scenario, assumptions and timing model(s).

    A chart copied out of its report must still say what it assumes; the timing model matters
    most, since `compute-only` hides paging time and static energy that `overlap` counts.
    """
    # Timing members print as "Timing.OVERLAP"; their value is the name users write.
    names = sorted({str(getattr(t, "value", t)) for t in timings if isinstance(t, str) and t}) or ["unknown"]
    return f"Scenario: {scenario}. {ASSUMPTIONS}; timing: {', '.join(names)}."


def framed(chart: alt.TopLevelMixin, title: str, footer: str, subtitle: str | None = None) -> alt.VConcatChart:
    """`chart` with a title (and optional subtitle) on top and the footer below, left-aligned.

    A one-chart vertical concatenation is the Vega-Lite way to have both a title and a
    bottom-anchored footer on any chart, faceted and layered ones included.
    """
    head = alt.TitleParams(text=title, subtitle=_lines(subtitle) if subtitle else "", anchor="start", fontSize=14)
    foot = alt.TitleParams(text=_lines(footer), orient="bottom", anchor="start", fontSize=10,
                           fontWeight="normal", color="#555555")
    return alt.vconcat(chart.properties(title=head), title=foot)


def _lines(text: str) -> list[str]:
    return textwrap.wrap(text, _FOOTER_WIDTH_CHARS) or [""]


def stage_states(schedule: Schedule, graph: TrainingGraph) -> pd.DataFrame:
    """What happens to each node's output in each stage: one row per (stage, node), all T x T.

    Columns: stage, node, state (one of `STATES`). "in RAM" means resident at the start of the
    stage and not computed or paged in it; "on storage" means a copy is on storage and none in
    RAM. A page-in makes its node resident from the next stage, a page-out puts it on storage
    from the next stage (the semantics of `poetsim.schedule`). The schedule is assumed valid (the
    checker's job); this only reads it.
    """
    if schedule.num_nodes != len(graph):
        raise ScheduleError(f"the schedule is for {schedule.num_nodes} nodes but graph '{graph.name}' has {len(graph)}")
    num_nodes = len(graph)
    resident: set[int] = set()
    on_storage: set[int] = set()
    stages, nodes, states = [], [], []
    for t, instructions in enumerate(schedule.stages):
        actions = _stage_actions(t, instructions)
        for i in range(num_nodes):
            stages.append(t)
            nodes.append(i)
            states.append(actions.get(i) or ("in RAM" if i in resident else "on storage" if i in on_storage else "nothing"))
        arriving: list[int] = []
        for ins in instructions:
            if isinstance(ins, Compute):
                resident.add(ins.node)
            elif isinstance(ins, Free):
                resident.discard(ins.node)
            elif isinstance(ins, PageIn):
                arriving.append(ins.node)
            elif isinstance(ins, PageOut):
                on_storage.add(ins.node)  # readable by page-ins of later stages only; none in this one reads it
        resident.update(arriving)
    return pd.DataFrame({"stage": stages, "node": nodes, "state": pd.Categorical(states, categories=STATES)})


def _stage_actions(t: int, instructions) -> dict[int, str]:
    """The highest-precedence action on each node in stage t."""
    rank = {state: r for r, state in enumerate(STATES)}
    actions: dict[int, str] = {}
    for ins in instructions:
        if isinstance(ins, Compute):
            state = "compute" if ins.node == t else "recompute"
        elif isinstance(ins, PageIn):
            state = "page-in"
        elif isinstance(ins, PageOut):
            state = "page-out"
        else:
            continue
        if ins.node not in actions or rank[state] < rank[actions[ins.node]]:
            actions[ins.node] = state
    return actions


def _state_runs(states: pd.DataFrame) -> pd.DataFrame:
    """Consecutive stages in which a node keeps the same state, as one row each.

    A T x T grid of 350 nodes is 122k cells; its runs are a few per node, which is what the
    chart embeds.
    """
    cells = states.sort_values(["node", "stage"])
    starts = (cells["node"].diff() != 0) | (cells["state"] != cells["state"].shift())
    runs = cells.groupby(starts.cumsum(), observed=True).agg(
        node=("node", "first"), state=("state", "first"), first_stage=("stage", "min"), last_stage=("stage", "max"))
    runs["end_stage"] = runs["last_stage"] + 1
    runs["node_end"] = runs["node"] + 1
    runs["state"] = runs["state"].astype(str)
    return runs.reset_index(drop=True)


def schedule_chart(schedule: Schedule, graph: TrainingGraph, title: str, footer: str) -> alt.VConcatChart:
    """The schedule as POET's Figure 2: stages across, nodes down, each cell coloured by state.

    Node 0 is at the top, so the forward pass runs down the diagonal and the backward pass's
    reuse of early activations shows as long "in RAM", "on storage" or recompute rows.
    """
    runs = _state_runs(stage_states(schedule, graph))
    runs["name"] = [graph.nodes[i].name for i in runs["node"]]
    side_px = min(720, max(240, 12 * len(graph)))
    # The scale domains are pinned to the grid so that a half-empty last stage still shows as a cell.
    x_scale = alt.Scale(domain=[0, len(schedule.stages)], nice=False, zero=True)
    y_scale = alt.Scale(domain=[0, len(graph)], nice=False, reverse=True)
    grid = alt.Chart(runs).mark_rect(stroke=None).encode(
        x=alt.X("first_stage:Q", scale=x_scale, title="stage (stage t first computes node t)"),
        x2="end_stage:Q",
        y=alt.Y("node:Q", scale=y_scale, title="node"),
        y2="node_end:Q",
        color=alt.Color("state:N", scale=alt.Scale(domain=list(STATES), range=list(_STATE_COLOURS)),
                        legend=alt.Legend(title="state of the node's output")),
        tooltip=["node:Q", "name:N", "state:N", alt.Tooltip("first_stage:Q", title="from stage"),
                 alt.Tooltip("last_stage:Q", title="to stage")],
    ).properties(width=side_px, height=side_px)
    counts = schedule.counts()
    subtitle = (f"{graph.name}: {len(graph)} nodes; {counts['compute'] - len(graph)} recomputations, "
                f"{counts['page_out']} page-outs, {counts['page_in']} page-ins ({schedule.timing.value} timing)")
    return framed(grid, title, footer, subtitle)


def timeline_chart(sim_result: "SimulationResult", budget_ram_bytes: int | None, title: str, footer: str) -> alt.VConcatChart:
    """The simulated iteration: compute and DMA lanes over time, and the RAM curve beneath.

    Built from `sim_result.trace` (time_s, end_s, resource, node, kind, bytes; see
    `poetsim.simulator.TRACE_COLUMNS`) and `sim_result.ram_curve` (time_s, ram_bytes). The
    instant alloc and free events are left to the RAM curve; DMA transfers that overlap get one
    lane per channel in use. The two panels share the time axis; the RAM budget, when given, is a
    dashed rule, so a peak over it is plain to see.
    """
    trace, coarsened = _merged_bars(_lanes(sim_result.trace))
    ram = _ram_envelope(sim_result.ram_curve)
    lanes = sorted(trace["resource"].astype(str).unique())
    bars = alt.Chart(trace).mark_bar(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("time_s:Q", title="time (s)"),
        x2="end_s:Q",
        y=alt.Y("resource:N", sort=lanes, title=None),
        color=alt.Color("kind:N", scale=alt.Scale(domain=list(KINDS), range=list(_KIND_COLOURS)),
                        legend=alt.Legend(title="activity")),
        tooltip=["resource:N", "kind:N", "node:N", alt.Tooltip("time_s:Q", format=".6g"),
                 alt.Tooltip("end_s:Q", format=".6g"), alt.Tooltip("bytes:Q", format=",")],
    ).properties(width=720, height=max(60, 28 * len(lanes)))
    curve = alt.Chart(ram).mark_line(interpolate="step-after").encode(
        x=alt.X("time_s:Q", title="time (s)"),
        y=alt.Y("ram_bytes:Q", title="RAM in use (bytes)", axis=alt.Axis(format="~s")),
        tooltip=[alt.Tooltip("time_s:Q", format=".6g"), alt.Tooltip("ram_bytes:Q", format=",")],
    )
    layers = [curve]
    if budget_ram_bytes is not None:
        rule = pd.DataFrame({"ram_bytes": [budget_ram_bytes], "label": [f"RAM budget {budget_ram_bytes:,} bytes"]})
        layers.append(alt.Chart(rule).mark_rule(color="#d62728", strokeDash=[6, 4]).encode(
            y="ram_bytes:Q", tooltip=["label:N"]))
    ram_panel = alt.layer(*layers).properties(width=720, height=180)
    subtitle = _timeline_subtitle(sim_result, budget_ram_bytes, coarsened)
    body = alt.vconcat(bars, ram_panel).resolve_scale(x="shared")
    return framed(body, title, footer, subtitle)


def _lanes(trace: pd.DataFrame) -> pd.DataFrame:
    """The trace's bars (no alloc or free events), kinds spelt as in the legend, one lane per DMA channel.

    Transfers are put on the first channel free at their start (greedy interval partitioning),
    so overlapping transfers are side by side instead of hiding each other.
    """
    bars = trace[~trace["kind"].isin(("alloc", "free"))].copy()
    bars["kind"] = bars["kind"].astype(str).str.replace("_", "-")
    bars["resource"] = bars["resource"].astype(str).replace({"ram": "waiting for RAM"})
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
    return bars


def _timeline_subtitle(sim_result: "SimulationResult", budget_ram_bytes: int | None, coarsened: bool) -> str:
    ram = sim_result.ram_curve["ram_bytes"]
    parts = [f"peak RAM {ram.max():,.0f} bytes" if len(ram) else "no RAM recorded"]
    if budget_ram_bytes is not None:
        parts.append(f"budget {budget_ram_bytes:,} bytes (dashed)")
    parts.append(f"makespan {sim_result.makespan_s:.6g} s, stalls {sim_result.stall_s:.6g} s")
    if coarsened:
        parts.append("bars closer than a pixel are merged")
    return "; ".join(parts)


def _merged_bars(trace: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The trace's bars, with same-lane same-kind bars less than a pixel apart merged when many;
    and whether any were merged.

    Merging keeps every busy interval visible and the colours true; only the per-node tooltip is
    lost for merged bars (their node reads "n nodes").
    """
    columns = ["time_s", "end_s", "resource", "node", "kind", "bytes"]
    bars = trace[[c for c in columns if c in trace.columns]].copy()
    for column in ("node", "bytes"):
        if column not in bars:
            bars[column] = None
    bars["node"] = bars["node"].map(lambda v: "" if pd.isna(v) else str(v))
    if len(bars) <= _MAX_BARS:
        return bars, False
    tolerance_s = (bars["end_s"].max() - bars["time_s"].min()) / 1500
    bars = bars.sort_values(["resource", "kind", "time_s"])
    previous_end = bars.groupby(["resource", "kind"])["end_s"].cummax().shift()
    same_lane = (bars["resource"] == bars["resource"].shift()) & (bars["kind"] == bars["kind"].shift())
    new_bar = ~same_lane | (bars["time_s"] - previous_end > tolerance_s)
    merged = bars.groupby(new_bar.cumsum()).agg(
        time_s=("time_s", "min"), end_s=("end_s", "max"), resource=("resource", "first"), kind=("kind", "first"),
        node=("node", "count"), bytes=("bytes", "sum"))
    merged["node"] = merged["node"].map(lambda n: f"{n} nodes")
    return merged.reset_index(drop=True), True


def _ram_envelope(ram_curve: pd.DataFrame) -> pd.DataFrame:
    """The RAM curve, or when long, each time bin's lowest and highest points in time order.

    Keeping the extremes of every bin keeps the peak (and the dips) that the chart is read for.
    """
    curve = ram_curve[["time_s", "ram_bytes"]].sort_values("time_s", kind="stable")
    if len(curve) <= _MAX_RAM_POINTS:
        return curve.reset_index(drop=True)
    bins = pd.cut(curve["time_s"], _MAX_RAM_POINTS // 2, labels=False)
    grouped = curve.groupby(bins)["ram_bytes"]
    keep = pd.Index(grouped.idxmax()).union(pd.Index(grouped.idxmin()))
    return curve.loc[keep].sort_values("time_s", kind="stable").reset_index(drop=True)


def save_chart(chart: alt.TopLevelMixin, directory: Path, stem: str) -> list[Path]:
    """Write `stem.html` (Vega JavaScript inline, opens offline) and `stem.png`; return both paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    html, png = directory / f"{stem}.html", directory / f"{stem}.png"
    chart.save(str(html), inline=True)
    chart.save(str(png))
    return [html, png]


def save_run_charts(run: "Run", directory: Path, title: str) -> list[Path]:
    """The schedule grid and, if the run was simulated, the timeline of a `pipeline.Run`.

    Writes schedule.html/png and timeline.html/png into `directory` and returns the paths.
    A run without a schedule (infeasible, failed) has nothing to draw: UserInputError.
    """
    if run.schedule is None:
        raise UserInputError(f"run '{run.strategy}' has no schedule to draw (status {run.status}: {run.message})")
    problem = run.problem
    scenario = (f"{title} ({problem.graph.name} on {problem.platform.name}, RAM budget "
                f"{problem.budgets.ram_bytes:,} bytes, runtime budget {problem.runtime_x:g}x)")
    footer = footer_text(scenario, [problem.timing.value])
    paths = save_chart(schedule_chart(run.schedule, problem.graph, f"{title}: schedule", footer), directory, "schedule")
    if run.simulated is not None:
        chart = timeline_chart(run.simulated, problem.budgets.ram_bytes, f"{title}: simulated timeline", footer)
        paths += save_chart(chart, directory, "timeline")
    return paths
