"""A chart's key, drawn as marks beside their words and wrapped to the chart's width.

Vega-Lite places legends beside or above a whole composed chart, where a faceted chart's legend
ends up over its title or cut off at the side; and a legend cannot say "hollow means not
proven". The key is a small chart of its own, stacked under the title, listing exactly the marks
the chart uses.
"""

import textwrap
from dataclasses import dataclass, field

import altair as alt
import pandas as pd

_CHAR_PX = 6.2
_LINE_PX = 18


@dataclass(frozen=True)
class Entry:
    """One mark of the key and what it means; `line_break` starts a new line before it."""

    text: str
    mark: dict = field(default_factory=dict)
    line_break: bool = False


def colour_entries(groups: list[tuple[str, str]], shape: str = "circle") -> list[Entry]:
    """One filled mark per (name, colour)."""
    return [Entry(name, dict(shape=shape, filled=True, size=70, color=colour, opacity=1)) for name, colour in groups]


def shape_entries(shapes: list[tuple[str, str]], colour: str = "#555555") -> list[Entry]:
    """One grey mark per (name, shape)."""
    return [Entry(name, dict(shape=shape, filled=True, size=60, color=colour, opacity=1)) for name, shape in shapes]


def key_chart(entries: list[Entry], width_px: float) -> alt.LayerChart | alt.FacetChart:
    """The entries in reading order, wrapped to `width_px`; an entry wider than that on its own wraps its words."""
    rows, x, line = [], 0.0, 0
    fits = max(8, int((width_px - 32) / _CHAR_PX))
    for number, entry in enumerate(entries):
        size = 14 + _CHAR_PX * len(entry.text) + 18
        if x > 0 and (x + size > width_px or entry.line_break):
            x, line = 0.0, line + 1
        parts = textwrap.wrap(entry.text, fits) if size > width_px else [entry.text]
        rows.append({"entry": number, "x": x + 6, "text_x": x + 14, "y": line * _LINE_PX + 9, "text": parts[0]})
        for more in parts[1:]:  # no mark: the entry's words go on under its first line
            line += 1
            rows.append({"entry": -1, "x": x + 6, "text_x": x + 14, "y": line * _LINE_PX + 9, "text": more})
        x += size if len(parts) == 1 else width_px
    data = pd.DataFrame(rows)
    width = max(width_px, float((data["text_x"] + _CHAR_PX * data["text"].str.len()).max()))
    scale_x = alt.Scale(domain=[0, width], nice=False, zero=True)
    scale_y = alt.Scale(domain=[0, (line + 1) * _LINE_PX], nice=False, zero=True, reverse=True)
    base = alt.Chart(data).encode(x=alt.X("x:Q", axis=None, scale=scale_x), y=alt.Y("y:Q", axis=None, scale=scale_y))
    layers = [
        base.mark_text(align="left", baseline="middle", fontSize=12, color="#333333").encode(
            x=alt.X("text_x:Q", axis=None, scale=scale_x), text="text:N"
        )
    ]
    for number, entry in enumerate(entries):
        layers.append(base.transform_filter(alt.datum.entry == number).mark_point(**entry.mark))
    return alt.layer(*layers).properties(width=width, height=(line + 1) * _LINE_PX, view=alt.ViewConfig(stroke=None))
