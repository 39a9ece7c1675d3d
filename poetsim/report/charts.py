"""Charts of one run: the schedule as a stage-by-node grid, the simulated timeline, and their page.

The grid is POET's Figure 2 (Patil et al., ICML 2022): for every stage (x) and node (y), what
happens to that node's output. It is derived from the instruction list alone, by the semantics in
the module docstring of `poetsim.schedule.model`, so it shows what a device would do, not what the
optimiser's variables claim. Nodes are named on the axis, the loss and the line between the
forward and the backward pass are marked, and transfers carry a marker as well as a colour, so
page-ins and page-outs are told apart without colour. The timeline is `poetsim.report.timeline`.

Altair embeds its data in every file, so data is aggregated before charting: the grid as runs
of equal cells, the timeline as merged bars and a peak-preserving RAM envelope.
"""

import html
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import altair as alt
import pandas as pd

from poetsim.errors import UserInputError
from poetsim.folders import RunFolder
from poetsim.graphs.graph import TrainingGraph
from poetsim.report import page
from poetsim.report.framing import footer_text, framed, save_images
from poetsim.report.timeline import WIDTH_PX as TIMELINE_WIDTH_PX
from poetsim.report.timeline import timeline_chart
from poetsim.schedule.checker import check_made_for
from poetsim.schedule.model import Compute, Free, PageIn, PageOut, Schedule

if TYPE_CHECKING:  # for annotations only: importing them would pull simpy and the solver stack into reporting
    from poetsim.pipeline import Run

__all__ = ["STATES", "footer_text", "framed", "save_chart", "save_run_charts", "schedule_chart", "stage_states", "timeline_chart"]

#: What can happen to a node's output in a stage, in order of precedence: a cell shows the first
#: that applies (a node recomputed in a stage where it was also resident at the start is shown
#: as recomputed).
STATES = ("compute", "recompute", "page-in", "page-out", "in RAM", "on storage", "nothing")
#: Okabe-Ito hues for the actions, light tints for the resting states; compute and recompute as
#: in the timeline. Page-in and page-out also differ in lightness and carry their own marker.
STATE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#A6CEE3", "#E8D9A8", "#F4F4F4")
#: Markers on transfer cells: down into RAM, up out of it.
TRANSFER_SHAPES = {"page-in": "triangle-down", "page-out": "triangle-up"}
_ROW_PX = 12
_MAX_GRID_PX = 1500


def stage_states(schedule: Schedule, graph: TrainingGraph) -> pd.DataFrame:
    """What happens to each node's output in each stage: one row per (stage, node), all T x T.

    Columns: stage, node, state (one of `STATES`). "in RAM" means resident at the start of the
    stage and not computed or paged in it; "on storage" means a copy is on storage and none in
    RAM. A page-in makes its node resident from the next stage, a page-out puts it on storage
    from the next stage (the semantics of `poetsim.schedule.model`). A schedule made for another
    graph is refused (`check_made_for`); beyond that it is assumed valid (the checker's job), and
    this only reads it.
    """
    check_made_for(schedule, graph)
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
        node=("node", "first"), state=("state", "first"), first_stage=("stage", "min"), last_stage=("stage", "max")
    )
    runs["end_stage"] = runs["last_stage"] + 1
    runs["state"] = runs["state"].astype(str)
    return runs.reset_index(drop=True)


