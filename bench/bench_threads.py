"""The hot breakpoint's cost per hit against the number of threads in the traced process.

    .venv/bin/python bench/bench_threads.py [-n ROUNDS] [--no-write] [--same-cpu]

bench/threads_target.py loops ``torch.add`` under ``--break at::_ops::add_Tensor::call`` in a process
with 1, 64 or 256 threads (idle Python threads; an intra-op pool of 64 made by
``torch.set_num_threads(64)``, parked, and kept busy by a parallel op on another thread). Each
configuration runs pttrace, gdb's ``commands; silent; bt; continue`` and a bare ``gdb.Breakpoint``
whose ``stop()`` returns False, plus the target alone, alternating within each round. Per hit: the
loop's wall time (measured inside the target) over the hits, minus the same loop's time without a
debugger in that round (which matters only when the pool is busy). gdb in all-stop mode stops every
thread when it reports a stop to its user (``bt``); whether a breakpoint that does not stop pays for
the threads too is what this measures. Every pttrace run must record every hit, each on the main
thread with its Python line.

``--same-cpu`` runs every run (the debugger and, by inheritance, the target) on CPU 0 (``taskset``): whether
gdb and the thread that hits share a CPU doubles or halves gdb's CPU per hit, whatever the threads, and the
scheduler decides it anew in each run (bench/RESULTS.md, "Threads: where the growth with 256 threads goes");
pinned, every run has the same placement (gdb's CPU per hit is then the cheaper, shared-CPU one). Pinned
rounds still spread (the 256-thread growth 1.18-1.69x in the first pinned rounds): gdb's ~20 walks a hit over
its thread list cost what the caches make them cost.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run import (ADD_OP, BARE, NOPLT, PTTRACE, RESULTS, ROOT, VENV_PY, _hot_script,  # noqa: E402
                       _completed, _innermost_is, _session_hits, run_measured)

TARGET = "bench/threads_target.py"
N = 2000
BT_N = 100  # gdb `bt` costs 2-150 ms a hit here (all-stop stops every thread): fewer hits, same per-hit figure
CONFIGS = [("idle", 1), ("idle", 64), ("idle", 256), ("pool", 64), ("busy", 64)]
# pttrace as it runs by default (argument values read) and with PTTRACE_NO_ARGS=1: the hot breakpoint's
# target (issue 29: a hit within 1.5x a bare stop()) was set before argument values existed.
TOOLS = ("pttrace", "pttrace-noargs", "bare", "bt")
PIN: str | None = None  # --same-cpu: the CPU every run is pinned to (taskset -c)
SECTION = "Threads: the hot breakpoint with 1 to 256 threads"


def _loop(rundir: Path) -> dict | None:
    try:
        return json.loads((rundir / "loop.json").read_text())
    except (OSError, ValueError):
        return None


def _check_pttrace(rundir: Path) -> list[str]:
    hits, status = _session_hits(rundir / "sessions")
    errs = []
    if len(hits) != N:
        errs.append(f"expected {N} hits, the session has {len(hits)}")
    bad = [h for h in hits if not _innermost_is(h.frames, ADD_OP, "libtorch_cpu")
           or not any(f.kind == "python" and (f.file or "").endswith("threads_target.py") for f in h.frames)]
    if bad:
        errs.append(f"{len(bad)} hit(s) without {ADD_OP} innermost and the target's Python line")
    threads = {h.thread.id if h.thread else None for h in hits}
    if len(threads) > 1:
        errs.append(f"hits on {len(threads)} threads, expected the main thread only")
    return errs + _completed(status)


def _argv(kind: str, mode: str, threads: int, rundir: Path, scripts: dict) -> list[str]:
    n = BT_N if kind == "bt" else N
    target = [str(VENV_PY), TARGET, mode, str(threads), str(n), "--out", str(rundir / "loop.json")]
    if kind.startswith("pttrace"):
        return [str(PTTRACE), "run", "--break", ADD_OP, "--batch", "-q", "--session-dir", str(rundir / "sessions"),
                "--", *target[1:]]
    if kind == "alone":
        return target
    return [shutil.which("gdb") or "gdb", "-nx", "-batch", "-x", str(scripts[kind]), "--args", *target]


def gdb_scripts(tmp: Path) -> dict:
    """The gdb scripts of the references, written in ``tmp``: a bare breakpoint and `bt` at each hit."""
    scripts = {"bare": tmp / "bare.gdb", "bt": _hot_script(tmp, "bt", ["bt"], noplt=True)}
    scripts["bare"].write_text("set pagination off\nset confirm off\nset print thread-events off\n" + NOPLT
                               + (BARE % ADD_OP) + "run\n")
    return scripts


def run_round(tmp: Path, scripts: dict, results: dict, rnd: int, configs: list) -> None:
    for mode, threads in configs:
        for kind in ("alone", *TOOLS):
            rundir = tmp / f"{mode}-{threads}-{kind}-{rnd}"
            rundir.mkdir()
            env = dict(os.environ, PTTRACE_NO_ARGS="1") if kind == "pttrace-noargs" else None
            argv = _argv(kind, mode, threads, rundir, scripts)
            res = run_measured(["taskset", "-c", PIN, *argv] if PIN else argv, rundir / "out.txt", env=env)
            loop = _loop(rundir)
            errs = [] if loop else [f"no loop time (rc {res.rc})"]
            if loop and kind.startswith("pttrace"):
                errs += _check_pttrace(rundir)
            if loop and kind == "bt":
                stops = (rundir / "out.txt").read_text(errors="replace").count("\n#0 ")
                if stops < BT_N:
                    errs.append(f"gdb printed {stops} backtraces, expected {BT_N}")
            if errs:
                print(f"FAILED {mode}-{threads} {kind}: {'; '.join(errs)}", file=sys.stderr)
                results.setdefault("failed", []).append(f"{mode}-{threads} {kind}: {'; '.join(errs)}")
                continue
            key = (mode, threads)
            per_hit = {m: loop[m] / loop["n"] for m in ("seconds", "debugger_cpu", "target_cpu")}
            if "debugger_cpu_first" in loop and loop["n"] > 1:  # the hits after the first: its one-off work apart
                per_hit["debugger_cpu_rest"] = (loop["debugger_cpu"] - loop["debugger_cpu_first"]) / (loop["n"] - 1)
            results.setdefault(key, {}).setdefault(kind, []).append(per_hit)
            results.setdefault("threads", {})[key] = loop["threads"]
            print(f"round {rnd} {mode:4} {threads:3} {kind:14} {1000 * loop['seconds'] / loop['n']:.3f} ms/iter, gdb CPU "
                  f"{1000 * loop['debugger_cpu'] / loop['n']:.3f} ms ({1000 * per_hit.get('debugger_cpu_rest', 0):.3f} "
                  f"after the first), target CPU {1000 * loop['target_cpu'] / loop['n']:.3f} ms "
                  f"({loop['threads']} threads) load {os.getloadavg()[0]:.1f}", flush=True)


MEASURES = [
    ("seconds", "Wall time per hit, in ms (the loop without a debugger subtracted)"),
    ("debugger_cpu", "gdb's CPU time per hit, in ms, every hit counted (all its threads, from /proc/PID/task/*/schedstat; "
                     "pttrace's own process is not counted: it only waits for the session in --batch)"),
    ("debugger_cpu_rest", "gdb's CPU time per hit after the first hit, in ms (the first hit's one-off work left out: "
                          "what each further hit costs)"),
    ("target_cpu", "The traced process's CPU time per hit, in ms (kernel time of the stops included; the busy "
                   "pool's own work is in it, so that row is not comparable)"),
]


def render(results: dict, rounds: int, load: tuple[float, float], configs: list) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [f"### {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, pttrace at {head}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}, {rounds} rounds, load average "
             f"{load[0]:.1f} at the start and {load[1]:.1f} at the end"
             + (f", every run on CPU {PIN} (--same-cpu)" if PIN else ""), "",
             "Medians over the rounds [min-max]; growth: the median against the same tool's with 1 thread.", ""]
    for measure, title in MEASURES:
        lines += [f"{title}:", "",
                  "| threads in the process | pttrace | pttrace, no args | bare stop() | gdb `bt` | pttrace / bare "
                  "| no args / bare | pttrace growth | no args growth | bare growth | `bt` growth |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        base: dict = {}
        for mode, threads in configs:
            per = results.get((mode, threads), {})
            alone = statistics.median([x[measure] for x in per.get("alone", [])] or [0.0]) \
                if measure in ("seconds", "target_cpu") else 0.0
            cells, meds = [], {}
            for kind in TOOLS:
                xs = [1000 * (x[measure] - alone) for x in per.get(kind, []) if measure in x]
                if not xs:
                    cells.append("-")
                    continue
                meds[kind] = statistics.median(xs)
                cells.append(f"{meds[kind]:.3f} [{min(xs):.3f}-{max(xs):.3f}]")
            if (mode, threads) == ("idle", 1):
                base = meds
            ratios = [f"{meds[k] / meds['bare']:.2f}x" if k in meds and meds.get("bare") else "-"
                      for k in ("pttrace", "pttrace-noargs")]
            growth = [f"{meds[k] / base[k]:.2f}x" if k in meds and base.get(k) else "-" for k in TOOLS]
            label = {"idle": f"{threads} (main + idle Python threads)",
                     "pool": f"intra-op pool of {threads}, parked",
                     "busy": f"intra-op pool of {threads}, busy in a parallel op"}[mode]
            label += f": {results.get('threads', {}).get((mode, threads), '?')} threads"
            lines.append(f"| {label} | " + " | ".join(cells + ratios + growth) + " |")
        lines.append("")
    for f in results.get("failed", []):
        lines.append(f"- FAILED: {f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--configs", default=",".join(f"{m}-{t}" for m, t in CONFIGS),
                        help="which to run, e.g. idle-1,idle-256,pool-64 (default: all five)")
    parser.add_argument("--same-cpu", action="store_true",
                        help="run the debugger and its target on CPU 0 only (see the docstring)")
    args = parser.parse_args(argv)
    global PIN
    PIN = "0" if args.same_cpu else None
    configs = [c for c in CONFIGS if f"{c[0]}-{c[1]}" in args.configs.split(",")]
    if not configs:
        parser.error(f"--configs: none of {args.configs!r} is one of the configurations")
    tmp = Path(tempfile.mkdtemp(prefix="pttrace-bench-threads-"))
    scripts = gdb_scripts(tmp)
    results: dict = {}
    load0 = os.getloadavg()[0]
    try:
        for rnd in range(args.rounds):
            run_round(tmp, scripts, results, rnd, configs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, args.rounds, (load0, os.getloadavg()[0]), configs)
    print(text)
    if not args.no_write:
        content = RESULTS.read_text()
        marker = f"\n## {SECTION}\n"
        if marker not in content:
            content = content.rstrip("\n") + f"\n{marker}\n`bench/bench_threads.py`: {__doc__.split(chr(10), 3)[3].strip()}\n"
        head, _, tail = content.partition(marker)
        nxt = tail.find("\n## ")
        section, rest = (tail, "") if nxt < 0 else (tail[:nxt + 1], tail[nxt + 1:])
        RESULTS.write_text(head + marker + section.rstrip("\n") + "\n\n" + text + ("\n" + rest if rest else ""))
    return 1 if results.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
