"""Where a function finds its ``c10::DispatchKeySet`` argument at its first instruction (x86-64 System V).

A dispatcher hop's key set is an argument like any other, so where it is depends on the signature:
``redispatch(DispatchKeySet, ...)`` has it first (rdi); a boxing adapter's
``wrap_kernel_functor_unboxed_<…>::call(OperatorKernel* functor, DispatchKeySet, ...)`` second (rsi);
``make_boxed_from_unboxed_functor<…>::call(functor, const OperatorHandle&, DispatchKeySet, Stack*)``
third (rdx). A member function's ``this`` comes before the arguments, and a function that returns a
class by value (``at::Tensor``, a ``std::tuple``) is handed the address to build it at before ``this``
and the arguments (Itanium C++ ABI 3.1.4). So the position is worked out from the parameter types, from
whether there is a ``this``, and from the return type; when one of them cannot be told, the answer is
"unknown, because ...", never a guess.

The signature comes from the demangled name (parameters always; the return type only for function
templates, whose names carry it, and from the template arguments of the boxing adapters), from
``native_functions.yaml`` for the generated code of an operator (whose names do not carry it), or from
gdb's debug information when the library has it. Standard library only: the agent imports it in gdb.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tracer.dispatch import arg_abi
from tracer.text.cxxtext import split_top

INT_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
KEYSET = "c10::DispatchKeySet"

# Types returned in rax/xmm0 (or nothing): scalars, enums, small trivially copyable classes.
_REGISTER_TYPES = {
    "void", "bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int",
    "long", "unsigned long", "long long", "unsigned long long", "float", "double", "c10::ScalarType",
    "at::ScalarType", "c10::Layout", "c10::QScheme", "c10::MemoryFormat", "c10::DispatchKeySet", "c10::Device",
    "c10::DeviceType", "c10::SymBool",
}
# Classes with a destructor or copy constructor of their own: returned through a hidden pointer, and
# passed by one when they are arguments.
_MEMORY_PREFIXES = ("at::Tensor", "c10::Scalar", "c10::SymInt", "c10::IValue", "std::tuple<", "std::vector<",
                    "std::__cxx11::basic_string<", "std::string", "c10::intrusive_ptr<", "c10::List<",
                    "c10::Dict<", "std::shared_ptr<", "std::unique_ptr<", "at::TensorBase")
# Trivially copyable pairs of eight-byte words: two integer registers as an argument.
_TWO_WORDS = ("c10::ArrayRef<", "c10::OptionalArrayRef<", "c10::string_view", "std::basic_string_view<",
              "std::string_view")

# Scopes whose functions are free functions or static members (no ``this``).
_FREE_SCOPES = {
    "at", "at::native", "at::meta", "at::cpu", "at::functionalization", "at::compositeexplicitautograd",
    "at::compositeimplicitautograd", "at::compositeexplicitautogradnonfunctional", "c10::impl",
    "torch::autograd::VariableType", "torch::ADInplaceOrView", "torch::TraceType", "torch::autograd",
    "torch::autograd::impl", "torch::impl",
}
_STATIC_CALLS = ("c10::impl::wrap_kernel_functor_unboxed_", "c10::impl::make_boxed_from_unboxed_functor")
# Member functions of the dispatcher's classes that take a key set.
_MEMBERS = {
    "c10::Dispatcher": {"call", "redispatch", "callBoxed", "redispatchBoxed", "callWithDispatchKeySlowPath"},
    "c10::KernelFunction": {"call", "callBoxed"},
    "c10::BoxedKernel": {"callBoxed"},
    "c10::OperatorHandle": {"callBoxed", "redispatchBoxed"},
    "c10::TypedOperatorHandle": {"call", "redispatch"},
    "c10::impl::OperatorEntry": {"callBoxed"},
}
# Generated functions named after an operator, and where in the name the operator's token is.
_GENERATED = re.compile(r"^(?:at::_ops::(?P<struct>\w+)::(?:call|redispatch)|"
                        r"(?:torch::autograd::VariableType|torch::ADInplaceOrView|torch::TraceType|"
                        r"at::functionalization)::(?P<kernel>\w+))$")
_QUALIFIERS = re.compile(r"(?:\s*(?:const|volatile|&&|&))+$")
_CLONE = re.compile(r"(?:\s*\[clone [^\]]*\])+$")


@dataclass(frozen=True)
class Signature:
    """What is known of a function's signature: None where it is not known."""

    params: tuple[str, ...]
    has_this: bool | None
    returns: str | None


