"""The paper's claims and how they fare: its numbers, the four verdicts, and their HTML and Markdown.

`poetsim.analysis.paper` builds a `PaperComparison` per exhibit from a study's results; this
module holds what those are made of (`PaperNumber`, `Verdict`, `Claim`), how a number the paper
states is judged against poetsim's (`judge_size`), and how claims are written out for a page
(`render_claim`, `render_claims`, `render_html`) or for docs (`render_markdown`). docs/paper.md
says how a verdict is reached.
"""

import html
import math
import numbers
import re
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from poetsim import strategies
from poetsim.units import column_header

SOURCE = "Patil et al., POET, ICML 2022 (arXiv 2207.07697)"
#: A size within this factor of the paper's (same sign) holds in part; further off, it does not hold.
PART_FACTOR = 2.0


@dataclass(frozen=True)
class PaperNumber:
    """A number the paper states: its range (low = high for one value), how it is written, and where.

    `exhibit` says where in the paper it is. `half_step` is half the unit of its last digit: 13
    stands for 12.5 to 13.5, so a figure of poetsim's within that is the paper's number.
    """

    low: float
    high: float
    text: str
    exhibit: str
    half_step: float

    @property
    def source(self) -> str:
        """'Patil et al., POET, ICML 2022 (arXiv 2207.07697), Figure 5'."""
        return f"{SOURCE}, {self.exhibit}"


#: The numbers the paper states, each with the exhibit that states it (docs/paper.md). Figures 3
#: and 4 are curves without numbers in the text; their claims are judged on what the paper's
#: model implies (see the claims).
PAPER_NUMBERS = {
    "fig5_capuchin": PaperNumber(73.0, 141.0, "+73 % to +141 %", "Figure 5", 0.5),
    "fig5_poet": PaperNumber(0.0, 1.0, "< 1 %", "Figure 5", 0.0),
    "table3_peak": PaperNumber(-8.3, -8.3, "-8.3 %", "Table 3", 0.05),
    "table3_throughput": PaperNumber(13.0, 13.0, "+13 %", "Table 3", 0.5),
}


class Verdict(str, Enum):
    """How a claim fares under poetsim's cost model."""

    HOLDS = "holds"
    PARTLY = "holds in part"
    FAILS = "does not hold"
    UNJUDGED = "cannot be judged"

    def __str__(self) -> str:
        """The verdict as a reader reads it: 'holds in part'."""
        return self.value


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, the paper's number, poetsim's, and how it fares here.

    `qualifier` says in a few words where a claim holds only in part or why it does not hold
    ('same sign, smaller'); `reason` gives the numbers behind the verdict.
    """

    where: str  # the exhibit: "Figure 5"
    statement: str  # the claim in words
    paper: str  # the paper's number, as it states it
    poetsim: str  # poetsim's figure for the same thing
    verdict: Verdict
    reason: str
    qualifier: str = ""


def _times(factor: float) -> str:
    """'2.2' or '2,150': a factor at a precision a reader can take in."""
    return f"{factor:.2g}" if factor < 10 else f"{factor:,.0f}"


@dataclass(frozen=True)
class PaperComparison:
    """One exhibit of the paper: poetsim's figures per point and the claims judged on them."""

    key: str
    title: str
    scenario: str
    table: pd.DataFrame
    claims: tuple[Claim, ...]


