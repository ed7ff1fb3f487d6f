"""Symbols benchmark: ``pttrace where`` and the DWARF reader side by side with nm and addr2line.

    python bench/bench_symbols.py [--runs 5] [--no-write]

Measured in one run, each case alternating ours and theirs so that both see the same machine:

1. ``pttrace where initModule`` over the wheel's torch libraries, cold (empty index cache) and warm,
   against ``nm -C LIB | grep NAME`` over the same libraries.
2. One name -> file:line in a large debug library (bench/gen_debug_lib.py: 200 units, ~92 MB of
   .debug_info), cold: ``pttrace where NAME --lib BIG`` against ``addr2line -f -C -e BIG ADDR``.
3. 1,000 addresses -> file:line (with inlining chains), warm, against ``addr2line -f -C -i`` given
   all of them in one call; the cold build of the per-unit index is reported too.
4. Peak RSS of each process (ours builds the index in the cold runs).

Times are wall-clock medians of separate processes. The page cache is warm for everyone (the first
run of each command is a discarded warm-up), "cold" means an empty pttrace index cache. Python runs
with bytecode caching on (as installed), whatever PYTHONDONTWRITEBYTECODE says here.
Results are appended to bench/RESULTS.md under "## Symbols".
"""
from __future__ import annotations

import argparse
import os
import platform
import random
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
sys.path.insert(0, str(ROOT / "bench"))

PYTHON = sys.executable
PTTRACE = [PYTHON, "-m", "tracer"]
BATCH = """
import sys
from tracer.symbols import lines_for_addresses
addrs = [int(x, 16) for x in open(sys.argv[2]).read().split()]
res = lines_for_addresses(sys.argv[1], addrs)
print(sum(1 for v in res.values() if v is not None))
"""


