"""What a recording tells its listener (typed events) and its session (warnings): one sender that every
part is handed as ``emit`` and ``warn``, so that none of them needs the recorder."""
from __future__ import annotations

import logging
from typing import Callable

from tracer.errors import PttraceError
from tracer.recorder.events import Listener, RecorderEvent, WarningRaised
from tracer.recorder.outcome import Outcome
from tracer.session import storage

log = logging.getLogger("pttrace.recorder")


class Notices:
    def __init__(self, listener: Listener, writer: Callable[[], storage.SessionWriter | None], outcome: Outcome):
        self._listener = listener
        self._writer = writer
        self._outcome = outcome
        self.warnings: list[str] = []

    def emit(self, event: RecorderEvent) -> None:
        try:
            self._listener(event)
        except Exception:  # the outer edge of a listener: a UI's bug must not end the recording
            log.exception("the listener failed on %r", event)

    def warn(self, message: str) -> None:
        """Said once: in the session (once it is open) and to the listener."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        log.info("warning: %s", message)
        writer = self._writer()
        if writer:
            try:
                writer.warning(message)
            except PttraceError as exc:
                self._outcome.write_failed(exc.message)
        self.emit(WarningRaised(message))
