#!/usr/bin/env bash
# Runs the whole test suite against a real gdb, a real torch and a real debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The compiled fixtures (cached by their inputs in tests/.cache, where the tests' own fixtures find them
# built): the -g -O0 debug extension, its build without DWARF and the small generated big-DWARF library.
# They are built while mypy runs: mypy keeps one core busy for ~30 s, the builds take ~60 s of CPU (a
# fresh clone otherwise built two of them inside the tests, ~40 s of the suite's CPU).
logs="$(mktemp -d)"
builds=()
trap 'kill "${builds[@]}" 2>/dev/null || true' EXIT  # a failure below leaves no build running
.venv/bin/python scripts/build_debug_ext.py >"$logs/debug_ext" 2>&1 & builds+=($!)
.venv/bin/python scripts/build_debug_ext.py --no-debug >"$logs/debug_ext_nodwarf" 2>&1 & builds+=($!)
PTTRACE_CACHE="${PTTRACE_CACHE:-$PWD/tests/.cache}" .venv/bin/python bench/gen_big_debug.py --units 3 --types 60 --small \
    >"$logs/bigdebug" 2>&1 & builds+=($!)
# The oracle of the speedscope export's test: speedscope's own schema, from its npm package.
.venv/bin/python scripts/fetch_speedscope_schema.py >/dev/null
# The type checker first (pyproject.toml's [tool.mypy]): a type error fails the run as a test would.
mypy_status=0
.venv/bin/python -m mypy || mypy_status=$?
for pid in "${builds[@]}"; do
    if ! wait "$pid"; then
        echo "test.sh: a compiled test fixture failed to build:" >&2
        tail -n 40 "$logs"/* >&2
        exit 1
    fi
done
rm -rf "$logs"
trap - EXIT
[ "$mypy_status" -eq 0 ] || exit "$mypy_status"
# --durations=20: every run names its slowest tests (the suite is kept under 10 minutes). Two workers
# (pytest-xdist), each taking whole test files (a module's shared recording is made once): a test is
# mostly one process at a time (gdb, or the target it stopped), so a second one fills the second core.
# The files are taken in collection order, the longest first (tests/conftest.py's LONGEST_FIRST), so
# that the run ends on short files on both workers, not on one worker's long file while the other idles.
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 -n 2 --dist loadfile --no-loadscope-reorder \
    tests "$@"
