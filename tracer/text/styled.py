"""Styled lines for the short answers of ``pttrace where``: bold, dim, italic and three colours.

rich took ~50 ms of imports in a ``where`` whose whole answer is a dozen lines (the target is 0.1 s
with the symbol index cached); these are the few SGR codes it would have written. Every piece goes
through ``escape.visible``: the names printed come from libraries, which anyone can craft.
"""
from __future__ import annotations

import os
import sys
TYPE_CHECKING = False  # not typing's: importing typing costs `where` ~5-10 ms; mypy still reads the block
if TYPE_CHECKING:
    from typing import TextIO

from tracer.text.escape import visible

_SGR = {"bold": "1", "dim": "2", "italic": "3", "green": "32", "yellow": "33", "cyan": "36"}


class Line:
    """A line made of pieces, each with its style (words from ``_SGR``, space-separated, or none)."""

    def __init__(self, text: str = "", style: str = ""):
        self.pieces: list[tuple[str, str]] = []
        self.append(text, style)

    def append(self, text: str, style: str = "") -> None:
        if text:
            self.pieces.append((text, style))

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.pieces)


def wants_color(stream: TextIO) -> bool:
    """Colour on a terminal, as rich decides it: ``NO_COLOR`` and ``TERM=dumb`` turn it off,
    ``FORCE_COLOR`` on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Printer:
    """Writes ``Line``s (or strings) to a stream, styled only when it is a terminal."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.color = wants_color(self.stream)

    def print(self, line: Line | str = "") -> None:
        pieces = [(line, "")] if isinstance(line, str) else line.pieces
        out = []
        for text, style in pieces:
            text = visible(text)
            codes = ";".join(_SGR[w] for w in style.split() if w in _SGR) if self.color else ""
            out.append(f"\x1b[{codes}m{text}\x1b[0m" if codes else text)
        self.stream.write("".join(out) + "\n")