def measure(cmd: list[str] | str, env: dict | None = None, shell: bool = False) -> tuple[float, int, str]:
    """(seconds, peak RSS in KB of the process tree's largest member, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, shell=shell)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss, out.decode(errors="replace")


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def env_with(cache: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def torch_libs() -> list[str]:
    from tracer.symbols import torch_libraries

    return torch_libraries(PYTHON)


def case_where(runs: int, rows: list, notes: list) -> None:
    libs = torch_libs()
    nm_cmd = " ; ".join(f"nm -C '{lib}' | grep -F initModule" for lib in libs) + " ; true"
    measure(nm_cmd, shell=True)
    warm_cache = tempfile.mkdtemp(prefix="pttrace-bench-")
    measure(PTTRACE + ["where", "initModule"], env=env_with(warm_cache))  # warm-up, writes .pyc too
    cold, cold_rss, nm_t, nm_rss, warm, warm_rss = [], [], [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as fresh:
            t, rss, out = measure(PTTRACE + ["where", "initModule"], env=env_with(fresh))
            assert "torch::cpu::initModule" in out, out
            cold.append(t)
            cold_rss.append(rss)
        t, rss, _ = measure(nm_cmd, shell=True)
        nm_t.append(t)
        nm_rss.append(rss)
        t, rss, _ = measure(PTTRACE + ["where", "initModule"], env=env_with(warm_cache))
        warm.append(t)
        warm_rss.append(rss)
    shutil.rmtree(warm_cache, ignore_errors=True)
    total = sum(os.path.getsize(x) for x in libs)
    notes.append(f"torch libraries: {len(libs)} files, {total / 1e6:.0f} MB (libtorch_cpu.so "
                 f"{os.path.getsize([x for x in libs if x.endswith('libtorch_cpu.so')][0]) / 1e6:.0f} MB)")
    rows.append(("`where initModule`, torch libs, cold", med(cold), "`nm -C LIB | grep` same libs", med(nm_t),
                 "<= 1.0x", max(cold_rss), max(nm_rss)))
    rows.append(("`where initModule`, torch libs, warm", med(warm), "(target: <= 0.2 s)", None, "<= 0.2 s",
                 max(warm_rss), None))


def big_library() -> Path:
    from gen_debug_lib import build

    return build(200, 4, os.cpu_count() or 2)


def case_one_name(runs: int, rows: list, notes: list, big: Path) -> None:
    from tracer.symbols.elf_index import LibraryIndex

    name = "work_150_2"
    address = next(m.address for m in LibraryIndex.open(str(big)).lookup(name) if not m.cold)
    a2l = ["addr2line", "-f", "-C", "-e", str(big), hex(address)]
    measure(a2l)
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as fresh:
        measure(PTTRACE + ["where", name, "--lib", str(big)], env=env_with(fresh))
    ours, ours_rss, theirs, theirs_rss = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as fresh:
            t, rss, out = measure(PTTRACE + ["where", name, "--lib", str(big)], env=env_with(fresh))
            assert "unit_0150.cpp:" in out, out
            ours.append(t)
            ours_rss.append(rss)
        t, rss, out = measure(a2l)
        assert "unit_0150.cpp:" in out
        theirs.append(t)
        theirs_rss.append(rss)
    info = subprocess.run(["readelf", "-SW", str(big)], capture_output=True, text=True).stdout
    size = next(int(line.split()[5], 16) for line in info.splitlines() if ".debug_info" in line)
    notes.append(f"debug library: {big.name}, {os.path.getsize(big) / 1e6:.0f} MB, .debug_info "
                 f"{size / 1e6:.0f} MB, 200 units, DWARF 5, -g -O2")
    rows.append((f"`where {name} --lib BIG` (name -> file:line), cold", med(ours),
                 "`addr2line -f -C -e BIG ADDR`", med(theirs), "<= 2x", max(ours_rss), max(theirs_rss)))


def case_batch(runs: int, rows: list, notes: list, big: Path) -> None:
    from tracer.symbols.elf_index import LibraryIndex

    index = LibraryIndex.open(str(big))
    values, sizes, _ = index._ensure_addresses()
    rng = random.Random(1000)
    funcs = [(v, s) for v, s in zip(values, sizes) if s > 0]
    addresses = sorted({v + rng.randrange(s) for v, s in rng.sample(funcs, 1000)})
    listing = Path(tempfile.mkstemp(prefix="pttrace-addrs-")[1])
    listing.write_text("\n".join(hex(a) for a in addresses))
    a2l = ["addr2line", "-f", "-C", "-i", "-e", str(big), *map(hex, addresses)]
    a2l_plain = ["addr2line", "-f", "-C", "-e", str(big), *map(hex, addresses)]
    ours_cmd = [PYTHON, "-c", BATCH, str(big), str(listing)]
    cache = tempfile.mkdtemp(prefix="pttrace-bench-")
    measure(a2l)
    cold_t, cold_rss, out = measure(ours_cmd, env=env_with(cache))  # builds every unit's index
    assert int(out.strip()) == len(addresses), out
    ours, ours_rss, theirs, theirs_rss, plain = [], [], [], [], []
    for _ in range(runs):
        t, rss, _ = measure(ours_cmd, env=env_with(cache))
        ours.append(t)
        ours_rss.append(rss)
        t, rss, _ = measure(a2l)
        theirs.append(t)
        theirs_rss.append(rss)
        plain.append(measure(a2l_plain)[0])
    size = sum(f.stat().st_size for f in Path(cache, "pttrace").rglob("*") if f.is_file())
    shutil.rmtree(cache, ignore_errors=True)
    listing.unlink()
    notes.append(f"1,000 addresses: random bytes of random functions, {len(addresses)} distinct; the index "
                 f"cache for the debug library is {size / 1e6:.0f} MB; `addr2line` without -i: "
                 f"{med(plain):.2f} s")
    rows.append(("1,000 addresses -> file:line + inlining, warm", med(ours), "`addr2line -f -C -i` all in one call",
                 med(theirs), "<= 0.5x", max(ours_rss), max(theirs_rss)))
    rows.append(("1,000 addresses, cold (builds the index of every unit)", cold_t, "same addr2line call",
                 med(theirs), "(none)", cold_rss, None))


def render(rows: list, notes: list, runs: int) -> str:
    lines = [
        f"### {datetime.now():%Y-%m-%d %H:%M} — {platform.node()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, median of {runs} runs",
        "",
        "| case | pttrace | reference | reference time | ratio | target | peak RSS ours / ref |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for case, ours, ref, ref_t, target, rss, ref_rss in rows:
        ratio = f"{ours / ref_t:.2f}x" if ref_t else "—"
        ref_time = f"{ref_t:.3f} s" if ref_t else "—"
        rss_text = f"{rss / 1024:.0f} MB" + (f" / {ref_rss / 1024:.0f} MB" if ref_rss else "")
        lines.append(f"| {case} | {ours:.3f} s | {ref} | {ref_time} | {ratio} | {target} | {rss_text} |")
    lines.append("")
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return "\n".join(lines)


def append_results(text: str) -> None:
    path = ROOT / "bench" / "RESULTS.md"
    content = path.read_text() if path.exists() else "# Benchmark results\n"
    if "\n## Symbols\n" not in "\n" + content:
        content = content.rstrip("\n") + "\n\n## Symbols\n\n" + __doc__.split("\n\n")[1].strip() + "\n\n"
    head, _, tail = content.partition("## Symbols\n")
    # Keep other sections intact: insert our newest result right under the section's introduction.
    nxt = tail.find("\n## ")
    section, rest = (tail, "") if nxt < 0 else (tail[:nxt + 1], tail[nxt + 1:])
    section = section.rstrip("\n") + "\n\n" + text
    path.write_text(head + "## Symbols\n" + section + ("\n" + rest if rest else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    rows: list = []
    notes: list = []
    big = big_library()
    case_where(args.runs, rows, notes)
    case_one_name(args.runs, rows, notes, big)
    case_batch(max(3, args.runs // 2), rows, notes, big)
    text = render(rows, notes, args.runs)
    print(text)
    if not args.no_write:
        append_results(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
