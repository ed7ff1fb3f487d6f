#!/usr/bin/env bash
# pttrace vs plain gdb benchmarks (bench/RESULTS.md, section "Run and attach").
#   bash bench/run_all.sh            # bench_run.py, 5 rounds (~5 min on 2 cores)
#   bash bench/run_all.sh --quick    # 2 rounds
#   bash bench/run_all.sh --deep     # also: where gdb spends its time on libtorch_cpu.so (printed), and
#                                    # re-runs on a debug build (bench_rerun.py; builds a 180 MB library once)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
deep=0
args=()
for a in "$@"; do
    if [ "$a" = "--deep" ]; then deep=1; else args+=("$a"); fi
done
status=0
"$PY" bench/bench_run.py "${args[@]}" || status=$?
if [ "$deep" = 1 ]; then
    "$PY" bench/libtorch_cpu_probe.py --rounds 3 || status=$?
    "$PY" bench/bench_rerun.py || status=$?
fi
exit $status
