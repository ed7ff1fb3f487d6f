"""C++ names as people read them: the one place that calls the demangler (cxxfilt)."""
from __future__ import annotations

import _thread
from functools import lru_cache

# Demangler outputs that name something derived from a function, not the function itself.
SPECIAL_PREFIXES = ("guard variable for ", "vtable for ", "VTT for ", "typeinfo for ", "typeinfo name for ",
                    "construction vtable for ", "non-virtual thunk to ", "virtual thunk to ",
                    "covariant return thunk to ", "TLS init function for ", "TLS wrapper function for ",
                    "reference temporary ", "transaction clone for ", "hidden alias for ")

# What cxxfilt's import asks ``ctypes.util.find_library`` for, and the sonames the dynamic loader finds by
# itself on glibc systems. find_library runs ``/sbin/ldconfig -p`` for each name: cxxfilt's import spent
# 0.06-0.15 s of wall time on two of them at the end of every first hit (RESULTS.md, "First hits, seventh
# pass"), and a fork of a big process besides. A name dlopen does not find goes to the real find_library.
_SONAMES = {"c": "libc.so.6", "stdc++": "libstdc++.so.6", "c++": "libc++.so.1"}
_import_lock = _thread.allocate_lock()  # _thread, not threading: `pttrace where` imports this module
_loaded: list = []  # cxxfilt, once its import has run to its end


def _loadable(name: str):
    """The soname for a library name that dlopen can open as it is, else None."""
    import ctypes

    soname = _SONAMES.get(name)
    if soname is None:
        return None
    try:
        ctypes.CDLL(soname)
    except OSError:
        return None
    return soname


def load_cxxfilt():
    """cxxfilt, imported with its default demangler (libc's free, libstdc++'s ``__cxa_demangle``) found
    without ``ldconfig``: cxxfilt picks its libraries at import, through ``ctypes.util.find_library``, which
    answers here from ``_SONAMES`` while the import runs."""
    if _loaded:
        return _loaded[0]
    with _import_lock:
        # Not sys.modules: another thread's import puts cxxfilt there before it has run (an AttributeError
        # on its demangle here, seen killing a TUI worker in a loaded run); _loaded is set once it has.
        if _loaded:
            return _loaded[0]
        import ctypes.util

        real = ctypes.util.find_library

        def find_library(name: str):
            return _loadable(name) or real(name)

        ctypes.util.find_library = find_library
        try:
            import cxxfilt
        finally:
            ctypes.util.find_library = real
        _loaded.append(cxxfilt)
    return cxxfilt


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a symbol name, or the name itself if it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    cxxfilt = load_cxxfilt()
    try:
        return cxxfilt.demangle(name, external_only=False)
    except cxxfilt.InvalidName:
        return name
