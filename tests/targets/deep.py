"""Recurses 5,000 Python frames deep, then calls torch.tensor at the bottom."""
import sys

import torch

sys.setrecursionlimit(20000)


def down(n):
    if n == 0:
        return torch.tensor([1])
    return down(n - 1)


down(5000)
