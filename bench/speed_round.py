"""Every row of issue 29 ("Speed round 3") in one go, side by side with its reference, in one table.

The table: row, measured (median [min-max] over the rounds), target, met or not.

    .venv/bin/python bench/speed_round.py            # 3 rounds: ~17 minutes on a quiet 2-core machine
    .venv/bin/python bench/speed_round.py --quick    # 1 round, 500 hits a run instead of 2,000: ~5 minutes
                                                     # (11.5 minutes at load 9-18)
    .venv/bin/python bench/speed_round.py -n 5
    .venv/bin/python bench/speed_round.py --configs idle-1,idle-256,pool-64   # fewer threads configurations (~10 min)
    .venv/bin/python bench/speed_round.py --same-cpu   # every threads run on CPU 0 (bench_threads.py --same-cpu)

Nothing of the benchmarks is copied here: each round runs one round of each of them, imported, in turn
(so a slow drift of the machine reaches every row), with their own alternation and their own checks:

- bench_run.py's first hits (``init``, ``sigmoid`` on scripts/hello-world.py): pttrace against plain gdb,
  wall time, the ratio taken within each round (its cold-cache and hand-written gdb variants are left
  out; python alone runs in the first round only, as there);
- bench_threads.py's five configurations (1, 64 and 256 idle threads, the intra-op pool of 64 parked and
  busy): pttrace with argument values and without, a bare ``stop()``, gdb ``bt``, gdb's CPU time per hit;
  its 1-thread configuration gives the hot hit against the bare ``stop()``, as gdb's CPU per hit over every
  hit (the row's target: the first hit's one-off work spread over the run) and over the hits after the
  first (threads_target.py reads it apart: what each further hit costs); the threads rows use the latter;
- bench_symbols.py's warm ``pttrace where initModule`` against ``python -c pass``, wall and CPU time.

A run that records the wrong thing (a benchmark's check fails) is printed as FAILED and its row is not
"met". Nothing is written to bench/RESULTS.md: copy the table there by hand with the machine's load.
Not measured here (issue 29's other rows): the full-size debug build (bench_bigdebug.py) and the test
suite's time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_run  # noqa: E402
import bench_symbols  # noqa: E402
import bench_threads  # noqa: E402

# Seconds one round of each part takes on a quiet 2-core machine, for the estimate printed at the start:
# a --quick round took 693 s at load 9-18 (2026-11-27 10:00 UTC; first hits ~75 s, threads ~610 s, `where`
# ~5 s), taken as 2.5 times a quiet machine's; 2,000 hits a run add ~60 s a round there.
EST_FIRST_HITS = 30.0
EST_THREADS = {("idle", 1): 45.0, ("idle", 64): 55.0, ("idle", 256): 65.0, ("pool", 64): 55.0,
               ("busy", 64): 80.0}  # with 2,000 hits a run
EST_THREADS_FIXED = 0.8  # the share of a threads run that does not grow with the hits (start-up, torch)
EST_WHERE_RUN = 0.3  # one warm `where` and one `python -c pass`, with the spawning
FULL_HITS = bench_threads.N  # the estimates' hit count (--quick lowers bench_threads.N)


def estimate(rounds: int, hits: int, where_runs: int, configs: list) -> float:
    scale = EST_THREADS_FIXED + (1 - EST_THREADS_FIXED) * hits / FULL_HITS
    threads = sum(EST_THREADS[c] for c in configs) * scale
    return rounds * (EST_FIRST_HITS + threads + where_runs * EST_WHERE_RUN) + 10


def first_hits_round(tmp: Path, helper: str | None, first: bool) -> dict:
    """One round of bench_run's ``init`` and ``sigmoid``: {(case, variant): (wall, failures)}."""
    cases = bench_run.build_cases(tmp, helper, {"init", "sigmoid"}, full=False)
    for case in cases:
        case.variants = [v for v in case.variants
                         if v.key in ("pttrace", "gdb") or (first and v.key == "python")]
    stats = bench_run.run_all(cases, 1, tmp)
    return {key: (st.runs[0].wall if st.runs else None, st.failures) for key, st in stats.items()}


def threads_round(tmp: Path, scripts: dict, rnd: int, configs: list) -> dict:
    """One round of bench_threads' configurations: {((mode, threads), tool): gdb CPU per hit in ms over the
    hits after the first, or None when the run failed its check. The first hit's one-off work (pttrace's:
    0.15-0.25 s of gdb CPU, RESULTS.md) is left out: spread over 500 hits (--quick) it would be ~0.4 ms a
    hit, over 2,000 ~0.1 ms, and the rows are about the hot hit."""
    results: dict = {}
    bench_threads.run_round(tmp, scripts, results, rnd, configs)
    out: dict = {"failed": results.get("failed", []), "threads": results.get("threads", {})}
    for config in configs:
        for tool in bench_threads.TOOLS:
            runs = results.get(config, {}).get(tool, [])
            out[(config, tool)] = 1000 * runs[0].get("debugger_cpu_rest", runs[0]["debugger_cpu"]) if runs else None
            out[(config, tool, "all")] = 1000 * runs[0]["debugger_cpu"] if runs else None
    return out


