"""The report's tables as HTML: the headline pivot and every run.

The table of every run is sortable and filterable by the page's script.

Every value is escaped here (`html.escape`): model, platform, scenario names and messages come
from users' files. Numbers carry their raw value in `data-sort`, so sorting is by number.
"""

import html
from collections.abc import Sequence
from typing import TypeAlias

import pandas as pd

from poetsim.analysis.results import WITH_SCHEDULE, headline
from poetsim.report.timeline import Unit
from poetsim.status import Status
from poetsim.tolerances import exceeds
from poetsim.units import column_header

_esc = html.escape

#: The statuses without a schedule whose words a headline table may show, explained under it.
UNSCHEDULED = (Status.INFEASIBLE, Status.NO_SOLUTION, Status.OVER_BUDGET, Status.NOT_APPLICABLE)

#: How a column of the table of runs shows its values: "text", "message", or (scale, number format).
Shown: TypeAlias = str | tuple[float, str]


def headline_table(frame: pd.DataFrame) -> tuple[str, str]:
    """Strategies side by side, as the README's headline: the HTML and the CSS of its tabs.

    One tab per model, timing and runtime budget (those that vary); in each, one row per
    platform and RAM budget (largest first) and one column per strategy in registry order, the
    cell as `results.cell_text` writes it (`*`: not proven optimal). The lowest overhead of a
    row is bold; a status word stands where there is no schedule. The tab with the most
    schedules opens first.
    """
    table = headline(frame.assign(model=frame["model_label"], platform=frame["platform_label"]))
    strategies = [c for c in table.columns if f"{c} status" in table.columns]
    tab_keys = ["model", "timing", "runtime_x"]
    tabs = list(table.groupby(tab_keys, dropna=False, sort=False))
    varying = [k for k in tab_keys if table[k].nunique(dropna=False) > 1]
    # The tab that opens is the one with the most schedules: a runtime budget at which every
    # budget below keep-all is infeasible says least.
    schedules = [sum(int(rows[f"{s} status"].astype(str).isin(WITH_SCHEDULE).sum()) for s in strategies) for _, rows in tabs]
    opened = schedules.index(max(schedules)) if schedules else 0
    inputs, panels, style = [], [], []
    for number, (key, rows) in enumerate(tabs):
        name = " · ".join(_tab_part(k, v) for k, v in zip(tab_keys, key) if k in varying or k == "runtime_x")
        checked = " checked" if number == opened else ""
        inputs.append(
            f"<input type='radio' name='headline-tab' id='headline-tab-{number}'{checked}>"
            f"<label for='headline-tab-{number}'>{_esc(name)}</label>"
        )
        rows_html = _headline_rows(rows, strategies)
        panels.append(f"<div class='tab-panel' id='headline-panel-{number}'><div class='scroll'>{rows_html}</div></div>")
        style.append(f"#headline-tab-{number}:checked ~ .tab-panels #headline-panel-{number} {{ display: block; }}")
    body = (
        f"<div class='tabs'>{''.join(inputs)}<div class='tab-panels'>{''.join(panels)}</div></div>"
        "<p class='note'>Energy per iteration above keep-all (every node computed once, nothing paged). "
        "<b>Bold</b>: lowest of its row. <b>*</b>: a schedule not proven optimal within its effort, so an "
        "upper bound on the optimum (hover a cell for its energy and gap). "
        + "; ".join(
            f"<i>{s}</i>: {s.meaning}" for s in (Status.INFEASIBLE, Status.NO_SOLUTION, Status.OVER_BUDGET, Status.NOT_APPLICABLE)
        )
        + ".</p>"
    )
    return body, "\n".join(style)


def _tab_part(key: str, value) -> str:
    if key == "runtime_x":
        return "runtime ?" if pd.isna(value) else f"runtime {value:g}x"
    if key == "timing":
        return f"{value or '?'} timing"
    return "?" if pd.isna(value) else str(value)


