"""The agent's log: what it caught and went on from, for someone finding out why a frame is missing.

Off unless ``pttrace-setup`` names a file (``"log"`` in its configuration): nothing then reaches
gdb's own output, which pttrace parses.
"""
from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the agent's import stays light
if TYPE_CHECKING:
    from typing import Callable


class _Log:
    """The calls of logging's Logger the agent makes, which do nothing until ``open_log`` points them at the
    logger: logging is imported then, not with the agent (its import, with threading, string and traceback, was
    ~10% of the agent's, which gdb does before the target may start)."""

    CALLS = ("debug", "info", "warning", "exception")
    debug: Callable[..., None]
    info: Callable[..., None]
    warning: Callable[..., None]
    exception: Callable[..., None]

    def __init__(self):
        self.logger = None
        for name in self.CALLS:
            setattr(self, name, _nothing)

    def use(self, logger) -> None:
        self.logger = logger
        for name in self.CALLS:
            setattr(self, name, getattr(logger, name))


def _nothing(msg, *args, **kwargs) -> None:
    return None


LOG = _Log()


def open_log(path: str) -> None:
    import logging

    logger = logging.getLogger("pttrace.agent")
    logger.propagate = False
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for old in list(logger.handlers):
        logger.removeHandler(old)
        old.close()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    LOG.use(logger)
