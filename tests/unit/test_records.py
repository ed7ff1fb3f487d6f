"""tracer/records.py: the one encoder and decoder of session records, shared by the agent and the loader."""
from __future__ import annotations

import io
import json

import pytest

from tracer import records
from tracer.records import CachedFrame


def _frames():
    native = CachedFrame({"kind": "native", "function": "at::add(at::Tensor const&)", "short": "at::add",
                          "library": "/usr/lib/libtorch_cpu.so", "address": 0x7F0012345678, "file": None,
                          "line": None, "layer": "dispatcher", "dispatch_key": None, "offset": 0x1234})
    py = CachedFrame({"kind": "python", "function": "main", "short": "main", "library": None, "address": None,
                      "file": "/tmp/é.py", "line": 3, "layer": "python", "dispatch_key": None, "source": "x = 1"})
    return [py, native, dict(native, keyset=0x8000)]


def test_encode_hit_is_encode_byte_for_byte_and_reuses_cached_text():
    rec = records.hit(7, "at::add", {"id": 1, "name": "python", "lwp": 42}, 1.5, _frames(), truncated=True,
                      signal="SIGSEGV")
    assert records.encode_hit(rec) == records.encode(rec)
    assert rec["frames"][0].text == json.dumps(rec["frames"][0], ensure_ascii=False, separators=(",", ":"))
    assert records.encode_hit(rec) == records.encode(rec)  # the second time from the cached text


def test_a_name_that_is_not_utf8_is_kept_as_an_escape_and_reads_back():
    bad = "f\udcff"  # a byte that was not UTF-8, surrogate-escaped
    rec = records.hit(1, None, {}, 0.0, [CachedFrame({"kind": "native", "function": bad})])
    data = records.encode_hit(rec)
    assert data == records.encode(rec) and data.isascii()
    assert records.decode(data)["frames"][0]["function"] == bad


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
    fh.write(whole + second[:10])
    assert [records.decode(x)["message"] for x in tail.lines(fh)] == ["one"]
    assert tail.lines(fh) == []
    fh.seek(0, io.SEEK_END)
    fh.write(second[10:])
    assert [records.decode(x)["message"] for x in tail.lines(fh)] == ["two"]


def test_hits_and_end_applies_fill_records_to_the_frames_they_name():
    frames = [dict(f) for f in _frames()]
    frames[1]["function"] = frames[2]["function"] = None
    lib = frames[1]["library"]
    data = records.encode(records.hit(1, "b", {}, 0.0, frames))
    data += records.encode({"type": "fill", "frames": [[lib, 0x1234, True, {"function": "caller()", "layer": "kernel"}],
                                                       [lib, 0x1234, False, {"function": "inner()"}]]})
    data += records.encode({"type": "end", "status": "completed"})
    hits, end = records.hits_and_end(io.BytesIO(data))
    assert end["status"] == "completed"
    assert [f["function"] for f in hits[0]["frames"]] == ["main", "caller()", "inner()"]
    assert hits[0]["frames"][1]["layer"] == "kernel"


def test_fill_key_only_for_native_frames_missing_a_name_or_place():
    assert records.fill_key({"kind": "native", "library": "l", "offset": 5, "function": None}, True) == ("l", 5, False)
    assert records.fill_key({"kind": "native", "library": "l", "offset": 5, "function": "f", "file": "a.c"}, True) is None
    assert records.fill_key({"kind": "python", "offset": 5}, False) is None
