"""The operator entries of ``native_functions.yaml`` and ``derivatives.yaml``, by every name codegen gives them.

Both files ship with the wheel under ``torchgen/packaged/``. They are read line by line, not with a
YAML loader: only each entry's first line (its schema), its ``dispatch:`` kernel names and, for
derivatives, whether it makes a backward Node are needed, and a line scan of 16k lines takes ~30 ms.
native_functions.yaml is read by ``tracer.dispatch.native_functions`` (which ``--op`` reads it with too);
derivatives.yaml here.

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

from tracer.dispatch import native_functions as nf

_NAME_RE = re.compile(r"^- name:\s*([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?\s*\(", re.M)
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


def _entries(path: str, head: re.Pattern) -> list[tuple[int, re.Match, str]]:
    """(line, head match, the entry's text) for every entry; the text runs to the next entry's head."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    heads = list(head.finditer(text))
    out: list[tuple[int, re.Match, str]] = []
    line, at = 1, 0
    for i, m in enumerate(heads):
        line += text.count("\n", at, m.start())
        at = m.start()
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append((line, m, text[m.start():end]))
    return out


@functools.lru_cache(maxsize=4)
def native_functions(path: str) -> "YamlIndex":
    return YamlIndex.load(path, "nfyaml", _parse_native_functions)


@functools.lru_cache(maxsize=4)
def derivatives(path: str) -> "YamlIndex":
    return YamlIndex.load(path, "derivyaml", _parse_derivatives)


class YamlIndex:
    """A yaml file's entries as rows, and tables from a name to row numbers. Parsed once per file
    version and kept in the pttrace cache: loading it is ~3 ms, parsing native_functions.yaml ~35 ms."""

    VERSION = 4  # bump when the rows or tables change

    def __init__(self, path: str, rows: list[tuple], tables: dict[str, dict[str, list[int]]]):
        self.path = path
        self._rows = rows
        self._tables = tables

    @classmethod
    def load(cls, path: str, kind: str, parse) -> "YamlIndex":
        from tracer.symbols import cache

        st = os.stat(path)
        key = cache.FileKey(os.path.realpath(path), st.st_size, st.st_mtime_ns, None)
        stored = cache.read(key, kind, f"-v{cls.VERSION}")
        if stored is None:
            stored = parse(path)
            cache.write(key, kind, stored, f"-v{cls.VERSION}")
        rows, tables = stored
        return cls(path, rows, tables)

    def get(self, table: str, key: str) -> list[YamlEntry]:
        return [self.entry(n) for n in self._tables.get(table, {}).get(key, ())]

    def entry(self, n: int) -> YamlEntry:
        line, name, overload, schema, kernels, variants, module, node = self._rows[n]
        return YamlEntry(self.path, line, name, overload, schema, tuple(kernels), tuple(variants), module, node)


def _parse_native_functions(path: str) -> tuple[list[tuple], dict]:
    rows: list[tuple] = []
    tables: dict[str, dict[str, list[int]]] = {"struct": {}, "kernel_name": {}, "name": {}, "dispatch": {}}

    def names_of(n: int, name: str, overload: str, out: bool) -> None:
        struct = f"{name}_{overload}" if overload else name
        tables["struct"].setdefault(struct, []).append(n)  # at::_ops::<struct>
        tables["name"].setdefault(name, []).append(n)
        cpp = name + "_out" if out else name
        # wrapper_<Key>_<x> (structured or not), VariableType::<x>, TraceType::<x>
        for form in {struct, f"{cpp}_{overload}" if overload else cpp, f"{overload}_{name}", f"{overload}_{cpp}"}:
            tables["kernel_name"].setdefault(form, []).append(n)

    for n, e in enumerate(nf.entries(nf.read(path))):
        kernels = [k.name.rsplit("::", 1)[-1] for k in e.kernels if k.written]
        rows.append((e.line, e.name, e.overload, e.schema, kernels, list(e.variants), e.python_module, None))
        names_of(n, e.name, e.overload, e.out)
        # Overloads codegen makes from this entry (``autogen: foo.out``) have no entry of their own: this one.
        for generated in e.autogen:
            g_name, _, g_overload = generated.partition(".")
            names_of(n, g_name, g_overload, g_overload == "out" or g_overload.endswith("_out"))
        for k in kernels:  # at::native::<kernel> named in dispatch:
            tables["dispatch"].setdefault(k, []).append(n)
    return rows, tables


def _node_prefix(name: str) -> str:
    camel = "".join(p.title() for p in name.split("_"))
    return (camel + "Backward").replace("ForwardBackward", "Backward")


def _parse_derivatives(path: str) -> tuple[list[tuple], dict]:
    rows: list[tuple] = []
    tables: dict[str, dict[str, list[int]]] = {"aten": {}, "node": {}}
    counters: dict[str, int] = {}
    for line, m, block in _entries(path, _NAME_RE):
        n = len(rows)
        name, overload = m.group(1), m.group(2) or ""
        nodes = []
        for key in _node_keys(block.split("\n")[1:]):
            prefix = _node_prefix(name) + ("" if key == "Default" else key)
            nodes.append(f"{prefix}{counters.get(prefix, 0)}")
            counters[prefix] = counters.get(prefix, 0) + 1
        rows.append((line, name, overload, block.split("\n", 1)[0][len("- name:"):].strip(), [], ["function"], None,
                     nodes[0] if nodes else None))
        tables["aten"].setdefault(f"{name}.{overload}" if overload else name, []).append(n)
        for node in nodes:
            tables["node"][node] = [n]
    return rows, tables


def _node_keys(body: list[str]) -> list[str]:
    """The autograd keys a derivatives entry makes a backward Node for: ``Default`` when it has a
    backward formula for some input, or each key of its ``dispatch:`` block that has one (the Node of a
    key other than Default is named with the key: ``MeanBackwardAutogradNestedTensor0``)."""
    if any(text.startswith("  dispatch:") for text in body):
        keys, current, formulas = [], None, False
        for text in body:
            if text.startswith("    ") and not text.startswith("     ") and text.strip().endswith(":"):
                if current and formulas:
                    keys.append(current)
                current, formulas = text.strip()[:-1], False
            elif current and text.startswith("      ") and _is_formula(text):
                formulas = True
        if current and formulas:
            keys.append(current)
        return keys
    return ["Default"] if any(text.startswith("  ") and not text.startswith("   ") and _is_formula(text)
                              for text in body) else []


def _is_formula(text: str) -> bool:
    """A ``input: formula`` line (not the result's forward formula, nor a non-differentiable input)."""
    key, _, value = text.strip().partition(":")
    if key in _NOT_BACKWARD or key.startswith("#"):
        return False
    return bool(value.strip()) and value.strip() != "non_differentiable"


# -------------------------------------------------------------- which entries a frame stands for

_WRAPPER_RE = re.compile(r"^wrapper_([A-Za-z0-9]+)_(.+)$")
# SigmoidBackward0, MeanBackwardAutogradNestedTensor0 (a dispatch: key's), AliasBackward0_copy (the
# Node codegen derives for a view's *_copy variant from the view's entry)
_NODE_RE = re.compile(r"^([A-Za-z0-9]+Backward[A-Za-z]*\d+)(_copy)?(?:_apply_functional)?$")
_AUTOGRAD_KEY_RE = re.compile(r"_Autograd[A-Za-z0-9]+$")
_CODEGEN_NAMESPACES = ("torch::autograd::VariableType::", "torch::ADInplaceOrView::", "torch::TraceType::",
                       "at::functionalization::")


def ops_of(qualified: str, native: YamlIndex, deriv: YamlIndex | None
           ) -> tuple[list[YamlEntry], list[YamlEntry]]:
    """The native_functions.yaml entries and the derivatives.yaml entries a function stands for."""
    parts = qualified.split("::")
    last = parts[-1]
    ops: list[YamlEntry] = []
    grads: list[YamlEntry] = []
    autograd = False
    if len(parts) >= 4 and parts[:2] == ["at", "_ops"] and parts[-1] in ("call", "redispatch"):
        ops = native.get("struct", parts[2])
    elif (wrapper := _WRAPPER_RE.match(last)) and parts[0] == "at":
        ops = native.get("kernel_name", wrapper.group(2))
    elif qualified.startswith(_CODEGEN_NAMESPACES) and len(parts) >= 3:
        # VariableType::unbind_int_AutogradNestedTensor: a kernel of another autograd key, named with it
        ops = native.get("kernel_name", last) or native.get("kernel_name", _AUTOGRAD_KEY_RE.sub("", last))
        autograd = qualified.startswith("torch::autograd::VariableType::")
    elif qualified.startswith("torch::autograd::generated::"):
        m = next((m for p in parts[3:] if (m := _NODE_RE.match(p))), None)
        entry = next(iter(deriv.get("node", m.group(1))), None) if deriv and m else None
        if entry is not None:
            grads = [entry]
            op_name = entry.name + ((m.group(2) if m else None) or "")
            ops = [e for e in native.get("name", op_name) if e.overload == entry.overload]
        return ops, grads
    elif last.startswith("THPVariable_") and parts[0] == "torch":
        ops = native.get("name", last[len("THPVariable_"):])
    elif parts[:2] == ["at", "native"]:
        name = parts[-2] if last == "impl" and len(parts) >= 4 else last
        ops = native.get("dispatch", name) or native.get("dispatch", name.removeprefix("structured_"))
    if autograd and deriv is not None:
        seen = set()
        for e in ops:
            for g in deriv.get("aten", e.aten):
                if g.line not in seen:
                    seen.add(g.line)
                    grads.append(g)
    return ops, grads


def packaged_file(torchgen_dir: str, *parts: str) -> str | None:
    path = os.path.join(torchgen_dir, "packaged", *parts)
    return path if os.path.isfile(path) else None
