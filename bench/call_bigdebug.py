"""A torch program calling into the generated debug library (bench/gen_big_debug.py) through a torch
operator, so a breakpoint in the library sits under torch's dispatcher: ``bigdebug::run`` is defined
with torch.library and its CPU kernel calls the library through ctypes.

    python bench/call_bigdebug.py LIB [UNIT [HOT]]

With HOT 0 (the default) the operator runs ``bigdebug_unit_U(3)`` once (it calls ``bigU::kernel_U_0``);
else ``bigdebug_hot_U(HOT)``, which calls ``bigU::tick_U`` HOT times. UNIT defaults to 7.
It prints the operator call's own wall time (for the per-hit cost of a hot breakpoint).
"""
import argparse
import ctypes
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("library")
ap.add_argument("unit", type=int, nargs="?", default=7)
ap.add_argument("hot", type=int, nargs="?", default=0)
args = ap.parse_args()

lib = ctypes.CDLL(args.library)
entry = getattr(lib, f"bigdebug_hot_{args.unit}" if args.hot else f"bigdebug_unit_{args.unit}")
entry.restype = ctypes.c_double
entry.argtypes = [ctypes.c_int]

torch.library.define("bigdebug::run", "(Tensor x) -> Tensor")


@torch.library.impl("bigdebug::run", "CPU")
def run_cpu(x):
    return x + entry(args.hot or 3)


t0 = time.perf_counter()
value = torch.ops.bigdebug.run(torch.zeros(1)).item()
print(f"bigdebug::run: {value} in {time.perf_counter() - t0:.6f} s")
