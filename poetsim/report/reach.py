"""How far down each strategy reaches: the tightest RAM budget it meets, per platform and budget.

This is the question a memory-starved device asks first (can it train at all at this RAM?), and
its points are the schedules worth looking at: the report's table links each cell to its
schedule view (`poetsim.report.schedules`). Takes the prepared results frame of
`poetsim.report.report`.
"""

import html
from collections.abc import Mapping

import pandas as pd

from poetsim.analysis.results import cell_text
from poetsim.report.overhead import DIMENSIONS
from poetsim.report.palette import strategy_order

#: One row of the table: the dimensions other than the RAM budget.
GROUP = ["model_label", "platform_label", "runtime_x", "timing"]


def tightest(frame: pd.DataFrame) -> pd.DataFrame:
    """Per group and strategy, the run with a schedule at the smallest RAM budget (the frame's rows)."""
    ok = frame[frame["ok"] & frame["ram_fraction"].notna()]
    if ok.empty:
        return ok
    index = ok.groupby([*GROUP, "strategy"], dropna=False, sort=False)["ram_fraction"].idxmin()
    return ok.loc[index.to_numpy()]


def group_label(row: pd.Series, frame: pd.DataFrame) -> str:
    """The group's dimensions that vary in `frame`, in words ('rpi4 · runtime 1.5x'), or 'all runs'."""
    varying = [c for c in GROUP if frame[c].nunique() > 1]
    return " · ".join(DIMENSIONS[c](row[c]) for c in varying) or "all runs"


def _key(row: pd.Series) -> tuple[str, ...]:
    return tuple(str(row[c]) for c in GROUP)


def reach_table(frame: pd.DataFrame, links: Mapping[str, str]) -> str:
    """Groups down, strategies across; each cell the tightest RAM budget met and the energy there.

    A cell links to `links[point_key]` when the point has a schedule view. Every string escaped.
    """
    esc = html.escape
    best = {(_key(run), str(run["strategy"])): run for _, run in tightest(frame).iterrows()}
    names = strategy_order(frame["strategy"])
    head = "".join(f"<th>{esc(n)}</th>" for n in names)
    lines = [f"<div class='scroll'><table class='reach'><thead><tr><th class='text'></th>{head}</tr></thead><tbody>"]
    for _, runs in frame.groupby(GROUP, dropna=False, sort=True):
        first = runs.iloc[0]
        cells = [f"<td class='text'>{esc(group_label(first, frame))}</td>"]
        for name in names:
            run = best.get((_key(first), name))
            if run is None:
                tried = (runs["strategy"] == name).any()
                cells.append(f"<td class='none'>{'none' if tried else ''}</td>")
                continue
            text = f"{run['ram_label']} · {cell_text(str(run['status']), run['overhead_pct'], run['gap_overhead'])}"
            text = text.replace(" %", "\u00a0%")  # a narrow page wraps the cell at the dot, never inside a figure
            href = links.get(str(run.get("point_key")))
            body = f"<a href='{esc(href)}'>{esc(text)}</a>" if href else esc(text)
            cells.append(f"<td>{body}</td>")
        lines.append(f"<tr>{''.join(cells)}</tr>")
    lines.append("</tbody></table></div>")
    return "".join(lines)