@dataclass(frozen=True)
class KeysetArg:
    """Where the key set is at the function's entry: a register, or a stack slot (bytes above rsp);
    or neither, and why it cannot be told."""

    register: str | None = None
    stack: int | None = None
    why: str | None = None


def locate(sig: Signature) -> KeysetArg | None:
    """Where a function with this signature receives its DispatchKeySet; None if it takes none."""
    if KEYSET not in sig.params:
        return None
    if sig.returns is None:
        return KeysetArg(why="its return type is not known (a hidden return-slot argument may come first)")
    in_memory = returns_in_memory(sig.returns)
    if in_memory is None:
        return KeysetArg(why=f"pttrace cannot tell how {sig.returns} is returned")
    if sig.has_this is None:
        return KeysetArg(why="its name does not say whether it is a member function (no debug information)")
    for loc in arg_abi.locate_all(sig.params, sig.has_this, in_memory):
        if loc.type == KEYSET:
            if loc.how is None:
                return KeysetArg(why=loc.why)
            if loc.registers:
                return KeysetArg(register=loc.registers[0])
            return KeysetArg(stack=loc.stack)
    return None  # not reached: KEYSET is one of the parameters


def arguments(sig: Signature) -> list[arg_abi.ArgLocation]:
    """Where every parameter of a function with this signature is at its entry (``arg_abi``)."""
    in_memory = returns_in_memory(sig.returns) if sig.returns is not None else None
    return arg_abi.locate_all(sig.params, sig.has_this, in_memory)


def returns_in_memory(cpp: str) -> bool | None:
    """Whether a function returning ``cpp`` gets a hidden pointer to its result; None if not known."""
    t = " ".join(cpp.split())
    if t.endswith(("&", "*")) or t in _REGISTER_TYPES:
        return False
    m = re.fullmatch(r"(?:std|c10)::optional<(.*)>", t)
    if m:
        inner = returns_in_memory(m.group(1))
        return True if inner else (False if inner is False and m.group(1).strip() in _REGISTER_TYPES else None)
    if t == "c10::Scalar" or t.startswith(_MEMORY_PREFIXES):
        return True
    return None


def integer_words(cpp: str) -> int | None:
    """How many integer registers an argument of type ``cpp`` takes; None if not known."""
    t = " ".join(cpp.split())
    if t.endswith(("&", "*")) or t in _REGISTER_TYPES - {"float", "double", "void"}:
        return 1
    if t in ("float", "double"):
        return 0
    if t.startswith(_TWO_WORDS):
        return 2
    if t == "c10::Scalar" or t.startswith(_MEMORY_PREFIXES):
        return 1  # a copy made by the caller, passed by its address
    return None


@dataclass(frozen=True)
class ParsedName:
    """A demangled function name taken apart."""

    scope: str  # the qualified name without the parameters or return type
    params: tuple[str, ...]
    returns: str | None  # a function template's return type, as its name carries it
    member_qualified: bool  # ``const``/``&`` after the parameters: a non-static member function


def parse(name: str) -> ParsedName | None:
    """A demangled function name taken apart; None if it has no parameter list."""
    base = _CLONE.sub("", name.strip())
    quals = _QUALIFIERS.search(base)
    core = base[: quals.start()] if quals else base
    if not core.endswith(")"):
        return None
    depth = 0
    for i in range(len(core) - 1, -1, -1):
        c = core[i]
        if c in ">)]}":
            depth += 1
        elif c in "<([{":
            depth -= 1
            if depth == 0:
                break
    else:
        return None
    params = tuple(p for p in split_top(core[i + 1 : -1]) if p and p != "void")
    head = core[:i]
    from tracer.dispatch.classify import drop_return_type

    proper = drop_return_type(head + "()")[:-2]
    returns = head[: len(head) - len(proper)].strip() or None
    return ParsedName(proper.replace("(anonymous namespace)::", ""), params, returns, bool(quals))


