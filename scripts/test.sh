#!/usr/bin/env bash
# Runs the whole test suite against a real gdb, a real torch and a real debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiled fixtures (cached by their inputs in tests/.cache, where the tests' own fixtures find them
# built): the -g -O0 debug extension, its copy without DWARF and the small generated big-DWARF library (a
# fresh clone otherwise built two of them inside the tests, ~40 s of the suite's CPU).
logs="$(mktemp -d)"
builds=()
trap 'kill "${builds[@]}" 2>/dev/null || true' EXIT  # a failure below leaves no build running
# Two need only the standard library and start at once, beside the venv's set-up (pip keeps one core busy):
# the big-DWARF library (~11 s of CPU at load 8; once setup.sh installed the compiler, on a machine without
# one) and the oracle of the speedscope export's test, speedscope's own schema from its npm package.
PY="${PTTRACE_PYTHON:-python3}"
bigdebug() {
    PTTRACE_CACHE="${PTTRACE_CACHE:-$PWD/tests/.cache}" "$PY" bench/gen_big_debug.py --units 3 --types 60 --small \
        >"$logs/bigdebug" 2>&1 & builds+=($!)
}
compiler=0
command -v g++ >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1 && compiler=1
[ "$compiler" -eq 1 ] && bigdebug
"$PY" scripts/fetch_speedscope_schema.py >"$logs/speedscope_schema" 2>&1 & builds+=($!)
# The debug extension needs torch's headers, and only them: its build (~15 s of CPU on one core; --no-debug
# builds it, then links its copy without DWARF from the same object) starts once torch is in, beside the rest
# of the set-up (pip's install of the test tools on one core, then compileall on both) and mypy.
bash scripts/setup.sh --torch
[ "$compiler" -eq 1 ] || bigdebug
.venv/bin/python scripts/build_debug_ext.py --no-debug >"$logs/debug_ext" 2>&1 & builds+=($!)
bash scripts/setup.sh
# The type checker (pyproject.toml's [tool.mypy]) runs beside the tests' first seconds: as the set-up's last
# step it kept one core busy for ~10 s while the other idled. A type error fails the run as a test would; its
# report comes after the tests'. In CI its cache is never read again: not written (2 s of its 12 s of CPU).
mypy_log="$logs/mypy"
.venv/bin/python -m mypy ${CI:+--cache-dir=/dev/null} >"$mypy_log" 2>&1 & mypy=$!
for pid in "${builds[@]}"; do
    if ! wait "$pid"; then
        echo "test.sh: a test fixture failed to build or to download:" >&2
        tail -n 40 "$logs"/debug_ext "$logs"/bigdebug "$logs"/speedscope_schema 2>/dev/null >&2
        exit 1
    fi
done
builds=("$mypy")
# --durations=20: every run names its slowest tests (the suite is kept under 10 minutes). Two workers
# (pytest-xdist), each taking whole test files (a module's shared recording is made once): a test is
# mostly one process at a time (gdb, or the target it stopped), so a second one fills the second core.
# The files are taken in collection order, the longest first (tests/conftest.py's LONGEST_FIRST), so
# that the run ends on short files on both workers, not on one worker's long file while the other idles.
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 -n 2 --dist loadfile --no-loadscope-reorder \
    tests "$@" || status=$?
if ! wait "$mypy"; then
    cat "$mypy_log" >&2
    echo "test.sh: mypy found type errors (above)" >&2
    [ "$status" -ne 0 ] || status=1
fi
rm -rf "$logs"
trap - EXIT
exit "$status"
