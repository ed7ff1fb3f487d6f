"""Compiles and runs a new function six times, freeing the previous one's code object first:
the next code object often takes the freed one's address."""
import gc

import torch

for i in range(6):
    src = f"def fn_{i}():\n    return torch.tensor([{i}])\n\n\nfn_{i}()\n"
    code = compile(src, "<generated>", "exec")
    exec(code, {"torch": torch})
    del code
    gc.collect()
