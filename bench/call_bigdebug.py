"""A torch program calling into the generated debug library (bench/gen_big_debug.py) through a torch
operator, so a breakpoint in the library sits under torch's dispatcher: ``bigdebug::run`` is defined
with torch.library and its CPU kernel calls the library through ctypes.

    python bench/call_bigdebug.py LIB [UNIT [HOT]] [--kernel-too]

With HOT 0 (the default) the operator runs ``bigdebug_unit_U(3)`` once (it calls ``bigU::kernel_U_0``);
else ``bigdebug_hot_U(HOT)``, which calls ``bigU::tick_U`` HOT times, after ``bigdebug_unit_U(3)`` with
``--kernel-too``. UNIT defaults to 7. It prints the last operator call's own wall time (for the per-hit
cost of a hot breakpoint).
"""
import argparse
import ctypes
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("library")
ap.add_argument("unit", type=int, nargs="?", default=7)
ap.add_argument("hot", type=int, nargs="?", default=0)
ap.add_argument("--kernel-too", action="store_true", help="with HOT, run bigdebug_unit_UNIT(3) first")
args = ap.parse_args()

lib = ctypes.CDLL(args.library)
calls = []  # (entry point, its argument), in order
if args.kernel_too or not args.hot:
    calls.append((getattr(lib, f"bigdebug_unit_{args.unit}"), 3))
if args.hot:
    calls.append((getattr(lib, f"bigdebug_hot_{args.unit}"), args.hot))
for entry, _ in calls:
    entry.restype = ctypes.c_double
    entry.argtypes = [ctypes.c_int]

torch.library.define("bigdebug::run", "(Tensor x, int which) -> Tensor")


@torch.library.impl("bigdebug::run", "CPU")
def run_cpu(x, which):
    entry, n = calls[which]
    return x + entry(n)


for which in range(len(calls)):
    t0 = time.perf_counter()
    value = torch.ops.bigdebug.run(torch.zeros(1), which).item()
print(f"bigdebug::run: {value} in {time.perf_counter() - t0:.6f} s")
