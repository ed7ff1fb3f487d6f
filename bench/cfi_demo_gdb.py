"""Sourced by gdb (bench/libtorch_cpu_probe.py runs it): stop in a libtorch_cpu.so function of
scripts/hello-world.py with only the symbols that stop needs, and dump the stack as JSON.

    PT_MODE=full|cfi PT_CFI=/path/cfi-only.so PT_OFFSET=0x2deec40 PT_OUT=/tmp/stack.json \
      gdb -nx -batch -x bench/cfi_demo_gdb.py --args .venv/bin/python scripts/hello-world.py

full: ``sharedlibrary libtorch_cpu`` (gdb reads its 648k minimal symbols, as pttrace does today);
cfi:  ``add-symbol-file CFI -o LOAD_BASE`` with the CFI-only copy made by bench/cfi_only.py (unwind
      tables only, no symbols). In both, the breakpoint is set by address (``*LOAD_BASE+PT_OFFSET``,
      the offset coming from pttrace's own symbol index), and libtorch_python / libpython get their
      symbols as usual.
"""
import json
import os
import time

import gdb  # type: ignore[import-not-found]

MODE = os.environ.get("PT_MODE", "cfi")
CFI = os.environ.get("PT_CFI", "")
OFFSET = int(os.environ["PT_OFFSET"], 0)
OUT = os.environ["PT_OUT"]
LIB = "libtorch_cpu.so"

for cmd in ("set pagination off", "set confirm off", "set auto-solib-add off", "set breakpoint pending on",
            "set print thread-events off"):
    gdb.execute(cmd)
catch = gdb.execute("catch load libtorch_python", to_string=True)
gdb.execute("run")
for lib in ("libtorch_python", "libpython"):
    gdb.execute(f"sharedlibrary {lib}", to_string=True)
for bp in gdb.breakpoints() or ():
    bp.delete()
gdb.execute("delete")  # the catchpoint

pid = gdb.selected_inferior().pid
base = path = None
with open(f"/proc/{pid}/maps") as fh:
    for line in fh:
        p = line.split()
        if len(p) >= 6 and p[5].endswith("/" + LIB) and int(p[2], 16) == 0:
            base, path = int(p[0].split("-")[0], 16), p[5]
            break
if base is None:
    raise gdb.GdbError(f"{LIB} is not mapped")

t0 = time.perf_counter()
if MODE == "full":
    gdb.execute(f"sharedlibrary {LIB}", to_string=True)
else:
    gdb.execute(f"add-symbol-file {CFI} -o {base:#x}", to_string=True)
t_symbols = time.perf_counter() - t0
gdb.execute(f"break *{base + OFFSET:#x}", to_string=True)
gdb.execute("continue")

t0 = time.perf_counter()
frames = []
f = gdb.newest_frame()
while f is not None:
    pc = f.pc()
    try:
        lib = gdb.solib_name(pc)
    except Exception:
        lib = None
    frames.append({"level": f.level(), "pc": pc, "name": f.name(), "library": lib,
                   "inline": f.type() == gdb.INLINE_FRAME})
    f = f.older()
t_walk = time.perf_counter() - t0
with open(OUT, "w") as fh:
    json.dump({"mode": MODE, "base": base, "library": path, "symbols_seconds": t_symbols, "walk_seconds": t_walk,
               "frames": frames}, fh)
gdb.execute("kill")
