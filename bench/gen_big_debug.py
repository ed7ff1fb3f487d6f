"""Generate and build a full-size debug library (a stand-in for libtorch_cpu.so from a ``DEBUG=1`` build):
thousands of C++ units compiled with ``-g``, linked into one shared library with well over 1.5 GB of DWARF,
plus a second copy whose debug sections are compressed (as ``-gz`` builds have), derived with objcopy.

The units are shaped like torch's: each one includes a large set of standard headers (precompiled once,
so the parse costs nothing per unit) and keeps the debug types of everything they declare
(``-fno-eliminate-unused-debug-types``; a torch unit carries the types of the c10/ATen headers it
includes the same way); it defines its own record types, instantiates containers, algorithms and
lambdas over them, and runs a chain of templates ``Stage<D, K>`` whose ``step`` functions inline into
each other ``D`` deep, so an address inside a kernel sits under a stack of inlined frames. Per second of
compile this yields several times the DWARF of bench/gen_debug_lib.py.

    python bench/gen_big_debug.py [--units 660] [--jobs 2]     # prints the path of the library
    python bench/gen_big_debug.py --units 4 --small              # a few units, for the tests

Every compile runs under ``nice -n 19``. The build is cached in ``$PTTRACE_CACHE/bench_bigdebug``
(default ``$XDG_CACHE_HOME/pttrace/bench_bigdebug``, beside pttrace's own caches, outside the repository),
in a directory named by a stamp of its inputs;
``build.json`` beside it records the build time and the section sizes. The compressed variant is
``<name>.gz.so`` (``--compressed`` prints its path).

Each unit ``u`` exports ``extern "C" double bigdebug_unit_u(int n)``, which calls ``bigU::kernel_u_k``
for every ``k`` (units from ``--kernels`` on have none: they cost a third of the compile time and carry
two thirds of the DWARF), and ``bigdebug_hot_u(int n)``, which calls the small ``bigU::tick_u`` n times (a hot
breakpoint); bench/call_bigdebug.py calls them from a torch operator.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPT = "-O1"
CFLAGS = ["-g", OPT, "-fPIC", "-std=c++17", "-fno-eliminate-unused-debug-types"]
NICE = ["nice", "-n", "19"]
HEADERS = ("algorithm functional map memory sstream string unordered_map vector iostream thread mutex atomic tuple "
           "variant optional array deque list set unordered_set chrono complex random filesystem regex future "
           "condition_variable numeric iomanip fstream locale").split()

UNIT = r"""
namespace big{u} {{

struct Record{u} {{
  std::string name;
  std::vector<double> values;
  std::map<std::string, int> tags;
  std::shared_ptr<Record{u}> parent;
  std::optional<std::array<float, 4>> extent;
}};

template <int D, int K> struct Stage {{
  double weight[3];
  int id;
  Stage<D - 1, K> inner;
  static inline double step(double x, int n) {{
    double y = Stage<D - 1, K>::step(x * 1.5 + K, n - 1);
    return y * 0.5 + ((n & D) ? x : y - D);
  }}
}};
template <int K> struct Stage<0, K> {{
  static inline double step(double x, int n) {{ return x * K + n; }}
}};

template <typename T>
struct Stats{u} {{
  T low{{}}, high{{}}, total{{}};
  void add(T v) {{
    low = std::min(low, v);
    high = std::max(high, v);
    total += v;
  }}
}};

{functions}

// Small and called often: the hot breakpoint of the per-hit benchmark, with inlined frames under it.
__attribute__((noinline)) double tick_{u}(double x, int n) {{
  return Stage<{depth}, 3>::step(x, n) + n;
}}

}}  // namespace big{u}

extern "C" double bigdebug_unit_{u}(int n) {{
  double acc = 0;
{calls}
  return acc;
}}

extern "C" double bigdebug_hot_{u}(int n) {{
  double acc = 0;
  for (int i = 0; i < n; ++i) acc += big{u}::tick_{u}(acc * 1e-9, i);
  return acc;
}}
"""

FUNCTION = r"""
__attribute__((noinline)) double kernel_{u}_{k}(int n) {{
  std::vector<Record{u}> records;
  std::unordered_map<std::string, std::vector<int>> index;
  std::deque<std::pair<int, double>> queue;
  for (int i = 0; i < n; ++i) {{
    Record{u} r;
    r.name = "r" + std::to_string(i * {k});
    r.values.assign(i % 7 + 1, i * 0.5);
    r.tags[r.name] = i;
    index[r.name].push_back(i);
    queue.emplace_back(i, Stage<{depth}, {k}>::step(i, n));
    records.push_back(std::move(r));
  }}
  std::sort(records.begin(), records.end(), [](const Record{u}& a, const Record{u}& b) {{
    return a.name < b.name;
  }});
  Stats{u}<double> stats;
  std::function<void(const Record{u}&)> visit = [&](const Record{u}& r) {{
    for (double v : r.values) stats.add(v + {k});
  }};
  std::for_each(records.begin(), records.end(), visit);
  std::ostringstream out;
  out << stats.total << index.size() << queue.size();
  return stats.high - stats.low + out.str().size() + Stage<{depth}, {k}>::step(stats.total, n);
}}
"""


def fake_aten(types: int) -> str:
    """A stand-in for the c10/ATen headers every torch unit includes: plain record types with members and
    declared methods, in inheritance chains; each unit repeats their debug types, as torch's units do."""
    kinds = ["int", "double", "long", "float", "Kind", "std::int64_t"]
    lines = ["namespace fakeaten {", "enum class Kind : int { " + ", ".join(f"K{i}" for i in range(200)) + " };"]
    for i in range(types):
        base = f" : public Type{i - 1}" if i % 5 else ""
        members = " ".join(f"{kinds[j % len(kinds)]} m{j}_{i};" for j in range(10))
        methods = " ".join(f"int method{j}_{i}(int a, double b) const;" for j in range(5))
        lines.append(f"struct Type{i}{base} {{ {members} {methods} static Type{i}* make(long n); }};")
    return "\n".join(lines) + "\n}  // namespace fakeaten\n"


