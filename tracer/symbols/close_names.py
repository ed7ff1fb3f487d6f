"""Close names for a misspelled one, without reading every symbol.

The candidates are the names holding the longest prefix, or the longest suffix, of the query's last
identifier that the string table contains: a few binary-searched ``find``s over ``.strtab``, then a
similarity ratio on those few names only.
"""
from __future__ import annotations

from . import names
from .demangle import SPECIAL_PREFIXES, demangle
from .symtab import FUNCTION_TYPES, SymbolTable

_MAX_HITS_PER_PROBE = 4000


def suggest_names(t: SymbolTable, query: str, limit: int) -> list[tuple[float, str]]:
    """(score, qualified name) of the functions of ``t`` closest to ``query``, best first (score >= 0.5).
    The table's sorted names must be loaded."""
    q = names.parse(names.split_clones(query.strip())[0].lstrip(":"))
    last = names.base_component(q.components[-1]) if q.components else query
    ident = last.encode()
    if len(ident) < 3:
        return []
    scored: dict[str, float] = {}
    q_last = last.lower()
    q_full = "::".join(q.components).lower()
    so = t.str_offset
    floor = 0.5  # a candidate sure to score under it can change nothing returned: its exact score is skipped
    for s in _candidate_starts(t, ident):
        for i in t.starting_in(s - so, s - so):
            _st_name, info, shndx, _v, _sz = t.entry(i)
            if (info & 0xF) not in FUNCTION_TYPES or shndx == 0:
                continue
            dem = demangle(t.name_at(s - so))
            if dem.startswith(SPECIAL_PREFIXES):
                continue
            parsed = names.parse(dem)
            if not parsed.components:
                continue
            score = _score(q_last, q_full, len(q.components), parsed, floor)
            if score is None:
                continue
            short = parsed.qualified
            if score > scored.get(short, -1.0):
                scored[short] = score
                if len(scored) >= limit:
                    floor = max(0.5, sorted(scored.values(), reverse=True)[limit - 1])
    best = sorted(scored.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
    return [(score, name) for name, score in best[:limit] if score >= 0.5]


def _candidate_starts(t: SymbolTable, ident: bytes) -> dict[int, None]:
    """Start offsets (in ``t.mm``) of the strings holding the longest present prefix or suffix of ``ident``."""
    mm, so, end = t.mm, t.str_offset, t.str_end
    minimum = max(3, len(ident) // 3)

    def longest(make) -> bytes | None:
        lo, hi = minimum - 1, len(ident)  # invariant: make(lo) present (or lo below minimum)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mm.find(make(mid), so, end) >= 0:
                lo = mid
            else:
                hi = mid - 1
        return make(lo) if lo >= minimum else None

    probes = {longest(lambda n: ident[:n]), longest(lambda n: ident[len(ident) - n :])}
    starts: dict[int, None] = {}
    for probe in probes:
        if not probe:
            continue
        for count, p in enumerate(t.find_all(probe)):
            if count >= _MAX_HITS_PER_PROBE:
                break
            starts[mm.rfind(b"\0", so, p) + 1] = None
    return starts


def _score(q_last: str, q_full: str, q_parts: int, parsed: names.ParsedName, floor: float = 0.0) -> float | None:
    """The candidate's closeness to the query, or None when it is sure to be under ``floor``: difflib's
    ``quick_ratio`` bounds each ``ratio`` from above at a fraction of its cost, so most of the thousands of
    candidates of a common name are dropped without their exact ratios (~2/3 of a misspelled name's search)."""
    import difflib  # here: a warm `pttrace where` that finds its name never suggests (~1.5 ms of imports)

    bases = [names.base_component(c).lower() for c in parsed.components]
    parts = [(1.0, difflib.SequenceMatcher(None, q_last, bases[-1]))]
    # A class or namespace name ("make_boxed_from_unboxed_functor") points at its members.
    parts += [(0.9, difflib.SequenceMatcher(None, q_last, outer)) for outer in bases[:-1]
              if abs(len(outer) - len(q_last)) <= len(q_last) // 2]
    whole = None
    if q_parts > 1:
        full = "::".join(names.base_component(c) for c in parsed.components).lower()
        whole = difflib.SequenceMatcher(None, q_full, full)

    def combine(ratio) -> float:
        score = max(weight * ratio(m) for weight, m in parts)
        return score if whole is None else 0.5 * score + 0.5 * ratio(whole)

    if combine(difflib.SequenceMatcher.quick_ratio) < floor:
        return None
    return combine(difflib.SequenceMatcher.ratio)