def _template_args(component: str) -> list[str]:
    start = component.find("<")
    return split_top(component[start + 1 : component.rfind(">")]) if start >= 0 else []


def _top_components(scope: str) -> list[str]:
    parts, depth, last, i = [], 0, 0, 0
    while i < len(scope):
        c = scope[i]
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif depth == 0 and scope.startswith("::", i):
            parts.append(scope[last:i])
            last = i + 2
            i += 1
        i += 1
    parts.append(scope[last:])
    return parts


def _base(component: str) -> str:
    return component.split("<", 1)[0]


def signature_from_name(name: str, op_returns=None) -> Signature | None:
    """The signature as far as the demangled ``name`` (and ``op_returns``: an operator's C++ return type
    from the token generated code names it by, ``add__Tensor``) tell it."""
    p = parse(name)
    if p is None:
        return None
    comps = _top_components(p.scope)
    scope = "::".join(comps[:-1])
    method = _base(comps[-1])
    has_this: bool | None = None
    returns = p.returns
    if p.member_qualified:
        has_this = True
    elif scope.startswith(_STATIC_CALLS) and method == "call":
        has_this = False
        if scope.startswith("c10::impl::make_boxed_from_unboxed_functor"):
            returns = "void"
        elif returns is None:
            sig = (_template_args(comps[-2]) or [""])[-1]
            cut = sig.find(" (")
            returns = sig[:cut].strip() if cut > 0 else None
    elif re.fullmatch(r"at::_ops::\w+", scope) and method in ("call", "redispatch"):
        has_this = False
    elif "::".join(_base(c) for c in comps[:-1]) in _MEMBERS and method in _MEMBERS["::".join(
            _base(c) for c in comps[:-1])]:
        has_this = True
    elif scope in _FREE_SCOPES:
        has_this = False
    if returns is None and _is_boxed(p.params):
        returns = "void"  # a boxed kernel: void(const OperatorHandle&, DispatchKeySet, Stack*)
    if returns is None and op_returns is not None:
        m = _GENERATED.match(p.scope)
        if m:
            returns = op_returns(m.group("struct") or m.group("kernel"))
    return Signature(p.params, has_this, returns)


def _is_boxed(params: tuple[str, ...]) -> bool:
    return (len(params) >= 3 and params[-3] == "c10::OperatorHandle const&" and params[-2] == KEYSET
            and params[-1].startswith("std::vector<c10::IValue") and params[-1].endswith("*"))


def takes_keyset(name: str) -> bool:
    """Whether a function has a DispatchKeySet parameter of its own (not one in a template argument)."""
    p = parse(name)
    return p is not None and KEYSET in p.params


# ---------------------------------------------------------------------------------------------------
# An operator's C++ return type, from its schema
# ---------------------------------------------------------------------------------------------------
_SCHEMA_SCALARS = {"bool": "bool", "int": "long", "float": "double", "ScalarType": "c10::ScalarType",
                   "Layout": "c10::Layout", "QScheme": "c10::QScheme", "Device": "c10::Device",
                   "MemoryFormat": "c10::MemoryFormat", "SymInt": "c10::SymInt", "Scalar": "c10::Scalar",
                   "str": "std::string", "SymBool": "c10::SymBool"}


def schema_return_cpp(returns: str) -> str | None:
    """``Tensor(a!)`` -> ``at::Tensor&``; ``(Tensor, Tensor)`` -> ``std::tuple<…>``; ``()`` -> ``void``."""
    r = returns.strip()
    if r == "()":
        return "void"
    if r.startswith("("):
        return "std::tuple<…>"
    t = r.split()[0] if r else ""
    if t.endswith("[]") or t.endswith("[]?"):
        return "std::vector<…>"
    if t.startswith("Tensor"):
        if t.endswith("?"):
            return "std::optional<at::Tensor>"
        return "at::Tensor&" if "!" in t else "at::Tensor"
    return _SCHEMA_SCALARS.get(t.rstrip("?"))
