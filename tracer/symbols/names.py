"""Reading demangled C++ names: where the parameter list starts, the qualified name, its components.

Pure string work, shared by the symbol search (``break NAME``-style matching) and the suggestions.
The demangler's output is regular enough that a bracket-depth scan does the job, with care for
the few places where brackets are not brackets: ``operator<``, ``operator()``, ``operator->``...,
``(anonymous namespace)``, ``{lambda(int)#1}`` and ``[abi:cxx11]``.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# GCC's names for the parts of a function it split or specialised, as suffixes of the symbol name:
# ``foo.cold`` / ``foo(int) [clone .cold]``, ``.part.0``, ``.isra.0``, ``.constprop.0``...
# Compiled at their first use (``_rx``): ~0.7 ms that a warm `pttrace where`, answered from the cache, never needs.
_PATTERNS = {
    "clone_demangled": r"( \[clone \.[A-Za-z_][\w.]*\])+$",
    "clone_plain": r"^(?P<base>[A-Za-z_.$][\w.$]*?)(?P<suffix>(?:\.(?:cold|part|isra|constprop|lto_priv|localalias|"
                   r"llvm|clone|specialized)(?:\.\d+)*)+)$",
    "abi_tag": r"\[abi:[\w]+\]",
    # What may follow a function's parameter list: cv- and ref-qualifiers, noexcept.
    "trailing_qualifiers": r"^(\s*(const|volatile|&&|&|noexcept|transaction_safe))*\s*$",
}


@functools.cache
def _rx(name: str) -> re.Pattern:
    return re.compile(_PATTERNS[name])


_OPEN = "(<[{"
_CLOSE = ")>]}"
# Longest first: what can follow the keyword ``operator`` and must not count as brackets.
_OPERATOR_SYMBOLS = (
    "<=>", "<<=", ">>=", "->*", "()", "[]", "<<", ">>", "<=", ">=", "->", "<", ">",
)


@dataclass(frozen=True)
class ParsedName:
    """A demangled name taken apart. ``components`` exclude the return type and the parameters."""

    components: tuple[str, ...]
    params: str | None  # the parameter list with its parentheses and trailing qualifiers, or None
    clones: tuple[str, ...] = ()  # ".cold", ".isra.0"... as they appeared

    @property
    def qualified(self) -> str:
        return "::".join(self.components)

    @property
    def cold(self) -> bool:
        return _cold(self.clones)


def _cold(clones: tuple[str, ...]) -> bool:
    return any(c == ".cold" or c.startswith(".cold.") for c in clones)


def is_cold(name: str) -> bool:
    """``parse(name).cold`` without taking the rest of the name apart: naming a frame asks it of every symbol
    it finds, and torch's template names run to thousands of characters."""
    return _cold(split_clones(name.strip())[1])


def split_clones(name: str) -> tuple[str, tuple[str, ...]]:
    """``"f(int) [clone .isra.0] [clone .cold]"`` -> ``("f(int)", (".isra.0", ".cold"))``; also ``f.cold``."""
    m = _rx("clone_demangled").search(name)
    if m:
        clones = tuple(part[len("[clone "):-1] for part in re.findall(r"\[clone [^\]]*\]", m.group(0)))
        return name[: m.start()], clones
    if "(" not in name and " " not in name and "::" not in name:
        m = _rx("clone_plain").match(name)
        if m:
            suffix = m.group("suffix")
            parts = re.findall(r"\.(?:cold|part|isra|constprop|lto_priv|localalias|llvm|clone|specialized)"
                               r"(?:\.\d+)*", suffix)
            return m.group("base"), tuple(parts)
    return name, ()


_OPERATOR_TOKEN = (r"(?<!\w)operator(?: *(?:" + "|".join(re.escape(sym) for sym in _OPERATOR_SYMBOLS) + "))?")


@functools.cache
def _tokens(sep: str) -> re.Pattern:
    """The characters a scan acts on: an operator's name (with its symbol: never brackets), a bracket, and
    ``sep`` (a space, ``::``) when given. Every other character is passed over by the regex engine, not by a
    Python loop (torch's template names run to thousands of characters)."""
    alternatives = [_OPERATOR_TOKEN, r"[(<\[{)>\]}]"] + ([re.escape(sep)] if sep else [])
    return re.compile("|".join(alternatives))


def _scan(text: str, sep: str = ""):
    """Yield (index, token, depth) for each operator name (token ``"o"``) and bracket in ``text``, and each
    ``sep`` outside every bracket: the depth is that of the brackets around it (an opener's before it, a
    closer's after it)."""
    outer, inner = _tokens(sep), _tokens("")
    depth = 0
    pos = 0
    while (m := (inner if depth else outer).search(text, pos)) is not None:
        token = m.group()
        pos = m.end()
        if token in _OPEN:
            yield m.start(), token, depth
            depth += 1
        elif token in _CLOSE:
            depth = max(depth - 1, 0)
            yield m.start(), token, depth
        elif token.startswith("operator"):
            yield m.start(), "o", depth
        else:
            yield m.start(), token, depth


def _top_level_groups(text: str) -> list[tuple[int, int, str]]:
    """(start, end, opening char) of every bracket group at depth 0; ``end`` is past the closer."""
    groups = []
    start = None
    opener = ""
    for i, c, depth in _scan(text):
        if depth == 0 and c in _OPEN:
            start, opener = i, c
        elif depth == 0 and c in _CLOSE and start is not None:
            groups.append((start, i + 1, opener))
            start = None
    return groups


def split_params(name: str) -> tuple[str, str | None]:
    """``"void ns::f<int>(int, char) const"`` -> ``("void ns::f<int>", "(int, char) const")``."""
    for start, end, opener in reversed(_top_level_groups(name)):
        if opener != "(":
            continue
        if name[start:end] == "(anonymous namespace)":
            continue
        if _rx("trailing_qualifiers").match(name[end:]):
            return name[:start].rstrip(), name[start:].strip()
        break
    return name, None


