"""The values benchmark's target: ``torch.add(a, b, alpha=2)`` N times once a line arrives on stdin (a
debugger attaches in between); the loop's wall time is printed as ``LOOP {json}``."""
import json
import sys
import time

import torch


def main() -> None:
    n = int(sys.argv[1])
    a = torch.ones(2, 3)
    b = torch.arange(6.0).view(3, 2).t()
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    for _ in range(n):
        torch.add(a, b, alpha=2)
    print("LOOP " + json.dumps({"n": n, "seconds": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
