"""One exception family; only the CLI turns these into a message and an exit code."""
from __future__ import annotations


class PttraceError(Exception):
    """A failure we can explain in one sentence. ``hint`` is an optional second line of help."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(PttraceError):
    """Bad input from the user: a missing script, a bad option value."""


class GdbNotFound(PttraceError):
    """gdb is missing or too old."""


class GdbDied(PttraceError):
    """gdb went away under us (exit code 3, as when it dies while the target runs: not bad input)."""

    exit_code = 3


class TargetError(PttraceError):
    """The target process cannot be launched or attached to."""


class PermissionDenied(TargetError):
    """ptrace refused: Yama, capabilities or another user."""


class SessionError(PttraceError):
    """A session id that matches nothing, or a file that is not a session."""


class SymbolError(PttraceError):
    """A library that cannot be read as ELF, or a symbol that is not there."""
