"""``e``: markdown notes of the session, written beside the session file in a worker (asking before
overwriting), with the source pane's finder so that the notes find the same files the pane shows."""
from __future__ import annotations

import os
from pathlib import Path

from textual import work

from tracer.errors import PttraceError
from tracer.sources import SourceFinder
from tracer.tui.app_base import AppBase
from tracer.tui.messages import ExportWritten
from tracer.tui.screens import Confirm
from tracer.tui.widgets.source import SourcePane


def export_path(session_path: Path | None, session_id: str | None) -> Path:
    """Where the markdown notes go: beside the session file, else in the current directory."""
    if session_path is not None and os.access(session_path.parent, os.W_OK):
        return session_path.with_suffix(".md")
    return Path.cwd() / f"{session_id or 'pttrace-session'}.md"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class ExportActions(AppBase):
    def action_export(self) -> None:
        if self.source.session_path is None:
            self.notify("there is no session to export yet", severity="warning", timeout=4)
            return
        path = export_path(self.source.session_path, getattr(self.state.info, "id", None))
        if not path.exists():
            self._start_export(path)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_export(path)
            else:
                self.notify(f"{path.name} kept as it was", title="export", timeout=4)

        self.push_screen(Confirm(f"{path} exists. Overwrite it with notes of this session?",
                                 "Overwrite", "Keep it"), answered)

    def _start_export(self, path: Path) -> None:
        self.notify("writing markdown notes…", timeout=2)
        self._export_worker(path, self.query_one(SourcePane).finder())

    @work(thread=True, group="export", exit_on_error=False)
    def _export_worker(self, path: Path, finder: SourceFinder) -> None:
        from tracer.export import render

        try:
            session = self.source.load_session()
            write_atomically(path, render(session, "markdown", finder=finder))
        except PttraceError as exc:
            self.post_message(ExportWritten(None, error=exc.message))
        except OSError as exc:
            self.post_message(ExportWritten(None, error=f"cannot write the notes: {exc.strerror or exc}"))
        except Exception as exc:
            self.post_message(ExportWritten(None, error=f"export failed: {type(exc).__name__}: {exc}"))
        else:
            self.post_message(ExportWritten(path, len(session.hits)))

    def on_export_written(self, message: ExportWritten) -> None:
        if message.error:
            self.notify(message.error, title="export", severity="error", timeout=8)
        else:
            self.notify(f"{message.hits:,} hits written to {message.path}", title="export", timeout=8)
