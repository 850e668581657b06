"""Plots as standalone SVG text (no plotting library needed)."""

from .svg import PALETTE, grid, interval_chart, line_chart, nice_ticks, pr_chart, scatter

__all__ = ["PALETTE", "grid", "interval_chart", "line_chart", "nice_ticks", "pr_chart", "scatter"]
