"""A hot breakpoint gdb resolves by name, children followed or not: gdb's CPU per hit, alternating.

    .venv/bin/python bench/bench_child_entry.py [-n ROUNDS] [--calls N]

With children followed (the default) each place a breakpoint resolved by name (libz's zlibCompileFlags,
called through ctypes) also has an internal breakpoint by address, where a fork child not set up yet stops
(agent/breakpoints.py, ``ChildEntry``). The target calls zlibCompileFlags N times and reads gdb's CPU time
around its loop (every thread of its parent, gdb, from /proc/PID/task/*/schedstat: the load inflates it far
less than wall time). Each round runs, in turn, ``--no-follow-children`` and the default; only the rounds'
alternation makes the comparison on a shared machine. Every pttrace run must record all N hits.

The load moves pttrace's figures by 20% between runs, more than the entry costs, so each round also runs
plain gdb twice: a Python breakpoint on the name whose ``stop()`` returns False, alone and with an entry's
twin (an internal breakpoint at its address whose ``stop()`` asks whether the inferior is set up, then
returns False): their difference is what the entry adds to a hit in a process set up.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
TARGET = '''\
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[3])  # bench/: proc_cpu
from proc_cpu import cpu_seconds
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
n, out = int(sys.argv[1]), sys.argv[2]

call()  # the first hit's one-off work (gdb reading unwind tables) outside the loop
gdb = os.getppid()
cpu0 = cpu_seconds(gdb)
for _ in range(n):
    call()
json.dump({"n": n, "gdb_cpu": cpu_seconds(gdb) - cpu0}, open(out, "w"))
'''
VARIANTS = {"no-follow": ["--no-follow-children"], "follow": [], "gdb": [], "gdb+entry": []}
GDB = """set pagination off
set confirm off
set breakpoint pending on
python
import gdb
READY = {1}
class Named(gdb.Breakpoint):
    def stop(self):
        return False
class Entry(gdb.Breakpoint):
    def stop(self):
        return gdb.selected_inferior().num not in READY
named = Named("zlibCompileFlags")
def placed(_=None):
    if %(entry)s and not getattr(named, "entry", None):
        places = [loc.address for loc in named.locations if loc.address]
        if places:
            named.entry = Entry("*%%#x" %% places[0], internal=True)
gdb.events.breakpoint_modified.connect(placed)
end
run
"""


def run_one(variant: str, tmp: Path, rnd: int, calls: int) -> float | None:
    """gdb's CPU per hit of the loop, in ms."""
    d = tmp / f"{variant}-{rnd}"
    d.mkdir()
    target = [str(tmp / "target.py"), str(calls), str(d / "loop.json"), str(ROOT / "bench")]
    if variant.startswith("gdb"):
        (d / "bp.gdb").write_text(GDB % {"entry": variant == "gdb+entry"})
        argv = ["gdb", "-nx", "-batch", "-x", str(d / "bp.gdb"), "--args", str(PY), *target]
    else:
        argv = [str(PY), "-m", "tracer", "run", "--break", "zlibCompileFlags", "--batch", "-q", *VARIANTS[variant],
                "--session-dir", str(d / "s"), "--", *target]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    try:
        loop = json.loads((d / "loop.json").read_text())
    except (OSError, ValueError):
        print(f"FAILED {variant}: rc {proc.returncode} {proc.stderr[-500:]}", file=sys.stderr)
        return None
    if variant.startswith("gdb"):
        return 1000 * loop["gdb_cpu"] / loop["n"]
    hits = sum(line.count('"type":"hit"') for p in (d / "s").glob("*.jsonl") for line in p.open())
    if hits != calls + 1:
        print(f"FAILED {variant}: {hits} hits recorded, not {calls + 1}", file=sys.stderr)
        return None
    return 1000 * loop["gdb_cpu"] / loop["n"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    res: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-entry-") as name:
        tmp = Path(name)
        (tmp / "target.py").write_text(TARGET)
        for rnd in range(args.rounds):
            for v in VARIANTS:
                ms = run_one(v, tmp, rnd, args.calls)
                if ms is not None:
                    res[v].append(ms)
                    print(f"round {rnd} {v:10} gdb CPU {ms:.3f} ms a hit", flush=True)
    med = {v: statistics.median(x) for v, x in res.items() if x}
    for v, x in res.items():
        if x:
            print(f"  {v:10} median {med[v]:.3f} ms [{min(x):.3f}-{max(x):.3f}]; rounds "
                  + " ".join(f"{m:.3f}" for m in x))
    if len(med) == 4:
        print(f"  follow / no-follow: {med['follow'] / med['no-follow']:.3f}; the entry's twin in plain gdb: "
              f"{1000 * (med['gdb+entry'] - med['gdb']):+.1f} us a hit ({med['gdb+entry'] / med['gdb']:.3f}x)")
    return 0 if all(len(x) == args.rounds for x in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
