"""A hot breakpoint workload: ``torch.add`` called N times (default 2,000) from one Python line.

    python bench/hot_add.py [N] [--out FILE]

The loop's own wall time (measured inside the target, so it includes every breakpoint's cost and
nothing of the debugger's start-up) is written to FILE as JSON, or printed as ``HOT_LOOP {...}``.
"""
import json
import sys
import time

import torch


def main() -> None:
    args = sys.argv[1:]
    out = None
    if "--out" in args:
        i = args.index("--out")
        out = args[i + 1]
        del args[i:i + 2]
    n = int(args[0]) if args else 2000
    a = torch.ones(4)
    b = torch.ones(4)
    t0 = time.perf_counter()
    for _ in range(n):
        torch.add(a, b)  # HOT-LINE: the benchmark checks every hit comes from this line
    elapsed = time.perf_counter() - t0
    result = {"n": n, "seconds": elapsed}
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh)
    else:
        print("HOT_LOOP " + json.dumps(result))


if __name__ == "__main__":
    main()
