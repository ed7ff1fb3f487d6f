"""tracer/session/records.py: the one encoder and decoder of session records, shared by the agent and the loader."""
from __future__ import annotations

import io

import pytest

from tracer.session import records
from tracer.session.records import CachedFrame


def _frames():
    native = CachedFrame({"kind": "native", "function": "at::add(at::Tensor const&)", "short": "at::add",
                          "library": "/usr/lib/libtorch_cpu.so", "address": 0x7F0012345678, "file": None,
                          "line": None, "layer": "dispatcher", "dispatch_key": None, "offset": 0x1234})
    py = CachedFrame({"kind": "python", "function": "main", "short": "main", "library": None, "address": None,
                      "file": "/tmp/é.py", "line": 3, "layer": "python", "dispatch_key": None, "source": "x = 1"})
    return [py, native, dict(native, keyset=0x8000)]


THREAD = {"id": 1, "name": "python", "lwp": 42}


def _hits(data: bytes) -> list[dict]:
    """The hit records of ``data`` as the reader gives them back (frames as written, one list a stack)."""
    reader = records.Reader()
    decoded = (reader.feed(rec) for _, rec in records.read(io.BytesIO(data)))
    return [rec for rec in decoded if rec is not None and rec["type"] == records.HIT]


def _interned(*hits) -> bytes:
    interner = records.Interner()
    return b"".join(interner.encode_hit(*h) for h in hits)


def test_an_interned_hit_reads_back_as_written_and_a_repeat_costs_one_short_line():
    frames = _frames()
    data = _interned((1, "at::add", THREAD, 1.5, frames), (2, "at::add", THREAD, 2.25, frames, False, "SIGSEGV"),
                     (3, "at::add", THREAD, 3.0, frames[:2], True))
    lines = data.splitlines()
    # GIVEN three hits, the second on the first's stack: frames, stack and site once, then one line
    assert [records.decode(x)["type"] for x in lines] == ["frame"] * 3 + ["stack", "site", "hit", "hit", "stack",
                                                                           "site", "hit"]
    assert len(lines[6]) < 100
    hits = _hits(data)
    assert [(h["seq"], h["time"], h["breakpoint"], h["thread"], h["truncated"], h["signal"]) for h in hits] == [
        (1, 1.5, "at::add", THREAD, False, None), (2, 2.25, "at::add", THREAD, False, "SIGSEGV"),
        (3, 3.0, "at::add", THREAD, True, None)]
    assert hits[0]["frames"] == [dict(f) for f in frames] and hits[2]["frames"] == [dict(f) for f in frames[:2]]
    assert hits[0]["frames"] is hits[1]["frames"]  # one list per stack


def test_a_name_that_is_not_utf8_is_kept_as_an_escape_and_reads_back():
    bad = "f\udcff"  # a byte that was not UTF-8, surrogate-escaped
    data = _interned((1, None, {}, 0.0, [CachedFrame({"kind": "native", "function": bad})]))
    assert data.isascii()
    # Read back spelled out: a lone surrogate would make printing it fail (escape.visible).
    assert _hits(data)[0]["frames"][0]["function"] == "f\\udcff"
    assert records.decode(records.encode({"type": "warning", "message": bad}))["message"] == "f\\udcff"


def test_a_hit_not_written_takes_back_what_it_defined():
    interner = records.Interner()
    frames = _frames()
    interner.encode_hit(1, "b", THREAD, 0.0, frames)
    interner.rollback()  # the write failed: disk full
    again = interner.encode_hit(2, "b", THREAD, 0.0, frames)
    assert [records.decode(x)["type"] for x in again.splitlines()][:3] == ["frame"] * 3


def test_a_hit_of_a_site_the_file_does_not_define_is_a_bad_record():
    reader = records.Reader()
    with pytest.raises(records.BadRecord, match="undefined site 4"):
        reader.feed({"type": "hit", "seq": 1, "time": 0.0, "site": 4})
    with pytest.raises(records.BadRecord, match="undefined frame 9"):
        reader.feed({"type": "stack", "id": 1, "frames": [9]})


@pytest.mark.parametrize("line, why", [(b"{not json", "not valid JSON"), (b"[1, 2]", "not a session record"),
                                       (b'{"seq": 1}', "not a session record")])
def test_decode_names_what_a_bad_line_is(line, why):
    with pytest.raises(records.BadRecord) as exc:
        records.decode(line)
    assert exc.value.why == why


def test_read_yields_records_and_bad_lines_with_their_numbers():
    fh = io.BytesIO(records.encode(records.warning("a")) + b"\n" + b"garbage\n" + records.encode(records.warning("b")))
    out = list(records.read(fh))
    assert [n for n, _ in out] == [1, 3, 4]
    assert out[0][1] == {"type": "warning", "message": "a"} and isinstance(out[1][1], records.BadRecord)


def test_tail_returns_complete_lines_only_and_keeps_the_cut_one():
    fh = io.BytesIO()
    tail = records.Tail()
    whole = records.encode(records.warning("one"))
    second = records.encode(records.warning("two"))
    tail.CHUNK = 7  # lines longer than a chunk, cut anywhere
    fh.write(whole + second[:10])
    assert [records.decode(x)["message"] for x in tail.lines(fh)] == ["one"]
    assert list(tail.lines(fh)) == []
    fh.seek(0, io.SEEK_END)
    fh.write(second[10:])
    assert [records.decode(x)["message"] for x in tail.lines(fh)] == ["two"]


def test_a_workers_launcher_stack_is_interned_and_read_back():
    frames = _frames()
    launch = {"thread": {"id": 1, "name": "python", "lwp": 7}, "frames": frames[:2]}
    data = _interned((1, "b", THREAD, 0.5, frames[1:], False, None, launch),
                     (2, "b", THREAD, 0.7, frames[1:], False, None, {"thread": None, "why": "not found"}))
    hits = _hits(data)
    assert hits[0]["launched_by"] == {"thread": launch["thread"], "frames": [dict(f) for f in frames[:2]]}
    assert hits[1]["launched_by"] == {"thread": None, "why": "not found"}
