#!/usr/bin/env bash
# Runs the whole test suite against a real gdb, a real torch and a real debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -f scripts/build_debug_ext.py ]; then
    .venv/bin/python scripts/build_debug_ext.py >/dev/null
fi
# The oracle of the speedscope export's test: speedscope's own schema, from its npm package.
.venv/bin/python scripts/fetch_speedscope_schema.py >/dev/null
# The type checker first (pyproject.toml's [tool.mypy]): a type error fails the run as a test would.
.venv/bin/python -m mypy
# --durations=20: every run names its slowest tests (the suite is kept under 10 minutes). Two workers
# (pytest-xdist), each taking whole test files (a module's shared recording is made once): a test is
# mostly one process at a time (gdb, or the target it stopped), so a second one fills the second core.
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 -n 2 --dist loadfile tests "$@"
