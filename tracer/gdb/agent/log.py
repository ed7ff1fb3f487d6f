"""The agent's log: what it caught and went on from, for someone finding out why a frame is missing.

Off unless ``pttrace-setup`` names a file (``"log"`` in its configuration): nothing then reaches
gdb's own output, which pttrace parses.
"""
from __future__ import annotations

import logging

LOG = logging.getLogger("pttrace.agent")
LOG.addHandler(logging.NullHandler())
LOG.propagate = False


def open_log(path: str) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for old in list(LOG.handlers):
        LOG.removeHandler(old)
        old.close()
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)