def schedule_chart(
    schedule: Schedule, graph: TrainingGraph, title: str, footer: str, width_px: float | None = None, wrap_chars: int = 0
) -> alt.VConcatChart:
    """The schedule as POET's Figure 2: stages across, nodes down by name, each cell coloured by state.

    `width_px` fits the whole chart (node names, grid and legend) into that many pixels, the legend
    below the grid and the names shorter when it is narrow; by default the grid takes 8 px a stage.

    Node 0 is at the top, so the forward pass runs down the diagonal and the backward pass's
    reuse of early activations shows as long "in RAM", "on storage" or recompute rows. A rule
    marks where the backward pass begins (after the loss, in stages and in nodes).
    """
    runs = _state_runs(stage_states(schedule, graph))
    # "nothing" is the grid's background, drawn once, not as half the cells' runs.
    runs = runs[runs["state"] != "nothing"].reset_index(drop=True)
    labels = [f"{node.id} {node.name}" for node in graph.nodes]
    runs["label"] = [labels[i] for i in runs["node"]]
    height = min(_MAX_GRID_PX, max(240, _ROW_PX * len(graph)))
    narrow = width_px is not None and width_px < 600
    label_px = 90 if narrow else 220
    if width_px is None:
        width = min(1000, max(360, 8 * len(schedule.stages)))
    else:
        width = int(width_px - label_px - (20 if narrow else 200))
    legend_at: Literal["bottom", "right"] = "bottom" if narrow else "right"
    x_scale = alt.Scale(domain=[0, len(schedule.stages)], nice=False, zero=True)
    y = alt.Y(
        "label:N",
        sort=labels,
        title=None,
        scale=alt.Scale(domain=labels),
        axis=alt.Axis(labelFontSize=11, labelLimit=label_px, labelOverlap="parity", ticks=False),
    )
    base = alt.Chart(runs)
    grid = base.mark_rect(stroke=None).encode(
        x=alt.X("first_stage:Q", scale=x_scale, title="stage (stage t first computes node t)"),
        x2="end_stage:Q",
        y=y,
        color=alt.Color(
            "state:N",
            scale=alt.Scale(domain=list(STATES), range=list(STATE_COLOURS)),
            legend=alt.Legend(title="state of the node's output", orient=legend_at, columns=2 if narrow else 1),
        ),
        tooltip=[
            alt.Tooltip("label:N", title="node"),
            "state:N",
            alt.Tooltip("first_stage:Q", title="from stage"),
            alt.Tooltip("last_stage:Q", title="to stage"),
        ],
    )
    background = (
        alt.Chart(pd.DataFrame({"state": ["nothing"]}))
        .mark_rect(color=STATE_COLOURS[STATES.index("nothing")])
        .encode(x=alt.value(0), x2=alt.value(width), y=alt.value(0), y2=alt.value(height))
    )
    layers = [background, grid]
    transfers = runs[runs["state"].isin(list(TRANSFER_SHAPES))].copy()
    if len(transfers):
        transfers["middle"] = (transfers["first_stage"] + transfers["end_stage"]) / 2
        layers.append(
            alt.Chart(transfers)
            .mark_point(filled=True, size=28, color="black", opacity=0.9)
            .encode(
                x=alt.X("middle:Q", scale=x_scale),
                y=y,
                shape=alt.Shape(
                    "state:N",
                    scale=alt.Scale(domain=list(TRANSFER_SHAPES), range=list(TRANSFER_SHAPES.values())),
                    legend=alt.Legend(title="transfer", orient=legend_at),
                ),
                tooltip=[alt.Tooltip("label:N", title="node"), "state:N", alt.Tooltip("first_stage:Q", title="stage")],
            )
        )
    loss = _loss_node(graph)
    if loss is not None and loss + 1 < len(graph):
        divider = pd.DataFrame(
            {"stage": [loss + 1], "label": [labels[loss + 1]], "text": ["backward pass from here (after the loss)"]}
        )
        marks = alt.Chart(divider)
        layers += [
            marks.mark_rule(color="black", strokeWidth=1.5, strokeDash=[5, 3]).encode(x=alt.X("stage:Q", scale=x_scale)),
            marks.mark_rule(color="black", strokeWidth=1.5, strokeDash=[5, 3]).encode(
                y=alt.Y("label:N", sort=labels, scale=alt.Scale(domain=labels), bandPosition=0)
            ),
            marks.mark_text(align="left", dx=4, dy=-6, fontSize=11, color="black").encode(
                x=alt.X("stage:Q", scale=x_scale), y=alt.value(0), text="text:N"
            ),
        ]
    counts = schedule.counts()
    where = f"loss is node {loss}; " if loss is not None else ""
    subtitle = (
        f"{graph.name}: {len(graph)} nodes; {where}{_count(counts['compute'] - len(graph), 'recomputation')}, "
        f"{_count(counts['page_out'], 'page-out')} (up triangles), {_count(counts['page_in'], 'page-in')} "
        f"(down triangles); {schedule.timing.value} timing"
    )
    return framed(alt.layer(*layers).properties(width=width, height=height), title, footer, subtitle, wrap_chars)


def grid_width(spec: dict) -> float:
    """The plot width of a `schedule_chart` spec (the grid's, without names and legend), in px."""
    return float(spec["vconcat"][0]["width"])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _loss_node(graph: TrainingGraph) -> int | None:
    """The loss: the node whose op says so, else the last forward node (graphs put it there)."""
    named = [node.id for node in graph.nodes if node.op == "loss"]
    if named:
        return named[-1]
    forward = [node.id for node in graph.nodes if not node.backward]
    return forward[-1] if forward and len(forward) < len(graph) else None


