"""The schedule view of a study: the points that matter, replayed, on one page beside report.html.

For each group (platform, runtime budget, model, timing) and strategy, the tightest RAM budget it
meets (`poetsim.report.reach.tightest`) is the schedule worth seeing: how the strategy fits where
the others cannot. Each such point's saved schedule (`<sweep>/points/<slug>/schedule.json`) is
checked against its problem and replayed by the simulator (`pipeline.load_run`) when the report is
built, so the view shows what the current simulator does with it. `schedules.html` holds every
chosen point with the Vega JavaScript once; it shows one point at a time, chosen by the link that
led there (`schedules.html#<id>`), and draws a point's charts only when it is shown. Points whose
schedule was not kept are named on the page with the reason, never drawn from anything else.
"""

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from poetsim.assumptions import SIMULATOR_ASSUMPTIONS
from poetsim.errors import PoetsimError
from poetsim.report import page
from poetsim.report.charts import grid_width, schedule_chart
from poetsim.report.finding import integrated_strategy, where_text
from poetsim.report.palette import strategy_order
from poetsim.report.reach import GROUP, reach_table, tightest
from poetsim.report.timeline import timeline_chart

PAGE = "schedules.html"
#: The room a point's charts are drawn for (a desktop), the timeline's plot width in it, and the
#: width below which the page narrows them (a phone or a narrow window), in px.
WIDE_PX = 1100
TIMELINE_PX = WIDE_PX - 180
NARROW_BELOW_PX = 0.75 * WIDE_PX
#: At most this many points are drawn, and no more once their chart data pass MAX_DATA_BYTES (the
#: integrated strategy's first): each adds its trace and grid to the page.
MAX_POINTS = 40
MAX_DATA_BYTES = 2_500_000

_SCRIPT = """
const drawn = new Set();
function showPoint() {
  const sections = Array.from(document.querySelectorAll("section.point"));
  if (!sections.length) return;
  const wanted = location.hash.slice(1);
  const shown = sections.find(s => s.id === wanted) || sections[0];
  for (const section of sections) section.hidden = section !== shown;
  for (const link of document.querySelectorAll("table.reach a"))
    link.classList.toggle("current", link.getAttribute("href") === "#" + shown.id);
  if (drawn.has(shown.id)) return;
  drawn.add(shown.id);
  drawGroup(shown.id);
}
window.addEventListener("hashchange", showPoint);
showPoint();
"""
_STYLE = "table.reach a.current { font-weight: 700; color: #000; } section.point h2 { margin-top: 10px; }"


@dataclass
class ScheduleViews:
    """What the schedule page holds: the link of each drawn point, and a note on what is missing."""

    links: dict[str, str] = field(default_factory=dict)
    note: str = ""


def write_schedule_views(frame: pd.DataFrame, sweep_dir: Path | None, directory: Path, title: str, footer: str) -> ScheduleViews:
    """Replay the chosen points of `frame` from `sweep_dir` and write `directory/schedules.html`.

    `frame` is the report's prepared frame. Returns the links to the points drawn and a note on
    what could not be drawn.

    Nothing is written when no point can be drawn (the note says why).
    """
    chosen = _chosen(frame)
    if chosen.empty:
        return ScheduleViews(note="No strategy has a schedule, so there is no schedule to show.")
    if sweep_dir is None or not (Path(sweep_dir) / "scenario.yaml").exists():
        return ScheduleViews(note="The results folder keeps no scenario.yaml, so the schedules cannot be replayed here.")
    # The simulator and the problem builder are imported only here: a report without schedules needs neither.
    from poetsim.inputs.scenario import load_scenario
    from poetsim.pipeline import load_run, problem_for_point
    from poetsim.sweeps.runner import POINTS_DIR, point_slug

    try:
        scenario = load_scenario(Path(sweep_dir) / "scenario.yaml")
    except PoetsimError as error:
        return ScheduleViews(note=f"The sweep's scenario cannot be read here, so no schedule is replayed ({error}).")
    points = {point.key: point for point in scenario.points()}
    views = ScheduleViews()
    sections, specs, missing, left = [], {}, [], 0
    data: dict[str, int] = {}  # the page's datasets and their sizes: shared ones count once
    for number, (_, row) in enumerate(chosen.iterrows()):
        name = f"{row['strategy']} at {where_text(row, frame)}"
        if sum(data.values()) > MAX_DATA_BYTES:
            left += 1
            continue
        point = points.get(str(row.get("point_key")))
        if point is None:
            missing.append(f"{name}: no point of the scenario has its key (a model or platform file changed since the sweep?)")
            continue
        path = Path(sweep_dir) / POINTS_DIR / point_slug(point) / "schedule.json"
        if not path.exists():
            missing.append(f"{name}: the sweep did not keep its schedule")
            continue
        try:
            run = load_run(problem_for_point(scenario, point), path)
        except PoetsimError as error:
            missing.append(f"{name}: {error}")
            continue
        anchor = f"p{number}"
        views.links[str(row["point_key"])] = f"{PAGE}#{anchor}"
        sections.append((anchor, name, _section(anchor, name, row, run)))
        specs[anchor] = _specs(anchor, name, run)
        _count_datasets(data, specs[anchor])
    views.note = _note(missing, left)
    if sections:
        nav = reach_table(frame, {key: "#" + href.split("#")[1] for key, href in views.links.items()})
        _write(directory, title, footer, nav, sections, specs, views.note)
    return views


