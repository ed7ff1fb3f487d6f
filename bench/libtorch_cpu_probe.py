"""Where does gdb spend its time when it reads libtorch_cpu.so, and what would make it cheaper?

    .venv/bin/python bench/libtorch_cpu_probe.py [--rounds 3] [--only sections,threads,cache,cfi]

sections  copies of the library with sections removed (objcopy), each read by
          ``gdb -nx -batch -ex "file COPY"``: wall, CPU, peak RSS, and what is really left in the copy
          (``objcopy --remove-section .symtab`` leaves a regenerated .symtab behind: it is checked)
threads   ``maint set worker-threads N`` on the original (gdb demangles minimal symbols in parallel)
cache     ``set index-cache enabled on``, cold then warm (it indexes DWARF; this library has none)
cfi       the live case: stop in ``wrapper_CPU_sigmoid`` of scripts/hello-world.py with gdb reading
          libtorch_cpu.so's symbols (``sharedlibrary``) vs. a CFI-only copy of it (bench/cfi_only.py,
          ``add-symbol-file -o BASE``), breakpoint by address from pttrace's symbol index in both;
          checks the two stacks are the same frames (same pcs) and that the index names every
          libtorch_cpu.so frame as gdb does with full symbols

Copies go to a temporary directory (about 3 GB of mostly sparse files, one at a time) and are
removed at the end. Prints markdown tables.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_run import run_measured  # noqa: E402
from cfi_only import _sections, write_cfi_only  # noqa: E402

LIB = next((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch/lib/libtorch_cpu.so"))
PY = ROOT / ".venv" / "bin" / "python"
HELLO = ROOT / "scripts" / "hello-world.py"

VARIANTS = [
    ("original", None, "the wheel's libtorch_cpu.so"),
    ("objcopy --remove-section .symtab --remove-section .strtab",
     ["--remove-section", ".symtab", "--remove-section", ".strtab"],
     "what DESIGN.md measured: objcopy writes a regenerated .symtab back"),
    ("DESIGN.md's copy: --remove-section .symtab .dynsym .eh_frame",
     ["--remove-section", ".symtab", "--remove-section", ".strtab", "--remove-section", ".dynsym",
      "--remove-section", ".eh_frame", "--remove-section", ".eh_frame_hdr"], ""),
    ("no .eh_frame, .eh_frame_hdr", ["--remove-section", ".eh_frame", "--remove-section", ".eh_frame_hdr"], ""),
    ("no .gcc_except_table", ["--remove-section", ".gcc_except_table"], ""),
    ("no .rela.dyn, .rela.plt (no @plt symbols)", ["--remove-section", ".rela.dyn", "--remove-section", ".rela.plt"],
     ""),
    ("no .gnu.version*", ["--remove-section", ".gnu.version", "--remove-section", ".gnu.version_d",
                          "--remove-section", ".gnu.version_r"], ""),
    ("no .note*, .comment, .gnu.build.attributes", ["--remove-section", ".note*", "--remove-section", ".comment",
                                                    "--remove-section", ".gnu.build.attributes"], ""),
    ("--strip-all (really no .symtab; .dynsym left)", ["--strip-all"], ""),
    ("--strip-all, no .dynsym/.dynstr/.gnu.hash/.gnu.version*/.rela.*",
     ["--strip-all", "--remove-section", ".dynsym", "--remove-section", ".dynstr", "--remove-section", ".gnu.hash",
      "--remove-section", ".gnu.version", "--remove-section", ".gnu.version_d", "--remove-section", ".gnu.version_r",
      "--remove-section", ".rela.dyn", "--remove-section", ".rela.plt"], "no symbols at all"),
    ("CFI-only copy (bench/cfi_only.py: .eh_frame + .eh_frame_hdr)", "cfi", ""),
]


def timed(argv: list[str], env: dict | None = None) -> dict:
    """wall, user+sys CPU and peak RSS of one command, through /usr/bin/time (no child processes here:
    /usr/bin/time's peak would include a waited-for child's)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name, *argv], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
        fields = tf.read().split()[-4:]
    return {"wall": wall, "cpu": float(fields[1]) + float(fields[2]), "rss_mb": int(fields[3]) / 1024,
            "rc": p.returncode, "out": p.stdout.decode(errors="replace")}


