"""The agent inside gdb imports ``tracer.symbols.ehframe`` before the target starts: that must not load the
symbol index (elf_index and its imports, ~10-15 ms of gdb's CPU on the way to ``-exec-run``), and loading
the index later must leave the package's functions as they are. Fresh interpreters: import order matters."""
from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, sys
import tracer.symbols.ehframe
before = sorted(m for m in sys.modules if m.startswith("tracer.symbols."))
from tracer import symbols
symbols.LibraryIndex  # the lazy attribute loads the index
print(json.dumps({"before": before, "loaded": "tracer.symbols.elf_index" in sys.modules,
                  "functions": {n: callable(getattr(symbols, n)) and not isinstance(getattr(symbols, n), type(sys))
                                for n in ("suggest", "find_symbol", "symbol_at", "libraries_defining")}}))
"""


def test_ehframe_alone_does_not_load_the_symbol_index():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["before"] == ["tracer.symbols.ehframe", "tracer.symbols.leb128"]
    assert got["loaded"]
    assert all(got["functions"].values()), got["functions"]  # no submodule shadows a function
