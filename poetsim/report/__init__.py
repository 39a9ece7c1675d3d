"""Reporting: altair charts of one run and the HTML report of a sweep.

The only package that imports altair (and, through it, vl-convert). Every file it writes opens
without internet: HTML pages carry the Vega JavaScript inline, PNGs are rendered locally.
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
