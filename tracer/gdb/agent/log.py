"""The agent's log: what it caught and went on from, for someone finding out why a frame is missing.

Off unless ``pttrace-setup`` names a file (``"log"`` in its configuration): nothing then reaches
gdb's own output, which pttrace parses.
"""
from __future__ import annotations


class _Log:
    """The calls of logging's Logger the agent makes, which do nothing until ``open_log``: logging is imported
    then, not with the agent (its import, with threading, string and traceback, was ~10% of the agent's, which
    gdb does before the target may start)."""

    def __init__(self):
        self.logger = None

    def debug(self, msg, *args, **kwargs) -> None:
        if self.logger is not None:
            self.logger.debug(msg, *args, **kwargs)

    def info(self, msg, *args, **kwargs) -> None:
        if self.logger is not None:
            self.logger.info(msg, *args, **kwargs)

    def warning(self, msg, *args, **kwargs) -> None:
        if self.logger is not None:
            self.logger.warning(msg, *args, **kwargs)

    def exception(self, msg, *args, **kwargs) -> None:
        if self.logger is not None:
            self.logger.exception(msg, *args, **kwargs)


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
    LOG.logger = logger
