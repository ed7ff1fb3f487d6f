"""C++ names as people read them: the one place that calls the demangler (cxxfilt)."""
from __future__ import annotations

from functools import lru_cache

# Demangler outputs that name something derived from a function, not the function itself.
SPECIAL_PREFIXES = ("guard variable for ", "vtable for ", "VTT for ", "typeinfo for ", "typeinfo name for ",
                    "construction vtable for ", "non-virtual thunk to ", "virtual thunk to ",
                    "covariant return thunk to ", "TLS init function for ", "TLS wrapper function for ",
                    "reference temporary ", "transaction clone for ", "hidden alias for ")


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a symbol name, or the name itself if it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    import cxxfilt

    try:
        return cxxfilt.demangle(name, external_only=False)
    except cxxfilt.InvalidName:
        return name
