"""The README's first command, as a new user runs it: ``bash scripts/demo.sh`` records hello-world.py and
writes notes that open with the sigmoid call hop by hop, forward and backward, with what each hop carried,
then the paths, the import-time hits folded into one section, and how to get the C++ source."""
from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.support import run_child

pytestmark = pytest.mark.gdb


def test_the_demo_writes_notes_that_lead_with_the_sigmoid_call_and_what_it_carried():
    proc = run_child(["bash", "scripts/demo.sh"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                     check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "NumPy" not in proc.stdout + proc.stderr  # no warning pttrace's own set-up causes
    assert "source .venv/bin/activate" in proc.stdout
    md = (ROOT / "sessions" / "hello-world.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## Breakpoints", "## Operator calls", "## Call paths"], headings
    assert headings[-2:] == ["## At import time", "## Getting the C++ source"], headings
    calls = md[md.index("## Operator calls"):md.index("## Call paths")]
    forward = calls[calls.index("`y = model(x)`"):calls.index("`loss.backward()`")]
    backward = calls[calls.index("`loss.backward()`"):]
    # Forward: the entry point carries the Linear layer's output, the redispatch shows Autograd handled
    assert re.search(r"\| `at::_ops::sigmoid::call` \|.*self: float32\\\[1\\\] strides \(1\) cpu requires\\_grad", forward)
    assert re.search(r"\| `at::_ops::sigmoid::redispatch` \|.*\| handled AutogradCPU \|", forward)
    assert "`at::wrapper_CPU_sigmoid` [CPU]" in forward
    # Backward: sigmoid_backward gets the incoming gradient and sigmoid's own output (grad_fn SigmoidBackward0)
    assert re.search(r"\| `at::_ops::sigmoid_backward::call` \|.*grad\\_output: float32\\\[1\\\].*"
                     r"output: float32\\\[1\\\].*grad\\_fn SigmoidBackward0", backward)
    imports = md[md.index("## At import time"):md.index("## Getting the C++ source")]
    assert "`initModule`" in imports and imports.count("<details>") >= 7
    # No path of the recording machine is needed to read the paths: libraries and files are relative
    paths = md[md.index("## Call paths"):]
    assert str(ROOT) + "/.venv" not in paths
