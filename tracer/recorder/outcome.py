"""How a recording ends, as its parts decide it: the status the session ends with, why, whether gdb was
lost, and the session file's write error. One small object handed to the parts that may end the run
(reactions.py, ending.py); the rest of the recording reads it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    """How the recording ends: its status and reason, gdb lost or not, the first write failure."""

    status: str = "running"  # the session's end status (shutdown.final_status settles it)
    end_reason: str | None = None
    gdb_lost: bool = False  # gdb died, was killed or stopped answering: the target was not ended by it
    write_error: str | None = None  # the first failure to write the session file

    def end(self, status: str, reason: str) -> None:
        self.status, self.end_reason = status, reason

    def write_failed(self, message: str) -> None:
        self.write_error = self.write_error or message
