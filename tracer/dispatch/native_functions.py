"""What ``native_functions.yaml`` says each operator's kernels are called.

The wheel ships the file torchgen generated the dispatcher code from
(``torchgen/packaged/ATen/native/native_functions.yaml``, next to ``torch/``). Its ``dispatch:``
section names, for each key, the ``at::native`` function a kernel wrapper calls (``CPU, CUDA: relu``,
``MkldnnCPU: mkldnn_relu``); a structured operator's entries name structured kernels
(``CPU: mm_out_cpu`` is ``at::native::structured_mm_out_cpu::impl``). These names follow no rule
that could be derived from the operator's, so they are read, not guessed.

The file is YAML, but a regular subset of it: a ``- func:`` line opens an entry, its fields are indented
by two spaces, ``dispatch:`` entries by four. This reads that subset (no YAML library in the target's
environment is assumed), and is the one reader of the file: ``--op`` and ``pttrace ops`` ask it for
kernels, ``tracer.sources`` for the line each entry starts at.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from tracer.text.cxxtext import split_top

# pathlib is not imported: these run inside gdb too, where its import (with urllib.parse and ipaddress) was
# ~6% of the agent's, which gdb does before the target may start; paths are os.path strings here.

YAML_IN_SITE_PACKAGES = ("torchgen", "packaged", "ATen", "native", "native_functions.yaml")
# A key whose kernels torchgen generates as structured kernels when the operator is structured;
# any other key of a structured operator registers a plain function.
_STRUCTURED_KEYS = {"CPU", "CUDA", "MPS", "XPU", "MTIA", "Meta"}
_FUNC = re.compile(r"^- func: ([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?\((.*)\) -> (.*?)\s*$")
_FIELD = re.compile(r"^  ([a-z_]+):\s*(.*?)\s*$")
_DISPATCH = re.compile(r"^    ([A-Za-z0-9_, ]+):\s*([A-Za-z0-9_:]+)\s*$")


@dataclass(frozen=True)
class Kernel:
    """One ``dispatch:`` entry: the keys it is registered for and the function it names."""

    keys: tuple[str, ...]
    name: str  # as written: ``relu``, ``mm_out_cpu``
    structured: bool  # at::native::structured_<name>::impl, else the function at::native::<name>
    implicit: bool = False  # no dispatch section: CompositeImplicitAutograd by default
    ufunc: bool = False  # generated from the ufunc_inner_loop section, not named in dispatch:

    @property
    def written(self) -> bool:
        """Named in the entry's ``dispatch:`` section (not a default nor a generated ufunc kernel)."""
        return not (self.implicit or self.ufunc)

    @property
    def qualified(self) -> str:
        if "::" in self.name:
            return self.name
        return f"at::native::structured_{self.name}::impl" if self.structured else f"at::native::{self.name}"


@dataclass(frozen=True)
class NativeEntry:
    """One operator overload of the file."""

    name: str
    overload: str
    arguments: int  # parameters of its C++ native signature (schema arguments, the ``*`` left out)
    kernels: tuple[Kernel, ...]
    delegate: str | None = None  # structured_delegate: the out= overload whose kernel it runs
    returns: str = ""  # as the schema writes it: Tensor, Tensor(a!), (Tensor, Tensor), ()
    out: bool = False  # an out= overload: its C++ name ends in _out
    line: int = 0  # of its ``- func:`` line, from 1
    schema: str = ""  # that line after ``- func:``
    variants: tuple[str, ...] = ("function",)  # function, method
    python_module: str | None = None  # nn, linalg, special, fft, sparse, nested
    autogen: tuple[str, ...] = ()  # overloads codegen makes from this entry: ``foo.out``

    @property
    def struct(self) -> str:
        """What ``at::_ops::`` names it: ``add_Tensor``."""
        return f"{self.name}_{self.overload}" if self.overload else self.name

    @property
    def kernel_token(self) -> str:
        """What the generated kernels (VariableType, ADInplaceOrView...) name it: ``add_out_out``."""
        cpp = self.name + "_out" if self.out else self.name
        return f"{cpp}_{self.overload}" if self.overload else cpp


def yaml_path(libraries: list[str]) -> str | None:
    """The file of the torch whose ``torch/lib`` holds one of ``libraries``; None if it is not there."""
    for lib in libraries:
        real = os.path.realpath(lib)
        parts = real.split(os.sep)
        if len(parts) >= 3 and parts[-3] == "torch" and parts[-2] == "lib":
            site = os.path.dirname(os.path.dirname(os.path.dirname(real)))
            candidate = os.path.join(site, *YAML_IN_SITE_PACKAGES)
            if os.path.isfile(candidate):
                return candidate
    return None