def cache_dir() -> Path:
    base = os.environ.get("PTTRACE_CACHE")
    if base:
        return Path(base) / "bench_bigdebug"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "pttrace" / "bench_bigdebug"


def unit_text(u: int, per_unit: int, depth: int) -> str:
    functions = "".join(FUNCTION.format(u=u, k=k, depth=depth) for k in range(per_unit))
    calls = "".join(f"  acc += big{u}::kernel_{u}_{k}(n);\n" for k in range(per_unit))
    return UNIT.format(u=u, functions=functions, calls=calls, depth=depth)


def compile_one(job: tuple[Path, Path, Path, int, int, int]) -> None:
    """Compile unit ``u`` (``per_unit`` kernels) unless its object is there."""
    src, obj, header, u, per_unit, depth = job
    if obj.exists():
        return
    src.write_text(unit_text(u, per_unit, depth))
    tmp = obj.with_suffix(".tmp.o")
    subprocess.run([*NICE, "g++", *CFLAGS, "-include", str(header), "-Winvalid-pch", "-c", str(src), "-o", str(tmp)],
                   check=True)
    tmp.replace(obj)


def debug_sizes(library: Path) -> dict[str, int]:
    out = subprocess.run(["readelf", "-SW", str(library)], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1].startswith(".debug"):
            sizes[parts[1]] = int(parts[5], 16)
    return sizes


def build(units: int, per_unit: int, depth: int, types: int, jobs: int, quiet: bool = False,
          kernels: int | None = None) -> Path:
    kernels = units if kernels is None else min(kernels, units)
    stamp = hashlib.sha256(f"{UNIT}{FUNCTION}{CFLAGS}{HEADERS}{fake_aten(types)}{units}{per_unit}{depth}{kernels}"
                           .encode())
    out = cache_dir() / f"{units}x{per_unit}k{kernels}d{depth}t{types}-{stamp.hexdigest()[:16]}"
    library = out / f"libbigdebug_{units}.so"
    compressed = out / f"libbigdebug_{units}.gz.so"
    if library.exists() and compressed.exists():
        return library
    started = time.monotonic()
    (out / "src").mkdir(parents=True, exist_ok=True)
    (out / "obj").mkdir(exist_ok=True)
    header = out / "src" / "all.h"
    (out / "src" / "fakeaten.h").write_text("#pragma once\n#include <cstdint>\n" + fake_aten(types))
    header.write_text("".join(f"#include <{h}>\n" for h in HEADERS) + '#include "fakeaten.h"\n')
    gch = header.with_name("all.h.gch")
    if not gch.exists():
        subprocess.run([*NICE, "g++", *CFLAGS, "-x", "c++-header", str(header), "-o", str(gch)], check=True)
    work = [(out / "src" / f"unit_{u:04d}.cpp", out / "obj" / f"unit_{u:04d}.o", header, u,
             per_unit if u < kernels else 0, depth) for u in range(units)]
    done = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for _ in pool.map(compile_one, work):
            done += 1
            if not quiet and done % 50 == 0:
                print(f"  {done}/{units} units, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    compiled = time.monotonic() - started
    objs = [str(w[1]) for w in work]
    (out / "objs.txt").write_text("".join(f"{o}\n" for o in objs))
    tmp = library.with_suffix(".tmp")
    subprocess.run([*NICE, "g++", "-shared", "-fuse-ld=gold", "-g", "-o", str(tmp), f"@{out / 'objs.txt'}"],
                   check=True)
    tmp.replace(library)
    linked = time.monotonic() - started
    ztmp = compressed.with_suffix(".tmp")
    subprocess.run([*NICE, "objcopy", "--compress-debug-sections=zlib", str(library), str(ztmp)], check=True)
    ztmp.replace(compressed)
    total = time.monotonic() - started
    sizes = debug_sizes(library)
    facts = {"units": units, "per_unit": per_unit, "kernels": kernels, "types": types, "depth": depth, "cflags": CFLAGS, "jobs": jobs,
             "compile_s": round(compiled), "link_s": round(linked - compiled), "compress_s": round(total - linked),
             "total_s": round(total), "library_bytes": library.stat().st_size,
             "compressed_bytes": compressed.stat().st_size, "debug_bytes": sum(sizes.values()), "sections": sizes}
    (out / "build.json").write_text(json.dumps(facts, indent=1) + "\n")
    shutil.rmtree(out / "obj", ignore_errors=True)
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=660)
    parser.add_argument("--kernels", type=int, default=256,
                        help="units with kernels (the rest hold types, the inlined chain and tick_U only)")
    parser.add_argument("--per-unit", type=int, default=1, help="kernels per translation unit")
    parser.add_argument("--depth", type=int, default=8, help="how deep the Stage<> step functions inline")
    parser.add_argument("--types", type=int, default=4500, help="record types in the stand-in for torch's headers")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--compressed", action="store_true", help="print the compressed variant's path")
    parser.add_argument("--small", action="store_true", help="quiet (for the tests)")
    args = parser.parse_args(argv)
    library = build(args.units, args.per_unit, args.depth, args.types, args.jobs, quiet=args.small,
                    kernels=args.kernels)
    print(library.with_name(library.stem + ".gz.so") if args.compressed else library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