def spread(values: list) -> tuple[float, float, float] | None:
    xs = [v for v in values if v is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None


def fmt(s: tuple[float, float, float] | None, unit: str = "x", digits: int = 2) -> str:
    if s is None:
        return "-"
    return f"{s[0]:.{digits}f}{unit} [{s[1]:.{digits}f}-{s[2]:.{digits}f}]"


def verdict(s: tuple[float, float, float] | None, limit: float, every_run: bool = False, failed: bool = False) -> str:
    if failed:
        return "FAILED check"
    if s is None:
        return "not measured"
    return "met" if (s[2] if every_run else s[0]) <= limit else "**not met**"


def ratios(rounds: list[dict], num, den) -> list:
    """Per round, ``num`` over ``den`` (keys into that round's figures), None where either is missing."""
    out = []
    for r in rounds:
        a, b = r.get(num), r.get(den)
        out.append(a / b if a and b else None)
    return out


def table(first: list[dict], threads: list[dict], where: dict) -> list[str]:
    rows = ["| row (issue 29) | measured: median [min-max] over the rounds | target | met? |", "|---|---|---|---|"]
    walls = [{k: v[0] for k, v in r.items()} for r in first]
    for case, label, limit, every in (("sigmoid", "first hit `wrapper_CPU_sigmoid` vs plain gdb (wall)", 0.4, False),
                                      ("init", "first hit `initModule` vs plain gdb (wall)", 0.3, True)):
        s = spread(ratios(walls, (case, "pttrace"), (case, "gdb")))
        failed = any(r.get((case, v), (None, []))[1] for r in first for v in ("pttrace", "gdb"))
        own = spread([w.get((case, "pttrace")) for w in walls])
        gdb = spread([w.get((case, "gdb")) for w in walls])
        cell = f"{fmt(s)} ({fmt(own, ' s')} against {fmt(gdb, ' s')})"
        rows.append(f"| {label} | {cell} | <= {limit}x{', every run' if every else ''} | "
                    f"{verdict(s, limit, every, failed)} |")
    warm, bare = spread(where["warm"]), spread(where["bare"])
    rows.append(f"| `pttrace where initModule`, warm (wall) | {fmt(warm, ' s', 3)} (`python -c pass` "
                f"{fmt(bare, ' s', 3)}) | <= 0.1 s | {verdict(warm, 0.1)} |")
    warm_cpu, bare_cpu = spread(where["warm_cpu"]), spread(where["bare_cpu"])
    rows.append(f"| the same, process CPU time (user+sys) | {fmt(warm_cpu, ' s', 3)} (`python -c pass` "
                f"{fmt(bare_cpu, ' s', 3)}) | <= 0.1 s | {verdict(warm_cpu, 0.1)} |")
    failed = {f.split(" ")[0] + " " + f.split(" ")[1].rstrip(":") for r in threads for f in r["failed"]}
    one = ("idle", 1)
    for tool, label in (("pttrace", "argument values on (the default)"),
                        ("pttrace-noargs", "without argument values (`PTTRACE_NO_ARGS=1`)")):
        # The row's target is per hit: over every hit, the first's one-off work (gdb's first walk of the
        # stack, the agent's first reads) spread over the run's hits; after the first, what each further hit costs.
        bad = f"idle-1 {tool}" in failed
        for key, which in (("all", "over every hit, the first too (the row's figure)"),
                           (None, "after the first hit (each further hit)")):
            num, den = ((one, tool, key), (one, "bare", key)) if key else ((one, tool), (one, "bare"))
            s = spread(ratios(threads, num, den))
            abs_ = f"{fmt(spread([r.get(num) for r in threads]), ' ms', 3)} against " \
                   f"{fmt(spread([r.get(den) for r in threads]), ' ms', 3)}"
            rows.append(f"| hot hit vs a bare `stop()`, gdb CPU per hit, {which}, 1 thread, {label} | {fmt(s)} "
                        f"({abs_}) | <= 1.5x | {verdict(s, 1.5, failed=bad)} |")
    labels = {("idle", 64): "64 idle threads", ("idle", 256): "256 idle threads",
              ("pool", 64): "the intra-op pool of 64, parked", ("busy", 64): "the intra-op pool of 64, busy"}
    for config, label in labels.items():
        s = spread(ratios(threads, (config, "pttrace"), (one, "pttrace")))
        bare_g = spread(ratios(threads, (config, "bare"), (one, "bare")))
        bt_g = spread(ratios(threads, (config, "bt"), (one, "bt")))
        n = next((r["threads"].get(config) for r in threads if r["threads"].get(config)), "?")
        name = f"{config[0]}-{config[1]}"
        bad = f"{name} pttrace" in failed or f"idle-1 pttrace" in failed
        rows.append(f"| per hit with {label} ({n} threads) vs 1 thread, gdb CPU per hit after the first, pttrace | {fmt(s)} (bare `stop()` "
                    f"{fmt(bare_g)}, gdb `bt` {fmt(bt_g)}) | <= 1.2x | {verdict(s, 1.2, failed=bad)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="1 round, 500 hits a threads run (gdb `bt`: 30), 5 `where` runs: a trial, not a figure")
    parser.add_argument("--configs", default=",".join(f"{m}-{t}" for m, t in bench_threads.CONFIGS),
                        help="bench_threads' configurations to run (default all five; idle-1 is needed for every "
                             "threads row)")
    parser.add_argument("--same-cpu", action="store_true",
                        help="bench_threads' --same-cpu: every threads run (gdb and the target) on CPU 0, so that "
                             "each has the same placement (see bench_threads.py)")
    args = parser.parse_args(argv)
    if args.same_cpu:
        bench_threads.PIN = "0"
    configs = [c for c in bench_threads.CONFIGS if f"{c[0]}-{c[1]}" in args.configs.split(",")]
    if ("idle", 1) not in configs:
        parser.error("--configs: idle-1 is the reference of every threads row")
    if not bench_run.PTTRACE.exists():
        parser.error(f"{bench_run.PTTRACE} not found: run scripts/setup.sh first")
    rounds = 1 if args.quick else args.rounds
    if args.quick:  # bench_threads reads its hit counts at each run
        bench_threads.N, bench_threads.BT_N = 500, 30
    where_runs = 5 if args.quick else 3
    est = estimate(rounds, bench_threads.N, where_runs, configs)
    load0 = os.getloadavg()
    print(f"speed round: {rounds} round(s), {bench_threads.N} hits a threads run (gdb `bt` {bench_threads.BT_N}), "
          f"{where_runs} warm `where` runs a round; about {est / 60:.0f} min on a quiet 2-core machine "
          f"(load average now {load0[0]:.1f}: longer under load)", flush=True)
    stale = bench_run.stale_bytecode()
    if stale:
        print(f"warning: {len(stale)} of pttrace's modules have no up-to-date bytecode ({stale[0]}...): each run "
              "compiles them; run scripts/setup.sh first", file=sys.stderr)
    helper = bench_run.python_helper()
    with tempfile.TemporaryDirectory(prefix="pttrace-speed-warm-") as td:
        # hello-world.py once, then one untimed pttrace run of each first hit: round 1 is a re-run as the others
        bench_run.warm_up(bench_run.build_cases(Path(td), helper, {"init", "sigmoid"}, full=False, warm_only=True))
    first, threads, where = [], [], {"warm": [], "bare": [], "warm_cpu": [], "bare_cpu": []}
    notes: list[str] = []
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="pttrace-speed-round-"))
    try:
        scripts = bench_threads.gdb_scripts(tmp)
        for rnd in range(rounds):
            t_round = time.time()
            print(f"-- round {rnd + 1}/{rounds}: first hits (load {os.getloadavg()[0]:.1f})", flush=True)
            rdir = tmp / f"round-{rnd}"
            rdir.mkdir()
            first.append(first_hits_round(rdir, helper, rnd == 0))
            t_threads = time.time()
            print(f"-- round {rnd + 1}/{rounds}: threads (load {os.getloadavg()[0]:.1f})", flush=True)
            threads.append(threads_round(rdir, scripts, rnd, configs))
            t_where = time.time()
            print(f"-- round {rnd + 1}/{rounds}: warm `where` (load {os.getloadavg()[0]:.1f})", flush=True)
            figures = bench_symbols.case_where(where_runs, [], notes if rnd == 0 else [], cold_too=False)
            for k in where:
                where[k] += figures[k]
            took = time.time() - t_round
            left = rounds - rnd - 1
            print(f"-- round {rnd + 1} took {took / 60:.1f} min (first hits {t_threads - t_round:.0f} s, threads "
                  f"{t_where - t_threads:.0f} s, `where` {time.time() - t_where:.0f} s)" +
                  (f"; the {left} left, about {left * took / 60:.0f} min more" if left else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    print()
    print(f"Issue 29, every row in one run: {rounds} round(s), {bench_threads.N} hits a threads run"
          + (f" (every threads run on CPU {bench_threads.PIN})" if bench_threads.PIN else "") + ", "
          f"{time.time() - t0:.0f} s in all; load average {load0[0]:.1f} at the start and {load1[0]:.1f} at the end.")
    print()
    print("\n".join(table(first, threads, where)))
    print()
    for note in notes:
        print(f"- {note}")
    failures = [f for r in threads for f in r["failed"]]
    failures += [f"{case}/{variant}: {e}" for r in first for (case, variant), (_, errs) in r.items() for e in errs]
    for f in failures:
        print(f"- FAILED: {f}")
    print("- not measured here: the full-size debug build (bench/bench_bigdebug.py) and the test suite's time")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
