"""Colours, markers and type sizes shared by every chart, so a reader learns them once.

Strategies take their colour from the registry (`poetsim.strategies`, Okabe-Ito), so hybrid is
the same blue in every chart of every report. Platforms get colours from Paul Tol's "muted"
scheme, chosen by the platform's place in the sorted list of the report's platforms, so one
platform keeps one colour across all the charts of a report; the scheme is distinct from the
strategies' and safe for colour-blind readers. A run without a schedule is marked by its status
with a shape of its own, never by colour alone.
"""

from collections.abc import Iterable
from typing import Any

from poetsim import strategies
from poetsim.status import Status

#: Paul Tol's "muted" qualitative scheme (https://personal.sron.nl/~pault/), ordered so that the
#: first colours are far apart.
PLATFORM_COLOURS = ("#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", "#882255", "#44AA99", "#999933", "#AA4499")

#: The shape of each status without a schedule in the overhead charts' strip. A hollow circle
#: is "not known" (the search ran out of effort); filled shapes are facts.
STATUS_SHAPES = {
    Status.INFEASIBLE.value: "cross",  # drawn turned by 45 degrees: an x, "proven impossible"
    Status.OVER_BUDGET.value: "square",
    Status.NO_SOLUTION.value: "circle",
    Status.NOT_APPLICABLE.value: "triangle-up",
    Status.INVALID.value: "diamond",
    Status.FAILED.value: "triangle-down",
}
#: Statuses without a schedule that the strip does not know by name are gathered in one row.
OTHER_STATUS = "other"
STATUS_FILLED = {status: status != Status.NO_SOLUTION.value for status in STATUS_SHAPES} | {OTHER_STATUS: True}

#: Smallest type size of any text in a chart or a page, in px.
MIN_FONT_PX = 11

#: Chart configuration: type no smaller than MIN_FONT_PX, no frame around views.
CHART_CONFIG: dict[str, Any] = {
    "font": "sans-serif",
    "axis": {"labelFontSize": 11, "titleFontSize": 12, "labelColor": "#333333", "titleColor": "#222222"},
    "legend": {"labelFontSize": 12, "titleFontSize": 12, "symbolSize": 90},
    "header": {"labelFontSize": 12, "titleFontSize": 12},
    "title": {"fontSize": 15, "subtitleFontSize": 12, "subtitleColor": "#444444"},
    "view": {"stroke": "#dddddd"},
}


def strategy_order(names: Iterable[str]) -> list[str]:
    """Distinct strategy names in registry order (unknown names last, by name)."""
    return sorted({str(n) for n in names}, key=lambda n: (strategies.rank(n), n))


def strategy_colours(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """A colour scale's domain and range for these strategies: each one's registry colour."""
    domain = strategy_order(names)
    return domain, [strategies.colour(n) for n in domain]


def platform_colours(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """A colour scale's domain and range for these platforms: fixed by their sorted order."""
    domain = sorted({str(n) for n in names})
    return domain, [PLATFORM_COLOURS[i % len(PLATFORM_COLOURS)] for i in range(len(domain))]


def strip_status(status: str) -> str:
    """The strip row of a status without a schedule: its own word if known, else OTHER_STATUS."""
    return status if status in STATUS_SHAPES else OTHER_STATUS


def strip_order(statuses: Iterable[str]) -> list[str]:
    """The strip rows present, proofs nearest the plot: infeasible, over-budget, no-solution, ..."""
    present = {strip_status(s) for s in statuses}
    return [s for s in (*STATUS_SHAPES, OTHER_STATUS) if s in present]
