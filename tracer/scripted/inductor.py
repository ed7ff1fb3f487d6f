"""Which inductor kernel a generated library runs, the FX nodes and ATen ops it implements, and the user's
lines they came from: read from what inductor wrote, never guessed.

What inductor writes on CPU (torch 2.13, measured on tests/targets/compile_fn.py):
- the kernel's library ``<cache>/xx/<hash>.main.so``, built from ``<hash>.main.cpp`` beside it, whose
  function is ``extern "C" void kernel(...)`` (no DWARF: inductor builds with -O3, no -g);
- the output module ``<cache>/yy/<hash>.py``, which defines each kernel as
  ``cpp_fused_add_mul_sigmoid_tanh_0 = async_compile.cpp_pybinding([...], r'''<the .cpp's kernel>''')``
  and calls it from ``Runner.call``. The kernel's name lists the ATen ops it fuses
  (``cpp.descriptive_names = "original_aten"``, the default); nothing else in the module says which FX
  nodes or source lines it came from: the default module has no source-node comments, and
  ``comment_origin = True`` adds none to CPU kernels (2.13);
- with ``TORCH_COMPILE_DEBUG=1`` only, a debug directory ``torch_compile_debug/run_*/torchinductor/<graph>/``
  (under the working directory, or ``TORCH_COMPILE_DEBUG_DIR``) holding a copy of the output module
  (``output_code.py``), the post-grad FX graph with each node's source line (``fx_graph_transformed.py``:
  ``# File: compile_fn.py:10 in g, code: …`` above the nodes it made) and which nodes each kernel
  implements (``inductor_provenance_tracking_node_mappings.json``, ``cppCodeToPost``).
So the ops come from the kernel's name (labelled so) unless the debug directory is there, which alone
gives the FX nodes and the user's lines; where it is missing, ``GeneratedKernel.missing`` says so.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CACHE_DIR = re.compile(r"(^|/)torchinductor_[^/]*/")
_PYBINDING = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(\[[^\]]*\], r'''\n(.*?)'''\)", re.M | re.S)
_CALL = re.compile(r"^\s*(\w+)\(")
_KERNEL_DEF = re.compile(r'extern "C"\s+void\s+kernel\(')
_NAME_OPS = re.compile(r"^cpp_fused_(.+?)_\d+$")
_FILE_COMMENT = re.compile(r"^\s*# File: (.+):(\d+) in ([^,]+), code: (.*)$")
_NODE = re.compile(r"^\s*(\w+)(?:: \"[^\"]*\")? = torch\.ops\.([\w.]+)\(")
_CPP_PREFIX = b"#include <torch/csrc/inductor/cpp_prefix.h>"
MAX_MODULES = 2000  # output modules looked through for one library (newest first)
MAX_FILE = 8 << 20


@dataclass(frozen=True)
class FxNode:
    """One post-grad FX node of a kernel: its name, ATen op and the user's line it came from."""

    name: str
    op: str | None = None  # aten.sigmoid.default
    file: str | None = None
    line: int | None = None
    function: str | None = None
    code: str | None = None


@dataclass
class GeneratedKernel:
    name: str | None  # cpp_fused_add_mul_sigmoid_tanh_0; None: no output module defines this library's kernel
    library: str
    cpp: str | None = None  # the .cpp beside the library
    cpp_line: int | None = None  # its ``extern "C" void kernel(`` line
    module: str | None = None  # the output module that defines and calls it
    module_line: int | None = None  # the call in Runner.call
    ops_from_name: list[str] = field(default_factory=list)
    nodes: list[FxNode] = field(default_factory=list)
    debug_dir: str | None = None
    missing: str | None = None  # what could not be found, and how to get it

    @property
    def aten_ops(self) -> list[str]:
        """The ATen ops it implements: the FX nodes' when known, else those its name lists."""
        if self.nodes:
            return list(dict.fromkeys(n.op.rsplit(".", 1)[0] if n.op and n.op.count(".") >= 2 else n.op
                                      for n in self.nodes if n.op))
        return [f"aten.{op}" for op in self.ops_from_name]

    @property
    def user_lines(self) -> list[FxNode]:
        """One node per distinct user line, in graph order."""
        seen: dict[tuple, FxNode] = {}
        for n in self.nodes:
            if n.file and (n.file, n.line) not in seen:
                seen[(n.file, n.line)] = n
        return list(seen.values())

    def summary(self) -> str:
        """One line: ``inductor kernel cpp_fused_…_0: aten.sigmoid, aten.mul … (FX sigmoid, mul …)``."""
        if self.name is None:
            return "inductor-generated code (" + (self.missing or "kernel not identified") + ")"
        ops = ", ".join(self.aten_ops) or "?"
        text = f"inductor kernel {self.name}: {ops}"
        if self.nodes:
            text += " (FX " + ", ".join(n.name for n in self.nodes) + ")"
        elif self.ops_from_name:
            text += " (from its name)"
        lines = self.user_lines
        if lines:
            text += " ← " + ", ".join(f"{os.path.basename(n.file or '')}:{n.line}" for n in lines)
        return text


