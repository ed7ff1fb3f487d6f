"""The layout the README's "How it is built" describes, checked over the code itself: tracer/'s imports
(read with ast from every module: top-level, inside functions and under ``TYPE_CHECKING`` alike) form no
circle, run down the layers only, and third-party packages stay at their edges."""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TRACER = Path(__file__).resolve().parents[2] / "tracer"

# The README's layers, top to bottom: a package imports its own layer's or a lower one's, never a higher.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "__main__"),
    ("commands",),
    ("tui", "export"),
    ("recorder",),
    ("gdb",),
    ("sources", "scripted"),
    ("session", "dispatch", "values"),
    ("pyruntime", "symbols"),
    ("text", "errors", "settings", "startenv", "logs", "elfparts", "probes", ""),  # "": tracer/__init__.py (the version)
)

# Where each third-party package may be imported (a package of tracer/, with its subpackages).
EDGES: dict[str, tuple[str, ...]] = {
    "pygdbmi": ("gdb",),
    "elftools": ("symbols",),
    "cxxfilt": ("symbols",),
    "zstandard": ("symbols",),
    "textual": ("tui",),
    "rich": ("commands", "export", "tui"),
    "gdb": ("gdb.agent",),  # gdb's own Python module: only inside gdb
    "torch": ("values.probe",),  # the layout probe, run by the target's interpreter (never imported by pttrace)
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, without the leading "tracer."; "" for tracer/__init__.py
    path: Path
    is_package: bool

    @property
    def room(self) -> str:
        """The top-level package (or loose module) of tracer/ it belongs to."""
        return self.name.split(".")[0]


@cache
def modules() -> dict[str, Module]:
    out = {}
    for path in sorted(TRACER.rglob("*.py")):
        parts = list(path.relative_to(TRACER).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        out[name] = Module(name, path, is_package)
    return out


def _known(dotted: str) -> str:
    """The module of tracer/ a dotted name (without "tracer.") lands in: itself, or its nearest package."""
    mods = modules()
    while dotted not in mods:
        dotted = dotted.rpartition(".")[0]
    return dotted


@cache
def imports() -> dict[str, tuple[set[str], set[str]]]:
    """{module: (the modules of tracer/ it imports, the top-level names of the other packages it imports)}."""
    out = {}
    for name, mod in modules().items():
        inside: set[str] = set()
        outside: set[str] = set()
        package = name if mod.is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(mod.path.read_text(), str(mod.path))):
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - (node.level - 1)]
                    full = ".".join(["tracer", *base, *([node.module] if node.module else [])])
                else:
                    full = node.module or ""
                targets = [(full, a.name) for a in node.names]
            else:
                continue
            for full, member in targets:
                if full != "tracer" and not full.startswith("tracer."):
                    outside.add(full.split(".")[0])
                    continue
                dotted = full[len("tracer."):] if full != "tracer" else ""
                sub = f"{dotted}.{member}" if dotted and member else (member or dotted)
                # `from tracer.x import y` imports the module tracer.x.y when there is one, else tracer.x
                inside.add(sub if member and sub in modules() else _known(dotted))
        inside.discard(name)
        out[name] = (inside, outside)
    return out


def _rank(room: str) -> int:
    for i, layer in enumerate(LAYERS):
        if room in layer:
            return i
    raise AssertionError(f"tracer/{room} is in no layer of the README's map: add it to LAYERS and the README")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_reader_of_imports_sees_every_kind_of_import():
    # What the other tests rely on: relative, absolute, `from . import module`, lazy and TYPE_CHECKING ones.
    inside, outside = imports()["symbols.dwarf.reader"]
    assert {"symbols.cache", "symbols.elffile", "symbols.dwarf.unit", "symbols.dwarf.sections"} <= inside
    inside, outside = imports()["symbols.elffile"]
    assert "elftools" in outside
    assert "dispatch.keyset_abi" in imports()["dispatch.native_functions"][0]  # imported inside a function
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back_through_others():
    graph = {name: inside for name, (inside, _outside) in imports().items()}
    assert _cycles(graph) == []


def test_the_rooms_import_one_way():
    graph: dict[str, set[str]] = {}
    for name, (inside, _outside) in imports().items():
        room = modules()[name].room
        graph.setdefault(room, set()).update(modules()[t].room for t in inside if modules()[t].room != room)
    assert _cycles(graph) == []


def test_no_import_runs_up_the_layers():
    upward = []
    for name, (inside, _outside) in sorted(imports().items()):
        for target in sorted(inside):
            if _rank(modules()[target].room) < _rank(modules()[name].room):
                upward.append(f"tracer.{name} imports tracer.{target}")
    assert upward == []


def test_third_party_packages_stay_at_their_edges():
    stray = []
    for name, (_inside, outside) in sorted(imports().items()):
        for package in sorted(outside - set(sys.stdlib_module_names) - {"__future__"}):
            rooms = EDGES.get(package)
            if rooms is None:
                stray.append(f"tracer.{name} imports {package}, which has no edge here: add it to EDGES and the README")
            elif not any(name == room or name.startswith(room + ".") for room in rooms):
                stray.append(f"tracer.{name} imports {package} (only in {', '.join(rooms)})")
    assert stray == []


def test_the_agent_inside_gdb_needs_only_the_standard_library_and_gdb():
    # gdb's Python has none of pttrace's dependencies: everything the agent imports, all the way down.
    seen: set[str] = set()
    todo = [name for name in modules() if name == "gdb.agent" or name.startswith("gdb.agent.")]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imports()[name][0])
    needs = {(name, package) for name in seen for package in imports()[name][1]
             if package not in sys.stdlib_module_names and package not in ("__future__", "gdb")}
    assert sorted(needs) == []
