"""Compiles and runs a new function six times, freeing the previous one's code object first:
the next code object often takes the freed one's address. Each function calls libz's zlibCompileFlags
through ctypes (the claim is about the Python frames: importing torch took 2.5 s of CPU at load 8)."""
import ctypes
import gc

call = ctypes.CDLL("libz.so.1").zlibCompileFlags
for i in range(6):
    src = f"def fn_{i}():\n    return call()\n\n\nfn_{i}()\n"
    code = compile(src, "<generated>", "exec")
    exec(code, {"call": call})
    del code
    gc.collect()