@lru_cache(maxsize=4096)
def is_generated(library: str | None) -> bool:
    """A library inductor built: in its cache directory (``/tmp/torchinductor_$USER/``), or, wherever
    ``TORCHINDUCTOR_CACHE_DIR`` put it, beside a .cpp that starts as inductor's C++ does."""
    if not library or not library.endswith(".so"):
        return False
    if CACHE_DIR.search(library) is not None:
        return True
    try:
        with open(library[:-3] + ".cpp", "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return head.lstrip().startswith(_CPP_PREFIX)


def kernel_name_at(source_line: str | None) -> str | None:
    """``cpp_fused_add_0(arg0_1, buf0)`` (the output module's call) -> ``cpp_fused_add_0``."""
    m = _CALL.match(source_line or "")
    return m.group(1) if m else None


def ops_in_name(name: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The ATen op names a descriptive kernel name joins with ``_`` (``cpp_fused_add_mul_sigmoid_tanh_0``):
    split where the pieces are known op names (``known``), each piece alone otherwise."""
    m = _NAME_OPS.match(name)
    if not m:
        return []
    parts = m.group(1).split("_")
    out: list[str] = []
    i = 0
    while i < len(parts):
        for j in range(len(parts), i, -1):  # the longest known name from here
            piece = "_".join(parts[i:j])
            if piece in known or (j == i + 1):
                out.append(piece)
                i = j
                break
    return out


def _read(path: str | Path) -> str | None:
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > MAX_FILE:
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _kernel_part(cpp_text: str) -> str:
    """The kernel's source as the output module holds it: the .cpp up to its Python bindings."""
    cut = cpp_text.find("// Python bindings to call kernel():")
    return (cpp_text[:cut] if cut >= 0 else cpp_text).strip()


def _modules(root: Path) -> list[Path]:
    try:
        found = [p for p in root.glob("*/*.py")]
    except OSError:
        return []
    found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
    return found[:MAX_MODULES]


def _definitions(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in _PYBINDING.finditer(text)}


def _line_of(text: str, pattern: re.Pattern) -> int | None:
    for n, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            return n
    return None


def find_module(library: str, kernel_source: str, prefer: str | None = None) -> tuple[str, str] | None:
    """(output module, kernel name) defining this kernel source: ``prefer`` (the module a recorded path
    ran) first, then the modules of the library's cache directory, newest first."""
    candidates = [Path(prefer)] if prefer else []
    root = Path(library).parent.parent
    candidates += [p for p in _modules(root) if str(p) != prefer]
    for path in candidates:
        text = _read(path)
        if text is None or "cpp_pybinding" not in text:
            continue
        for name, src in _definitions(text).items():
            if src == kernel_source:
                return str(path), name
    return None


def debug_roots(cwd: str | None) -> list[Path]:
    """Where TORCH_COMPILE_DEBUG writes: ``$TORCH_COMPILE_DEBUG_DIR/torch_compile_debug`` (pttrace's
    environment, which a launched target inherits) and the target's working directory."""
    roots = []
    env = os.environ.get("TORCH_COMPILE_DEBUG_DIR")
    if env:
        roots.append(Path(env) / "torch_compile_debug")
    if cwd:
        roots.append(Path(cwd) / "torch_compile_debug")
    return roots


@lru_cache(maxsize=256)
def _debug_dir_of(module_text: str, roots: tuple[str, ...]) -> str | None:
    for root in roots:
        try:
            copies = sorted(Path(root).glob("run_*/torchinductor/*/output_code.py"), reverse=True)
        except OSError:
            continue
        for copy in copies:
            if _read(copy) == module_text:
                return str(copy.parent)
    return None


def graph_nodes(fx_text: str) -> dict[str, FxNode]:
    """The nodes of an FX graph's readable text, each with the ``# File:`` line above it."""
    nodes: dict[str, FxNode] = {}
    where: tuple | None = None
    for line in fx_text.splitlines():
        fm = _FILE_COMMENT.match(line)
        if fm:
            where = (fm.group(1), int(fm.group(2)), fm.group(3), fm.group(4).strip())
            continue
        if not line.strip():
            where = None
            continue
        nm = _NODE.match(line)
        if nm:
            file, lineno, fn, code = where or (None, None, None, None)
            nodes[nm.group(1)] = FxNode(nm.group(1), nm.group(2), file, lineno, fn, code)
    return nodes


def kernel_nodes(debug_dir: str, name: str) -> list[FxNode] | None:
    """The post-grad nodes the debug directory says kernel ``name`` implements, in graph order."""
    mapping = _read(Path(debug_dir) / "inductor_provenance_tracking_node_mappings.json")
    fx = _read(Path(debug_dir) / "fx_graph_transformed.py") or _read(Path(debug_dir) / "fx_graph_readable.py")
    if mapping is None or fx is None:
        return None
    try:
        code_to_post = json.loads(mapping).get("cppCodeToPost") or {}
    except (ValueError, AttributeError):
        return None
    names = next((v for k, v in code_to_post.items() if k.split(":", 1)[0] == name), None)
    if names is None:
        return None
    graph = graph_nodes(fx)
    order = list(graph)
    picked = [graph.get(n) or FxNode(n) for n in names]
    picked.sort(key=lambda n: order.index(n.name) if n.name in graph else len(order))
    return picked


NO_DEBUG = ("inductor's output module names no FX nodes or source lines on CPU (torch 2.13): run the target "
            "with TORCH_COMPILE_DEBUG=1 for them")


def describe(library: str, module: str | None = None, cwd: str | None = None,
             known_ops: frozenset[str] = frozenset()) -> GeneratedKernel:
    """What inductor's files say of the kernel in ``library`` (``module``: the output module the recorded
    path ran, when one did)."""
    return _describe(library, module, cwd, known_ops, tuple(str(r) for r in debug_roots(cwd)))


@lru_cache(maxsize=256)
def _describe(library: str, module: str | None, cwd: str | None, known_ops: frozenset[str],
              roots: tuple[str, ...]) -> GeneratedKernel:
    out = GeneratedKernel(None, library)
    cpp = library[:-3] + ".cpp"
    cpp_text = _read(cpp)
    if cpp_text is None:
        out.missing = f"its source {cpp} is no longer on this machine"
        return out
    out.cpp = cpp
    out.cpp_line = _line_of(cpp_text, _KERNEL_DEF)
    found = find_module(library, _kernel_part(cpp_text), module)
    if found is None:
        out.missing = "no inductor output module in its cache directory defines this kernel"
        return out
    out.module, out.name = found
    module_text = _read(out.module) or ""
    out.module_line = _line_of(module_text, re.compile(rf"^\s+{re.escape(out.name)}\("))
    out.ops_from_name = ops_in_name(out.name, known_ops)
    out.debug_dir = _debug_dir_of(module_text, roots)
    if out.debug_dir is None:
        out.missing = NO_DEBUG
        return out
    nodes = kernel_nodes(out.debug_dir, out.name)
    if nodes is None:
        out.missing = f"the debug directory {out.debug_dir} does not map this kernel to FX nodes"
    else:
        out.nodes = nodes
    return out
