"""Recurses 5,000 Python frames deep, then calls torch.tensor at the bottom (with --no-torch, libz's
zlibCompileFlags through ctypes, without importing torch: 2.5 s of CPU at load 8)."""
import ctypes
import sys

NO_TORCH = sys.argv[1:] == ["--no-torch"]
if NO_TORCH:
    zlib = ctypes.CDLL("libz.so.1")
else:
    import torch

sys.setrecursionlimit(20000)


def down(n):
    if n == 0:
        return zlib.zlibCompileFlags() if NO_TORCH else torch.tensor([1])
    return down(n - 1)


down(5000)
