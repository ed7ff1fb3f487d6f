"""The project's yardstick, checked over tracer/ with ast: no class over 400 lines, no function over 100, no
module over 900 (STYLE.md: small units; a unit past these is several units)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {"module": 900, "class": 400, "function": 100}

# Over the yardstick today, each at most its size now: it may shrink (and must leave this list once it fits),
# never grow. Everything else keeps to the limits.
OVER: dict[str, int] = {}


def sizes() -> dict[str, tuple[str, int]]:
    """{"path" or "path::Qualified.name": (kind, lines)} for every module, class and function of tracer/."""
    out: dict[str, tuple[str, int]] = {}
    for path in sorted((ROOT / "tracer").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        out[rel] = ("module", len(text.splitlines()))

        def walk(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    kind = "class" if isinstance(child, ast.ClassDef) else "function"
                    out[f"{rel}::{name}"] = (kind, child.end_lineno - first + 1)
                    walk(child, name + ".")
                else:
                    walk(child, prefix)

        walk(ast.parse(text, rel), "")
    return out


def test_the_reader_of_sizes_counts_what_it_should():
    found = sizes()
    assert found["tracer/symbols/dwarf/reader.py::DwarfReader.tables"][0] == "function"
    assert found["tracer/symbols/dwarf/reader.py::DwarfReader"][0] == "class"
    assert found["tracer/__init__.py"] == ("module", len((ROOT / "tracer/__init__.py").read_text().splitlines()))


def test_no_unit_is_over_the_yardstick():
    over = []
    for name, (kind, lines) in sizes().items():
        allowed = OVER.get(name, LIMITS[kind])
        if lines > allowed:
            over.append(f"{name}: a {kind} of {lines} lines (at most {allowed})")
    assert over == []


def test_the_list_of_units_over_it_is_not_stale():
    found = sizes()
    stale = [name for name in OVER if name not in found or found[name][1] <= LIMITS[found[name][0]]]
    assert stale == [], "these fit now: remove them from OVER"
