"""``--op conv2d --follow``: what following a composite operator's decomposition costs, side by side with
``--op conv2d`` alone, plain gdb breaking on ``at::_ops::conv2d::call`` (a ``commands`` that continues),
and the script without any of them.

    .venv/bin/python bench/bench_follow.py                  # 3 rounds, 1 and 40 conv2d calls
    .venv/bin/python bench/bench_follow.py -n 1 --calls 20 --no-write

Each case runs the same script (N calls of ``F.conv2d`` on a 1x2x8x8 input) from start to end; the
wall time includes start-up (gdb reading libtorch, the target importing torch). The cost per call is
(t(N) - t(1)) / (N - 1): the first call of a followed run pays for resolving each operator met
(~15 operators for conv2d), later calls only for their hits. Medians over the rounds; written to
``bench/RESULTS.md``, section "Follow".
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
PY = sys.executable
SCRIPT = """import sys
import torch
import torch.nn.functional as F
x = torch.randn(1, 2, 8, 8)
w = torch.randn(3, 2, 3, 3, requires_grad=True)
for _ in range(int(sys.argv[1])):
    y = F.conv2d(x, w)
"""


def cases(script: Path, sessions: Path) -> dict[str, list[str]]:
    pt = [PY, "-m", "tracer", "run", "--batch", "--quiet", "--session-dir", str(sessions)]
    return {
        "python alone": [PY, str(script)],
        "gdb: break at::_ops::conv2d::call": [
            "gdb", "-nx", "-batch", "-ex", "set breakpoint pending on", "-ex", "break at::_ops::conv2d::call",
            "-ex", "commands\nsilent\ncontinue\nend", "-ex", "run", "--args", PY, str(script)],
        "pttrace --op conv2d": pt + ["--op", "conv2d", str(script)],
        "pttrace --op conv2d --follow": pt + ["--op", "conv2d", "--follow", str(script)],
    }


def timed(argv: list[str], n: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([*argv, str(n)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:6]} failed: {proc.stderr[-2000:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "conv.py"
        script.write_text(SCRIPT)
        runs = cases(script, Path(tmp) / "sessions")
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for name, argv in runs.items():
                for n in (1, args.calls):
                    times.setdefault((name, n), []).append(timed(argv, n))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med[("python alone", args.calls)]
    gdb_call = (med[("gdb: break at::_ops::conv2d::call", args.calls)] -
                med[("gdb: break at::_ops::conv2d::call", 1)]) / (args.calls - 1)
    lines = [f"| case | 1 call (s) | {args.calls} calls (s) | per later call (ms) | vs python alone |",
             "|---|---:|---:|---:|---:|"]
    for name in runs:
        one, many = med[(name, 1)], med[(name, args.calls)]
        per = max(0.0, many - one) / (args.calls - 1) * 1000  # start-up noise can exceed a cheap loop
        lines.append(f"| {name} | {one:.2f} | {many:.2f} | {per:.1f} | {many / base:.1f}x |")
    follow = (med[("pttrace --op conv2d --follow", args.calls)] - med[("pttrace --op conv2d --follow", 1)]) / \
        (args.calls - 1)
    first = med[("pttrace --op conv2d --follow", 1)] - med[("pttrace --op conv2d", 1)]
    versus = (f"{follow / gdb_call:.0f}x plain gdb's stop on at::_ops::conv2d::call ({gdb_call * 1000:.1f} ms)"
              if gdb_call > 0 else "plain gdb's per-call stop was below this run's noise")
    load = os.getloadavg()[0]
    lines += ["", f"--follow: the first conv2d call costs {first:.1f} s more than --op conv2d alone (resolving "
              f"the operators met); each later call {follow * 1000:.0f} ms ({versus}). Medians of {args.rounds} "
              f"rounds; load average {load:.1f} on {os.cpu_count()} CPUs while it ran."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        _write_section(text)
    return 0


def _write_section(body: str) -> None:
    head = "## Follow"
    old = RESULTS.read_text() if RESULTS.exists() else ""
    section = f"{head}\n\n`bench/bench_follow.py` ({time.strftime('%Y-%m-%d')}):\n\n{body}\n"
    if head in old:
        start = old.index(head)
        nxt = old.find("\n## ", start + len(head))
        new = old[:start] + section + (old[nxt + 1:] if nxt >= 0 else "")
    else:
        new = old.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(new)


if __name__ == "__main__":
    sys.exit(main())