def save_chart(chart: alt.TopLevelMixin, directory: Path, stem: str, title: str | None = None) -> list[Path]:
    """Write `stem.html`, `stem.png` and `stem.svg`; return the three paths.

    The page has the Vega JavaScript inline, so it opens offline; the PNG is at twice the pixel
    density.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{stem}.html"
    spec = chart.to_dict()
    body = f"<div class='chart' id='chart-{stem}'></div>"
    target.write_text(page.page(title or stem, body, {f"chart-{stem}": spec}), encoding="utf-8")
    return [target, *save_images(spec, directory, stem)]


def save_run_charts(run: "Run", directory: Path, title: str) -> list[Path]:
    """The page of one run (`run.html`): its figures, the simulated timeline and the schedule grid.

    With it schedule.png/svg and, if the run was simulated, timeline.png/svg. Returns the paths.

    One page holds both charts, so the Vega JavaScript is in it once. A run without a schedule
    (infeasible, failed) has nothing to draw: UserInputError.
    """
    if run.schedule is None:
        raise UserInputError(f"run '{run.strategy}' has no schedule to draw (status {run.status}: {run.message})")
    problem = run.problem
    scenario = (
        f"{title} ({problem.graph.name} on {problem.platform.name}, RAM budget "
        f"{problem.budgets.ram_bytes:,} bytes, runtime budget {problem.runtime_x:g}x)"
    )
    footer = footer_text(scenario, [problem.timing.value])
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    # The files carry the footer (they travel alone); the page states it once, at its foot.
    for stem, chart in _run_charts(run, title, footer).items():
        paths += save_images(chart.to_dict(), directory, stem)
    specs = {stem: chart.to_dict(validate=False) for stem, chart in _run_charts(run, title, "").items()}
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='lede'>{html.escape(scenario)}; {html.escape(problem.timing.value)} timing; "
        f"status {html.escape(str(run.status))}.</p>",
        _figures_table(run),
    ]
    body += [f"<div class='chart' id='chart-{stem}'></div>" for stem in specs]
    body.append(f"<p class='footer'>{html.escape(footer)}</p>")
    target = RunFolder(directory).run_html
    page_title = f"poetsim run: {title} ({problem.graph.name} on {problem.platform.name})"
    # On a narrow window the page narrows both charts (`page.fitted`), so nothing scrolls sideways.
    fits = {"timeline": (TIMELINE_WIDTH_PX, 60), "schedule": (grid_width(specs["schedule"]), 110)}
    fitted = {f"chart-{s}": page.fitted(spec, *fits[s], below_px=0.75 * TIMELINE_WIDTH_PX) for s, spec in specs.items()}
    target.write_text(page.page(page_title, "\n".join(body), fitted), encoding="utf-8")
    return [target, *paths]


def _run_charts(run: "Run", title: str, footer: str) -> dict[str, alt.VConcatChart]:
    """The timeline (if the run was simulated) and the schedule grid of a run, by file stem."""
    problem = run.problem
    assert run.schedule is not None  # `save_run_charts` refuses a run without one
    charts = {}
    if run.simulated is not None:
        charts["timeline"] = timeline_chart(
            run.simulated, problem.budgets.ram_bytes, f"{title}: simulated timeline", footer, deadline_s=problem.budgets.runtime_s
        )
    charts["schedule"] = schedule_chart(run.schedule, problem.graph, f"{title}: schedule", footer)
    return charts


def _figures_table(run: "Run") -> str:
    """Prediction beside simulation, with the budgets: the numbers the charts are read against."""
    predicted, simulated, budgets = run.checked, run.simulated, run.problem.budgets
    if predicted is None:
        return ""
    rows = [
        ("energy (J)", predicted.total_j, simulated.figures.total_j if simulated else None, None),
        ("makespan (s)", predicted.runtime_s, simulated.makespan_s if simulated else None, budgets.runtime_s),
        (
            "peak RAM (bytes)",
            predicted.peak_ram_bytes,
            simulated.figures.peak_ram_bytes if simulated else None,
            budgets.ram_bytes,
        ),
    ]
    head = "<tr><th class='text'>figure</th><th>predicted</th><th>simulated</th><th>difference</th><th>budget</th></tr>"
    cells = []
    for name, p, s, b in rows:
        difference = f"{100 * (s / p - 1):+.3f} %" if s is not None and p else ""
        over = s is not None and b is not None and s > b
        cells.append(
            f"<tr><td class='text'>{name}</td><td>{_number(p)}</td><td>{_number(s)}</td><td>{difference}</td>"
            f"<td{' class=over' if over else ''}>{_number(b)}{' exceeded' if over else ''}</td></tr>"
        )
    return f"<div class='scroll'><table>{head}{''.join(cells)}</table></div>"


def _number(value) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) >= 1000 else f"{value:.6g}"
