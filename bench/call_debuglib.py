"""A target for the debug-build re-run benchmark: a torch program (as pttrace's are) that loads a library
built with -g (bench/gen_debug_lib.py) and calls one of its functions, which calls ``bench7::work_7_1``.

    python bench/call_debuglib.py LIB
"""
import ctypes
import sys

import torch

lib = ctypes.CDLL(sys.argv[1])
lib.bench_unit_7.restype = ctypes.c_double
lib.bench_unit_7.argtypes = [ctypes.c_int]
print("bench_unit_7:", lib.bench_unit_7(3), torch.ones(1).sum().item())
