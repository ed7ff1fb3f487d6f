#!/usr/bin/env bash
# The main job on the bundled example: record hello-world.py's sigmoid call, forward and backward, hop by
# hop with the arguments each hop carried, and the import-time initModule hits, and write the markdown.
# Installs what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# --op sigmoid breaks on every hop of aten::sigmoid (binding, dispatcher, autograd, kernels; its backward
# too), so the notes open with each hop and what it carried; the import-time initModule hits come last.
.venv/bin/pttrace run --batch scripts/hello-world.py --op sigmoid --break initModule
.venv/bin/pttrace export last -o sessions/hello-world.md --force
echo "markdown written to sessions/hello-world.md"
echo "pttrace is installed in .venv: \`source .venv/bin/activate\` puts it on PATH (then: pttrace --help)"
