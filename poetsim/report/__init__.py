"""Reporting: altair charts of one run, the HTML report of a sweep, and the pages that hold them.

The only package that imports altair (and, through it, vl-convert). Every page it writes opens
without internet and without a link that goes online: the Vega JavaScript is inline, once per
page. Every chart is also written as a PNG (at twice the pixel density) and an SVG.
"""

from poetsim.report.charts import (
    footer_text,
    save_chart,
    save_run_charts,
    schedule_chart,
    stage_states,
    timeline_chart,
)
from poetsim.report.report import build_report

__all__ = [
    "build_report",
    "footer_text",
    "save_chart",
    "save_run_charts",
    "schedule_chart",
    "stage_states",
    "timeline_chart",
]