def _count_datasets(data: dict[str, int], specs: dict) -> None:
    """Add the datasets of a point's charts to `data` with their sizes in JSON; a shared one counts once."""
    for entry in specs.values():
        for key, rows in entry["spec"].get("datasets", {}).items():
            data.setdefault(key, len(json.dumps(rows, default=str)))


def _note(missing: list[str], left: int) -> str:
    """The page's note on the chosen points it does not draw: those without a schedule, and `left` more."""
    notes = []
    if missing:
        notes.append(f"{len(missing)} chosen point(s) have no schedule view: " + "; ".join(missing) + ".")
    if left:
        notes.append(
            f"{left} more point(s) are not drawn, to keep this page small; their schedules are in the sweep's "
            "points/ folder (`poetsim simulate` draws any of them)."
        )
    return " ".join(notes)


def _chosen(frame: pd.DataFrame) -> pd.DataFrame:
    """The tightest point of each group and strategy; at most MAX_POINTS.

    The integrated strategy's come first, then the others in registry order, each by group.
    """
    best = tightest(frame)
    if best.empty:
        return best
    names = strategy_order(best["strategy"])
    focus = integrated_strategy()
    if focus in names:
        names.remove(focus)
        names.insert(0, focus)
    order = {name: rank for rank, name in enumerate(names)}
    best = best.assign(rank_=best["strategy"].map(order)).sort_values(["rank_", *GROUP], na_position="last", kind="stable")
    return best.head(MAX_POINTS).drop(columns="rank_")


def _specs(anchor: str, name: str, run) -> dict:
    """The point's charts, by element id, without the footer (the page has it).

    Each is drawn once, wide, and narrowed by the page on a phone (`page.fitted`).
    """
    problem = run.problem
    charts = {}
    if run.simulated is not None:
        timeline = timeline_chart(
            run.simulated,
            problem.budgets.ram_bytes,
            f"{name}: simulated timeline",
            "",
            deadline_s=problem.budgets.runtime_s,
            width_px=TIMELINE_PX,
        )
        charts[f"{anchor}-timeline"] = page.fitted(timeline.to_dict(validate=False), TIMELINE_PX, 60, NARROW_BELOW_PX)
    grid = schedule_chart(run.schedule, problem.graph, f"{name}: schedule", "", width_px=WIDE_PX)
    spec = grid.to_dict(validate=False)
    charts[f"{anchor}-grid"] = page.fitted(spec, grid_width(spec), 110, NARROW_BELOW_PX)
    return charts


def _section(anchor: str, name: str, row: pd.Series, run) -> str:
    """One point: its figures in a sentence, then its timeline and grid."""
    esc = html.escape
    problem, checked, simulated = run.problem, run.checked, run.simulated
    facts = [
        f"status {row['status']}",
        f"{checked.total_j:.6g} J per iteration, {float(row['overhead_pct']):.3g} % above keep-all",
        f"peak RAM {checked.peak_ram_bytes:,} of a {problem.budgets.ram_bytes:,}-byte budget",
        f"{checked.runtime_s:.4g} s of a {problem.budgets.runtime_s:.4g} s deadline",
        f"{checked.recomputations} recomputations, {checked.page_outs} page-outs, {checked.page_ins} page-ins",
    ]
    if simulated is not None:
        facts.append(
            f"simulated: {simulated.figures.total_j:.6g} J, makespan {simulated.makespan_s:.4g} s, "
            f"stalls {simulated.stall_s:.3g} s"
        )
    charts = (f"<div class='chart' id='{anchor}-timeline'></div>" if simulated is not None else "") + (
        f"<div class='chart' id='{anchor}-grid'></div>"
    )
    return f"<section class='point' id='{anchor}' hidden><h2>{esc(name)}</h2><p>{esc('; '.join(facts))}.</p>{charts}</section>"


def _write(directory: Path, title: str, footer: str, nav: str, sections: list, specs: dict, note: str) -> None:
    esc = html.escape
    body = [
        f"<h1>{esc(title)}: schedules</h1>",
        "<p class='finding'>The tightest RAM budget each strategy meets, replayed by the simulator: the timeline "
        "(compute, DMA and bus lanes against time, the deadline, RAM in use under the budget) and the schedule "
        "itself (what happens to each node's output in each stage). <a href='report.html'>Back to the report</a>.</p>",
        f"<nav>{nav}</nav>",
    ]
    if note:
        body.append(f"<p class='note'>{esc(note)}</p>")
    body += [text for _, _, text in sections]
    body.append(f"<div class='footer'><p>{esc(footer)}</p><p>{esc(SIMULATOR_ASSUMPTIONS)}.</p></div>")
    target = Path(directory) / PAGE
    target.write_text(
        page.page(f"poetsim schedules: {title}", "\n".join(body), {}, _STYLE, groups=specs, script=_SCRIPT),
        encoding="utf-8",
    )
