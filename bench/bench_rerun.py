"""Re-runs on a debug build: what the second run of the same breakpoint gains from the caches.

A person studying a debug build runs the same script again and again. gdb can keep the index it
builds of a library's DWARF (``set index-cache enabled on``: pttrace turns it on, in
``$XDG_CACHE_HOME/pttrace/gdb-index``), and pttrace keeps its own symbol index and CFI copies. This
measures, alternating in each round: pttrace's first run (an empty cache directory), pttrace run
again (caches warm), plain gdb as typed, and gdb with its own index cache warm; on a large generated
debug library (bench/gen_debug_lib.py: 200 C++ units, ~180 MB, ~90 MB of .debug_info) called through
ctypes by a torch program (bench/call_debuglib.py), with ``--break bench7::work_7_1``. Every run's
recording is checked: the hit in ``bench7::work_7_1`` with its DWARF file:line.

    .venv/bin/python bench/bench_rerun.py [-n ROUNDS] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run import PTTRACE, RESULTS, ROOT, VENV_PY, _fmt, _mb, _median, machine_facts, run_measured, \
    write_section  # noqa: E402

SECTION = "Re-runs on a debug build"
FUNCTION = "bench7::work_7_1"
SOURCE = "unit_0007.cpp"


def debug_library() -> Path:
    out = subprocess.run([str(VENV_PY), str(ROOT / "bench" / "gen_debug_lib.py")], capture_output=True, text=True,
                         check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def check_pttrace(rundir: Path) -> list[str]:
    files = list((rundir / "sessions").glob("*.jsonl"))
    if len(files) != 1:
        return [f"{len(files)} session files"]
    hits = [r for r in map(json.loads, files[0].read_text().splitlines()) if r.get("type") == "hit"]
    if len(hits) != 1:
        return [f"{len(hits)} hits recorded, expected 1"]
    inner = hits[0]["frames"][-1]
    errs = []
    if not (inner.get("function") or "").startswith(FUNCTION + "("):
        errs.append(f"innermost frame is {inner.get('function')!r}")
    if not (inner.get("file") or "").endswith(SOURCE) or not inner.get("line"):
        errs.append(f"no DWARF file:line on the kernel frame: {inner.get('file')}:{inner.get('line')}")
    return errs


def check_gdb(text: str) -> list[str]:
    tops = [ln for ln in text.splitlines() if ln.startswith("#0 ") and FUNCTION in ln and "@plt" not in ln]
    if len(tops) != 1 or SOURCE not in tops[0]:
        return [f"gdb stopped {len(tops)} time(s) in {FUNCTION} with its source line"]
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    lib = debug_library()
    gdb = shutil.which("gdb") or "gdb"
    script = [str(VENV_PY), str(ROOT / "bench" / "call_debuglib.py"), str(lib)]
    # gdb as typed stops first at the function's @plt stub in the caller's library: one `continue`
    # takes it to the function itself, where pttrace stops.
    plain = ["-nx", "-batch", "-ex", "set breakpoint pending on", "-ex", f"break {FUNCTION}", "-ex", "run",
             "-ex", "continue", "-ex", "bt 1", "-ex", "kill"]
    facts = machine_facts()
    runs: dict[str, list] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pttrace-rerun-") as td:
        tmp = Path(td)
        warm_cache, gdb_cache = tmp / "warm-cache", tmp / "gdb-index"
        gdb_cache.mkdir()
        cached = ["-iex", f"set index-cache directory {gdb_cache}", "-iex", "set index-cache enabled on"]
        variants = [
            ("pttrace-first", "pttrace run, first run (empty caches)", "pttrace", None),
            ("pttrace-again", "pttrace run again (its caches and gdb's index cache warm)", "pttrace", warm_cache),
            ("gdb", "gdb as typed (break, run, continue past the @plt stop, bt, kill)", "gdb", None),
            ("gdb-cached", "gdb with its own index cache warm", "gdb", "cached"),
        ]
        # Warm the caches of the re-run variants once, unmeasured.
        for key, _, kind, cache in variants[1:]:
            if key == "pttrace-again":
                subprocess.run([str(PTTRACE), "run", "--batch", "-q", "-b", FUNCTION, "--session-dir",
                                str(tmp / "prime"), *script[1:]], env=dict(os.environ, XDG_CACHE_HOME=str(cache)),
                               capture_output=True, check=True)
            elif key == "gdb-cached":
                subprocess.run([gdb, *cached, *plain, "--args", *script], capture_output=True, check=True)
        for rnd in range(args.rounds):
            for key, label, kind, cache in variants:
                rundir = tmp / f"{key}-{rnd}"
                (rundir / "sessions").mkdir(parents=True)
                if kind == "pttrace":
                    home = cache or rundir / "empty-cache"
                    argv = [str(PTTRACE), "run", "--batch", "-q", "-b", FUNCTION, "--session-dir",
                            str(rundir / "sessions"), *script[1:]]
                    res = run_measured(argv, rundir / "out.txt", env=dict(os.environ, XDG_CACHE_HOME=str(home)))
                    errs = check_pttrace(rundir)
                else:
                    argv = [gdb, *(cached if cache else []), *plain, "--args", *script]
                    res = run_measured(argv, rundir / "out.txt")
                    errs = check_gdb(res.stdout.read_text(errors="replace"))
                runs.setdefault(key, []).append(res)
                failures += [f"{label}, round {rnd + 1}: {e}" for e in errs]
                print(f"  round {rnd + 1}/{args.rounds}  {key:14s} {res.wall:6.2f} s  {res.tool_kb / 1024:5.0f} MB"
                      f"{'  CHECK FAILED: ' + '; '.join(errs) if errs else ''}", flush=True)
    ref = _median([r.wall for r in runs["gdb"]])
    ref_kb = _median([r.tool_kb for r in runs["gdb"]])
    lines = [
        "Measured by `bench/bench_rerun.py` (" + str(args.rounds) + " rounds, variants alternating; medians). "
        f"Library: `{lib.name}`, {lib.stat().st_size / 1e6:.0f} MB (bench/gen_debug_lib.py), called through "
        f"ctypes by a torch program (bench/call_debuglib.py); `--break {FUNCTION}`. {facts['gdb']}; Python {facts['python']}; "
        f"{facts['nproc']} cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| variant | wall (median) | vs plain gdb | peak RSS (debugger) | recorded |",
        "|---|---:|---:|---:|---|",
    ]
    for key, label, _, _ in variants:
        wall = _median([r.wall for r in runs[key]])
        kb = _median([r.tool_kb for r in runs[key]])
        bad = any(f.startswith(label + ",") for f in failures)
        lines.append(f"| {label} | {_fmt(wall, ' s')} | {_fmt(wall / ref if ref else None, 'x')} | {_mb(kb)} | "
                     f"{'FAILED' if bad else 'ok'} |")
    first = _median([r.wall for r in runs["pttrace-first"]])
    again = _median([r.wall for r in runs["pttrace-again"]])
    lines += ["", f"The second run's gain: {first:.2f} s -> {again:.2f} s ({first / again:.1f}x faster); "
              f"plain gdb {ref:.2f} s, {_mb(ref_kb)}. A pttrace first run also asks the target's torch for its "
              "dispatch-key numbering once (kept in the cache) and builds its symbol index of the library."]
    body = "\n".join(lines) + "\n"
    print("\n" + body)
    if not args.no_write:
        write_section(RESULTS, SECTION, body)
        print(f"written to {RESULTS} (section \"{SECTION}\")")
    if failures:
        print("\n".join(["RECORDED-PATH CHECK(S) FAILED:", *failures]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
