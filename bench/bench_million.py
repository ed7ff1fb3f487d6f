"""A million hits of a hot breakpoint: disk and memory per hit, speed against gdb, and reading it back.

    .venv/bin/python bench/bench_million.py                      # 1,000,000 hits (~10 min here)
    .venv/bin/python bench/bench_million.py --hits 100000 --no-write

In one run, side by side:
  record   ``pttrace run --batch --max-hits N --break at::_ops::add_Tensor::call bench/hot_add.py N``
           (the run ends by --max-hits at the loop's last call, so the session must come out complete
           and loadable): session file bytes a hit, peak RSS (VmHWM) of the pttrace process and of its
           gdb apart, and hits a second (from the hits' own times: the target is ended before it can
           write its loop time)
  gdb      the same loop under plain gdb ``commands; silent; bt; continue`` and under a gdb.Breakpoint
           whose stop() returns False (the floor), on ``--compare`` hits (a million ``bt``s would take
           an hour): their hits a second, against pttrace's
  read     ``pttrace show`` and ``pttrace export`` (markdown, json, folded) of the million-hit session:
           wall time and peak RSS of each; ``pttrace view``: the time until its first screen shows a hit
           (the TUI run headless, ``App.run_test``, in a process of its own)

Targets (issue 16): <= 200 bytes a repeated hit; pttrace's peak RSS <= 300 MB; export <= 10 s; view <= 2 s.
The recording is checked: every hit on the hot line, the session complete. Results go to
``bench/RESULTS.md``, section "A million hits".
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run import (ADD_OP, BARE, HOT, NOPLT, PTTRACE, RESULTS, ROOT, VENV_PY, RunResult,  # noqa: E402
                       TreeSampler, _hot_loop, _hot_script, machine_facts, write_section)

SECTION = "A million hits"
BYTES_TARGET = 200
RSS_TARGET_MB = 300
EXPORT_TARGET_S = 10
VIEW_TARGET_S = 2

# `pttrace view SESSION` headless: the seconds from the start of the process's work to a first screen that
# shows a hit's call path (the CLI's own path: SessionSource.open, then the app), and to the whole file read.
VIEW_OPEN = """
import asyncio, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from tracer.tui.app import make_app
from tracer.tui.sources import SessionSource

async def main():
    app = make_app(SessionSource.open(sys.argv[1]))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.call_path.hit is None:
            await pilot.pause(0.01)
        first = f"{time.perf_counter() - t0:.3f} {time.process_time() - c0:.3f} {len(app.state.hits)}"
        while app.state.status is None:  # the rest of the file, read behind the first screen
            await pilot.pause(0.01)
        print(f"VIEW_OPEN {first} {app.hits_table.row_count} {time.perf_counter() - t0:.3f} {len(app.state.hits)}")
        await pilot.press("end")
        await pilot.press("q")

