"""Demangled C++ names and source signatures, taken apart for matching one against the other.

A frame says ``c10::impl::wrap_kernel_functor_unboxed_<F, at::Tensor (at::Tensor const&)>::call(
c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)``; its definition in a header says
``static ReturnType call(OperatorKernel* functor, DispatchKeySet, ParameterTypes... args)`` inside
``struct wrap_kernel_functor_unboxed_<KernelFunctor, ReturnType(ParameterTypes...)>``. Matching
compares the qualified name without template arguments, then each parameter's type by its last
name component (``at::Tensor const&`` and ``const Tensor& self`` are both ``Tensor``), with the
template's own parameters matching anything and a trailing pack matching any number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tracer.text.cxxtext import split_top

_ANON_RE = re.compile(r"\(anonymous namespace\)::|__anon[0-9a-f]+::")
_SUFFIX_RE = re.compile(r"(?:\s*\[clone [^\]]*\])+$|\s*@plt$")
_OPERATOR_RE = re.compile(r"operator\s*(\(\)|\[\]|<<=?|>>=?|<=>|->\*?|[-+*/%^&|~!=<>]=?|&&|\|\||\+\+|--|,|"
                          r"new(?:\[\])?|delete(?:\[\])?|\s+[A-Za-z_][\w:<>,\s*&]*)")
_WORD_RE = re.compile(r"[A-Za-z_]\w*")
_QUALIFIERS = {"const", "volatile", "struct", "class", "typename", "enum", "union", "signed", "restrict",
               "__restrict", "constexpr", "static", "inline", "mutable", "register"}
_BUILTINS = {"int", "long", "short", "char", "bool", "float", "double", "void", "unsigned", "wchar_t",
             "char16_t", "char32_t", "char8_t", "auto"}
# How a name in the source reads once the compiler has resolved it (demangled names carry the latter).
_ALIASES = {
    "int64_t": "long", "int32_t": "int", "int16_t": "short", "int8_t": "signed char", "uint64_t": "unsigned long",
    "uint32_t": "unsigned int", "uint16_t": "unsigned short", "uint8_t": "unsigned char", "size_t": "unsigned long",
    "ssize_t": "long", "PyObject": "_object", "IntArrayRef": "ArrayRef", "SymIntArrayRef": "ArrayRef",
    "TensorList": "ArrayRef", "ITensorListRef": "IListRef", "OptionalIntArrayRef": "OptionalArrayRef",
    "OptionalSymIntArrayRef": "OptionalArrayRef", "DimnameList": "ArrayRef", "string_view": "basic_string_view",
    "string": "basic_string", "Stack": "vector", "optional": "optional",
}


def _matching(text: str, start: int, open_: str, close: str) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close and not (close == ">" and text[i - 1] == "-"):
            depth -= 1
            if depth == 0:
                return i
    return -1


@dataclass(frozen=True)
class Component:
    name: str
    targs: tuple[str, ...] = ()  # template arguments as written, () when none


@dataclass(frozen=True)
class ParsedName:
    components: tuple[Component, ...]
    params: tuple[str, ...] | None  # None when the name has no parameter list (a variable, a bare name)

    @property
    def qualified(self) -> str:
        """``a::b::c`` without template arguments or anonymous namespaces: the index key."""
        return "::".join(c.name for c in self.components)

    @property
    def class_targs(self) -> tuple[str, ...]:
        return self.components[-2].targs if len(self.components) > 1 else ()


def _split_components(qual: str) -> list[Component]:
    parts: list[Component] = []
    for piece in split_top(qual, "::"):
        lt = piece.find("<")
        if lt > 0 and not piece.startswith("operator"):
            end = _matching(piece, lt, "<", ">")
            targs = tuple(split_top(piece[lt + 1:end])) if end > lt else ()
            parts.append(Component(piece[:lt].strip(), targs))
        else:
            parts.append(Component(piece.strip()))
    return parts


def parse(demangled: str) -> ParsedName | None:
    """Take a demangled function name apart; None for what is not a C++ name (``??``, an address)."""
    name = _SUFFIX_RE.sub("", demangled.strip())
    name = _ANON_RE.sub("", name)
    if not name or not (name[0].isalpha() or name[0] in "_:"):
        return None
    # Hide ``operator()`` and friends so that their parentheses are not taken for the parameter list.
    ops: list[str] = []

    def hide(m: re.Match) -> str:
        ops.append(m.group(0))
        return f"\x00{len(ops) - 1}\x00"

    name = _OPERATOR_RE.sub(hide, name)
    params: tuple[str, ...] | None = None
    # The parameter list is the last top-level (...) group, followed only by cv/ref qualifiers.
    depth, open_at = 0, -1
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">" and name[i - 1:i] != "-":
            depth -= 1
        elif ch == "(" and depth == 0:
            close = _matching(name, i, "(", ")")
            if close < 0:
                return None
            tail = name[close + 1:].strip()
            if not tail or re.fullmatch(r"(?:const|volatile|&&?|noexcept|\s)*", tail):
                open_at = i
                params = tuple(p for p in split_top(name[i + 1:close]) if p and p != "void")
                break
    qual = name[:open_at] if open_at >= 0 else name
    # A return type before the name (templates demangle with one): the qualified name is the last word run.
    top = split_top(qual, " ")
    if len(top) > 1:
        qual = top[-1]
    for n, text in enumerate(ops):
        qual = qual.replace(f"\x00{n}\x00", re.sub(r"\s+", "", text) if "(" in text or "[" in text else text)
    components = tuple(c for c in _split_components(qual) if c.name)
    if not components:
        return None
    return ParsedName(components, params)


# ---------------------------------------------------------------- types

def strip_param_name(param: str) -> str:
    """``const Tensor& self = {}`` -> ``const Tensor&``; a lone type is returned as it is."""
    text = split_top(param, "=")[0].strip()
    if "(" in text and not text.endswith(")"):
        return text  # a function pointer parameter: keep as is
    m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])*$", text)
    if not m or m.start() == 0:
        return text
    before = text[:m.start()].rstrip()
    word = m.group(1)
    if word in _BUILTINS or word in _QUALIFIERS or before.endswith("::") or not before:
        return text
    if before.endswith(("<", ",")):
        return text
    return before


def base_type(type_text: str) -> str:
    """The type's last name component, without qualifiers, pointers, references or template args:
    ``const at::Tensor &`` -> ``Tensor``, ``std::vector<at::Tensor>&&`` -> ``vector``."""
    text = type_text.strip()
    if text.endswith("..."):
        text = text[:-3]
    # drop template arguments
    out, depth = [], 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">" and text[i - 1:i] != "-":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    words = [w for w in _WORD_RE.findall("".join(out).split("(")[0]) if w not in _QUALIFIERS]
    if not words:
        return ""
    if words[-1] in _BUILTINS:
        name = " ".join(w for w in words if w in _BUILTINS or w == "signed")
    else:
        name = words[-1]
    return _ALIASES.get(name, name)


def is_pack(param: str) -> bool:
    return "..." in param


def template_params(template: str | None) -> set[str]:
    """Names a ``template <class T, typename... Args, int N>`` list introduces."""
    if not template:
        return set()
    inner = template.strip()
    if inner.startswith("<") and inner.endswith(">"):
        inner = inner[1:-1]
    names = set()
    for part in split_top(inner):
        part = split_top(part, "=")[0].replace("...", " ")
        words = _WORD_RE.findall(part)
        if words:
            names.add(words[-1])
    return names


def type_conflicts(frame_types: list[str], source_types: list[str], wildcards: set[str]) -> tuple[int, int] | None:
    """(positions that disagree, positions matched by a concrete type); None when the counts cannot
    match. A source pack (``Args...``) takes any number of trailing frame types; a source type naming a
    template parameter matches any. More concrete matches is C++'s "more specialized"."""
    source = list(source_types)
    pack = bool(source) and is_pack(source[-1])
    if pack:
        source = source[:-1]
        if len(frame_types) < len(source):
            return None
    elif len(frame_types) != len(source):
        return None
    conflicts = concrete = 0
    for ft, st in zip(frame_types, source):
        sb = base_type(st)
        if not sb or sb in wildcards:
            continue
        if base_type(ft) != sb:
            conflicts += 1
        else:
            concrete += 1
    return conflicts, concrete


def function_type_params(type_text: str) -> list[str] | None:
    """``at::Tensor (c10::DispatchKeySet, at::Tensor const&)`` -> its parameter types; None if not a function type."""
    text = type_text.strip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                inner = text[i + 1:-1].strip()
                if not text[:i].strip():
                    return None
                return [p for p in split_top(inner) if p and p != "void"]
    return None
