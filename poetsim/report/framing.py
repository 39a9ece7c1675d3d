"""What every chart carries: a title, a subtitle that says how to read it, and the footer.

The footer holds the scenario and the model's assumptions, so a chart copied out of its page
still says what it assumes. Also the files of a chart: PNG at twice the pixel density and SVG,
for papers.
"""

import textwrap
from collections.abc import Iterable
from pathlib import Path

import altair as alt
import vl_convert
from altair.typing import ChartType

from poetsim.assumptions import ASSUMPTIONS
from poetsim.report.palette import CHART_CONFIG

_FOOTER_WIDTH_CHARS = 130
#: PNGs are drawn at this many device pixels per CSS pixel (sharp on print and high-DPI screens).
PNG_SCALE = 2
#: The Vega-Lite version altair writes, as vl-convert names it ("v6_4" for altair's "v6.4.1").
VL_VERSION = "_".join(alt.SCHEMA_VERSION.split(".")[:2])


def footer_text(scenario: str, timings: Iterable[str]) -> str:
    """The footer every chart carries: scenario, assumptions and timing model(s).

    The timing model matters most, since `compute-only` hides paging time and static energy
    that `overlap` counts.
    """
    # Timing members print as "Timing.OVERLAP"; their value is the name users write.
    names = sorted({str(getattr(t, "value", t)) for t in timings if isinstance(t, str) and t}) or ["unknown"]
    return f"Scenario: {scenario}. {ASSUMPTIONS}; timing: {', '.join(names)}."


def framed(chart: ChartType, title: str, footer: str, subtitle: str | None = None, wrap_chars: int = 0) -> alt.VConcatChart:
    """`chart` with a title (and optional subtitle) on top and the footer below, left-aligned.

    It is configured with the report's type sizes. An empty `footer` draws none: a page that
    states the assumptions once at its foot embeds its charts without one, while the PNG and SVG
    files, which travel alone, keep it. `wrap_chars` wraps the subtitle narrower (a chart for a
    phone).

    A one-chart vertical concatenation is the Vega-Lite way to have both a title and a
    bottom-anchored footer on any chart, faceted and layered ones included.
    """
    width = wrap_chars or _FOOTER_WIDTH_CHARS
    head = alt.TitleParams(text=_lines(title, width), subtitle=_lines(subtitle, width) if subtitle else "", anchor="start")
    if not footer:
        return alt.vconcat(chart.properties(title=head)).configure(**CHART_CONFIG)
    foot = alt.TitleParams(
        text=_lines(footer, width), orient="bottom", anchor="start", fontSize=11, fontWeight="normal", color="#555555"
    )
    return alt.vconcat(chart.properties(title=head), title=foot).configure(**CHART_CONFIG)


def _lines(text: str, width: int = _FOOTER_WIDTH_CHARS) -> list[str]:
    return textwrap.wrap(text, width) or [""]


def save_images(chart: alt.TopLevelMixin | dict, directory: Path, stem: str) -> list[Path]:
    """Write `stem.png` (at PNG_SCALE) and `stem.svg` into `directory`; return both paths.

    Takes the chart or its Vega-Lite spec: turning a chart into its spec validates it, which
    takes longer than drawing it, so callers that need the spec too pass it once.
    """
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    png, svg = directory / f"{stem}.png", directory / f"{stem}.svg"
    png.write_bytes(vl_convert.vegalite_to_png(spec, vl_version=VL_VERSION, scale=PNG_SCALE))
    svg.write_text(vl_convert.vegalite_to_svg(spec, vl_version=VL_VERSION), encoding="utf-8")
    return [png, svg]
