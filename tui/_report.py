"""``/doctor``'s report in the conversation, laid out per finding so it wraps at any width.

``abhed doctor`` prints fixed columns (mark, area, summary, and each fix indented
17 columns under it), which suits a terminal's scrollback.  In the TUI the same
lines soft-wrapped at 60 columns lost the columns: a long summary ran back to
the left edge and a fix was no longer under its problem.  Here each finding is
one row of a two-column grid, the mark on the left and the area, summary and fix
wrapped inside the right column, so a fix always reads as its problem's.  The
plain text (export, copy, tests) stays ``Report.lines()``, the words `abhed
doctor` prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tui._entries import Look, NoticeEntry
from tui._safe import visible

if TYPE_CHECKING:
    from appliance.doctor import Report

__all__ = ["DoctorEntry"]

_MARK = {"ok": "ok", "problem": "PROBLEM", "note": "note"}
_VERDICT = {0: "all is well", 1: "something needs a fix", 2: "some checks could not look"}


class DoctorEntry(NoticeEntry):
    """One doctor report: a row per finding (mark | area: summary, then its fix)."""

    def __init__(self, report: Report) -> None:
        super().__init__("\n".join(report.lines()), "error" if report.exit_code else "info")
        self.rows: list[tuple[str, str, str, str]] = [
            (f.status, f.area, f.summary, f.fix) for f in report.findings]
        self.rows += [("error", area, "could not look (see above)", "")
                      for area in report.could_not_look]
        self.verdict = f"doctor: {_VERDICT[report.exit_code]}"

    def renderable(self, look: Look) -> RenderableType:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, overflow="fold")
        for status, area, summary, fix in self.rows:
            bad = status in ("problem", "error")
            mark = Text(_MARK.get(status, "ERROR"), style=look.error if bad else look.muted)
            body = Text.assemble((f"{visible(area)}: ", "bold"), visible(summary))
            if fix:
                body.append("\nfix: ", style=look.warning)
                body.append(visible(fix))
            grid.add_row(mark, body)
        return Group(grid, Text(self.verdict, style=look.error if self.tone == "error" else
                                look.muted))