def _split_top(text: str, sep: str) -> list[str]:
    parts = []
    last = 0
    for i, c, depth in _scan(text, sep):
        if depth == 0 and c == sep:
            parts.append(text[last:i])
            last = i + len(sep)
    parts.append(text[last:])
    return parts


def strip_return_type(text: str) -> str:
    """Drop a template function's return type: the text before the last top-level space that is not
    inside an operator name (``operator new``, ``operator unsigned long``)."""
    spaces = [i for i, c, depth in _scan(text, " ") if depth == 0 and c == " "]
    for i in reversed(spaces):
        # The component holding this space: from the last top-level "::" before it.
        head = text[:i]
        comp_start = head.rfind("::") + 2 if "::" in head else 0
        if text[comp_start:i].lstrip().startswith("operator") or text[comp_start:i].lstrip("~").startswith("operator"):
            continue
        if text[i + 1 :].startswith(("const", "volatile", "&", "*")):
            continue
        return text[i + 1 :]
    return text


@functools.lru_cache(maxsize=4096)
def parse(name: str) -> ParsedName:
    """Take a demangled (or user-typed) name apart. Remembered (the result is frozen): a line lookup per
    address asks again for the name of the symbol around it, ~5 ms each for the standard library's
    templates."""
    base, clones = split_clones(name.strip())
    head, params = split_params(base)
    qualified = strip_return_type(head)
    if qualified.startswith("::"):
        qualified = qualified[2:]
    components = tuple(c.strip() for c in _split_top(qualified, "::"))
    return ParsedName(components=components, params=params, clones=clones)


def base_component(component: str) -> str:
    """A component without its template arguments and ABI tags: ``"f<int>[abi:cxx11]"`` -> ``"f"``."""
    comp = _rx("abi_tag").sub("", component)
    if comp.startswith("operator"):
        # operator<  / operator< <T>: keep the symbol, drop a template list after a space.
        m = re.match(r"operator\s*(<=>|<<=|>>=|->\*|\(\)|\[\]|<<|>>|<=|>=|->|<|>)", comp)
        if m:
            return m.group(0)
    for i, c, depth in _scan(comp):
        if c == "<" and depth == 0:
            return comp[:i]
    return comp


def identifier(component: str) -> str | None:
    """The plain identifier of a component, as it is spelled inside a mangled name, or None for
    operators, lambdas and other unnamed things (``~X`` gives ``X``: destructors mangle as D1/D2)."""
    comp = base_component(component).lstrip("~")
    if re.fullmatch(r"[A-Za-z_]\w*", comp) and comp != "operator":
        return comp
    return None


def _norm_params(params: str) -> str:
    return re.sub(r"\s+", "", _rx("abi_tag").sub("", params))


def components_match(query: tuple[str, ...], candidate: tuple[str, ...], *, qualified: bool = False) -> bool:
    """gdb's ``break NAME`` rule: the query's components match the candidate's last components.

    A query component without template arguments matches any instantiation; anonymous namespaces in
    the candidate may be left out of the query. ``qualified`` asks for all the components.
    """
    anon = "(anonymous namespace)"
    cand = list(candidate) if anon in query else [c for c in candidate if c != anon]
    if len(query) > len(cand) or (qualified and len(query) != len(cand)):
        return False
    return all(_component_equal(q, c) for q, c in zip(reversed(query), reversed(cand)))


def _component_equal(query: str, candidate: str) -> bool:
    q = _rx("abi_tag").sub("", query).replace(" ", "")
    c = _rx("abi_tag").sub("", candidate).replace(" ", "")
    if q == c:
        return True
    q_base = base_component(query).replace(" ", "")
    if q_base == q:  # no template arguments in the query: any instantiation will do
        return q_base == base_component(candidate).replace(" ", "")
    return False


def name_matches(query: str, demangled: str, mangled: str | None = None) -> bool:
    """Whether ``query`` designates the symbol, as ``break query`` would in gdb.

    Accepted: the mangled name, the exact demangled name, the name without its parameter list, or
    trailing ``::`` components (``initModule`` matches ``torch::cpu::initModule(_object*)``). A
    leading ``::`` asks for the fully qualified name only. Clone suffixes never matter.
    """
    query = query.strip()
    if mangled is not None:
        plain_mangled, _ = split_clones(mangled)
        if query in (mangled, plain_mangled):
            return True
    base, _ = split_clones(demangled)
    if query == base:
        return True
    qualified = query.startswith("::")
    q = parse(query)
    d = parse(base)
    if q.params is not None:
        if d.params is None or not _params_match(q.params, d.params):
            return False
    return components_match(q.components, d.components, qualified=qualified)


def _params_match(query: str, candidate: str) -> bool:
    qn, cn = _norm_params(query), _norm_params(candidate)
    if qn == cn:
        return True
    # "f(int)" also designates "f(int) const".
    return cn.startswith(qn) and _rx("trailing_qualifiers").match(candidate[candidate.rfind(")") + 1 :]) is not None \
        and _norm_params(candidate[: candidate.rfind(")") + 1]) == qn


def short_name(demangled: str) -> str:
    """The qualified name without return type, parameters or clone suffixes: a valid break spec."""
    p = parse(demangled)
    return p.qualified


def search_tokens(query: str) -> list[str]:
    """Identifiers of the query's components (the last first), as they appear in mangled names."""
    q = parse(split_clones(query.strip())[0].lstrip(":"))
    tokens = []
    for comp in reversed(q.components):
        ident = identifier(comp)
        if ident and ident not in tokens:
            tokens.append(ident)
    return tokens
