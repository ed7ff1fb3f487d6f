"""The target's stdin through its terminal: any bytes arrive unchanged, then end-of-file, as from a
pipe; checked on a real pseudo-terminal with a real Python reading it."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import tty
import zlib

from tests.support import allowance
from tracer.recorder.target_input import EOF, LNEXT, InputForwarder, encode, end_of_input

READER = ("import sys, zlib; d = sys.stdin.buffer.read(); sys.stdout.write(f'LEN {len(d)} CRC {zlib.crc32(d)}\\n'); "
          "sys.stdout.write(f'AGAIN {sys.stdin.buffer.read()!r}\\n')")


def test_special_bytes_go_behind_lnext_and_long_lines_are_pushed():
    special = {4, 0x7F, 0}
    assert encode(b"a\x04b\x7f\x00\n", special, 0) == (b"a" + LNEXT + b"\x04b" + LNEXT + b"\x7f" + LNEXT + b"\x00\n", 0)
    out, pending = encode(b"x" * 2050, special, 0)
    assert out == b"x" * 2048 + EOF + b"xx" and pending == 2
    assert end_of_input(2).startswith(EOF + EOF) and end_of_input(0).startswith(EOF)


def run_reader(data: bytes) -> str:
    master, slave = os.openpty()
    tty.setraw(slave)
    source, sink = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", READER], stdin=slave, stdout=slave, stderr=slave)
    forwarder = InputForwarder(source, master, slave)
    os.write(sink, data)
    os.close(sink)
    out = b""
    deadline = time.monotonic() + allowance(30)
    while b"AGAIN" not in out and time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            out += os.read(master, 65536)
    proc.wait(timeout=allowance(30))
    forwarder.close()
    for fd in (master, slave, source):
        os.close(fd)
    return out.decode(errors="replace")


def test_every_byte_value_and_a_long_line_arrive_unchanged_then_end_of_file():
    data = bytes(range(256)) * 20 + b"y" * 9000 + b"\nlast line without newline"
    out = run_reader(data)
    assert f"LEN {len(data)} CRC {zlib.crc32(data)}" in out
    assert "AGAIN b''" in out  # read again after the end: end-of-file again, as a pipe says


def test_empty_input_is_end_of_file_at_once():
    assert "LEN 0 " in run_reader(b"")
