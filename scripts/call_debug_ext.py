"""Call the pttrace_demo operators a few times: a target for ``pttrace run`` with a debug-built kernel.

    python scripts/call_debug_ext.py [PATH/TO/pttrace_demo.so]

Without a path, the library is built (or found in its cache) by scripts/build_debug_ext.py. Then:
``pttrace run scripts/call_debug_ext.py --break pttrace_demo::scale_add_cpu`` records the kernel with
its DWARF file:line, below ``c10::Dispatcher::callBoxed`` from the release libraries.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch


def main(argv: list[str]) -> int:
    if argv:
        library = Path(argv[0])
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from build_debug_ext import build

        library = build()
    torch.ops.load_library(str(library))
    a = torch.arange(4, dtype=torch.float32)
    b = torch.ones(4)
    for alpha in (0.5, 2.0, 3.0):
        out = torch.ops.pttrace_demo.scale_add(a, b, alpha)  # CPU kernel, through the boxed path
        print(f"scale_add(alpha={alpha}) = {out.tolist()}")
    twice = torch.ops.pttrace_demo.scale_add_twice(a, b, 1.0)  # CompositeImplicitAutograd -> CPU
    print(f"scale_add_twice = {twice.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
