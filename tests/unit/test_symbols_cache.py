"""The on-disk index cache: where it lives, and that nothing stale or damaged is ever believed."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer.settings import cache_dir
from tracer.symbols import cache
from tracer.symbols.cache import FileKey


@pytest.fixture
def xdg(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


KEY = FileKey("/lib/libx.so", 1234, 99, "ab12cd")


def test_cache_lives_under_xdg_cache_home(xdg):
    assert cache_dir() == xdg / "pttrace"
    cache.write(KEY, "names", {"a": 1})
    assert list((xdg / "pttrace" / "index").iterdir())


def test_cache_defaults_to_home_dot_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "pttrace"


def test_round_trip(xdg):
    payload = {"x": (b"\x00\x01", [1, 2, 3], "s")}
    cache.write(KEY, "names", payload)
    assert cache.read(KEY, "names") == payload


def test_build_id_key_is_shared_by_copies_but_size_still_counts(xdg):
    cache.write(KEY, "names", 1)
    assert cache.read(FileKey("/elsewhere/libx.so", 1234, 5, "ab12cd"), "names") == 1
    assert cache.read(FileKey("/lib/libx.so", 1235, 99, "ab12cd"), "names") is None


def test_without_build_id_the_key_is_path_size_and_mtime(xdg):
    key = FileKey("/lib/liby.so", 10, 20, None)
    cache.write(key, "memo", {"q": []})
    assert cache.read(key, "memo") == {"q": []}
    assert cache.read(FileKey("/lib/liby.so", 10, 21, None), "memo") is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage", "other-kind"])
def test_damaged_entries_read_as_absent(xdg, damage):
    cache.write(KEY, "names", {"a": list(range(100))})
    path = cache.entry_path(KEY, "names")
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-5] ^= 0xFF
    elif damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "empty":
        raw = bytearray()
    elif damage == "garbage":
        raw = bytearray(b"not a cache file at all" * 10)
    elif damage == "other-kind":
        cache.write(KEY, "addrs", {"a": 1})
        raw = bytearray(cache.entry_path(KEY, "addrs").read_bytes())
    path.write_bytes(bytes(raw))
    assert cache.read(KEY, "names") is None


def test_an_older_format_reads_as_absent(xdg, monkeypatch):
    cache.write(KEY, "names", 1)
    monkeypatch.setattr(cache, "FORMAT", cache.FORMAT + 1)
    assert cache.read(KEY, "names") is None


def test_unwritable_cache_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where a directory should be
    cache.write(KEY, "names", 1)
    assert cache.read(KEY, "names") is None


def test_kept_where_answers_follow_the_index_format():
    """A kept `where` answer (symbols/answers.py) is only as good as the matching rules it came from."""
    from tracer.symbols import answers

    assert answers.INDEX_FORMAT == cache.FORMAT


def test_a_torn_or_foreign_kept_answer_reads_as_none(tmp_path, monkeypatch):
    from tracer.symbols import answers

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"x")
    monkeypatch.setattr(answers, "watched_files", lambda libraries: list(libraries))
    answers.remember("f", [str(lib)], ("kept",))
    assert answers.recall("f", [str(lib)]) == ("kept",)
    assert answers.recall("g", [str(lib)]) is None  # another name (same slot or not)
    kept = next((tmp_path / "pttrace" / "where").iterdir())
    raw = kept.read_bytes()
    kept.write_bytes(raw[:-3])
    assert answers.recall("f", [str(lib)]) is None
    kept.write_bytes(raw)
    lib.write_bytes(b"yy")  # the library changed
    assert answers.recall("f", [str(lib)]) is None
