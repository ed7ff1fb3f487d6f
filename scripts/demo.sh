#!/usr/bin/env bash
# The main job on the bundled example: record hello-world.py's sigmoid, forward and backward, and the
# import-time initModule hits, and write the markdown. Installs what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The breakpoints' order is the notes' order: what the script computes first, what importing torch does last.
.venv/bin/pttrace run --batch scripts/hello-world.py \
    --break wrapper_CPU_sigmoid --break wrapper_CPU_sigmoid_backward --break initModule
.venv/bin/pttrace export last -o sessions/hello-world.md --force
echo "markdown written to sessions/hello-world.md"
echo "pttrace is installed in .venv: \`source .venv/bin/activate\` puts it on PATH (then: pttrace --help)"