def census(path: str) -> str:
    """What is really in an ELF copy: symbol counts and unwind tables."""
    with open(path, "rb") as fh:
        data = fh.read()
    _, secs = _sections(data)
    by = {s.name: s for s in secs.items}
    parts = []
    for name in (".symtab", ".dynsym"):
        s = by.get(name)
        parts.append(f"{name} {s.size // 24:,}" if s else f"no {name}")
    parts.append(".eh_frame" if ".eh_frame" in by else "no .eh_frame")
    parts.append(".rela.plt" if ".rela.plt" in by else "no .rela.plt")
    return ", ".join(parts)


def gdb_file(path: str, pre: list[str] | None = None) -> dict:
    args = ["gdb", "-nx", "-batch"]
    for cmd in pre or []:
        args += ["-ex", cmd]
    return timed(args + ["-ex", f"file {path}"])


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def probe_sections(tmp: Path, rounds: int) -> None:
    print("\n#### Reading copies of libtorch_cpu.so with sections removed: `gdb -nx -batch -ex \"file COPY\"`\n")
    print(f"{rounds} runs each, median. CPU = user + sys (gdb demangles on worker threads: CPU > wall).\n")
    print("| copy | what is really in it | wall | CPU | peak RSS |")
    print("|---|---|---|---|---|")
    for label, how, note in VARIANTS:
        if how is None:
            path = str(LIB)
        else:
            path = str(tmp / "copy.so")
            if how == "cfi":
                write_cfi_only(str(LIB), path)
            else:
                subprocess.run(["objcopy", *how, str(LIB), path], check=True, stderr=subprocess.DEVNULL)
        runs = [gdb_file(path) for _ in range(rounds)]
        what = census(path) + (f" ({note})" if note else "")
        print(f"| {label} | {what} | {med(runs, 'wall'):.2f} s | {med(runs, 'cpu'):.2f} s | "
              f"{med(runs, 'rss_mb'):.0f} MB |", flush=True)
        if how is not None:
            os.unlink(path)


def probe_threads(rounds: int) -> None:
    print("\n#### `maint set worker-threads N` (then `file libtorch_cpu.so`), alternating\n")
    settings = ["0", "1", "2", "4", "8"]
    runs: dict = {s: [] for s in settings}
    for _ in range(rounds):
        for s in settings:
            runs[s].append(gdb_file(str(LIB), [f"maint set worker-threads {s}"]))
    print(f"| worker threads | wall | CPU | peak RSS |")
    print("|---|---|---|---|")
    for s in settings:
        label = s + (" (gdb's default on this 2-core machine)" if s == "2" else "")
        print(f"| {label} | {med(runs[s], 'wall'):.2f} s | {med(runs[s], 'cpu'):.2f} s | "
              f"{med(runs[s], 'rss_mb'):.0f} MB |", flush=True)


def probe_cache(tmp: Path) -> None:
    print("\n#### `set index-cache enabled on` (fresh cache directory: cold, then warm)\n")
    cache = tmp / "index-cache"
    cache.mkdir()
    pre = [f"set index-cache directory {cache}", "set index-cache enabled on"]
    off = gdb_file(str(LIB))
    cold = gdb_file(str(LIB), pre)
    warm = gdb_file(str(LIB), pre)
    files = sum(1 for _ in cache.rglob("*") if _.is_file())
    print("| index cache | wall | peak RSS |")
    print("|---|---|---|")
    for label, r in (("off", off), ("on, cold", cold), ("on, warm", warm)):
        print(f"| {label} | {r['wall']:.2f} s | {r['rss_mb']:.0f} MB |")
    print(f"\nFiles written to the cache: {files} (the index cache holds DWARF indexes; libtorch_cpu.so has "
          "no DWARF, and minimal symbols are not cached).")


def _names_match(gdb_name: str | None, ours: str | None) -> bool:
    if not gdb_name or not ours:
        return False
    strip = lambda s: s.replace(" [clone .cold]", "").strip()  # noqa: E731
    return strip(gdb_name) == strip(ours)


