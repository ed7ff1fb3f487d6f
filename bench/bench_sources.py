"""Sources benchmark: the definition index of torch/include (tracer/sources/) side by side with ``ctags -R``.

    python bench/bench_sources.py [--runs 3] [--no-write]

Measured in one run, alternating ours and theirs so that both see the same machine:

1. Cold index of every header the wheel ships (torch/include): ours (universal-ctags on all cores, its
   JSON read, definitions and specializations kept, written to the cache) in a fresh process with an
   empty cache, against ``ctags -R`` over the same tree (one process, default options: the plain tags
   file a user would make) and against the same ctags command ours runs, alone.
2. Warm: the sources of every native frame of one recorded path (sessions/example-sigmoid-forward and
   -backward: op entries, header definitions, templates), timed inside one process from an empty
   finder: loading the cached index and the yaml, then every lookup. Target: well under 0.1 s.
3. Peak RSS of each process.

Wall-clock medians; the page cache is warm for everyone (a discarded first run of each).
Results are appended to bench/RESULTS.md under "## Sources".
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable

INTRO = (
    "`bench/bench_sources.py`: the index of C++ definitions over the wheel's `torch/include` "
    "(`tracer/sources/`, universal-ctags underneath) against `ctags -R` over the same tree, and the warm "
    "lookups of one recorded path's frames. Wall-clock medians of separate processes (start-up included) "
    "for the cold builds, in-process times for the warm lookups; page cache warm for everyone. The "
    "machine is a shared 2-core VM: trust the ratios more than the seconds."
)
COLD = """
import sys, time
from tracer.sources.tags import DefinitionIndex
t = time.perf_counter()
ix = DefinitionIndex.build(sys.argv[1])
print(len(ix), time.perf_counter() - t)
"""
WARM = """
import sys, time
t0 = time.perf_counter()
from tracer.session import storage
from tracer.sources import SourceFinder
frames = []
for path in sys.argv[2:]:
    s = storage.load(path)
    frames += [f for h in s.hits for f in h.frames if f.kind == "native" and not f.file]
t1 = time.perf_counter()
finder = SourceFinder(None, None, torch_dir=sys.argv[1])
found = sum(1 for f in frames if finder.refs(f.function, None))
t2 = time.perf_counter()
again = sum(1 for f in frames if finder.refs(f.function, None))
t3 = time.perf_counter()
print(len(frames), found, t2 - t1, t3 - t2)
"""


def measure(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_sources: {cmd[:3]} failed")
    return elapsed, usage.ru_maxrss, out.decode(errors="replace")


def env_with(cache: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print only, do not append to bench/RESULTS.md")
    args = ap.parse_args(argv)

    from tracer.sources.finder import installed_torch_dir
    from tracer.sources.tags import _CTAGS_ARGS, DefinitionIndex, _source_files, ctags_path

    SHARDS = DefinitionIndex.SHARDS

    torch_dir = installed_torch_dir()
    include = os.path.join(torch_dir, "include")
    files = _source_files(include)
    size = sum(os.path.getsize(f) for f in files)
    ctags = ctags_path()
    scratch = tempfile.mkdtemp(prefix="pttrace-bench-src-")
    tags_out = os.path.join(scratch, "tags")
    list_file = os.path.join(scratch, "files")
    Path(list_file).write_text("\n".join(files))
    plain = [ctags, "-R", "-f", tags_out, include]
    same = ["sh", "-c", f'"$0" {" ".join(a for a in _CTAGS_ARGS if a not in ("-L", "-", "-f"))} -f - '
            f'-L "$1"', ctags, list_file]
    ours = [PYTHON, "-c", COLD, include]
    for cmd in (plain, same):
        measure(cmd)  # warm-up: page cache
    cold, cold_rss, ref, ref_rss, same_t = [], [], [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as fresh:
            t, rss, out = measure(ours, env_with(fresh))
        cold.append(t)
        cold_rss.append(rss)
        n_defs = int(out.split()[0])
        t, rss, _ = measure(plain)
        ref.append(t)
        ref_rss.append(rss)
        t, _, _ = measure(same)
        same_t.append(t)
    n_tags = sum(1 for _ in open(tags_out, errors="replace"))

    warm_cache = tempfile.mkdtemp(prefix="pttrace-bench-")
    measure(ours, env_with(warm_cache))  # builds the cache
    sessions = [str(ROOT / "sessions" / f"example-sigmoid-{d}.jsonl") for d in ("forward", "backward")]
    warm_first, warm_again, warm_rss = [], [], []
    for _ in range(args.runs):
        _, rss, out = measure([PYTHON, "-c", WARM, torch_dir, *sessions], env_with(warm_cache))
        n_frames, n_found, first, again = out.split()
        warm_first.append(float(first))
        warm_again.append(float(again))
        warm_rss.append(rss)
    shutil.rmtree(warm_cache, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)

    med = statistics.median
    rows = [
        (f"cold index of torch/include ({len(files):,} files, {size / 1e6:.0f} MB): {n_defs:,} definitions",
         med(cold), f"`ctags -R` over the same tree ({n_tags:,} tags)", med(ref), "(none)",
         f"{max(cold_rss) // 1024} MB / {max(ref_rss) // 1024} MB"),
        ("the same ctags command ours runs, alone (one process)", med(same_t), "`ctags -R`", med(ref), "—", ""),
        (f"warm: sources of every native frame of the sigmoid paths ({n_frames} frames, {n_found} found), "
         "index and yaml loaded", med(warm_first), "(target: well under 0.1 s)", None, "< 0.1 s",
         f"{max(warm_rss) // 1024} MB"),
        ("warm: the same frames again (finder kept, as a view does)", med(warm_again), "", None, "", ""),
    ]
    now = datetime.now().strftime("%Y-%m-%d %H:%M")
    head = (f"### {now} — {platform.node() or 'machine'}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {subprocess.run([ctags, '--version'], capture_output=True, text=True).stdout.split(',')[0]}, "
            f"median of {args.runs} runs")
    lines = [head, "", "| case | pttrace | reference | reference time | ratio | target | peak RSS ours / ref |",
             "|---|---:|---|---:|---:|---|---:|"]
    for case, t, refname, rt, target, rss in rows:
        ratio = f"{t / rt:.2f}x" if rt else "—"
        rts = f"{rt:.3f} s" if rt else "—"
        lines.append(f"| {case} | {t:.3f} s | {refname} | {rts} | {ratio} | {target} | {rss} |")
    lines += ["", f"- ours runs the ctags command of the second row split over {os.cpu_count()} processes, reads its "
              "JSON, keeps function definitions (with their enclosing class's template and specialization) "
              f"and writes {SHARDS} cache shards; `ctags -R` writes a plain sorted tags file of every kind.",
              "- warm: a fresh finder in a process with the index cached: the shards the frames' names fall in, "
              "the yaml tables (cached too) and every lookup; interpreter start-up and imports not included.", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        results = ROOT / "bench" / "RESULTS.md"
        body = results.read_text()
        if "\n## Sources\n" not in body:
            body = body.rstrip() + f"\n\n## Sources\n\n{INTRO}\n"
        results.write_text(body.rstrip() + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