def judge_size(number: PaperNumber, values: list[float], unit: str = " %") -> tuple[Verdict, str]:
    """A size the paper states against poetsim's values: holds, holds in part, or does not hold.

    It holds where the ranges meet; in part where poetsim's has the same sign and comes within
    PART_FACTOR of it; otherwise not.
    """
    values = [v for v in values if v is not None and not pd.isna(v)]
    if not values:
        return Verdict.UNJUDGED, "no value to compare"
    low, high = min(values), max(values)
    paper_low, paper_high = number.low - number.half_step, number.high + number.half_step
    if low <= paper_high and high >= paper_low:
        return Verdict.HOLDS, ""
    if (low > 0) != (number.low > 0) or (high < 0) != (number.high < 0):
        return Verdict.FAILS, f"opposite sign: {span(values, unit)} against the paper's {number.text}"
    ours, theirs = (high, number.low) if high < number.low else (low, number.high)
    ratio = abs(theirs) / abs(ours) if ours else math.inf
    word = "smaller" if abs(ours) < abs(theirs) else "larger"
    factor = max(ratio, 1 / ratio) if ratio else math.inf
    if factor <= PART_FACTOR:
        return Verdict.PARTLY, f"same sign, {word}: {span(values, unit)} against the paper's {number.text}"
    return Verdict.FAILS, f"same sign but {_times(factor)} times {word}: {span(values, unit)} against the paper's {number.text}"


def span(values: list[float], unit: str = " %", digits: int = 3) -> str:
    """'0.02-0.04 %' (or one value) of the values, or 'no schedule'."""
    values = [v for v in values if v is not None]
    if not values:
        return "no schedule"
    low, high = min(values), max(values)
    text = f"{low:.{digits}g}" if math.isclose(low, high, rel_tol=1e-3) else f"{low:.{digits}g} to {high:.{digits}g}"
    return text + unit


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1000):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary(found: list[PaperComparison]) -> str:
    """The verdicts counted in one sentence: '3 of 9 claims hold under poetsim's cost model; 2 hold in part, ...'."""
    claims = [claim for comparison in found for claim in comparison.claims]
    counts = {v: sum(1 for c in claims if c.verdict is v) for v in Verdict}
    plural = {Verdict.PARTLY: "hold in part", Verdict.FAILS: "do not hold", Verdict.UNJUDGED: "cannot be judged"}
    rest = [f"{counts[v]} {plural[v]}" for v in plural if counts[v]]
    return (
        f"{counts[Verdict.HOLDS]} of {len(claims)} claims hold under poetsim's cost model"
        + ("; " + ", ".join(rest) if rest else "")
        + "."
    )


def css_class(verdict: Verdict) -> str:
    """The verdict as a CSS class: 'holds-in-part'."""
    return verdict.value.replace(" ", "-")


def render_claim(claim: Claim) -> str:
    """One claim as an HTML card, every string escaped.

    The card holds the verdict (coloured, with its qualifier), the paper's figure and its
    source, poetsim's figure, and the reason.
    """
    e = html.escape
    qualifier = f" <span class='qualifier'>({e(claim.qualifier)})</span>" if claim.qualifier else ""
    number = next((n for n in PAPER_NUMBERS.values() if n.text == claim.paper and n.exhibit == claim.where), None)
    source = f"{SOURCE}, {claim.where}" if number is None else number.source
    return (
        f"<div class='claim {css_class(claim.verdict)}'><p><span class='verdict {css_class(claim.verdict)}'>"
        f"{e(claim.verdict.value)}</span>{qualifier} <b>{e(claim.where)}</b>: {e(claim.statement)}</p><dl>"
        f"<dt>paper</dt><dd>{e(claim.paper)} <span class='note'>({e(source)})</span></dd>"
        f"<dt>poetsim</dt><dd>{e(claim.poetsim)}</dd><dt>why</dt><dd>{e(claim.reason)}</dd></dl></div>"
    )


