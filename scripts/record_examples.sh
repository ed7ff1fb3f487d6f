#!/usr/bin/env bash
# Regenerates the example sessions in sessions/ (and their markdown) with the real tool, from
# scripts/hello-world.py: the import-time initModule hit, torch.tensor's binding, and the sigmoid
# forward and backward kernels; and from scripts/call_debug_ext.py: the kernel of the -g -O0 operator
# library (scripts/build_debug_ext.py), whose frames carry DWARF file:line into torch's headers; and from
# scripts/torchscript.py: the kernels TorchScript's interpreter reaches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PT=.venv/bin/pttrace
out=sessions
rm -f "$out"/example-*.jsonl "$out"/example-*.md

record() {  # record NAME SCRIPT BREAKPOINT...
    local name="$1" script="$2"; shift 2
    local tmp; tmp="$(mktemp -d)"
    local args=()
    for b in "$@"; do args+=(--break "$b"); done
    "$PT" run --batch --quiet --session-dir "$tmp" "${args[@]}" "$script" >/dev/null
    mv "$tmp"/*.jsonl "$out/example-$name.jsonl"
    rmdir "$tmp"
    "$PT" export "$out/example-$name.jsonl" -o "$out/example-$name.md" --force
    echo "sessions/example-$name.jsonl -> sessions/example-$name.md"
}

record initModule scripts/hello-world.py initModule
record tensor scripts/hello-world.py THPVariable_tensor
record sigmoid-forward scripts/hello-world.py wrapper_CPU_sigmoid
record sigmoid-backward scripts/hello-world.py wrapper_CPU_sigmoid_backward
# TorchScript's interpreter: the scripted lines and graph at each kernel (its layout is established once
# per torch build, ~2 min of g++ the first time a run passes through the interpreter: record it twice then).
record torchscript scripts/torchscript.py wrapper_CPU_sigmoid at::native::relu
.venv/bin/python scripts/build_debug_ext.py >/dev/null  # built once, then cached
record debug-ext scripts/call_debug_ext.py pttrace_demo::scale_add_cpu