def probe_cfi(tmp: Path, rounds: int) -> None:
    from tracer.symbols import find_symbol, symbol_at

    target = next(m for m in find_symbol("wrapper_CPU_sigmoid", [str(LIB)]) if not m.cold and not m.plt)
    cfi = tmp / "libtorch_cpu.cfi.so"
    t0 = time.perf_counter()
    info = write_cfi_only(str(LIB), str(cfi))
    t_make = time.perf_counter() - t0
    runs: dict = {"full": [], "cfi": []}
    stacks: dict = {}
    for _ in range(rounds):
        for mode in ("full", "cfi"):
            out = tmp / f"stack-{mode}.json"
            env = dict(os.environ, PT_MODE=mode, PT_CFI=str(cfi), PT_OFFSET=hex(target.address), PT_OUT=str(out))
            env.pop("DEBUGINFOD_URLS", None)
            res = run_measured(["gdb", "-nx", "-batch", "-x", str(ROOT / "bench" / "cfi_demo_gdb.py"), "--args",
                                str(PY), str(HELLO)], tmp / "gdb-out.txt", env=env)
            r = {"wall": res.wall, "rss_mb": res.tool_kb / 1024, "target_mb": res.target_kb / 1024}
            data = json.loads(out.read_text())
            r["symbols"] = data["symbols_seconds"]
            r["walk"] = data["walk_seconds"]
            runs[mode].append(r)
            stacks[mode] = data
    full, cut = stacks["full"], stacks["cfi"]
    same_pcs = [f["pc"] for f in full["frames"]] == [f["pc"] for f in cut["frames"]]
    base = cut["base"]
    named = agree = 0
    mismatches = []
    for ff, cf in zip(full["frames"], cut["frames"]):
        if not (cf["library"] or "").endswith("libtorch_cpu.so"):
            continue
        pc = cf["pc"] - base - (1 if cf["level"] > 0 else 0)  # a return address may be past the call's function
        found = symbol_at(str(LIB), pc)
        ours = found[0].name if found else None
        named += ours is not None
        if _names_match(ff["name"], ours):
            agree += 1
        else:
            mismatches.append((ff["name"], ours))
    n_lib = sum(1 for f in cut["frames"] if (f["library"] or "").endswith("libtorch_cpu.so"))
    print("\n#### The live case: stop in `wrapper_CPU_sigmoid` (hello-world.py), breakpoint by address\n")
    print(f"{rounds} runs each, alternating, median. CFI-only copy: {info['bytes'] / 1e6:.1f} MB, written in "
          f"{t_make:.2f} s (once per library build; cacheable by build-id).\n")
    print("| libtorch_cpu.so given to gdb as | whole gdb run | reading it | walking the 68-frame stack | "
          "peak RSS (gdb) | peak RSS (target) |")
    print("|---|---|---|---|---|---|")
    for mode, label in (("full", "`sharedlibrary libtorch_cpu` (its symbols: what pttrace does now)"),
                        ("cfi", "`add-symbol-file CFI-ONLY -o BASE` (unwind tables only)")):
        rs = runs[mode]
        print(f"| {label} | {med(rs, 'wall'):.2f} s | {med(rs, 'symbols'):.3f} s | {med(rs, 'walk'):.3f} s | "
              f"{med(rs, 'rss_mb'):.0f} MB | {med(rs, 'target_mb'):.0f} MB |")
    print(f"\nSame stack both ways: {'yes' if same_pcs else '**NO**'} ({len(full['frames'])} vs "
          f"{len(cut['frames'])} frames, pcs compared one by one). libtorch_cpu.so frames: {n_lib}; named by pttrace's "
          f"index: {named}; same name as gdb with full symbols: {agree}.")
    for g, o in mismatches[:5]:
        print(f"- differs: gdb {g!r} / index {o!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="sections,threads,cache,cfi")
    args = ap.parse_args()
    only = {s.strip() for s in args.only.split(",")}
    ver = subprocess.run(["gdb", "-nx", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"{LIB} ({LIB.stat().st_size / 1e6:.0f} MB), {ver}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    tmp = Path(tempfile.mkdtemp(prefix="pttrace-probe-"))
    try:
        if "sections" in only:
            probe_sections(tmp, args.rounds)
        if "threads" in only:
            probe_threads(args.rounds)
        if "cache" in only:
            probe_cache(tmp)
        if "cfi" in only:
            probe_cfi(tmp, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n(load average {os.getloadavg()[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
