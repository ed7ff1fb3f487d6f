"""An operator entry's C++ signature with its parameter names, from the ``ATen/ops/<name>_ops.h`` the
wheel ships beside its libraries (``torch/include``).

``at::_ops::add_Tensor::call``'s demangled name gives the parameter types only, and not the return type
(it is not a template). The header torchgen wrote for the operator declares both, with the schema's
names: ``static at::Tensor call(const at::Tensor & self, const at::Tensor & other, const at::Scalar &
alpha);``. It covers the overloads codegen adds (``autogen``: ``log_normal``, ``*_out``) that
``native_functions.yaml`` does not list. Standard library only: the agent reads it, once per operator.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from tracer.text.cxxtext import split_top

# pathlib is not imported: these run inside gdb too, where its import (with urllib.parse and ipaddress) was
# ~6% of the agent's, which gdb does before the target may start; paths are os.path strings here.

_STRUCT = re.compile(r"struct TORCH_API (\w+) \{(.*?)\n\};", re.S)
_METHOD = re.compile(r"^\s*static ([^\n]+?) (call|redispatch)\(([^;]*?)\);", re.M)


@dataclass(frozen=True)
class OpSignature:
    """One ``at::_ops`` entry as its header declares it."""

    returns: str  # as written: ``at::Tensor``, ``at::Tensor &``, ``::std::tuple<at::Tensor,at::Tensor>``
    names: tuple[str, ...]  # the parameters' names, in order
    types: tuple[str, ...]  # as written: ``const at::Tensor &``


def include_dir(library: str | None) -> str | None:
    """``torch/include`` of the torch whose ``torch/lib`` holds ``library``; None if it is not there."""
    if not library:
        return None
    real = os.path.realpath(library)
    parts = real.split(os.sep)
    if len(parts) >= 3 and parts[-2] == "lib" and parts[-3] == "torch":
        candidate = os.path.join(os.path.dirname(os.path.dirname(real)), "include", "ATen", "ops")
        if os.path.isdir(candidate):
            return candidate
    return None


def _param(text: str) -> tuple[str, str]:
    """``const at::Tensor & self`` -> (``const at::Tensor &``, ``self``)."""
    m = re.match(r"^(.*?[\s&*>])(\w+)$", text.strip())
    return (m.group(1).strip(), m.group(2)) if m else (text.strip(), "")


@lru_cache(maxsize=512)
def _header(path: str) -> dict[tuple[str, str], OpSignature]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return {}
    out = {}
    for struct in _STRUCT.finditer(text):
        for m in _METHOD.finditer(struct.group(2)):
            params = [_param(p) for p in split_top(" ".join(m.group(3).split()))]
            out[(struct.group(1), m.group(2))] = OpSignature(m.group(1).strip(), tuple(n for _, n in params),
                                                             tuple(t for t, _ in params))
    return out


def signature(ops_dir: str | None, struct: str, method: str) -> OpSignature | None:
    """``at::_ops::<struct>::<method>`` (``call`` or ``redispatch``) as declared; None if no header says.
    The header is named after the operator, which is the struct's name or a prefix of it cut at an
    underscore (``add_Tensor`` in ``add_ops.h``): the longest such header that declares it."""
    if ops_dir is None:
        return None
    cuts = [len(struct)] + [i for i in range(len(struct) - 1, 0, -1) if struct[i] == "_"]
    for cut in cuts:
        path = os.path.join(ops_dir, f"{struct[:cut]}_ops.h")
        found = _header(path).get((struct, method)) if os.path.isfile(path) else None
        if found is not None:
            return found
    return None


_ALIASES = {"int64_t": "long", "at::TensorList": "c10::ArrayRef<at::Tensor>", "at::IntArrayRef": "c10::ArrayRef<long>",
            "c10::SymIntArrayRef": "c10::ArrayRef<c10::SymInt>", "at::Scalar": "c10::Scalar",
            "at::ScalarType": "c10::ScalarType", "at::Layout": "c10::Layout", "at::Device": "c10::Device",
            "at::MemoryFormat": "c10::MemoryFormat", "at::DimnameList": "c10::ArrayRef<at::Dimname>",
            "c10::string_view": "std::basic_string_view<char, std::char_traits<char> >",
            "at::ITensorListRef": "c10::IListRef<at::Tensor>", "at::Generator": "at::Generator",
            "at::Stream": "c10::Stream", "at::QScheme": "c10::QScheme",
            "at::OptionalIntArrayRef": "c10::OptionalArrayRef<long>",
            "at::OptionalSymIntArrayRef": "c10::OptionalArrayRef<c10::SymInt>", "at::Storage": "c10::Storage",
            "at::DeviceIndex": "signed char", "c10::DeviceIndex": "signed char", "double": "double"}


def demangled(t: str) -> str:
    """A header's spelling of a type as the demangler writes it: ``const at::Tensor &`` -> ``at::Tensor
    const&``, ``int64_t`` -> ``long``, ``::std::array<bool,4>`` -> ``std::array<bool, 4ul>``."""
    t = " ".join(t.replace("::std::", "std::").split()).replace(" &", "&").replace(" *", "*")
    t = re.sub(r"^::", "", t)
    const = t.startswith("const ")
    core = t[len("const "):] if const else t
    ref = ""
    while core.endswith(("&", "*")):
        ref, core = core[-1] + ref, core[:-1].strip()
    if re.search(r"\s*\bconst$", core):
        const, core = True, re.sub(r"\s*\bconst$", "", core)
    core = _ALIASES.get(core, core)
    core = re.sub(r"^at::ArrayRef<", "c10::ArrayRef<", core)
    core = re.sub(r"^(std::optional<)(.*)>$", lambda m: m.group(1) + demangled(m.group(2)) + ">", core)
    core = re.sub(r"^std::array<bool,\s*(\d+)>$", r"std::array<bool, \1ul>", core)
    core = re.sub(r"^(c10::(?:OptionalArrayRef|ArrayRef|List|IListRef)<)(.*)>$",
                  lambda m: m.group(1) + demangled(m.group(2)) + ">", core)
    return core + (" const" if const and ref else "") + ref


def same_type(declared: str, demangled_name: str) -> bool:
    """Whether a header's spelling (``const at::Tensor &``, ``int64_t``) is the demangled one."""
    return demangled(declared) == demangled(demangled_name)


def matching(ops_dir: str | None, tokens: list[str], params: tuple[str, ...]) -> OpSignature | None:
    """The first ``call``/``redispatch`` of the structs ``tokens`` name whose parameter types are ``params``:
    a kernel registered for an operator has its signature (a wrapper names no return type of its own)."""
    for token in tokens:
        for method in ("redispatch", "call"):
            sig = signature(ops_dir, token, method)
            if sig is not None and len(sig.types) == len(params) and all(
                    same_type(a, b) for a, b in zip(sig.types, params)):
                return sig
    return None
