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
