"""The DataTable every pane and dialog of the TUI uses: one that never shows cells drawn at a column
width the table has since changed."""
from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable


class Table(DataTable):
    """Textual's DataTable measures its columns only when its own Idle comes round, but keeps each cell
    it draws in caches whose keys leave out the column's width. When the screen is painted between the
    rows' arrival and that Idle (on a busy machine the paint is often due first), the rows are drawn at
    their columns' label widths ("pytho", "Modul") and stay so after the columns widen, beside rows
    first drawn later at the measured widths: the 80x24 terminal test saw a call path drawn at two
    widths at once, one run in six at load 7 (issue 31). So the caches go whenever the columns' widths
    differ from the ones the table last drew at."""

    _drawn_widths: tuple[int, ...] = ()

    def render_lines(self, crop: Region) -> list[Strip]:
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        if widths != self._drawn_widths:
            self._drawn_widths = widths
            self._clear_caches()  # (Textual's own: every cache of rendered cells, rows and lines)
        return super().render_lines(crop)
