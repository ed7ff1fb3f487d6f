#!/usr/bin/env bash
# Regenerates the example sessions in sessions/ (and their markdown) with the real tool, from
# scripts/hello-world.py: the import-time initModule hit, torch.tensor's binding, and the sigmoid
# forward and backward kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PT=.venv/bin/pttrace
out=sessions
rm -f "$out"/example-*.jsonl "$out"/example-*.md

record() {  # record NAME BREAKPOINT...
    local name="$1"; shift
    local tmp; tmp="$(mktemp -d)"
    local args=()
    for b in "$@"; do args+=(--break "$b"); done
    "$PT" run --batch --quiet --session-dir "$tmp" "${args[@]}" scripts/hello-world.py >/dev/null
    mv "$tmp"/*.jsonl "$out/example-$name.jsonl"
    rmdir "$tmp"
    "$PT" export "$out/example-$name.jsonl" -o "$out/example-$name.md"
    echo "sessions/example-$name.jsonl -> sessions/example-$name.md"
}

record initModule initModule
record tensor THPVariable_tensor
record sigmoid-forward wrapper_CPU_sigmoid
record sigmoid-backward wrapper_CPU_sigmoid_backward
