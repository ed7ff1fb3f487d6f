"""Where every parameter of a function is at its first instruction (x86-64 System V, Itanium C++ ABI).

``keyset_abi`` finds one parameter, the DispatchKeySet; the values a hop carried need all of them. Each
parameter's type says how it is passed: an integer, pointer or reference takes the next integer register
(rdi, rsi, rdx, rcx, r8, r9); a ``double`` or ``float`` the next SSE register (xmm0-xmm7); a trivially
copyable class of at most 16 bytes one or two registers, one per eight-byte word by the word's class
(``c10::ArrayRef`` two integer ones, ``std::optional<double>`` an SSE one then an integer one); a larger
trivially copyable class (``c10::OptionalArrayRef``: 24 bytes) is copied onto the stack; a class with a
destructor or copy constructor of its own (``at::Tensor``, ``c10::Scalar``, ``c10::SymInt``,
``std::optional<at::Tensor>``) is copied by the caller and passed by that copy's address, like a
reference. An argument whose words no longer all fit in the registers left goes on the stack whole, and
later ones still take the registers left. Before them all comes the address to build a returned class at
(when the return type is one, ``keyset_abi.returns_in_memory``), then ``this``.

A type this table does not know makes its own location and every later one unknown (how many registers
it took cannot be told), with the reason: never a guess. Standard library only: the agent imports it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

INT_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
SSE_REGISTERS = tuple(f"xmm{i}" for i in range(8))

# Scalars passed in one integer register, with their size in bytes (the rest of the register is junk).
INT_SCALARS = {
    "bool": 1, "char": 1, "signed char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2, "int": 4,
    "unsigned int": 4, "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8,
    "c10::ScalarType": 1, "at::ScalarType": 1, "c10::Layout": 1, "c10::MemoryFormat": 1, "c10::QScheme": 1,
    "c10::DeviceType": 1, "c10::Device": 2, "c10::DispatchKeySet": 8,
}
SSE_SCALARS = {"double": 8, "float": 4}
# Classes with a destructor or copy constructor of their own: the caller passes its copy's address.
_INDIRECT = ("at::Tensor", "at::TensorBase", "c10::Scalar", "c10::SymInt", "c10::SymFloat", "c10::SymBool",
             "c10::IValue", "at::Generator", "std::tuple<", "std::vector<", "std::__cxx11::basic_string<",
             "std::string", "c10::intrusive_ptr<", "c10::List<", "c10::Dict<", "std::shared_ptr<",
             "std::unique_ptr<", "std::function<", "c10::MaybeOwned<", "c10::Storage", "at::Storage")
# Trivially copyable two-word classes: two integer registers.
_TWO_INT_WORDS = ("c10::ArrayRef<", "std::basic_string_view<", "std::string_view", "c10::string_view",
                  "c10::Stream")
# Trivially copyable classes over 16 bytes, with their size: copied onto the stack.
_ON_STACK = {"c10::OptionalArrayRef<": 24, "c10::IListRef<": 24}
_OPTIONAL = re.compile(r"^(?:std|c10)::optional<(.*)>$")
_STD_ARRAY = re.compile(r"^std::array<(.*), (\d+)ul?>$")


@dataclass(frozen=True)
class Passing:
    """How one type travels: ``words`` eight-byte words of classes ``int``/``sse`` in registers
    (``how`` "value"), one integer word holding an object's address (``how`` "address"), or ``size``
    bytes copied onto the stack (``how`` "stack")."""

    how: str
    words: tuple[str, ...] = ()
    size: int = 0


@dataclass(frozen=True)
class ArgLocation:
    """Where one parameter is at the function's entry.

    ``how``: "value" (``registers`` hold its bytes, one per eight-byte word, or ``stack`` is the offset
    from rsp of its first word when it overflowed the registers), "address" (the register or stack word
    holds the address of the object: references, and classes passed by a copy's address), "stack" (the
    object itself lies at rsp + ``stack``, ``size`` bytes). ``object_type``: the type of what is read
    (a reference's referent). Unknown: ``how`` is None and ``why`` says why."""

    index: int
    type: str
    object_type: str
    how: str | None = None
    registers: tuple[str, ...] = ()
    stack: int | None = None
    size: int = 0
    why: str | None = None

    @property
    def where(self) -> str:
        """As a person reads it: ``rsi``, ``rdi:rsi``, ``xmm0``, ``[rsp+8]``, ``*rdx``."""
        if self.how is None:
            return "?"
        base = ":".join(self.registers) if self.registers else f"[rsp+{self.stack}]"
        return "*" + base if self.how == "address" else base


def normal(cpp: str) -> str:
    """One spelling for a type: whitespace collapsed, gdb's ``const T &`` as the demangler's ``T const&``."""
    t = " ".join(cpp.split()).replace(" &", "&").replace(" *", "*")
    t = re.sub(r"\b(?:class|struct|union|enum) ", "", t)
    if t.startswith("const ") and t.endswith(("&", "*")):
        t = t[len("const "):-1] + " const" + t[-1]
    return t


def referent(cpp: str) -> str:
    """``at::Tensor const&`` -> ``at::Tensor``."""
    t = normal(cpp)
    t = re.sub(r"&&?$", "", t)
    return re.sub(r"\s*\bconst$", "", t).strip()


def passing(cpp: str) -> Passing | None:
    """How an argument of type ``cpp`` is passed; None if this table does not know."""
    t = normal(cpp)
    if t.endswith("&"):
        return Passing("address", ("int",))
    if t.endswith("*"):
        return Passing("value", ("int",), 8)
    t = re.sub(r"\s*\bconst$", "", t)
    if t in INT_SCALARS:
        return Passing("value", ("int",), INT_SCALARS[t])
    if t in SSE_SCALARS:
        return Passing("value", ("sse",), SSE_SCALARS[t])
    m = _OPTIONAL.match(t)
    if m:
        return _optional(m.group(1).strip())
    m = _STD_ARRAY.match(t)
    if m and m.group(1) in INT_SCALARS:
        size = INT_SCALARS[m.group(1)] * int(m.group(2))
        if size <= 16:
            return Passing("value", ("int",) * ((size + 7) // 8), size)
        return Passing("stack", size=size)
    if t.startswith(_TWO_INT_WORDS):
        return Passing("value", ("int", "int"), 16)
    for prefix, size in _ON_STACK.items():
        if t.startswith(prefix):
            return Passing("stack", size=size)
    if t.startswith(_INDIRECT):
        return Passing("address", ("int",))
    return None


def _optional(inner: str) -> Passing | None:
    """``std::optional<T>``: T, then its ``bool``: a trivially copyable one is passed by its words."""
    p = passing(inner)
    if p is None or inner.endswith(("&", "*")):
        return None if p is None else Passing("value", ("int", "int"), 16)
    if p.how == "address":
        return Passing("address", ("int",))  # optional of a class with a destructor: not trivially copyable
    size = p.size + 1 if p.how == "value" and p.size < 8 else ((p.size + 7) // 8) * 8 + 8
    if size > 16:
        return Passing("stack", size=size)
    if p.size < 8:  # T and its flag share one word: integer class (a float in it makes it integer too)
        return Passing("value", ("int",), size)
    return Passing("value", (p.words[0], "int"), size)


def locate_all(params: tuple[str, ...], has_this: bool | None, returns_in_memory: bool | None
               ) -> list[ArgLocation]:
    """Where each of ``params`` is at the function's first instruction, in order."""
    out: list[ArgLocation] = []
    why = None
    if returns_in_memory is None:
        why = "its return type is not known (a hidden return-slot argument may come first)"
    elif has_this is None:
        why = "its name does not say whether it is a member function (no debug information)"
    ints = int(bool(returns_in_memory)) + int(bool(has_this))
    sses = 0
    stack = 8  # the first stack argument is above the return address
    for i, cpp in enumerate(params):
        obj = referent(cpp)
        p = passing(cpp) if why is None else None
        if why is None and p is None:
            why = f"pttrace cannot tell how an argument of type {normal(cpp)} is passed"
        if why is not None:
            out.append(ArgLocation(i, cpp, obj, why=why))
            continue
        assert p is not None
        if p.how == "stack":
            out.append(ArgLocation(i, cpp, obj, "stack", stack=stack, size=p.size))
            stack += (p.size + 7) // 8 * 8
            continue
        need_int, need_sse = p.words.count("int"), p.words.count("sse")
        if ints + need_int <= len(INT_REGISTERS) and sses + need_sse <= len(SSE_REGISTERS):
            regs = []
            for w in p.words:
                if w == "int":
                    regs.append(INT_REGISTERS[ints])
                    ints += 1
                else:
                    regs.append(SSE_REGISTERS[sses])
                    sses += 1
            out.append(ArgLocation(i, cpp, obj, p.how, registers=tuple(regs), size=p.size))
        else:  # the whole argument on the stack, a word each
            out.append(ArgLocation(i, cpp, obj, p.how, stack=stack, size=p.size or 8))
            stack += 8 * len(p.words)
    return out