def _entry(head: tuple[int, str, str, str, str, str], fields: dict,
           dispatch: list[tuple[tuple[str, ...], str]]) -> NativeEntry:
    line, schema, name, overload, args, returns = head
    count = sum(1 for a in split_top(args) if a and a != "*")
    structured = fields.get("structured", "").lower() == "true"
    delegate = fields.get("structured_delegate") or None
    kernels = tuple(Kernel(keys, k, structured and any(key in _STRUCTURED_KEYS for key in keys))
                    for keys, k in dispatch)
    if structured and "ufunc_inner_loop" in fields:
        # A ufunc operator's CPU and CUDA kernels are generated from its inner loops, not named.
        kernels += tuple(Kernel((key,), f"ufunc_{name}_{key}", True, ufunc=True) for key in ("CPU", "CUDA")
                         if not any(key in k.keys for k in kernels))
    if not dispatch and not delegate:
        cpp = name + "_out" if _is_out(args) else name
        kernels = (Kernel(("CompositeImplicitAutograd",), cpp, False, implicit=True),)
    return NativeEntry(name, overload, count, kernels, delegate, returns, _is_out(args), line, schema,
                       _listed(fields.get("variants") or "function"), fields.get("python_module") or None,
                       _listed(fields.get("autogen", "")))


def _listed(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _is_out(args: str) -> bool:
    return bool(re.search(r"\(\w!\)", args.split("*", 1)[1])) if "*" in args else False


def entries(text: str) -> list[NativeEntry]:
    """Every entry, in the file's order."""
    out: list[NativeEntry] = []
    head: tuple[int, str, str, str, str, str] | None = None
    fields: dict[str, str] = {}
    dispatch: list[tuple[tuple[str, ...], str]] = []
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("- func:"):
            if head is not None:
                out.append(_entry(head, fields, dispatch))
            m = _FUNC.match(line)
            head = (number, line[len("- func:"):].strip(), m.group(1), m.group(2) or "", m.group(3), m.group(4)
                    ) if m else None
            fields, dispatch, section = {}, [], None
            continue
        if head is None or line.lstrip().startswith("#"):
            continue
        m = _FIELD.match(line.split("#", 1)[0])
        if m:
            section = m.group(1)
            fields.setdefault(section, m.group(2))
            continue
        if section == "dispatch":
            m = _DISPATCH.match(line.split("#", 1)[0].rstrip())
            if m:
                keys = tuple(k.strip() for k in m.group(1).split(",") if k.strip())
                dispatch.append((keys, m.group(2)))
    if head is not None:
        out.append(_entry(head, fields, dispatch))
    return out


def parse(text: str) -> dict[str, NativeEntry]:
    """{``name`` or ``name.overload``: entry}."""
    return {f"{e.name}.{e.overload}" if e.overload else e.name: e for e in entries(text)}


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


@lru_cache(maxsize=4)
def load(path: str) -> dict[str, NativeEntry]:
    return parse(read(path))


def entries_for(libraries: list[str]) -> dict[str, NativeEntry] | None:
    """The entries of the torch ``libraries`` belong to; None if its yaml file cannot be read."""
    path = yaml_path(libraries)
    if path is None:
        return None
    try:
        return load(str(path))
    except OSError:
        return None


def return_types(entries: dict[str, NativeEntry]) -> dict[str, str | None]:
    """{the token generated code names an overload by: its C++ return type}, for both ``at::_ops::add_Tensor``
    and ``VariableType::add_out_out`` kinds of names; None where two overloads share a token but not a type."""
    from tracer.dispatch.keyset_abi import schema_return_cpp

    out: dict[str, str | None] = {}
    for e in entries.values():
        cpp = schema_return_cpp(e.returns)
        for token in (e.struct, e.kernel_token):
            if token in out and out[token] != cpp:
                out[token] = None
            else:
                out[token] = cpp
    return out


_RETURNS_FORMAT = 2  # bump when return_types changes what it gives (2: keyed by content)


def cached_return_types(path: str) -> dict[str, str | None]:
    """``return_types(load(path))``, kept on disk beside pttrace's other caches and checked by the file's
    size and CRC: the agent needs it at the first hit of an operator, where parsing the
    2,600 entries of native_functions.yaml took 0.3-1.2 s (load 1-10) and reading the table back ~0.5 ms.
    Paths as strings and the name from the stamp itself: pathlib and hashlib were ~13 ms of imports at that
    first hit inside gdb (7.8 and 5.5 ms quiet), the agent importing neither otherwise."""
    import marshal
    import zlib

    from tracer.settings import cache_root

    with open(path, "rb") as fh:
        # By content (its size and CRC: ~0.5 ms for the 0.6 MB file), not its path and time: a new venv or a
        # reinstall of the same wheel keeps the table (parsing it again was 0.3-1.2 s at that first hit).
        text = fh.read()
    stamp = (_RETURNS_FORMAT, len(text), zlib.crc32(text))
    folder = os.path.join(cache_root(), "native-functions")
    store = os.path.join(folder, f"{stamp[1]}-{stamp[2]:08x}-{_RETURNS_FORMAT}.returns")
    try:
        with open(store, "rb") as fh:
            # loads of the whole file, not load(fh): load reads the file object a few bytes at a time, one
            # call per object (0.5 ms against 16-28 ms for this 80 KB table, at the first hit of an operator).
            kept_stamp, table = marshal.loads(fh.read())
        if kept_stamp == stamp and isinstance(table, dict):
            return table
    except (OSError, ValueError, EOFError, TypeError):
        pass
    table = return_types(load(path))
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = f"{store}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            marshal.dump((stamp, table), fh)
        os.replace(tmp, store)
    except OSError:
        pass  # no cache: parsed again next time
    return table
