"""What reading a hit's argument values costs, side by side with a hit that reads none.

    .venv/bin/python bench/bench_values.py              # 5 rounds of 2,000 hits (about 2 minutes here)
    .venv/bin/python bench/bench_values.py -n 2 --hits 500 --no-write

bench/values_target.py calls ``torch.add(a, b, alpha=2)`` N times once gdb is attached with an address
breakpoint on ``at::_ops::add_Tensor::call`` (bench/values_gdb_stop.py). Variants, alternated in each
round so a noisy machine's drift hits all alike:

  none          no debugger: the loop's own time, taken off every other variant's
  floor         a stop() that returns False (the floor for a software breakpoint)
  walk          stop() names every native frame, as a recorder's stack walk does
  walk+values   the same, and the three arguments read with tracer.values (two tensors and a Scalar:
                sizes, strides, dtype, device, autograd state, key set and their six values each)
  values        the arguments alone

Then pttrace itself, the way a user runs it: ``pttrace run --batch -b at::_ops::add_Tensor::call
bench/hot_add.py N``, with its arguments read (the default) and with ``PTTRACE_NO_ARGS=1``, alternated;
each session is checked to hold N hits, with a float32 tensor among the arguments or none at all.

``--cpu``: pttrace alone, by CPU time (section "Argument values by CPU time"): each mode run with N hits
and with 0, alternated; a hit's CPU is the difference over N (a loaded machine inflates it far less).

Per-hit cost is (loop time - the no-debugger loop time) / N; the ratios that matter are pttrace's
``args / no args`` (the target is 1.3x at most), ``walk+values / walk`` in raw gdb, and the reader's
own time per hit, summed inside stop(). Results go to bench/RESULTS.md, section "Argument values".
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_run import write_section  # noqa: E402

from tracer.symbols import find_symbol, torch_libraries  # noqa: E402
from tracer.values import layout as layouts  # noqa: E402
from tracer.values.vtables import load_bases  # noqa: E402

TARGET = ROOT / "bench" / "values_target.py"
STOP = ROOT / "bench" / "values_gdb_stop.py"
VARIANTS = ("none", "floor", "walk", "walk+values", "values")
PTTRACE_VARIANTS = ("hot_add alone", "pttrace, no args", "pttrace")
HOT = ROOT / "bench" / "hot_add.py"
ADD = "at::_ops::add_Tensor::call"
SECTION = "Argument values"


def one_run(python: str, variant: str, hits: int, layout_file: Path, entry, tmp: Path) -> dict:
    proc = subprocess.Popen([python, str(TARGET), str(hits)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    gdb = None
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        stats_file = tmp / f"stats-{variant}.json"
        if variant != "none":
            armed = tmp / "armed"
            armed.unlink(missing_ok=True)
            address = load_bases(proc.pid)[os.path.realpath(entry.library)] + entry.address
            env = dict(os.environ, VALUES_REPO=str(ROOT), VALUES_LAYOUT=str(layout_file), VALUES_MODE=variant,
                       VALUES_OUT=str(stats_file), VALUES_ADDRESS=str(address))
            gdb = subprocess.Popen(["gdb", "-nx", "--batch", "-iex", "set auto-solib-add off", "-p", str(proc.pid),
                                    "-x", str(STOP), "-ex", f"python open({str(armed)!r}, 'w').close()",
                                    "-ex", "continue"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            while not armed.exists():
                if gdb.poll() is not None:
                    raise RuntimeError(f"gdb ended: {gdb.communicate()}")
                time.sleep(0.05)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line.startswith("LOOP "):
            raise RuntimeError(f"the target said {line!r}: {proc.stderr.read()[-2000:]}")
        result = json.loads(line[5:])
        if gdb is not None:
            gdb.wait(timeout=120)
            result.update(json.loads(stats_file.read_text()))
        return result
    finally:
        for p in (gdb, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=30)


def pttrace_run(python: str, variant: str, hits: int, tmp: Path) -> dict:
    """hot_add.py alone, or under ``pttrace run --batch``: its loop's time, and the session's check."""
    out = tmp / "hot.json"
    out.unlink(missing_ok=True)
    sessions = tmp / "sessions"
    env = dict(os.environ, PTTRACE_SESSION_DIR=str(sessions))
    env.pop("PTTRACE_NO_ARGS", None)
    if variant == "pttrace, no args":
        env["PTTRACE_NO_ARGS"] = "1"
    target = [python, str(HOT), str(hits), "--out", str(out)]
    pttrace = str(Path(python).with_name("pttrace"))
    cmd = target if variant == "hot_add alone" else [pttrace, "run", "--batch", "--python", python, "-b", ADD, "--",
                                                      *target[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=900, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.read_text())
    # CPU time of the whole run (pttrace, gdb, the target: each waited for by its parent), which a loaded
    # machine inflates far less than the loop's wall time.
    result["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if variant != "hot_add alone":
        newest = max(sessions.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        text = newest.read_text()
        result["session_hits"] = text.count('"type": "hit"') or text.count('"hit"')
        result["has_tensors"] = '"float32"' in text
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=5)
    ap.add_argument("--hits", type=int, default=2000)
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cpu", action="store_true",
                    help="pttrace only, by CPU time: each mode run with --hits and with 0 hits (its start-up), "
                         "alternated; per-hit CPU is the difference over the hits (robust on a loaded machine)")
    args = ap.parse_args()
    if args.cpu:
        return cpu_main(args)
    libraries = torch_libraries(args.python)
    entry = next(m for m in find_symbol("at::_ops::add_Tensor::call", libraries, lines=False)
                 if not m.plt and not m.cold)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        layout = layouts.establish(args.python, libraries, tmp)
        (tmp / "layout.json").write_text(layout.to_json())
        for r in range(args.rounds):
            for v in VARIANTS:
                runs[v].append(one_run(args.python, v, args.hits, tmp / "layout.json", entry, tmp))
            print(f"round {r + 1}: " + ", ".join(f"{v} {runs[v][-1]['seconds']:.3f} s" for v in VARIANTS), flush=True)
            for v in PTTRACE_VARIANTS:
                runs.setdefault(v, []).append(pttrace_run(args.python, v, args.hits, tmp))
            print("   " + ", ".join(f"{v} {runs[v][-1]['seconds']:.3f} s" for v in PTTRACE_VARIANTS), flush=True)
    base = statistics.median(x["seconds"] for x in runs["none"])
    per_hit = {v: statistics.median((x["seconds"] - base) / x["n"] for x in runs[v]) * 1000 for v in VARIANTS[1:]}
    reader = statistics.median(x["values_seconds"] / x["hits"] for x in runs["values"]) * 1e6
    bad = sum(x.get("bad", 0) for v in ("values", "walk+values") for x in runs[v])
    if bad:
        print("unreadable:", {x.get("why") for v in ("values", "walk+values") for x in runs[v]})
    hits = {v: {x.get("hits") for x in runs[v]} for v in VARIANTS[1:]}
    rows = [f"| {v} | {per_hit[v]:.3f} ms | {per_hit[v] / per_hit['walk']:.2f}x |" for v in VARIANTS[1:]]
    alone = statistics.median(x["seconds"] for x in runs["hot_add alone"])
    pt = {v: statistics.median((x["seconds"] - alone) / x["n"] for x in runs[v]) * 1000 for v in PTTRACE_VARIANTS[1:]}
    tensors = {v: {x["has_tensors"] for x in runs[v]} for v in PTTRACE_VARIANTS[1:]}
    body = "\n".join([
        f"`pttrace run --batch -b {ADD} bench/hot_add.py {args.hits}` ({args.rounds} rounds, alternated): "
        f"**{pt['pttrace']:.3f} ms a hit with its arguments read, {pt['pttrace, no args']:.3f} ms without "
        f"(`PTTRACE_NO_ARGS=1`): {pt['pttrace'] / pt['pttrace, no args']:.2f}x** (target 1.3x). Sessions held "
        f"float32 tensors: with args {tensors['pttrace']}, without {tensors['pttrace, no args']}.",
        "",
        f"Measured {time.strftime('%Y-%m-%d')}, load {os.getloadavg()[0]:.1f}, {args.rounds} rounds of {args.hits} hits "
        f"of `at::_ops::add_Tensor::call` (`bench/bench_values.py`), raw gdb with an address breakpoint whose "
        "stop() does the variant's work; per-hit cost is the loop's time less its time without a debugger "
        f"({base / args.hits * 1e6:.1f} µs a call).",
        "",
        "| stop() does | per hit | vs the stack walk alone |",
        "|---|---|---|",
        *rows,
        "",
        f"A hit with its three arguments read (two tensors with six values each, a Scalar) costs "
        f"**{per_hit['walk+values'] / per_hit['walk']:.2f}x** a hit that walks the stack only (target 1.3x); the "
        f"reader's own time is {reader:.0f} µs a hit ({reader / 3:.0f} µs an argument). Unreadable values: {bad}. "
        f"Hits seen: {hits}.",
    ])
    print(body)
    if not args.no_write:
        write_section(ROOT / "bench" / "RESULTS.md", SECTION, body)
    return 0


def cpu_main(args) -> int:
    """pttrace's per-hit CPU with and without argument values (``--cpu``)."""
    modes = ("pttrace, no args", "pttrace")
    cpu: dict[tuple[str, int], list[float]] = {}
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for n in (0, args.hits):
                for v in modes:
                    x = pttrace_run(args.python, v, n, Path(tmp))
                    cpu.setdefault((v, n), []).append(x["cpu"])
            per = {v: (cpu[(v, args.hits)][-1] - cpu[(v, 0)][-1]) / args.hits * 1000 for v in modes}
            ratios.append(per["pttrace"] / per["pttrace, no args"])
            print(f"round {r + 1}: CPU s " + ", ".join(f"{v} {n} hits {cpu[(v, n)][-1]:.2f}" for v in modes
                                                        for n in (0, args.hits))
                  + f"; per hit {per['pttrace']:.3f} / {per['pttrace, no args']:.3f} ms = {ratios[-1]:.2f}x", flush=True)
    med = {v: (statistics.median(cpu[(v, args.hits)]) - statistics.median(cpu[(v, 0)])) / args.hits * 1000
           for v in modes}
    body = (f"By CPU time ({args.rounds} rounds, alternated, load {os.getloadavg()[0]:.1f}; `bench/bench_values.py "
            f"--cpu --hits {args.hits}`): a hit costs **{med['pttrace']:.3f} ms of CPU with its arguments read, "
            f"{med['pttrace, no args']:.3f} ms without: {med['pttrace'] / med['pttrace, no args']:.2f}x** (ratio of "
            f"medians; per round {', '.join(f'{x:.2f}x' for x in ratios)}, median {statistics.median(ratios):.2f}x). "
            "Each figure is a run's CPU (pttrace, gdb and the target) less the same mode's run with 0 hits, over the hits.")
    print(body)
    if not args.no_write:
        write_section(ROOT / "bench" / "RESULTS.md", SECTION + " by CPU time", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
