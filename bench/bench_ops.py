"""Operators: how long ``--op`` takes to resolve and to set its breakpoints, for one op and for all
~3,100 ``at::_ops::*::call``, against what gdb's own name lookup costs.

    .venv/bin/python bench/bench_ops.py            # 3 rounds (about 3 minutes here)
    .venv/bin/python bench/bench_ops.py -n 1 --no-write

Cases (each round runs every case once, in turn; medians over the rounds):
  resolve   in a fresh process: ``tracer.dispatch.ops.resolve_op("sigmoid")`` and the enumeration of every
            ``at::_ops::*::call`` through ``tracer.symbols.search_symbols``, with an empty cache
            (XDG_CACHE_HOME in a temporary directory: the symbol index is built) and a warm one;
            and ``torch_facts`` (the target interpreter asked for its ops and key numbering, ~2 s
            cold, then cached)
  set       in plain gdb, stopped right after libtorch_cpu.so is loaded (symbols read, as pttrace
            reads them for an --op): the time to create N ``gdb.Breakpoint("*ADDR")``, N = one op's
            functions and N = every at::_ops::*::call; and gdb's own ``break at::_ops::sigmoid::call``
  run       ``pttrace run`` (the Recorder in this process) of a script that only imports torch, with
            ``--break at::_ops::sigmoid::call`` (baseline), ``--op sigmoid``, and the 3,101 calls as
            address breakpoints: the whole wall time, start-up included

Results are printed and written to ``bench/RESULTS.md``, section "Operators" (the other sections of
that file are left as they are).
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "Operators"
PY = sys.executable
ALL_CALLS = r"^_ZN2at4_ops\d+\w+?4callE"

_RESOLVE_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tracer import symbols
from tracer.dispatch import ops
out = {}
libs = symbols.torch_libraries(sys.argv[2])
t = time.perf_counter(); facts = ops.torch_facts(sys.argv[2], libs); out["facts"] = time.perf_counter() - t
t = time.perf_counter(); res = ops.resolve_op("sigmoid", libs, facts); out["one_op"] = time.perf_counter() - t
out["one_op_n"] = len(res.functions)
t = time.perf_counter()
calls = [m for m in symbols.search_symbols(["4_ops"], libs, pattern=sys.argv[3]) if not m.cold]
out["all_calls"] = time.perf_counter() - t
out["all_calls_n"] = len(calls)
print(json.dumps(out))
"""

_GDB_SET = r"""
import gdb, json, os, time
items = json.load(open(os.environ["BENCH_ITEMS"]))
pid = gdb.selected_inferior().pid
base = None
lib = items["library"]
for line in open(f"/proc/{pid}/maps"):
    parts = line.split(None, 5)
    if len(parts) == 6 and int(parts[2], 16) == 0 and parts[5].strip() in (lib, os.path.realpath(lib)):
        base = int(parts[0].split("-")[0], 16)
        break
out = {}
for name, offsets in (("one_op", items["one_op"]), ("all_calls", items["all_calls"])):
    t = time.perf_counter()
    bps = [gdb.Breakpoint(f"*{base + off:#x}", internal=True) for off in offsets]
    out[name] = time.perf_counter() - t
    out[name + "_n"] = len(bps)
    for bp in bps:
        bp.delete()
t = time.perf_counter()
bp = gdb.Breakpoint("at::_ops::sigmoid::call")
out["by_name"] = time.perf_counter() - t
out["by_name_locations"] = len(bp.locations)
print("BENCH " + json.dumps(out))
"""


def resolve_round(tmp: Path) -> dict:
    cold_cache = tempfile.mkdtemp(prefix="cache-", dir=tmp)
    out = {}
    for label, cache in (("cold", cold_cache), ("warm", cold_cache)):
        env = dict(os.environ, XDG_CACHE_HOME=cache)
        t = time.perf_counter()
        proc = subprocess.run([PY, "-c", _RESOLVE_CHILD, str(ROOT), PY, ALL_CALLS], capture_output=True, text=True,
                              env=env, timeout=600)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(f"resolve child failed: {proc.stderr[-2000:]}")
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        out.update({f"{label}_{k}": v for k, v in data.items()})
        out[f"{label}_process"] = wall
    shutil.rmtree(cold_cache, ignore_errors=True)
    return out


