"""Our co_linetable decoder agrees with CPython's own co_lines() on every instruction of real code."""
from __future__ import annotations

import argparse
import inspect
import json.decoder
import sys
import types

import pytest

from tracer.pyruntime.linetable import line_at, line_ranges

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the 3.11 location table format")


def all_code(module):
    def walk(code):
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from walk(const)

    source = inspect.getsource(module)
    yield from walk(compile(source, module.__file__, "exec"))


@pytest.mark.parametrize("module", [argparse, json.decoder, inspect])
def test_every_instruction_line_matches_co_lines(module):
    checked = 0
    for code in all_code(module):
        ranges = line_ranges(code.co_linetable, code.co_firstlineno)
        for start, end, line in code.co_lines():
            for byte in range(start, end, 2):
                assert line_at(ranges, byte // 2) == line, (code.co_name, byte)
                checked += 1
    assert checked > 1000


@pytest.mark.parametrize("module", [argparse, inspect])
def test_a_table_cut_anywhere_gives_the_whole_entries_before_the_cut(module):
    """A table read from a process can end short (a torn read): what is decoded is a prefix of what the
    whole table gives, growing with the cut, never an entry made up from half of one."""
    code = compile(inspect.getsource(module), module.__file__, "exec")
    table = code.co_linetable
    full = line_ranges(table, code.co_firstlineno)
    decoded = [line_ranges(table[:cut], code.co_firstlineno) for cut in range(len(table) + 1)]
    for cut, ranges in enumerate(decoded):
        assert ranges == full[:len(ranges)], cut
    assert [len(r) for r in decoded] == sorted(len(r) for r in decoded)
    assert decoded[0] == [] and decoded[-1] == full and len(full) > 100
