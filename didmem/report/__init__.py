"""A self-contained HTML report of one or more results: the finding first, in words.

One file, no server and no network. For each result the page opens with the finding
(:mod:`didmem.report._finding`), then the profile heatmap with a tooltip per cell, the
instantaneous, persistent and residual tables and figures (with the truth beside them when
it is known, :mod:`didmem.report._truth`), the pre-test with its power, a searchable table of
every cell (:mod:`didmem.report._cells`), the sensitivity analysis when asked for, and the
settings; with two or more results, the correlation of their profiles.
"""

from ._html import figure_png
from ._render import FIGURES, render_report, write_report

__all__ = ["render_report", "write_report", "figure_png", "FIGURES"]
