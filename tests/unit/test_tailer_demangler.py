"""The session tailer loads the demangler while the target starts, not at the first call path it names
(cxxfilt's import asks ldconfig for two libraries: 0.06-0.15 s that a --max-hits 1 run's end waited for)."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT
from tests.support import allowance

PROBE = """
import sys, time
from pathlib import Path
from tracer.recorder.tailer import SessionTailer
from tracer.session import storage
from tracer.session.model import SessionInfo

path = Path(sys.argv[1])
writer = storage.SessionWriter(path)
writer.header(SessionInfo(id="s1", mode="run", argv=["python"], started="2026-11-27T05:00:00+00:00"))
assert "cxxfilt" not in sys.modules, "imported before the tailer started"
tailer = SessionTailer(path, writer, lambda e: None, lambda m: None)
tailer.start(emit=False)
deadline = time.monotonic() + float(sys.argv[2])
while "cxxfilt" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
tailer.stop()
from tracer.symbols.demangle import demangle
print("cxxfilt" in sys.modules, demangle("_ZN2at6native11sigmoid_outERKNS_6TensorERS1_"))
"""


def test_the_tailer_loads_the_demangler_before_any_hit(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "s.jsonl"), str(allowance(20))], cwd=ROOT,
                         capture_output=True, text=True, timeout=allowance(60))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(maxsplit=1) == ["True", "at::native::sigmoid_out(at::Tensor const&, at::Tensor&)\n"]
