"""CPU time of a process from /proc, for the benchmarks' targets (standard library only: a target that
imports it imports nothing else)."""
import os


def cpu_seconds(pid) -> float:
    """CPU time of every thread of ``pid`` (``schedstat``: nanoseconds, where ``stat`` counts 10 ms ticks).
    Of the debugger (a target's parent, gdb) it is a per-hit cost the machine's load does not inflate much, as
    it does the wall time of a hit (each stop waits for the CPU several times on a loaded machine)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9
