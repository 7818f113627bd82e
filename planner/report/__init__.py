"""The report page (`rlplan report`, `plan --html`, `sweep --html`): one self-contained HTML
file from a plan JSON and/or a sweep JSON — see `planner.report.page`."""

from planner.report.page import render

__all__ = ["render"]
