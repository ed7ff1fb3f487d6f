#!/usr/bin/env bash
# The main job on the bundled example: record the sigmoid forward path of hello-world.py and write
# its markdown. Installs what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/pttrace run --batch scripts/hello-world.py --break initModule --break wrapper_CPU_sigmoid
.venv/bin/pttrace export last -o sessions/hello-world.md --force
echo "markdown written to sessions/hello-world.md"