def render_table(comparison: PaperComparison) -> str:
    """An HTML table, in its own scroll box, of poetsim's figures per point of one exhibit.

    Headers in words with their units; a column no point has a value in is left out; notes wrap;
    it sorts as the reports' tables do (numbers by value).
    """
    e = html.escape
    table = comparison.table
    if table.empty:
        return ""
    columns = [c for c in table.columns if any(_cell(v) not in ("-", "") for v in table[c])]
    out = [
        "<div class='scroll'><table class='figures sortable'><thead><tr>"
        + "".join(f"<th>{e(_header(str(c)))}</th>" for c in columns)
        + "</tr></thead><tbody>"
    ]
    for row in table[columns].itertuples(index=False):
        out.append("<tr>" + "".join(_html_cell(v) for v in row) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


_HEADER_WORDS = {"ram": "RAM", "gap overhead": "unproven (share of overhead)", "page ins": "page-ins", "page outs": "page-outs"}


def _header(column: str) -> str:
    """A table column's name as a header: 'hybrid_overhead_pct' -> 'hybrid overhead (%)'."""
    for name in strategies.names():
        column = column.replace(name.replace("-", "_"), name)
    words = column_header(column)
    for word, shown in _HEADER_WORDS.items():
        words = re.sub(rf"\b{word}\b", shown, words)
    return words


#: A text cell longer than this wraps (as the reports' messages do).
LONG_TEXT_CHARS = 40


def _html_cell(value) -> str:
    """One cell: a number carries its value to sort by; a long text wraps."""
    text = html.escape(_cell(value))
    if value is None or (isinstance(value, numbers.Real) and math.isnan(float(value))):
        return f"<td data-sort=''>{text}</td>"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"<td data-sort='{float(value)!r}'>{text}</td>"
    return f"<td class='msg'>{text}</td>" if len(text) > LONG_TEXT_CHARS else f"<td class='text'>{text}</td>"


def render_html(comparison: PaperComparison) -> str:
    """An HTML fragment: the claims with their verdicts, then poetsim's figures folded; every string escaped."""
    e = html.escape
    out = [
        f'<section class="paper-comparison" id="paper-{e(comparison.key)}">',
        f"<h3>{e(comparison.title)}</h3>",
        *(render_claim(claim) for claim in comparison.claims),
    ]
    if not comparison.table.empty:
        out.append(
            f"<details><summary>poetsim's figures per point ({len(comparison.table)} rows, from "
            f"{e(comparison.scenario)})</summary>{render_table(comparison)}</details>"
        )
    out.append("</section>")
    return "\n".join(out)


def render_claims(found: list[PaperComparison], link: str | None = None) -> str:
    """The claims of these comparisons as one HTML section for a study's report.

    The section holds the summary, the claims, and a link to the page of all exhibits (`link`,
    relative to the report).
    """
    e = html.escape
    more = f" <a href='{e(link)}'>All of the paper's exhibits, with charts</a>." if link else ""
    head = (
        '<section class="paper" id="paper"><h2>The POET paper\'s claims on these results</h2>'
        f"<p>{e(summary(found))} A verdict is about poetsim's cost model, not about the paper's "
        f"measurements.{more}</p>"
    )
    claims = [render_claim(claim) for comparison in found for claim in comparison.claims]
    return "\n".join([head, *claims, "</section>"])


def render_section(found: list[PaperComparison]) -> str:
    """All comparisons as one HTML section, each with its claims and its folded table."""
    head = (
        '<section class="paper" id="paper"><h2>The POET paper\'s comparisons</h2>'
        f"<p>{html.escape(summary(found))} Each claim of {html.escape(SOURCE)} beside poetsim's figure for it, "
        "judged under poetsim's cost model (docs/paper.md gives the sources).</p>"
    )
    return "\n".join([head, *(render_html(c) for c in found), "</section>"])


def render_markdown(comparison: PaperComparison, columns: list[str] | None = None) -> str:
    """The claims and (some of) the figures as Markdown tables, for docs."""
    lines = [
        f"**{comparison.title}** ({comparison.scenario})",
        "",
        "| claim | paper | poetsim | verdict | why |",
        "|---|---|---|---|---|",
    ]
    for claim in comparison.claims:
        verdict = claim.verdict.value + (f" ({claim.qualifier})" if claim.qualifier else "")
        cells = [f"{claim.where}: {claim.statement}", claim.paper, claim.poetsim, verdict, claim.reason]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    table = comparison.table if columns is None else comparison.table[columns]
    if not table.empty:
        lines += ["", "| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)
