"""The page of the POET paper's claims (`poetsim paper --html`): verdicts first, then each exhibit.

It opens on one line that counts the verdicts ("3 of 9 claims hold under poetsim's cost model"),
then lists every claim with its coloured verdict; each exhibit follows with the chart that
overlays the paper's numbers on poetsim's (`poetsim.report.paper_charts`), its claims with the
paper's figure, poetsim's and the reason, and poetsim's figures per point folded below, with a
link to the study report that holds every run. Verdicts and numbers are `poetsim.analysis.paper`'s.
"""

import html
import os
from collections.abc import Mapping
from pathlib import Path

from poetsim.analysis.claims import SOURCE, PaperComparison, css_class, render_claim, render_table, summary
from poetsim.assumptions import ASSUMPTIONS
from poetsim.report import page
from poetsim.report.paper_charts import BUILDERS
from poetsim.report.sweep_charts import NARROW_PX, WIDE_WIDTH_PX

TITLE = "poetsim: the POET paper's claims"
#: The scenarios each exhibit reads, by the comparison's key: their reports are linked from it.
SCENARIOS = {
    "fig3": ("paper_fig3", "paper_fig3_mcu"),
    "fig4": ("paper_fig4",),
    "fig5": ("paper_fig5",),
    "table3": ("paper_table3",),
}


def write_paper_page(found: list[PaperComparison], target: Path, studies: Mapping[str, Path]) -> Path:
    """Write the page to `target`, linking each study's report.

    `studies` maps each scenario name to its results folder, whose report.html the page links
    (by a path relative to the page).
    """
    target = Path(target)
    esc = html.escape
    specs = {}
    overview = []
    for comparison in found:
        for claim in comparison.claims:
            overview.append(
                f"<li><span class='verdict {css_class(claim.verdict)}'>{esc(claim.verdict.value)}</span> "
                f"<a href='#paper-{esc(comparison.key)}'>{esc(claim.where)}</a>: {esc(claim.statement)}"
                + (f" <span class='note'>({esc(claim.qualifier)})</span>" if claim.qualifier else "")
                + "</li>"
            )
    parts = [
        f"<h1>{esc(TITLE)}</h1>",
        f"<p class='finding' id='summary'><b>{esc(summary(found))}</b> Each claim of {esc(SOURCE)} is set beside "
        "poetsim's figure for the same thing and judged under poetsim's cost model: a verdict is about that model, "
        "not about the paper's measurements.</p>",
        f"<ul class='overview'>{''.join(overview)}</ul>",
    ]
    for comparison in found:
        build = BUILDERS.get(comparison.key)
        draw = build(comparison) if build else None
        parts.append(f"<section class='paper-comparison' id='paper-{esc(comparison.key)}'><h2>{esc(comparison.title)}</h2>")
        if draw is not None:
            element = f"chart-{comparison.key}"
            specs[element] = page.responsive(
                draw("", WIDE_WIDTH_PX).to_dict(), draw("", NARROW_PX).to_dict(validate=False), 0.75 * WIDE_WIDTH_PX
            )
            parts.append(f"<div class='chart' id='{element}'></div>")
        parts += [render_claim(claim) for claim in comparison.claims]
        links = [
            f"<a href='{esc(_relative(studies[name] / 'report.html', target.parent))}'>{esc(name)} report</a>"
            for name in SCENARIOS.get(comparison.key, ())
            if name in studies
        ]
        if not comparison.table.empty:
            parts.append(
                f"<details><summary>poetsim's figures per point ({len(comparison.table)} rows)</summary>"
                f"{render_table(comparison)}</details>"
            )
        parts.append(
            f"<p class='note'>Results of {esc(comparison.scenario)}"
            + (f"; every run, chart and schedule: {', '.join(links)}" if links else "")
            + ".</p></section>"
        )
    parts.append(
        f"<div class='footer'><p>Paper: {esc(SOURCE)}; its numbers and their sources are in docs/paper.md. "
        f"{esc(ASSUMPTIONS)}.</p></div>"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page.page(TITLE, "\n".join(parts), specs, _STYLE), encoding="utf-8")
    return target


_STYLE = "ul.overview { padding-left: 18px; } ul.overview li { margin: 4px 0; }"


def _relative(path: Path, start: Path) -> str:
    """`path` relative to `start`, with forward slashes: the page holds no absolute path."""
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()
