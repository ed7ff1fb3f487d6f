"""The reader's line tables agree with each interpreter's own co_lines(), 3.10 to 3.13.

Each pyenv interpreter dumps its code objects' raw co_linetable and co_lines() for a few stdlib
modules; our decoder must give the same line for every instruction.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import pythons
from tests.support import run_child
from tracer.pyruntime.lines import line_at, ranges_for


_DUMP = r"""
import argparse, inspect, json, sys, types, asyncio.base_events as be
def walk(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c)
out = []
for m in (argparse, inspect, be):
    for code in walk(compile(inspect.getsource(m), m.__file__, "exec")):
        out.append([code.co_linetable.hex(), code.co_firstlineno, list(code.co_lines())])
json.dump(out, sys.stdout)
"""


@pytest.mark.parametrize("minor", pythons.MINORS)
def test_every_instruction_line_matches_co_lines(minor):
    python = pythons.pyenv_python(minor)
    if python is None:
        pytest.skip(f"no pyenv 3.{minor} under {pythons.PYENV}")
    dumped = json.loads(run_child([str(python), "-c", _DUMP], capture_output=True, text=True,
                                  check=True, timeout=120).stdout)
    checked = 0
    for table, first, lines in dumped:
        ranges = ranges_for(minor, bytes.fromhex(table), first)
        for start, end, line in lines:
            for byte in range(start, end, 2):
                assert line_at(ranges, byte // 2) == line, (minor, first, byte)
                checked += 1
    assert checked > 10000


def test_310_table_cut_short_keeps_whole_entries():
    # (6 bytes on line +1), (4 bytes, no line), (2 bytes on line +2), then half an entry
    table = bytes([6, 1, 4, 0x80, 2, 2, 9])
    assert ranges_for(10, table, 10) == [(0, 3, 11), (3, 5, None), (5, 6, 13)]