def offsets() -> dict:
    from tracer import symbols

    from tracer.dispatch import ops
    libs = symbols.torch_libraries(PY)
    facts = ops.torch_facts(PY, libs)
    res = ops.resolve_op("sigmoid", libs, facts)
    cpu = next(lib for lib in libs if lib.endswith("libtorch_cpu.so"))
    calls = [m for m in symbols.search_symbols(["4_ops"], [cpu], pattern=ALL_CALLS) if not m.cold]
    return {
        "library": cpu,
        "one_op": [f.address for f in res.functions if f.library == cpu],
        "all_calls": [m.address for m in calls],
        "all_calls_bps": [{"label": "op:all", "library": cpu, "offset": m.address, "function": m.name} for m in calls],
        "one_op_bps": res.address_breakpoints(),
        "key_table": facts.key_table if facts else None,
    }


def set_round(tmp: Path, items: dict) -> dict:
    path = tmp / "items.json"
    path.write_text(json.dumps({k: items[k] for k in ("library", "one_op", "all_calls")}))
    script = tmp / "set.py"
    script.write_text(_GDB_SET)
    env = dict(os.environ, BENCH_ITEMS=str(path))
    env.pop("DEBUGINFOD_URLS", None)
    argv = ["gdb", "-nx", "-batch", "-iex", "set auto-load python-scripts off", "-ex", "set breakpoint pending on",
            "-ex", "catch load libtorch_cpu", "-ex", "run", "-ex", f"source {script}", "-ex", "kill",
            "--args", PY, "-c", "import torch"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"gdb run failed: {proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return json.loads(line[len("BENCH "):])


def run_round(tmp: Path, items: dict) -> dict:
    from tracer.session import storage
    from tracer.recorder import Recorder, TraceConfig

    target = tmp / "import_torch.py"
    target.write_text("import torch\n")
    out = {}
    cases = [
        ("by_name", dict(breakpoints=["at::_ops::sigmoid::call"])),
        ("one_op", dict(breakpoints=[], address_breakpoints=items["one_op_bps"])),
        ("all_calls", dict(breakpoints=[], address_breakpoints=items["all_calls_bps"])),
    ]
    for name, kw in cases:
        sessions = tmp / f"s-{name}"
        config = TraceConfig(python=PY, script=str(target), session_dir=sessions, forward_output=False,
                             max_depth=8, dispatch_keys=items["key_table"], **kw)
        t = time.perf_counter()
        engine = Recorder(config)
        engine.start()
        status = engine.run()
        out[name] = time.perf_counter() - t
        session = storage.load(engine.session_path)
        out[name + "_hits"] = len(session.hits)
        out[name + "_status"] = status
        placed = sum(len([loc for loc in bp.locations if loc.address]) for bp in session.breakpoints)
        out[name + "_locations"] = placed
        shutil.rmtree(sessions, ignore_errors=True)
    return out


def med(rounds: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def span(rounds: list[dict], key: str) -> str:
    vals = [r[key] for r in rounds]
    return f"{min(vals):.2f}-{max(vals):.2f}"


def report(res: list[dict], sets: list[dict], runs: list[dict], n: int, items: dict, took: float) -> str:
    import torch  # noqa: F401  (version only)

    gdb_version = subprocess.run(["gdb", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    one, calls = len(items["one_op"]), len(items["all_calls"])
    md = [
        "`bench/bench_ops.py`: what `--op` costs. Resolution runs in a fresh process (times measured inside it); "
        "setting is timed inside plain gdb stopped just after libtorch_cpu.so is loaded; the runs are whole "
        "`pttrace run`s (the Recorder) of a script that only imports torch. Wall-clock seconds, median of "
        f"{n} round(s) (range in brackets); the machine is shared and noisy: trust ratios.",
        "",
        f"### {when} — {platform.node() or 'vm'}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {sys.modules['torch'].__version__}, {gdb_version}",
        "",
        "| step | one op (`sigmoid`) | all `at::_ops::*::call` |",
        "|---|---:|---:|",
        f"| functions resolved | {res[0]['warm_one_op_n']} | {res[0]['warm_all_calls_n']:,} |",
        f"| resolve, symbol index cached | {med(res, 'warm_one_op'):.2f} s [{span(res, 'warm_one_op')}] "
        f"| {med(res, 'warm_all_calls'):.2f} s [{span(res, 'warm_all_calls')}] |",
        f"| resolve, empty cache (index built first; both in one process, op first) "
        f"| {med(res, 'cold_one_op'):.2f} s [{span(res, 'cold_one_op')}] "
        f"| {med(res, 'cold_all_calls'):.2f} s [{span(res, 'cold_all_calls')}] |",
        f"| set in gdb by address (`gdb.Breakpoint(\"*ADDR\")` x N, N = {one} / {calls:,}) "
        f"| {med(sets, 'one_op'):.3f} s [{span(sets, 'one_op')}] | {med(sets, 'all_calls'):.2f} s "
        f"[{span(sets, 'all_calls')}] |",
        f"| whole `pttrace run` of `import torch` with these breakpoints "
        f"| {med(runs, 'one_op'):.2f} s [{span(runs, 'one_op')}] | {med(runs, 'all_calls'):.2f} s "
        f"[{span(runs, 'all_calls')}] |",
        f"| ... hits recorded during `import torch` | {runs[0]['one_op_hits']} | {runs[0]['all_calls_hits']} |",
        "",
        f"- Reference, gdb by name: `break at::_ops::sigmoid::call` once libtorch_cpu.so's symbols are read: "
        f"{med(sets, 'by_name'):.3f} s ({sets[0]['by_name_locations']} location); the same `pttrace run` with "
        f"`--break at::_ops::sigmoid::call`: {med(runs, 'by_name'):.2f} s [{span(runs, 'by_name')}]. Against that "
        f"one named breakpoint, a run with one op's {one} is {med(runs, 'one_op') - med(runs, 'by_name'):+.2f} s "
        f"and one with all {calls:,} calls {med(runs, 'all_calls') - med(runs, 'by_name'):+.2f} s (DESIGN.md: "
        "`rbreak ^at::_ops::.*::call(` takes 18 minutes; not re-measured).",
        "- The agent used to read /proc/PID/maps once per address breakpoint at every library load until its "
        "library was mapped (124,040 reads for 3,101 breakpoints: 23 s); it now reads it once per library. "
        "Before that fix the 3,101-call run took 30-44 s here, the one-op run was unaffected (4-7 s).",
        f"- The target interpreter asked for its operators and DispatchKeySet numbering (`torch_facts`, imports "
        f"torch in a child): {med(res, 'cold_facts'):.2f} s the first time, {med(res, 'warm_facts'):.3f} s from "
        "the cache (`$XDG_CACHE_HOME/pttrace/ops/`).",
        f"- A fresh process for the warm resolution, start-up and imports included: "
        f"{med(res, 'warm_process'):.2f} s; cold: {med(res, 'cold_process'):.2f} s.",
        "",
        f"({took:.0f} s for the whole benchmark.)",
    ]
    return "\n".join(md) + "\n"


def write_section(path: Path, title: str, body: str) -> None:
    """Put ``body`` under ``## title`` in ``path``: replaced if there, appended if not; other sections kept."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    heading = f"## {title}\n"
    try:
        start = lines.index(heading)
    except ValueError:
        start = None
    block = [heading, "\n", body.rstrip("\n") + "\n"]
    if start is None:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        new = lines + ["\n"] + block
    else:
        stop = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        rest = lines[stop:]
        new = lines[:start] + block + (["\n"] + rest if rest else [])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(new))
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--no-write", action="store_true", help=f"print only; leave {RESULTS.name} alone")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args()
    if shutil.which("gdb") is None:
        ap.error("gdb is not installed")
    t0 = time.time()
    items = offsets()
    res, sets, runs = [], [], []
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-ops-") as td:
        tmp = Path(td)
        for i in range(args.rounds):
            res.append(resolve_round(tmp))
            sets.append(set_round(tmp, items))
            runs.append(run_round(tmp, items))
            print(f"round {i + 1}: resolve {res[-1]['warm_one_op']:.2f}/{res[-1]['warm_all_calls']:.2f} s, "
                  f"set {sets[-1]['one_op']:.3f}/{sets[-1]['all_calls']:.2f} s, "
                  f"run {runs[-1]['by_name']:.2f}/{runs[-1]['one_op']:.2f}/{runs[-1]['all_calls']:.2f} s", flush=True)
    body = report(res, sets, runs, args.rounds, items, time.time() - t0)
    print()
    print(body)
    if not args.no_write:
        write_section(args.results, SECTION, body)
        print(f"written to {args.results} (section \"{SECTION}\")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
