#!/usr/bin/env bash
# Installs what pttrace needs on a fresh Debian/Ubuntu machine: gdb, binutils, universal-ctags (apt, when missing),
# a venv in .venv with torch==2.13.0 (the CPU wheel), pttrace itself and its test tools.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v gdb >/dev/null 2>&1 || need_apt+=(gdb)
command -v addr2line >/dev/null 2>&1 || need_apt+=(binutils)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
# universal-ctags parses C++ for the definitions of frames without DWARF (tracer/sources/).
command -v ctags >/dev/null 2>&1 && ctags --version 2>/dev/null | grep -q Universal || need_apt+=(universal-ctags)
# libc's detached debug info: the tests read a stripped system library through /usr/lib/debug/.build-id.
if command -v dpkg >/dev/null 2>&1 && ! dpkg -s libc6-dbg >/dev/null 2>&1; then need_apt+=(libc6-dbg); fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]} with apt-get" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY="${PTTRACE_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PY --version)" >&2
    "$PY" -m venv .venv
fi
# Reinstall when pyproject.toml changed since the last install (new or pinned test tools), not only
# when a package is missing: an old venv must not hide a missing dependency that CI would install. The
# packages are looked for, not imported: importing torch took 2.5 s of CPU (load 10) at every demo.sh.
# The install mode is part of the stamps: a venv installed the old way is installed again once.
want="$(sha256sum pyproject.toml | cut -d' ' -f1) editable-compat"
found() {
    .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, sys.argv[1:])))" "$@" \
        2>/dev/null
}
# torch first, on its own stamp: with --torch, set-up ends there, so that scripts/test.sh builds the fixtures that
# need torch's headers while the rest is installed and compiled (test.sh then runs set-up again).
torch_stamp=.venv/.pttrace-torch
if [ "$(cat "$torch_stamp" 2>/dev/null)" != "$want" ] || ! found torch numpy; then
    echo "setup: installing torch==2.13.0 into .venv" >&2
    # numpy beside torch: without it every `import torch` warns "Failed to initialize NumPy". ninja (one of
    # the test tools) now too: torch's extension builder needs it.
    # --no-compile: pip compiles every module it installs one at a time, ~2/3 of its CPU (38 of 56 s at
    # load 8); compileall below does the same work on every core.
    .venv/bin/pip install -q --disable-pip-version-check --no-compile "torch==2.13.0" numpy ninja
    echo "$want" > "$torch_stamp"
fi
[ "${1:-}" = "--torch" ] && exit 0
stamp=.venv/.pttrace-installed
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! found torch tracer numpy; then
    echo "setup: installing pttrace and its test tools into .venv" >&2
    # editable_mode=compat: the checkout goes on sys.path through a plain .pth line. setuptools' default
    # editable install adds an import hook whose module imports pathlib and importlib.util at every
    # interpreter start in this venv: `python -c pass` took 38 ms of CPU with it, 14 ms without (load 7).
    # --no-build-isolation: the setuptools torch brought builds it, not one pip installs into a build
    # environment of its own first (3.6 s of CPU instead of 6.6 s, load 8).
    .venv/bin/pip install -q --disable-pip-version-check --no-compile --no-build-isolation -e ".[test]" \
        --config-settings editable_mode=compat
    # The installed modules' bytecode, as pip would have written it (with PYTHONDONTWRITEBYTECODE set, a
    # module without it is compiled again at every import: torch's at every target's start). Left out, as
    # never imported: the packages' own tests, torch's internal test helpers (its one module of Python
    # 3.12's syntax among them, which pip leaves out too), pip itself, and mypy's sources (it runs compiled);
    # 36 MB of the 122 MB of sources, ~30% of this step's 36 s of CPU.
    .venv/bin/python -m compileall -q -j 0 \
        -x '/tests/|/torch/testing/_internal/|/site-packages/(pip|mypy|mypyc)/' \
        "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
    echo "$want" > "$stamp"
fi
# The checkout's bytecode, written now as pip writes it for an installed package: an editable install has none
# until a first import writes it, and never where PYTHONDONTWRITEBYTECODE is set (as in this project's CI and
# benchmark machines), where every pttrace run and every gdb agent import compiled ~100 modules again: 0.25 s of
# pttrace's CPU and 0.08 s of gdb's a run (load 12). Up-to-date files are skipped; a module edited later is
# compiled in memory until this runs again (Python checks each file's time and size against its .pyc).
.venv/bin/python -m compileall -q -j 0 tracer