def _headline_rows(rows: pd.DataFrame, strategies: list[str]) -> str:
    head = "".join(f"<th>{_esc(s)}</th>" for s in strategies)
    lines = [f"<table class='headline'><thead><tr><th class='text'>platform</th><th>RAM</th>{head}</tr></thead><tbody>"]
    previous = None
    for _, row in rows.iterrows():
        overheads = {
            s: row.get(f"{s} overhead %")
            for s in strategies
            if str(row.get(f"{s} status")) in WITH_SCHEDULE and pd.notna(row.get(f"{s} overhead %"))
        }
        best = min(overheads.values()) if overheads else None
        group = " class='group'" if previous is not None and row["platform"] != previous else ""
        platform = _esc(str(row["platform"])) if row["platform"] != previous else ""
        previous = row["platform"]
        ram = f"{100 * row['ram_share']:.3g} %" if pd.notna(row["ram_share"]) else str(row["ram"])
        cells = [f"<td class='text'>{platform}</td><td>{_esc(ram)}</td>"]
        for strategy in strategies:
            text = row.get(strategy) or ""
            status = str(row.get(f"{strategy} status", ""))
            css = "none" if status not in WITH_SCHEDULE else "best" if _ties(overheads.get(strategy), best) else ""
            tip = _cell_tip(strategy, row, status)
            cells.append(f"<td class='{css}' title='{_esc(tip)}'>{_cell_html(str(text))}</td>")
        lines.append(f"<tr{group}>{''.join(cells)}</tr>")
    lines.append("</tbody></table>")
    return "".join(lines)


def _cell_html(text: str) -> str:
    """A headline cell's text, its device verdict (`[device ok]`, from `results.headline`) on a line of its own.

    On one line the verdict doubles a column's width, and a table of five strategies no longer
    fits beside the chart.
    """
    figure, mark, verdict = text.partition(" [")
    if not mark:
        return _esc(text)
    return f"{_esc(figure)}<br><span class='mark'>{_esc(verdict.rstrip(']'))}</span>"


def _ties(value, best) -> bool:
    """Whether `value` is the lowest overhead of its row; a difference of rounding is a tie."""
    return value is not None and best is not None and not exceeds(value, best)


def _cell_tip(strategy: str, row, status: str) -> str:
    if not status or status == "nan":
        return f"{strategy}: not run"
    parts = [f"{strategy}: {status}"]
    energy = row.get(f"{strategy} energy J")
    if status in WITH_SCHEDULE and pd.notna(energy):
        parts.append(f"{energy:.6g} J")
    gap = row.get(f"{strategy} gap")
    if status in WITH_SCHEDULE and pd.notna(gap) and gap > 0:
        parts.append(f"{100 * gap:.3g} % of the overhead not proven")
    return "; ".join(parts)


def _mib_columns(frame: pd.DataFrame) -> Unit:
    peak = pd.to_numeric(frame.get("keep_all_peak_bytes"), errors="coerce").max()
    return Unit.ram(peak if pd.notna(peak) else 0)


def run_columns(frame: pd.DataFrame) -> list[tuple[str, str, Shown]]:
    """The columns of the table of every run: (header with unit, source column, how to show it).

    How to show it is "text", "message", or a (scale, format) pair for numbers.
    """
    space = _mib_columns(frame)
    mb: Shown = (1 / space.size, ".4g")
    return [
        ("model", "model_label", "text"),
        ("platform", "platform_label", "text"),
        ("timing", "timing", "text"),
        ("strategy", "strategy", "text"),
        ("status", "status", "text"),
        ("RAM budget (% of keep-all)", "ram_fraction", (100, ".3g")),
        (f"RAM budget ({space.name})", "ram_budget_bytes", mb),
        ("runtime budget (x)", "runtime_x", (1, "g")),
        ("energy (J)", "predicted_total_j", (1, ".6g")),
        ("above keep-all (%)", "overhead_pct", (1, ".4f")),
        ("not proven (% of overhead)", "gap_overhead", (100, ".3g")),
        (f"peak RAM ({space.name})", "predicted_peak_ram_bytes", mb),
        ("makespan (s)", "predicted_runtime_s", (1, ".4g")),
        ("recomputations", "predicted_recomputations", (1, ",.0f")),
        ("page-ins", "predicted_page_ins", (1, ",.0f")),
        ("page-outs", "predicted_page_outs", (1, ",.0f")),
        ("simulated energy (J)", "simulated_total_j", (1, ".6g")),
        ("simulated makespan (s)", "simulated_runtime_s", (1, ".4g")),
        (f"simulated peak RAM ({space.name})", "simulated_peak_ram_bytes", mb),
        ("stalls (s)", "simulated_stall_s", (1, ".3g")),
        ("solve time (s)", "solve_s", (1, ".3g")),
        *device_columns(frame),
        ("message", "message", "message"),
    ]


