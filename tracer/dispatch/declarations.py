"""A function's own declaration in the headers the wheel ships (``torch/include/ATen/ops``): its parameter
names, its return type and whether it is a member, where the demangled name gives only the types.

torchgen writes one header a namespace and operator: ``at::native::sigmoid_out`` and the structured kernel
``at::native::structured_sigmoid_out::impl`` in ``sigmoid_native.h``, ``at::meta::structured_sigmoid::meta``
in ``sigmoid_meta.h``, ``at::cpu::sigmoid`` in ``sigmoid_cpu_dispatch.h``. The header is found from the
name (the operator is the first component with ``structured_``/``ufunc_`` cut, or a prefix of it ending at
an underscore), read once and parsed by a few patterns: no C++ parser. A declaration counts only when its
parameter types are the demangled name's. Standard library only: the agent reads it, once per function.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from tracer.dispatch.op_headers import _param, same_type
from tracer.text.cxxtext import split_top

# pathlib is not imported: these run inside gdb too, where its import (with urllib.parse and ipaddress) was
# ~6% of the agent's, which gdb does before the target may start; paths are os.path strings here.

_SUFFIX = {"native": "_native.h", "meta": "_meta.h"}  # at::<ns> -> its headers' suffix; others: _<ns>_dispatch.h
_STRUCT = re.compile(r"struct TORCH_API (\w+)[^{;]*\{(.*?)\n\};", re.S)
# A declaration on one line or a few: its parameters may hold defaults such as ``={}`` or ``=at::Scalar(1)``.
_DECL = re.compile(r"^\s*(?:TORCH_API\s+)?(?:static\s+)?(?:inline\s+)?([\w:<>,\s&*]+?)\s*\b(\w+)"
                   r"\(((?:[^;{}()]|\{\}|\([^()]*\))*)\)\s*(?:const\s*)?(?:override\s*)?;", re.M)


@dataclass(frozen=True)
class Declaration:
    """A function as its header declares it."""

    returns: str  # as written: ``void``, ``at::Tensor &``
    names: tuple[str, ...]
    types: tuple[str, ...]
    member: bool  # a non-static member function: ``this`` comes first
    where: str  # ``ATen/ops/sigmoid_native.h:21``


@lru_cache(maxsize=256)
def _parse(path: str) -> dict[tuple[str | None, str], list[Declaration]]:
    """(struct or None, function) -> its declarations in the header at ``path``."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return {}
    shown = "/".join(path.split(os.sep)[-3:])
    out: dict[tuple[str | None, str], list[Declaration]] = {}
    spans = []
    for s in _STRUCT.finditer(text):
        spans.append((s.start(2), s.end(2)))
        for m in _DECL.finditer(s.group(2)):
            line = text.count("\n", 0, s.start(2) + m.start(2)) + 1
            _add(out, s.group(1), m, "static" not in m.group(0).split("(")[0], f"{shown}:{line}")
    for m in _DECL.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            _add(out, None, m, False, f"{shown}:{text.count(chr(10), 0, m.start(2)) + 1}")
    return out


def _add(out: dict, struct: str | None, m: re.Match, member: bool, where: str) -> None:
    returns = " ".join(m.group(1).split())
    if not returns or returns in ("return", "else", "new"):
        return
    raw = " ".join(m.group(3).split())
    params = [_param(re.sub(r"\s*=.*$", "", p)) for p in split_top(raw)] if raw and raw != "void" else []
    if any(not n for _, n in params):
        return
    out.setdefault((struct, m.group(2)), []).append(
        Declaration(returns, tuple(n for _, n in params), tuple(t for t, _ in params), member, where))


def _headers(ops_dir: str, namespace: str, token: str) -> list[str]:
    suffix = _SUFFIX.get(namespace, f"_{namespace}_dispatch.h")
    op = re.sub(r"^(?:structured_)?(?:ufunc_)?", "", token)
    cuts = [len(op)] + [i for i in range(len(op) - 1, 0, -1) if op[i] == "_"]
    return [p for p in (os.path.join(ops_dir, f"{op[:cut]}{suffix}") for cut in cuts) if os.path.isfile(p)]


def find(ops_dir: str | None, qualified: str, params: tuple[str, ...]) -> Declaration | None:
    """The declaration of ``qualified`` (``at::native::structured_sigmoid_out::impl``, ``at::cpu::add``)
    whose parameter types are ``params`` (as demangled); None if no header declares one."""
    if ops_dir is None:
        return None
    comps = qualified.split("::")
    if len(comps) < 3 or comps[0] != "at" or not re.fullmatch(r"\w+", comps[1]):
        return None
    if len(comps) == 3:
        struct, function = None, comps[2]
    elif len(comps) == 4:
        struct, function = comps[2], comps[3]
    else:
        return None
    for path in _headers(ops_dir, comps[1], struct or function):
        for decl in _parse(path).get((struct, function), ()):
            if len(decl.types) == len(params) and all(same_type(a, b) for a, b in zip(decl.types, params)):
                return decl
    return None
