"""Splitting C++ text (demangled names, declarations, schema argument lists) at top-level separators.

Standard library only: the agent imports it inside gdb, and so do the symbols-free readers of
native_functions.yaml and of key-set ABIs.
"""
from __future__ import annotations


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside any (), <>, [] or {} (``->`` is not a closing angle), each part stripped:
    ``"a, b<c, d>, e[1, 2]"`` -> ``["a", "b<c, d>", "e[1, 2]"]``; ``""`` -> ``[]``."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "(<[{":
            depth += 1
        elif ch in ")]}" or (ch == ">" and text[i - 1:i] != "-"):
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i].strip())
            i += len(sep)
            start = i
            continue
        i += 1
    tail = text[start:].strip()
    if tail or out:
        out.append(tail)
    return out
