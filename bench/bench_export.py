"""How long `pttrace export` takes on a 10,000-hit session, per format.

The session is built from the real stacks of tests/data/sigmoid_session.jsonl (torch 2.13 wheel,
CPython 3.11, interpreter frames kept as gdb records them), written in the storage format:
  typical: 10,000 hits over 100 distinct call paths (a training loop hitting a kernel from a few places);
  worst:   10,000 hits, every one a distinct path (each from another line of the script).
Each export runs in-process (best of 3: load + group + render + write) and once as a fresh
`python -m tracer export` process (what a user waits for, start-up and imports included).

    .venv/bin/python bench/bench_export.py [--hits N] [--no-results]

Prints the numbers and replaces the "## Export" section of bench/RESULTS.md (other sections are kept).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracer.session import storage  # noqa: E402
from tracer.cli import main as cli_main  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "sigmoid_session.jsonl"
RESULTS = ROOT / "bench" / "RESULTS.md"
FORMATS = ("markdown", "json", "folded")


def make_session(path: Path, hits: int, distinct: int) -> None:
    """Write ``hits`` hits cycling over ``distinct`` paths made from the fixture's real stacks."""
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    header = next(r for r in records if r["type"] == "header")
    bps = [r for r in records if r["type"] == "breakpoint"]
    stacks = [r for r in records if r["type"] == "hit"]
    header["session"]["id"] = path.stem
    with open(path, "w") as fh:
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        for bp in bps:
            fh.write(json.dumps(bp, separators=(",", ":")) + "\n")
        variants = []
        for i in range(distinct):
            base = copy.deepcopy(stacks[i % len(stacks)])
            module = next(f for f in base["frames"] if f["kind"] == "python")
            module["line"] = 1000 + i  # another call site in the script: another path
            variants.append(base)
        for seq in range(1, hits + 1):
            hit = variants[(seq - 1) % distinct]
            hit["seq"] = seq
            hit["time"] = seq * 0.001
            fh.write(json.dumps(hit, separators=(",", ":")) + "\n")
        fh.write(json.dumps({"type": "end", "status": "completed", "exit_code": 0,
                             "ended": header["session"]["started"]}) + "\n")


def frame_counts() -> str:
    counts = [len(json.loads(line)["frames"]) for line in FIXTURE.read_text().splitlines()
              if '"type":"hit"' in line[:20]]
    return f"{min(counts)}-{max(counts)}"


def best_of(n: int, fn) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of ``n`` runs. CPU time says more on a busy machine."""
    runs = []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_case(name: str, hits: int, distinct: int, work: Path) -> list[dict]:
    session = work / f"{name}.jsonl"
    make_session(session, hits, distinct)
    size_mb = session.stat().st_size / 1e6
    load = best_of(3, lambda: storage.load(session))
    rows = []
    for fmt in FORMATS:
        out = work / f"{name}.{fmt}"
        argv = ["export", str(session), "--format", fmt, "-o", str(out)]
        devnull = open(os.devnull, "w")
        saved = sys.stderr
        sys.stderr = devnull  # the "wrote N hits" line
        try:
            in_process = best_of(3, lambda: cli_main(argv))
        finally:
            sys.stderr = saved
            devnull.close()
        t0, c0 = time.perf_counter(), child_cpu()
        subprocess.run([sys.executable, "-m", "tracer", *argv], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fresh = (time.perf_counter() - t0, child_cpu() - c0)
        rows.append({"case": name, "hits": hits, "paths": distinct, "file_mb": size_mb, "load": load,
                     "format": fmt, "in_process": in_process, "process": fresh,
                     "out_mb": out.stat().st_size / 1e6})
    return rows


def table(rows: list[dict]) -> list[str]:
    def pair(wall_cpu: tuple[float, float]) -> str:
        return f"{wall_cpu[0]:.2f} / {wall_cpu[1]:.2f}"

    lines = ["| session | format | load only | export, in-process | `pttrace export` process | output (MB) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['hits']:,} hits, {r['paths']:,} paths ({r['file_mb']:.0f} MB) | {r['format']} | "
                     f"{pair(r['load'])} | {pair(r['in_process'])} | {pair(r['process'])} | {r['out_mb']:.1f} |")
    return lines


def update_results(section: list[str]) -> None:
    """Replace our "## Export" section, keep everybody else's."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    body = "\n".join(section).rstrip() + "\n"
    pattern = re.compile(r"^## Export\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: body + "\n", text).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + body
    RESULTS.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hits", type=int, default=10_000)
    ap.add_argument("--no-results", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as tmp:
        work = Path(tmp)
        rows = run_case("typical", args.hits, 100, work) + run_case("worst", args.hits, args.hits, work)
    lines = table(rows)
    print("\n".join(lines))
    if not args.no_results:
        section = [
            "## Export",
            "",
            f"`bench/bench_export.py`, {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs. Sessions built from the real stacks of `tests/data/sigmoid_session.jsonl` "
            f"({frame_counts()} frames a hit, interpreter frames included). In-process: best of 3 of `cli.main(['export', ...])` "
            "(load, group, render, write); process: one fresh `python -m tracer export`, start-up included. "
            "\"load only\" is `storage.load` alone, part of every export. Seconds as wall / CPU: the machine "
            "is shared, so CPU time is the steadier figure.",
            "",
            *lines,
        ]
        update_results(section)
        print(f"\nwrote the Export section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
