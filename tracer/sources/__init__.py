"""Source locations for native frames that have no DWARF: a release wheel's frames lead to source too.

- ``SourceFinder(source_dir, session_commit).refs(function, library) -> list[SourceRef]``: labelled
  places (``definition`` in a shipped header or the source directory, ``op`` entries of
  native_functions.yaml / derivatives.yaml, ``generated from`` a codegen template).
- ``SourceFinder.local_file(recorded_path)``: a DWARF path from another machine mapped onto the
  source directory (gdb's ``set substitute-path``).
- ``source_dir_setting(flag)``: ``--source-dir`` or ``$PTTRACE_SOURCE_DIR``.

C++ is parsed by universal-ctags (``tags.py``); indexes are cached under ``$XDG_CACHE_HOME/pttrace``.
"""
from tracer.sources.finder import DEFINITION, GENERATED, OP, SourceFinder, SourceRef, source_dir_setting

__all__ = ["DEFINITION", "GENERATED", "OP", "SourceFinder", "SourceRef", "source_dir_setting"]
