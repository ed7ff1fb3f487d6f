"""What ``--eval`` costs a hit: the hot loop of bench/hot_add.py under ``--break at::_ops::add_Tensor::call``
recorded without ``--eval`` and with 1 and 3 register expressions and 1 memory read, rounds alternating.

    .venv/bin/python bench/bench_eval.py [-n HITS] [--rounds R]

Per hit: the loop's wall time measured inside the target / hits (gdb's stop, the recording and each
expression's evaluation included); the difference with the run without ``--eval`` is the cost of the
expressions. Prints a markdown table for bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTTRACE = [sys.executable, "-m", "tracer"]
VARIANTS = {
    "no --eval": [],
    "--eval '$rdi'": ["--eval", "$rdi"],
    "3 registers ($rdi, $rsi, $pc)": ["--eval", "$rdi", "--eval", "$rsi", "--eval", "$pc"],
    "a memory read (*(long *)$rsp)": ["--eval", "*(long *)$rsp"],
}


def one(hits: int, extra: list[str], tmp: Path) -> float:
    out = tmp / f"loop-{time.monotonic_ns()}.json"
    cmd = [*PTTRACE, "run", "--batch", "-q", "--session-dir", str(tmp / "sessions"), "-b", "at::_ops::add_Tensor::call",
           *extra, "--", "bench/hot_add.py", str(hits), "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=1800)
    return json.loads(out.read_text())["seconds"] / hits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--hits", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    per: dict[str, list[float]] = {k: [] for k in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-eval-") as tmp:
        for rnd in range(args.rounds):
            for name, extra in VARIANTS.items():
                per[name].append(one(args.hits, extra, Path(tmp)))
                print(f"  round {rnd + 1}/{args.rounds}  {name:32s} {per[name][-1] * 1e3:6.2f} ms/hit", flush=True)
    base = statistics.median(per["no --eval"])
    print(f"\n{args.hits:,} hits, {args.rounds} rounds (medians), load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end.\n")
    print("| run | ms per hit | cost of the expressions per hit |")
    print("| --- | --- | --- |")
    for name in VARIANTS:
        m = statistics.median(per[name])
        print(f"| {name} | {m * 1e3:.2f} | {'' if name == 'no --eval' else f'{(m - base) * 1e3:+.2f} ms'} |")


if __name__ == "__main__":
    main()
