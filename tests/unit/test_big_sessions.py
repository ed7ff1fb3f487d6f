"""A big session is read and exported in memory that does not grow with its hits (issue 16).

The sessions are written by the agent's own ``Interner`` (``export_support.write_hot_session``); the
times are in ``bench/bench_million.py``, not here.
"""
from __future__ import annotations

import io
import json
import tracemalloc

from tests.unit.export_support import json_hits, write_hot_session
from tracer.session import storage
from tracer.cli import main
from tracer.export import folded, markdown
from tracer.export import json as json_export
from tracer.export import paths as P
from tracer.session.hit_table import HitTable


class _Sink(io.TextIOBase):
    """A file that counts what is written to it and keeps none of it."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


def _peak_of_export(path, fmt: str) -> int:
    tracemalloc.start()
    try:
        session = storage.load(path)
        sink = _Sink()
        if fmt == "json":
            json_export.write(session, sink)
        else:
            sink.write({"markdown": markdown.render, "folded": folded.render}[fmt](session))
        assert sink.chars > 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_memory_does_not_grow_with_the_hits(tmp_path):
    tiny, small, big = tmp_path / "tiny.jsonl", tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    write_hot_session(tiny, 100)  # the same call paths, so the same source files
    write_hot_session(small, 10_000)  # a few of the loader's chunks already
    write_hot_session(big, 50_000)
    for fmt in ("json", "markdown", "folded"):
        # the source files markdown quotes are read once, and kept: a first export reads them (of a few
        # hits: the 10,000 hits exported once more under tracemalloc were a third of this test's CPU)
        _peak_of_export(tiny, fmt)
        grew = _peak_of_export(big, fmt) - _peak_of_export(small, fmt)
        # 40,000 more hits: ~20 bytes each in the hit table, nothing per hit in the export.
        assert grew < 2_500_000, (fmt, grew)


def test_a_big_session_loads_as_a_table_of_its_few_sites(tmp_path):
    p = tmp_path / "s.jsonl"
    write_hot_session(p, 30_000, paths=3, threads=2)
    s = storage.load(p)
    assert isinstance(s.hits, HitTable) and len(s.hits) == 30_000 and len(s.hits.sites) == 6
    assert [h.seq for h in s.hits[:3]] == [1, 2, 3] and s.hits[-1].seq == 30_000
    assert s.hits[0].frames is s.hits[3].frames  # one list of frames a stack
    assert sum(bp.hits for bp in s.breakpoints) == 30_000
    paths = P.group(s.hits)
    assert [p.count for p in paths] == [10_000] * 3
    assert [h.seq for h in paths[0].hits[:3]] == [1, 4, 7] and paths[0].first.seq == 1
    assert paths[0].threads == ["2 (worker-1)", "1 (python)"]
    assert P.group(list(s.hits))[0].threads == paths[0].threads  # the same as hit by hit


def test_export_and_show_of_a_big_session_count_every_hit(tmp_path, capsys):
    p = tmp_path / "s.jsonl"
    write_hot_session(p, 30_000, paths=3, threads=2)
    assert main(["export", str(p), "--format", "folded"]) == 0
    assert sorted(int(line.rsplit(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()) == [10_000] * 3
    assert main(["export", str(p), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [h["seq"] for h in doc["hits"]] == list(range(1, 30_001)) and len(doc["stacks"]) == 3
    assert json_hits(doc)[5]["frames"][-1]["function"] == storage.load(p).hits[5].frames[-1].function
    assert main(["export", str(p)]) == 0
    assert "30,000 hits took 3 distinct call paths" in " ".join(capsys.readouterr().out.split())
    assert main(["show", str(p)]) == 0
    assert "30,000 hits in 3 distinct call paths" in " ".join(capsys.readouterr().out.split())


def test_hits_out_of_order_and_with_their_own_extras_read_back_in_order(tmp_path):
    """A hit with a signal or a launcher is its own site; hits written out of order are sorted."""
    from tracer.session import records

    p = tmp_path / "s.jsonl"
    write_hot_session(p, 0, end=False)
    frames = [records.CachedFrame({"kind": "native", "function": "f()", "library": "/l.so", "address": 16})]
    interner = records.Interner()
    thread = {"id": 1, "name": "python", "lwp": 7}
    with open(p, "ab") as fh:
        for seq in (1, 2, 4, 3, 5):
            fh.write(interner.encode_hit(seq, "f", thread, float(seq), frames,
                                         signal="SIGSEGV" if seq == 4 else None))
    s = storage.load(p)
    assert [h.seq for h in s.hits] == [1, 2, 3, 4, 5]
    assert [h.signal for h in s.hits] == [None, None, None, "SIGSEGV", None]
    assert [h.time for h in s.hits] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(s.hits.sites) == 2 and P.group(s.hits)[0].signals == ["SIGSEGV"]
