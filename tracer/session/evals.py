"""``--eval EXPR``: gdb expressions evaluated at every hit, in the frame stopped in, and their text.

One ``evals`` record follows its hit's record in the session file (``{"type": "evals", "seq": N,
"values": [{"expr", "text" | "error"}]}``): apart from the hit's own line and from the values pttrace
reads itself, so a session without ``--eval`` is unchanged and a reader that does not know the record
loses nothing else. Written by the agent (tracer/gdb/agent/evals.py), read by storage.py; shown by
``show``, the markdown and JSON exports and the TUI.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EVALS = "evals"
MAX_TEXT = 4000  # characters of one value kept: gdb prints a whole std::vector if asked


@dataclass(frozen=True)
class Evaluated:
    """One expression at one hit: gdb's text of its value, or why gdb could not evaluate it."""

    expr: str
    text: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"expr": self.expr}
        if self.error is not None:
            d["error"] = self.error
        else:
            d["text"] = self.text
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Evaluated":
        if not isinstance(data, dict) or not isinstance(data.get("expr"), str):
            raise ValueError("an evaluated expression without its text")
        text, error = data.get("text"), data.get("error")
        if not isinstance(text, (str, type(None))) or not isinstance(error, (str, type(None))):
            raise ValueError("an evaluated expression whose value is not text")
        return cls(data["expr"], text, error)

    def line(self) -> str:
        """``expr = value`` or ``expr: error: why``, as show and the TUI write it."""
        return f"{self.expr}: error: {self.error}" if self.error is not None else f"{self.expr} = {self.text}"


def record(seq: int, values: list[Evaluated]) -> dict[str, Any]:
    return {"type": EVALS, "seq": seq, "values": [v.to_dict() for v in values]}


def read(rec: dict[str, Any]) -> tuple[int, list[Evaluated]]:
    """The hit number and values of an ``evals`` record; ``ValueError`` if it is not one."""
    seq, values = rec.get("seq"), rec.get("values")
    if type(seq) is not int or not isinstance(values, list):
        raise ValueError("an evals record without its hit number or values")
    return seq, [Evaluated.from_dict(v) for v in values]


def clipped(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text):,} characters)"


SHOWN_HITS = 20  # hits whose values show and the markdown list; the JSON export has every one


def first_hits(evals: dict[int, list[Evaluated]], limit: int = SHOWN_HITS) -> tuple[list[tuple[int, list[Evaluated]]], int]:
    """The first ``limit`` hits' values in hit order, and how many hits with values are left out."""
    seqs = sorted(evals)
    return [(seq, evals[seq]) for seq in seqs[:limit]], max(0, len(seqs) - limit)
