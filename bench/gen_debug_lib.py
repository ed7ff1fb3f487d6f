"""Generate and build a large debug library for the symbol benchmarks: hundreds of C++ translation
units compiled with ``-g -O2`` (DWARF 5, inlined frames), linked into one shared library with
well over 50 MB of ``.debug_info``.

The sources are synthetic but shaped like real C++: each unit defines its own record types and
instantiates standard containers, algorithms and lambdas over them, so every unit brings its own
template instantiations (and their DWARF) as a torch translation unit does.

    python bench/gen_debug_lib.py [--units 320] [--jobs 2]   # prints the path of the library

The build is cached in ``$PTTRACE_CACHE/bench_debuglib`` (default ``tests/.cache/bench_debuglib``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CFLAGS = ["-g", "-O2", "-fPIC", "-std=c++17"]

UNIT = r"""
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace bench{u} {{

struct Record{u} {{
  std::string name;
  std::vector<double> values;
  std::map<std::string, int> tags;
  std::shared_ptr<Record{u}> parent;
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

}}  // namespace bench{u}

extern "C" double bench_unit_{u}(int n) {{
  double acc = 0;
{calls}
  return acc;
}}
"""

FUNCTION = r"""
double work_{u}_{k}(int n) {{
  std::vector<Record{u}> records;
  std::unordered_map<std::string, std::vector<int>> index;
  for (int i = 0; i < n; ++i) {{
    Record{u} r;
    r.name = "r" + std::to_string(i * {k});
    r.values.assign(i % 7 + 1, i * 0.5);
    r.tags[r.name] = i;
    index[r.name].push_back(i);
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
  out << stats.total << index.size();
  return stats.high - stats.low + out.str().size();
}}
"""


def cache_dir() -> Path:
    base = os.environ.get("PTTRACE_CACHE")
    return (Path(base) if base else ROOT / "tests" / ".cache") / "bench_debuglib"


def write_sources(src: Path, units: int, per_unit: int) -> list[Path]:
    src.mkdir(parents=True, exist_ok=True)
    paths = []
    for u in range(units):
        functions = "".join(FUNCTION.format(u=u, k=k) for k in range(per_unit))
        calls = "".join(f"  acc += bench{u}::work_{u}_{k}(n);\n" for k in range(per_unit))
        text = UNIT.format(u=u, functions=functions, calls=calls)
        path = src / f"unit_{u:04d}.cpp"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths


def compile_one(source: Path, obj: Path) -> None:
    if obj.exists() and obj.stat().st_mtime >= source.stat().st_mtime:
        return
    tmp = obj.with_suffix(".tmp.o")
    subprocess.run(["g++", *CFLAGS, "-c", str(source), "-o", str(tmp)], check=True)
    tmp.replace(obj)


def build(units: int, per_unit: int, jobs: int) -> Path:
    out = cache_dir()
    library = out / f"libbigdebug_{units}x{per_unit}.so"
    stamp = hashlib.sha256(f"{UNIT}{FUNCTION}{CFLAGS}{units}{per_unit}".encode()).hexdigest()
    stamp_file = library.with_suffix(".stamp")
    if library.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return library
    sources = write_sources(out / "src", units, per_unit)
    objs = [out / "obj" / (s.stem + ".o") for s in sources]
    objs[0].parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for done in pool.map(compile_one, sources, objs):
            pass
    subprocess.run(["g++", "-shared", "-g", "-o", str(library), *map(str, objs)], check=True)
    stamp_file.write_text(stamp)
    shutil.rmtree(out / "obj", ignore_errors=True)  # ~400 MB of objects, not needed once linked
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--per-unit", type=int, default=4, help="functions per translation unit")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    print(build(args.units, args.per_unit, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
