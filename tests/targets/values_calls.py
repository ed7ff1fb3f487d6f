"""Calls whose arguments pttrace's value reader must read at the functions' first instructions: says what
torch says of its tensors (one JSON line), "ready", then waits for a line on stdin (a debugger is
attached by then), makes the calls and exits."""
import json
import sys

import torch


def main():
    a = torch.tensor([[1.0, -2.0], [3.0, 4.5]])
    b = torch.arange(6.0).view(3, 2)[1:]  # a view with an offset
    low = torch.tensor(0.5)
    c = torch.ones(2, 2, dtype=torch.float64).t()
    facts = {name: {"impl": t._cdata, "sizes": list(t.shape), "strides": list(t.stride()),
                    "storage_offset": t.storage_offset(), "dtype": str(t.dtype)[6:], "data_ptr": t.data_ptr()}
             for name, t in (("a", a), ("b", b), ("low", low), ("c", c))}
    print(json.dumps(facts), flush=True)
    print("ready", flush=True)
    sys.stdin.readline()
    torch.add(a, b, alpha=2)
    torch.add(a, b, alpha=0.25)
    torch.clamp(a, min=low)
    torch.cat([a, b, c.float()], 1)
    torch.sum(a, dim=[1], keepdim=True, dtype=torch.float64)
    torch.full((2, 3), 1.5, dtype=torch.float64)
    a.sigmoid()
    torch.sigmoid(a)
    print("done", flush=True)


if __name__ == "__main__":
    main()
