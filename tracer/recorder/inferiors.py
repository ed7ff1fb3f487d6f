"""The processes gdb debugs for one recording."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Inferior:
    """One process gdb debugs for this recording (gdb's thread group ``i1``, ``i2``...)."""

    group: str
    pid: int | None = None
    state: str = "starting"  # "running", "stopped", "exited", "detached"
    attached: bool = False
    exit_code: int | None = None
    signal: str | None = None  # the signal that ended it
    end_reported: bool = False  # gdb said it ended (not only read from its zombie: ProcessTable.thread_exited)

    @property
    def number(self) -> int:
        """gdb's inferior number (``inferior N``)."""
        return int(self.group.lstrip("i") or 1)

    @property
    def live(self) -> bool:
        return self.pid is not None and self.state not in ("exited", "detached")