asyncio.run(main())
"""


def measured(argv: list[str], out: Path, timeout: float) -> tuple[RunResult, dict[str, int]]:
    """Run argv; the result, and the peak RSS in KB of the root process and of its gdb apart."""
    import subprocess

    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                start_new_session=True)
        sampler = TreeSampler(proc.pid, interval=0.1)
        sampler.start()
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            rc = proc.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
    gdbs = [kb for pid, kb in sampler.peaks.items() if sampler.roles.get(pid) in ("gdb", "tool-gdb")]
    peaks = {"root": sampler.peaks.get(proc.pid, 0), "gdb": max(gdbs or [0]), "target": sampler.target_peak_kb()}
    return RunResult(wall, rc, sampler.tool_peak_kb(), sampler.target_peak_kb(), out), peaks


def check_session(path: Path, hits: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tracer.session import storage

    errs = []
    s = storage.load(path)
    if len(s.hits) != hits:
        errs.append(f"{len(s.hits)} hits loaded, expected {hits}")
    if s.info.status != "completed":
        errs.append(f"the session is {s.info.status}")
    for frames in s.hits.frame_lists():
        if not any(f.kind == "python" and "HOT-LINE" in (f.source or "") for f in frames):
            errs.append("a recorded path does not pass through the hot line")
        if not (frames and (frames[-1].function or "").startswith(ADD_OP)):
            errs.append(f"a recorded path ends in {frames[-1].function if frames else None}")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hits", type=int, default=1_000_000)
    ap.add_argument("--compare", type=int, default=5000, help="hits of the plain gdb runs (default 5,000)")
    ap.add_argument("--read-timeout", type=float, default=600, help="seconds allowed to show and each export")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    facts = machine_facts()
    gdb = shutil.which("gdb") or "gdb"
    rows: list[tuple[str, str]] = []
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pttrace-million-") as td:
        tmp = Path(td)
        # --- record ---------------------------------------------------------------------------------
        sessions = tmp / "sessions"
        argv = [str(PTTRACE), "run", "--batch", "-q", "--break", ADD_OP, "--max-hits", str(args.hits),
                "--session-dir", str(sessions), "--", HOT, str(args.hits), "--out", str(tmp / "hot.json")]
        res, peaks = measured(argv, tmp / "record.out", timeout=6 * 3600)
        if res.rc != 0:
            errors.append(f"pttrace exited with {res.rc}: {res.stdout.read_text(errors='replace')[-2000:]}")
        found = list(sessions.glob("*.jsonl"))
        if len(found) != 1:
            print(res.stdout.read_text(errors="replace")[-3000:], file=sys.stderr)
            print(f"expected one session in {sessions}, found {len(found)}", file=sys.stderr)
            return 1
        path = found[0]
        size = path.stat().st_size
        hit_lines = [ln for ln in path.read_bytes().splitlines() if ln.startswith(b'{"type":"hit"')]
        repeated = sum(len(ln) + 1 for ln in hit_lines[1:]) / max(1, len(hit_lines) - 1)
        errors += check_session(path, args.hits)
        from tracer.session import storage

        times = storage.load(path).hits.times
        loop = times[-1] - times[0]  # the hits' own clock: first hit to last
        pt_rate = (len(times) - 1) / loop
        rows += [
            ("hits recorded", f"{len(hit_lines):,}"),
            ("session file", f"{size / 1e6:.1f} MB: {size / args.hits:.0f} bytes a hit overall, "
                             f"{repeated:.0f} bytes a repeated hit (target <= {BYTES_TARGET})"),
            ("peak RSS, pttrace process", f"{peaks['root'] / 1024:.0f} MB (target <= {RSS_TARGET_MB} MB)"),
            ("peak RSS, its gdb", f"{peaks['gdb'] / 1024:.0f} MB"),
            ("peak RSS, the target", f"{peaks['target'] / 1024:.0f} MB"),
            ("pttrace: the loop", f"{loop:.1f} s from the first hit to the last, {pt_rate:,.0f} hits/s "
                                  f"({1000 / pt_rate:.3f} ms a hit); wall of the whole run {res.wall:.1f} s, "
                                  f"ended by --max-hits {args.hits}: session complete and loadable"),
        ]
        # --- plain gdb, on fewer hits -------------------------------------------------------------------
        bare = tmp / "bare.gdb"
        bare.write_text("set pagination off\nset confirm off\n" + NOPLT + (BARE % ADD_OP) + "run\n")
        bt = _hot_script(tmp, "bt", ["bt"], noplt=True)
        for label, script in (("gdb `commands; silent; bt; continue`", bt), ("gdb.Breakpoint, stop() False", bare)):
            rundir = tmp / script.stem
            rundir.mkdir()
            gres, gpeaks = measured([gdb, "-nx", "-batch", "-x", str(script), "--args", str(VENV_PY), HOT,
                                     str(args.compare), "--out", str(rundir / "hot.json")],
                                    rundir / "out.txt", timeout=3600)
            errors += _hot_loop(rundir, gres)
            rate = args.compare / (gres.extra.get("loop") or float("nan"))
            rows.append((f"{label}, {args.compare:,} hits", f"{rate:,.0f} hits/s ({1000 / rate:.3f} ms a hit); "
                         f"pttrace {pt_rate / rate:.2f}x its rate; gdb peak RSS {gpeaks['gdb'] / 1024:.0f} MB"))
        # --- reading it back ----------------------------------------------------------------------------
        for label, extra in (("show", ["show", str(path)]),
                             ("export markdown", ["export", str(path), "--format", "markdown", "-o", str(tmp / "x.md")]),
                             ("export json", ["export", str(path), "--format", "json", "-o", str(tmp / "x.json")]),
                             ("export folded", ["export", str(path), "--format", "folded", "-o", str(tmp / "x.txt")])):
            rres, rpeaks = measured([str(PTTRACE), *extra], tmp / f"{label}.out", timeout=args.read_timeout)
            ok = "" if rres.rc == 0 else f" (exit {rres.rc}: {rres.stdout.read_text(errors='replace')[-300:]})"
            if rres.wall >= args.read_timeout:
                ok = " (stopped at the time limit, unfinished)"
            target = f" (target <= {EXPORT_TARGET_S} s)" if label.startswith("export") else ""
            rows.append((f"pttrace {label}", f"{rres.wall:.1f} s{target}, peak RSS {rpeaks['root'] / 1024:.0f} MB{ok}"))
        vres, vpeaks = measured([str(VENV_PY), "-c", VIEW_OPEN, str(path)], tmp / "view.out",
                                timeout=args.read_timeout)
        said = [ln for ln in vres.stdout.read_text(errors="replace").splitlines() if ln.startswith("VIEW_OPEN ")]
        if vres.rc != 0 or not said:
            errors.append(f"the view did not open: {vres.stdout.read_text(errors='replace')[-500:]}")
        else:
            _, opened, cpu, held, rows_held, loaded, total = said[-1].split()
            rows.append(("pttrace view", f"first screen in {float(opened):.1f} s (target <= {VIEW_TARGET_S} s; "
                                         f"{float(cpu):.1f} s of CPU: the figure on an idle machine), "
                                         f"{int(held):,} hits in its table, {int(rows_held)} rows; all "
                                         f"{int(total):,} hits read {float(loaded):.1f} s after the start; "
                                         f"peak RSS {vpeaks['root'] / 1024:.0f} MB"))
    lines = [f"Measured by `bench/bench_million.py --hits {args.hits}` on {facts['date']}, commit {facts['commit']}: "
             f"{facts['gdb']}, torch {facts['torch']}, Python {facts['python']}, {facts['nproc']} cores, load average "
             f"{facts['load']} at the start, {os.getloadavg()[0]:.1f} at the end. `{ADD_OP}` on bench/hot_add.py.", "",
             "| | |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    if errors:
        lines += ["", "Checks that failed: " + "; ".join(errors)]
    body = "\n".join(lines) + "\n"
    print(body)
    if not args.no_write:
        write_section(RESULTS, SECTION, body)
        print(f"written to {RESULTS} (section \"{SECTION}\")")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
