"""What the recorder hands the agent for TorchScript (tracer/recorder/torchscript.py): the cached layout of this
torch build, or, while a probe establishes it, the file it will write and why nothing is read until then;
never a second probe while one runs (its lock names a live process)."""
from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from tracer.recorder.torchscript import NOT_READY, agent_config
from tracer.scripted import interp_layout as IL

LIB = Path(sysconfig.get_paths()["purelib"]) / "torch" / "lib" / "libtorch_cpu.so"
pytestmark = pytest.mark.skipif(not LIB.exists(), reason="no torch wheel in this interpreter")


def test_without_libtorch_cpu_it_says_why(tmp_path):
    assert agent_config(["/x/libc10.so"], tmp_path) == {"why": "libtorch_cpu.so is not among torch's libraries"}


def test_a_probe_under_way_is_waited_for_not_started_again(tmp_path):
    path = IL.cache_path(str(LIB), tmp_path)
    assert path is not None
    path.parent.mkdir(parents=True)
    lock = path.with_suffix(".lock")
    lock.write_text(str(os.getpid()))  # a live process holds it: another pttrace's probe
    got = agent_config([str(LIB)], tmp_path)
    assert got == {"file": str(path), "why": NOT_READY}
    assert lock.read_text() == str(os.getpid()) and not path.exists()  # nothing started, nothing written


def test_a_cached_layout_is_handed_over_whole(tmp_path):
    path = IL.cache_path(str(LIB), tmp_path)
    path.parent.mkdir(parents=True)
    layout = IL.InterpreterLayout(tls_modid_slot=8, tls_offset=16, offsets={"frame_pc": 16}, run_ranges=[[1, 2]])
    path.write_text(json.dumps(IL.asdict(layout)))
    assert agent_config([str(LIB)], tmp_path) == {"layout": IL.asdict(layout)}
