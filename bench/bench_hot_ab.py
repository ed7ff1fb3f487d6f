"""The hot breakpoint's gdb CPU per hit, this tree against another checkout of pttrace, alternating.

    .venv/bin/python bench/bench_hot_ab.py --base DIR [-n ROUNDS]

DIR is a checkout of the commit to compare with (``git worktree add --detach DIR COMMIT``): its pttrace
runs with this venv and ``PYTHONPATH=DIR``, so its own agent goes into gdb. Each round runs, in turn, the
base and this tree with argument values (the default) and without (``PTTRACE_NO_ARGS=1``), and a bare
``gdb.Breakpoint`` whose ``stop()`` returns False, on 2,000 hits of ``at::_ops::add_Tensor::call``
(bench/threads_target.py, one thread). The figure is gdb's CPU time per hit (every thread of it, from
/proc/PID/task/*/schedstat, read by the target around its loop): on a shared machine the load inflates it
far less than wall time, but it still moves by tens of percent between runs minutes apart, so only the
rounds' alternation makes the comparison. Every pttrace run must record all 2,000 hits.

Each variant is given twice: over all 2,000 hits, and over the 1,999 after the first (the target reads gdb's
CPU after its first call too). pttrace's first hit costs gdb 0.15-0.25 s once (its first stack walk: gdb
reads the unwind tables and symbols of every library on the stack; the agent's first reads of torch and the
interpreter), which over 2,000 hits is ~0.1 ms of each; the bare breakpoint's is ~1 ms. The second figure
is what every further hit costs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run import BARE as BARE_BP, NOPLT  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
N = 2000
OP = "at::_ops::add_Tensor::call"
# The bare breakpoint of the other benchmarks (its stop() counts and returns False), PLT stubs left out.
BARE = "set pagination off\nset confirm off\nset print thread-events off\n" + NOPLT + (BARE_BP % OP) + "run\n"
VARIANTS = ("base", "new", "base-noargs", "new-noargs", "bare")


def run_one(variant: str, base: Path, tmp: Path, rnd: int) -> tuple[float, float, float] | None:
    """(gdb CPU per hit over all hits, per hit after the first, the first hit's), in ms."""
    d = tmp / f"{variant}-{rnd}"
    d.mkdir()
    target = [str(ROOT / "bench" / "threads_target.py"), "idle", "1", str(N), "--out", str(d / "loop.json")]
    env = dict(os.environ)
    if variant.endswith("noargs"):
        env["PTTRACE_NO_ARGS"] = "1"
    if variant.startswith("base"):
        env["PYTHONPATH"] = str(base)
    if variant == "bare":
        (tmp / "bare.gdb").write_text(BARE)
        argv = [shutil.which("gdb") or "gdb", "-nx", "-batch", "-x", str(tmp / "bare.gdb"), "--args", str(PY), *target]
    else:
        argv = [str(PY), "-m", "tracer", "run", "--break", OP, "--batch", "-q", "--session-dir", str(d / "s"),
                "--", *target]
    # `python -m` puts the directory it runs in first on sys.path, before PYTHONPATH: the base's pttrace runs
    # from the base's directory (from ROOT, "base" would be this tree again).
    proc = subprocess.run(argv, cwd=base if variant.startswith("base") else ROOT, env=env, capture_output=True,
                          text=True)
    try:
        loop = json.loads((d / "loop.json").read_text())
    except (OSError, ValueError):
        print(f"FAILED {variant}: rc {proc.returncode} {proc.stderr[-500:]}", file=sys.stderr)
        return None
    if variant != "bare":
        hits = sum(line.count('"type":"hit"') for p in (d / "s").glob("*.jsonl") for line in p.open())
        if hits != N:
            print(f"FAILED {variant}: {hits} hits recorded, not {N}", file=sys.stderr)
            return None
    first = loop["debugger_cpu_first"]
    return (1000 * loop["debugger_cpu"] / loop["n"], 1000 * (loop["debugger_cpu"] - first) / (loop["n"] - 1),
            1000 * first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the pttrace to compare with")
    parser.add_argument("-n", "--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="pttrace-bench-ab-"))
    res: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}
    try:
        for rnd in range(args.rounds):
            for v in VARIANTS:
                ms = run_one(v, args.base.resolve(), tmp, rnd)
                if ms is not None:
                    res[v].append(ms)
                    print(f"round {rnd} {v:12} gdb CPU {ms[0]:.3f} ms a hit, {ms[1]:.3f} after the first "
                          f"(the first {ms[2]:.1f} ms), load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for i, what in ((0, "all hits"), (1, "after the first hit")):
        print(f"gdb CPU per hit, {what}:")
        med = {v: statistics.median(m[i] for m in x) for v, x in res.items() if x}
        for v, x in res.items():
            if x:
                ratio = f", {med[v] / med['bare']:.2f}x bare" if med.get("bare") else ""
                print(f"  {v:12} median {med[v]:.3f} ms [{min(m[i] for m in x):.3f}-{max(m[i] for m in x):.3f}]"
                      f"{ratio}; rounds " + " ".join(f"{m[i]:.3f}" for m in x))
    return 0 if all(len(x) == args.rounds for x in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
