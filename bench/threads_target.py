"""The hot breakpoint's workload (``torch.add`` N times from one line) in a process with many threads.

    python bench/threads_target.py MODE THREADS N --out FILE

MODE ``idle``: THREADS - 1 Python threads, each blocked on an Event for the whole loop.
MODE ``pool``: ``torch.set_num_threads(THREADS)`` and one parallel op first, so the intra-op pool's
THREADS - 1 workers exist (parked once the op is done).
MODE ``busy``: the pool as above, kept busy by a Python thread that runs a parallel op over and over
(``torch.sigmoid`` of 4M floats) while the main thread loops.

The loop's wall time, measured inside the target, goes to FILE as JSON with the number of threads the
process had during it (from /proc), so a run with fewer threads than asked for cannot pass unseen, and
the CPU time the debugger (the parent) and the target spent during the loop, and the debugger's during
the loop's first call alone.
"""
import json
import os
import sys
import threading
import time

import torch

from proc_cpu import cpu_seconds  # bench/, this script's directory


def _threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


def main() -> None:
    mode, threads, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = sys.argv[sys.argv.index("--out") + 1]
    done = threading.Event()
    helpers = []
    if mode == "idle":
        helpers = [threading.Thread(target=done.wait, daemon=True) for _ in range(threads - 1)]
    elif mode in ("pool", "busy"):
        torch.set_num_threads(threads)
        big = torch.rand(1 << 22)
        torch.sigmoid(big)  # starts the pool's workers
        if mode == "busy":
            def churn() -> None:
                while not done.is_set():
                    torch.sigmoid(big)
            helpers = [threading.Thread(target=churn, daemon=True)]
    for t in helpers:
        t.start()
    a = torch.ones(4)
    b = torch.ones(4)
    during = _threads_now()
    debugger, mine = os.getppid(), os.getpid()
    cpu0 = cpu_seconds(debugger), cpu_seconds(mine)
    t0 = time.perf_counter()
    first = 0.0
    for i in range(n):
        torch.add(a, b)  # HOT-LINE
        if i == 0:  # the first hit's one-off work (a debugger reading unwind tables, say) apart from the rest
            first = cpu_seconds(debugger) - cpu0[0]
    elapsed = time.perf_counter() - t0
    cpu1 = cpu_seconds(debugger), cpu_seconds(mine)
    done.set()
    for t in helpers:
        t.join()
    with open(out, "w") as fh:
        json.dump({"n": n, "seconds": elapsed, "threads": during, "mode": mode,
                   "debugger_cpu": cpu1[0] - cpu0[0], "target_cpu": cpu1[1] - cpu0[1],
                   "debugger_cpu_first": first}, fh)


if __name__ == "__main__":
    main()
