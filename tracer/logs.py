"""pttrace's log: what the recorder asks gdb and why the target stops (``--verbose``, ``--log FILE``).

Silent by default; warnings the user must see go into the session instead, where every view shows them.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from tracer.errors import UsageError

FORMAT = "%(asctime)s %(name)s %(threadName)s: %(message)s"


def configure_logging(verbose: bool, log_file: Path | None) -> None:
    root = logging.getLogger("pttrace")
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.propagate = False
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("pttrace: %(message)s"))
        root.addHandler(handler)
    if log_file is not None:
        try:
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the log file {log_file}: {exc.strerror}.") from None
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if root.handlers else logging.WARNING)
    if not root.handlers:
        root.addHandler(logging.NullHandler())