def device_columns(frame: pd.DataFrame) -> list[tuple[str, str, Shown]]:
    """The measured-on-device columns a runs.csv may carry (`device_*`), in the file's order.

    'device_energy_j' shows as 'device energy (J)', a number; a column that is not numbers shows
    as text.
    """
    columns: list[tuple[str, str, Shown]] = []
    for name in (c for c in frame.columns if str(c).startswith("device_")):
        numbers = pd.to_numeric(frame[name], errors="coerce")
        numeric = numbers.notna().sum() == frame[name].notna().sum()
        columns.append((column_header(str(name)), str(name), (1, ".6g") if numeric else "text"))
    return columns


def runs_table(frame: pd.DataFrame, table_id: str, columns: Sequence[tuple[str, str, Shown]] | None = None) -> str:
    """A sortable table of runs (one row each) with a filter box above it.

    A column no run has a value in is left out: the device's columns of a sweep that ran on
    none, the simulator's of one that replayed nothing.
    """
    columns = [c for c in (columns or run_columns(frame)) if c[1] in frame.columns and _has_values(frame[c[1]])]
    ordered = frame.sort_values(
        ["model_label", "platform_label", "timing", "runtime_x", "ram_fraction", "strategy"],
        ascending=[True, True, True, True, False, True],
        na_position="last",
    )
    head = "".join(
        f"<th class='{'text' if shown in ('text', 'message') else ''}'>{_esc(name)}</th>" for name, _, shown in columns
    )
    rows = []
    for _, run in ordered.iterrows():
        rows.append("<tr>" + "".join(_run_cell(run[column], shown) for _, column, shown in columns) + "</tr>")
    count = f"{table_id}-count"
    return (
        f"<input class='filter' type='search' placeholder='filter: e.g. hybrid feasible' "
        f"data-table='{table_id}' data-count='{count}' aria-label='filter the runs'> "
        f"<span class='note' id='{count}'>{len(rows)} runs</span> <span class='note'>(click a header to sort)</span>"
        f"<div class='scroll'><table class='sortable' id='{table_id}'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _has_values(column: pd.Series) -> bool:
    """Whether some run has a value in `column` (an empty text is none)."""
    return bool(column.notna().any()) and bool(column.dropna().astype(str).str.strip().ne("").any())


def _run_cell(value, shown) -> str:
    if shown in ("text", "message"):
        text = "" if pd.isna(value) else str(value)
        css = "msg" if shown == "message" else "text"
        return f"<td class='{css}'>{_esc(text)}</td>"
    number = pd.to_numeric(value, errors="coerce")
    if pd.isna(number):
        return "<td data-sort=''></td>"
    scale, fmt = shown
    return f"<td data-sort='{float(number)!r}'>{format(float(number) * scale, fmt)}</td>"


def device_runs(frame: pd.DataFrame) -> str:
    """Every run that `poetsim device sweep` executed on the emulated device: measured beside predicted."""
    ran = frame[frame["device_ok"].notna()]
    ratio = pd.to_numeric(ran["device_compute_s"], errors="coerce") / pd.to_numeric(
        ran["device_predicted_compute_s"], errors="coerce"
    )
    ran = ran.assign(
        device_checks=ran["device_ok"].map(lambda v: "ok" if str(v).lower() == "true" else "FAILED"), device_ratio=ratio
    )
    count: Shown = (1, ",.0f")
    columns: list[tuple[str, str, Shown]] = [
        ("model", "model_label", "text"),
        ("platform", "platform_label", "text"),
        ("strategy", "strategy", "text"),
        ("RAM budget (bytes)", "ram_budget_bytes", count),
        ("checks", "device_checks", "text"),
        ("peak RAM predicted (bytes)", "predicted_peak_ram_bytes", count),
        ("peak RAM on the device (bytes)", "device_peak_ram_bytes", count),
        ("recomputations", "device_recomputations", count),
        ("page-outs", "device_page_outs", count),
        ("bytes paged out", "device_page_out_bytes", count),
        ("compute predicted (s)", "device_predicted_compute_s", (1, ".4g")),
        ("compute on the device (s)", "device_compute_s", (1, ".4g")),
        ("device / predicted", "device_ratio", (1, ".3f")),
        ("failed checks", "device_message", "message"),
    ]
    return runs_table(ran, "device-runs", columns)
