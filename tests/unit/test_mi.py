"""The MI transport: results are matched to their command by token, async records go to the queue.

The peer is a real process (a tiny fake gdb written in Python) answering out of order on purpose.
"""
from __future__ import annotations

import sys
import textwrap

import pytest

from tracer.gdb.mi import GdbCommandError, MiConnection, mi_quote
from tracer.gdb.spawn import start_process

FAKE_GDB = textwrap.dedent(r'''
    import sys
    print('=thread-group-added,id="i1"', flush=True)
    print("(gdb)", flush=True)
    for line in sys.stdin:
        token = "".join(ch for ch in line if ch.isdigit() and line.index(ch) < 4)
        cmd = line[len(token):].strip()
        if cmd == "-gdb-exit":
            print(token + "^exit", flush=True); break
        if cmd.startswith("-slow"):
            # an async record and stray console output arrive before the result
            print('*stopped,reason="breakpoint-hit",bkptno="1"', flush=True)
            print('~"console text\\n"', flush=True)
            print(token + '^done,value="slow"', flush=True)
        elif cmd.startswith("-bad"):
            print(token + '^error,msg="No symbol \\"x\\" in current context."', flush=True)
        else:
            print(token + '^done,value="' + cmd + '"', flush=True)
        print("(gdb)", flush=True)
''')


@pytest.fixture
def conn(tmp_path):
    script = tmp_path / "fakegdb.py"
    script.write_text(FAKE_GDB)
    c = MiConnection(start_process([sys.executable, str(script)], None, None))
    yield c
    c.close()


def test_result_belongs_to_its_command(conn):
    res = conn.command("-slow")
    assert res.message == "done" and res.payload == {"value": "slow"}
    assert res.console == ["console text\n"]
    assert conn.command("-echo").payload == {"value": "-echo"}
    events = []
    while (ev := conn.next_event(timeout=0.5)) is not None:
        events.append(ev)
    assert any(e.kind == "notify" and e.message == "stopped" and e.payload["reason"] == "breakpoint-hit"
               for e in events)
    assert any(e.kind == "notify" and e.message == "thread-group-added" for e in events)


def test_a_waiting_stop_is_seen_without_being_taken(conn):
    # The recorder skips a continue while a stop waits (two exits reported before one continue let a fork
    # child run past its waiting hit): the peek must see the stop and leave it to be read and acted on.
    assert not conn.stop_waiting()
    conn.command("-slow")  # its *stopped is queued before its result
    assert conn.stop_waiting() and conn.stop_waiting()
    taken = []
    while (ev := conn.next_event(timeout=0.5)) is not None:
        taken.append(ev)
    assert [e.payload["reason"] for e in taken if e.kind == "notify" and e.message == "stopped"] == ["breakpoint-hit"]
    assert not conn.stop_waiting()


def test_error_result_raises_with_gdbs_message(conn):
    with pytest.raises(GdbCommandError, match='No symbol "x"'):
        conn.command("-bad")
    assert conn.command("-bad", check=False).error.startswith("No symbol")


def test_close_leaves_no_process(conn):
    conn.close()
    assert conn.proc.poll() is not None


@pytest.mark.parametrize("raw,quoted", [
    ("initModule", '"initModule"'),
    ('a"b', '"a\\"b"'),
    ("c:\\x", '"c:\\\\x"'),
    ("at::_ops::add_Tensor::call", '"at::_ops::add_Tensor::call"'),
])
def test_mi_quote(raw, quoted):
    assert mi_quote(raw) == quoted


def test_mi_quote_refuses_newlines():
    with pytest.raises(GdbCommandError):
        mi_quote("a\nshell rm -rf /")


def test_a_pipe_closed_under_the_reader_ends_its_lines_instead_of_raising():
    import os

    from tracer.gdb.mi import stream_lines

    read_end, write_end = os.pipe()
    os.write(write_end, b"^done\n")
    os.close(write_end)
    stream = os.fdopen(read_end, "rb")
    lines = stream_lines(stream)
    assert next(lines) == b"^done\n"
    stream.close()  # as closing gdb does while the reader thread iterates
    assert list(lines) == []
