"""The operator entries of ``native_functions.yaml`` and ``derivatives.yaml``, by every name codegen gives them.

Both files ship with the wheel under ``torchgen/packaged/``. They are read line by line, not with a
YAML loader: only each entry's first line (its schema), its ``dispatch:`` kernel names and, for
derivatives, whether it makes a backward Node are needed, and a line scan of 16k lines takes ~20 ms.

Names codegen derives from an entry ``name.overload`` (see torchgen's ``gen.py`` and the autograd
``load_derivatives.py``): ``at::_ops::name_overload`` (the operator struct), ``wrapper_<Key>_name_overload``
(structured) or ``wrapper_<Key>_overload_name`` (unstructured), ``VariableType::name_overload``,
``THPVariable_name``, and for derivatives the Node ``CamelNameBackwardN``, N counting entries with the
same prefix in file order.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field

_FUNC_RE = re.compile(r"^- func:\s*([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?\s*\(")
_NAME_RE = re.compile(r"^- name:\s*([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?\s*\(")
_DISPATCH_LINE_RE = re.compile(r"^\s+[A-Za-z0-9_, ]+:\s*([A-Za-z0-9_:]+)\s*(?:#.*)?$")
# Lines of a derivatives entry that are not a backward formula for an input.
_NOT_BACKWARD = {"name", "result", "dispatch", "output_differentiability", "Default"}


@dataclass(frozen=True)
class YamlEntry:
    file: str
    line: int
    name: str
    overload: str
    schema: str  # the entry's first line without its "- func: " / "- name: "
    kernels: tuple[str, ...] = field(default=(), compare=False)  # dispatch: values (native_functions)
    variants: tuple[str, ...] = ("function",)  # native_functions: function, method
    python_module: str | None = None  # native_functions: nn, linalg, special, fft, sparse, nested
    node: str | None = None  # the backward Node it makes (derivatives)

    @property
    def aten(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


def _entries(path: str, head: re.Pattern) -> list[tuple[int, re.Match, list[str]]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    out: list[tuple[int, re.Match, list[str]]] = []
    for n, text in enumerate(lines, 1):
        m = head.match(text)
        if m:
            out.append((n, m, [text]))
        elif out and text.startswith((" ", "\t")):
            out[-1][2].append(text)
    return out


@functools.lru_cache(maxsize=4)
def native_functions(path: str) -> "NativeFunctions":
    return NativeFunctions(path)


@functools.lru_cache(maxsize=4)
def derivatives(path: str) -> "Derivatives":
    return Derivatives(path)


class NativeFunctions:
    def __init__(self, path: str):
        self.path = path
        self.entries: list[YamlEntry] = []
        self.by_struct: dict[str, list[YamlEntry]] = {}  # at::_ops::<struct>
        self.by_kernel_name: dict[str, list[YamlEntry]] = {}  # wrapper_<Key>_<x>, VariableType::<x>
        self.by_name: dict[str, list[YamlEntry]] = {}
        self.by_dispatch: dict[str, list[YamlEntry]] = {}  # at::native::<kernel> named in dispatch:
        for line, m, block in _entries(path, _FUNC_RE):
            name, overload = m.group(1), m.group(2) or ""
            kernels: list[str] = []
            variants, module = ("function",), None
            in_dispatch = False
            for text in block[1:]:
                stripped = text.strip()
                if stripped.startswith("variants:"):
                    variants = tuple(v.strip() for v in stripped[9:].split("#")[0].split(",") if v.strip())
                elif stripped.startswith("python_module:"):
                    module = stripped[14:].split("#")[0].strip() or None
                if stripped.startswith("dispatch:"):
                    in_dispatch = True
                    continue
                if in_dispatch:
                    dm = _DISPATCH_LINE_RE.match(text)
                    if dm and text.startswith("    "):
                        kernels.append(dm.group(1).rsplit("::", 1)[-1])
                        continue
                    in_dispatch = False
            e = YamlEntry(path, line, name, overload, block[0][len("- func:"):].strip(), tuple(kernels),
                          variants, module)
            self.entries.append(e)
            struct = f"{name}_{overload}" if overload else name
            self.by_struct.setdefault(struct, []).append(e)
            self.by_name.setdefault(name, []).append(e)
            cpp = name + "_out" if overload == "out" or overload.endswith("_out") else name
            forms = {struct, f"{cpp}_{overload}" if overload else cpp, f"{overload}_{name}", f"{overload}_{cpp}"}
            for form in forms:
                self.by_kernel_name.setdefault(form, []).append(e)
            for k in kernels:
                self.by_dispatch.setdefault(k, []).append(e)


def _node_prefix(name: str) -> str:
    camel = "".join(p.title() for p in name.split("_"))
    return (camel + "Backward").replace("ForwardBackward", "Backward")


class Derivatives:
    def __init__(self, path: str):
        self.path = path
        self.by_aten: dict[str, list[YamlEntry]] = {}
        self.by_node: dict[str, YamlEntry] = {}
        counters: dict[str, int] = {}
        for line, m, block in _entries(path, _NAME_RE):
            name, overload = m.group(1), m.group(2) or ""
            node = None
            if self._makes_node(block[1:]):
                prefix = _node_prefix(name)
                node = f"{prefix}{counters.get(prefix, 0)}"
                counters[prefix] = counters.get(prefix, 0) + 1
            e = YamlEntry(path, line, name, overload, block[0][len("- name:"):].strip(), node=node)
            self.by_aten.setdefault(e.aten, []).append(e)
            if node:
                self.by_node[node] = e

    @staticmethod
    def _makes_node(body: list[str]) -> bool:
        """Whether an entry has a backward formula for some input (codegen names a Node only then)."""
        for text in body:
            if not text.startswith("  ") or text.startswith("   "):
                continue  # nested (dispatch: blocks) or not a key of this entry
            key, _, value = text.strip().partition(":")
            if key in _NOT_BACKWARD or key.startswith("#"):
                continue
            if value.strip() and value.strip() != "non_differentiable":
                return True
        return False


# -------------------------------------------------------------- which entries a frame stands for

_WRAPPER_RE = re.compile(r"^wrapper_([A-Za-z0-9]+)_(.+)$")
_NODE_RE = re.compile(r"^([A-Za-z0-9]+Backward\d+)(?:_apply_functional)?$")
_CODEGEN_NAMESPACES = ("torch::autograd::VariableType::", "torch::ADInplaceOrView::", "torch::TraceType::",
                       "at::functionalization::")


def ops_of(qualified: str, native: NativeFunctions, deriv: Derivatives | None
           ) -> tuple[list[YamlEntry], list[YamlEntry]]:
    """The native_functions.yaml entries and the derivatives.yaml entries a function stands for."""
    parts = qualified.split("::")
    last = parts[-1]
    ops: list[YamlEntry] = []
    grads: list[YamlEntry] = []
    autograd = False
    if len(parts) >= 4 and parts[:2] == ["at", "_ops"] and parts[-1] in ("call", "redispatch"):
        ops = native.by_struct.get(parts[2], [])
    elif _WRAPPER_RE.match(last) and parts[0] == "at":
        rest = _WRAPPER_RE.match(last).group(2)
        ops = native.by_kernel_name.get(rest, [])
    elif qualified.startswith(_CODEGEN_NAMESPACES) and len(parts) >= 3:
        ops = native.by_kernel_name.get(last, [])
        autograd = qualified.startswith("torch::autograd::VariableType::")
    elif qualified.startswith("torch::autograd::generated::"):
        node = next((m.group(1) for p in parts[3:] if (m := _NODE_RE.match(p))), None)
        entry = deriv.by_node.get(node) if deriv and node else None
        if entry is not None:
            grads = [entry]
            ops = [e for e in native.by_name.get(entry.name, []) if e.overload == entry.overload]
        return ops, grads
    elif last.startswith("THPVariable_") and parts[0] == "torch":
        ops = native.by_name.get(last[len("THPVariable_"):], [])
    elif parts[:2] == ["at", "native"]:
        name = parts[-2] if last == "impl" and len(parts) >= 4 else last
        ops = native.by_dispatch.get(name, []) or native.by_dispatch.get(name.removeprefix("structured_"), [])
    if autograd and deriv is not None:
        seen = set()
        for e in ops:
            for g in deriv.by_aten.get(e.aten, []):
                if g.line not in seen:
                    seen.add(g.line)
                    grads.append(g)
    return ops, grads


def packaged_file(torchgen_dir: str, *parts: str) -> str | None:
    path = os.path.join(torchgen_dir, "packaged", *parts)
    return path if os.path.isfile(path) else None
