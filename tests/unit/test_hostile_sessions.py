"""Sessions are files people share: damaged or crafted ones give a session or one sentence, never a
traceback, and nothing in them reaches a terminal or a markdown file as a control sequence.

Everything runs through ``tracer.cli.main`` as a user runs it; a traceback there is an exception
out of ``main`` (it only turns PttraceErrors into exit codes).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil

import pytest

from tests.unit.export_support import SIGMOID, SIGMOID_ID, json_hits
from tracer.cli import main
from tracer.text.escape import visible
from tracer.session.records import Interner
from tracer.tui.sources import SessionSource

LINES = SIGMOID.read_text().splitlines()
RECORDS = [json.loads(line) for line in LINES]

# What a terminal would act on: C0 controls but tab and line feed, DEL, C1, bidi overrides. SGR colour
# sequences (ESC [ ... m) are rich's own and are removed before looking.
_SGR_RE = re.compile(r"\x1b\[[0-9;]*m")
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("PTTRACE_SESSION_DIR", raising=False)


def write(path, records_or_lines):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in records_or_lines))
    return path


def records():
    return json.loads(json.dumps(RECORDS))


def raw_controls(text: str) -> list[str]:
    return _CONTROL_RE.findall(_SGR_RE.sub("", text))


# ---------------------------------------------------------------- the crashes the issue found

def test_a_schema_too_big_for_any_number_is_one_sentence(tmp_path, capsys):
    lines = list(LINES)
    lines[0] = lines[0].replace('"schema":1', '"schema":1e400')
    p = write(tmp_path / "s.jsonl", lines)
    for command in (["export", str(p)], ["show", str(p)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"pttrace: {p} is not a pttrace session: line 1 is malformed header record "
                       "(the header: schema is a number, not an integer)."]
    with pytest.raises(Exception, match="schema is a number") as info:
        SessionSource.open(p)
    assert info.type.__name__ == "SessionError"


def test_a_line_of_100000_brackets_is_a_damaged_line(tmp_path, capsys):
    p = write(tmp_path / "s.jsonl", LINES[:5] + ["[" * 100_000] + LINES[5:])
    assert main(["export", str(p), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "line 6 of" in captured.err and "nested too deeply" in captured.err
    assert len(json.loads(captured.out)["hits"]) == 4


def test_a_null_frame_skips_its_hit_and_says_which(tmp_path, capsys):
    recs = records()
    hit = next(r for r in recs if r["type"] == "hit")
    hit["frames"][0] = None
    p = write(tmp_path / "s.jsonl", recs)
    assert main(["show", str(p)]) == 0
    captured = capsys.readouterr()
    assert "malformed hit record (frame 0 is null, not an object)" in captured.err
    assert "3 hits in" in captured.out  # the other three


def test_a_header_whose_session_is_a_string_hides_no_other_session(tmp_path, capsys):
    d = tmp_path / "sessions"
    d.mkdir()
    shutil.copy(SIGMOID, d / f"{SIGMOID_ID}.jsonl")
    recs = records()
    recs[0]["session"] = "oops"
    write(d / "20260101-000000-bad0.jsonl", recs)
    (d / "20260101-000000-bad1.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    (d / "20260101-000000-dir2.jsonl").mkdir()
    assert main(["sessions", "--session-dir", str(d)]) == 0
    out = capsys.readouterr().out
    good = next(line for line in out.splitlines() if SIGMOID_ID in line)
    assert "completed" in good and "THPVariable_tensor" in good
    for stem in ("bad0", "bad1", "dir2"):
        assert "unreadable" in next(line for line in out.splitlines() if stem in line)
    assert main(["export", str(d / "20260101-000000-bad0.jsonl")]) == 2
    assert "the session is a string, not an object" in capsys.readouterr().err


@pytest.mark.parametrize("field,value,why", [
    ("line", "12", "line is a string, not an integer"),
    ("address", 1.5, "address is a number, not an integer"),
    ("function", ["a"], "function is a list, not a string"),
    ("keys", [1, 2], "keys is a list, not a list of strings"),
    ("inlined", "yes", "inlined is a string, not true or false"),
])
def test_wrong_types_in_a_frame_are_named(tmp_path, capsys, field, value, why):
    recs = records()
    hit = next(r for r in recs if r["type"] == "hit")
    hit["frames"][2][field] = value
    p = write(tmp_path / "s.jsonl", recs)
    for fmt in ("markdown", "json", "folded"):
        assert main(["export", str(p), "--format", fmt]) == 0
        assert f"(frame 2: {why})" in capsys.readouterr().err


def test_records_of_other_kinds_with_wrong_types_are_skipped(tmp_path, capsys):
    recs = records()
    end = recs[-1]
    assert end["type"] == "end"
    bad = [
        {"type": "warning", "message": {"x": 1}},
        {"type": "fill", "frames": [["lib.so", "16", True, {}]]},
        {"type": "dispatch_keys", "keys": [["CPU", "1"]], "bits": []},
        {"type": "breakpoint", "spec": None},
        {"type": "hit", "seq": 9, "time": "noon", "frames": []},
        {"type": "hit", "seq": 10, "thread": [1], "frames": []},
        {"type": 7},
    ]
    p = write(tmp_path / "s.jsonl", recs[:-1] + bad + [end])
    assert main(["export", str(p), "--format", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [h["seq"] for h in doc["hits"]] == [1, 2, 3, 4]
    damaged = [w for w in doc["session"]["warnings"] if "damaged" in w]
    assert len(damaged) == len(bad)
    assert "time is a string, not a number" in " ".join(damaged)


# ---------------------------------------------------------------- terminal and markdown injection

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
TITLE = "\x1b]0;owned\x07"
INJECTIONS = [OSC52, TITLE, "\x9b31m", "\x1b[2J", "a\nforged line", "\u202eevil", "\x00nul", "\x7f"]


def hostile_session(tmp_path, name="evil.jsonl"):
    recs = records()
    recs[0]["session"]["argv"] = ["python", f"x{OSC52}.py"]
    recs[0]["session"]["warnings"] = [f"warn {TITLE}"]
    recs[0]["session"]["id"] = f"id{TITLE}"
    for r in recs:
        if r["type"] == "hit":
            r["thread"]["name"] = f"t{OSC52}"
            for i, f in enumerate(r["frames"]):
                bad = INJECTIONS[i % len(INJECTIONS)]
                for key in ("function", "short", "file", "library", "source", "dispatch_key"):
                    if f.get(key):
                        f[key] = f[key] + bad
        if r["type"] == "breakpoint":
            r["spec"] = r["spec"] + OSC52
            for loc in r["locations"]:
                loc["function"] += TITLE
    return write(tmp_path / name, recs)


def test_control_sequences_never_reach_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich writes for a terminal (its colours are filtered out)
    d = tmp_path / "sessions"
    d.mkdir()
    p = hostile_session(d)
    (d / f"name{TITLE}.jsonl").write_text(SIGMOID.read_text())
    runs = [["show", str(p)], ["show", str(p), "--all-frames"], ["diff", str(p), str(SIGMOID)],
            ["sessions", "--session-dir", str(d)], ["export", str(p)], ["export", str(p), "--format", "json"],
            ["export", str(p), "--format", "folded"], ["show", f"nope{OSC52}", "--session-dir", str(d)]]
    for argv in runs:
        code = main(argv)
        captured = capsys.readouterr()
        assert code == (2 if argv[1].startswith("nope") else 0), argv
        assert raw_controls(captured.out) == [] and raw_controls(captured.err) == [], argv
    # The names are still there, spelled out where one can read them.
    assert main(["show", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out and "\\x9b31m" in out and "\\u202eevil" in out
    assert "a\\nforged line" in out


def test_control_sequences_never_reach_a_markdown_file(tmp_path, capsys):
    p = hostile_session(tmp_path)
    out = tmp_path / "notes.md"
    assert main(["export", str(p), "-o", str(out)]) == 0
    md = out.read_text()
    assert raw_controls(md) == []
    assert "\\x1b]0;owned\\x07" in md


def test_visible_spells_out_controls_and_leaves_text_alone():
    assert visible("at::_ops::sigmoid::call(at::Tensor const&)") == "at::_ops::sigmoid::call(at::Tensor const&)"
    assert visible("déjà vu\tö 中文 🙂") == "déjà vu\tö 中文 🙂"
    assert visible("\x1b]0;t\x07\r\n\x9b\u202e\udcff") == "\\x1b]0;t\\x07\\r\\n\\x9b\\u202e\\udcff"


# ---------------------------------------------------------------- a seeded fuzz over mutated sessions

FUZZ_CASES = int(os.environ.get("PTTRACE_FUZZ_CASES", "40"))
FUZZ_SEED = int(os.environ.get("PTTRACE_FUZZ_SEED", "20261123"))
_ODD_VALUES = [None, 0, -1, 2 ** 64, 1e308, 1.5, True, "", "x" * 5000, "\x1b]0;t\x07", [], [None], {}, {"a": []},
               "[/bold]", "../../etc/passwd", "/proc/self/environ"]


def _odd(rng: random.Random):
    if rng.random() < 0.1:
        depth = rng.choice([3, 50, 5000])
        return json.loads("[" * depth + "]" * depth) if depth < 900 else None
    return rng.choice(_ODD_VALUES)


def _paths(value, prefix=()):
    """Every (path, container) inside a decoded record, to pick a place to mutate."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def interned(recs: list[dict]) -> list[dict]:
    """The same session in schema 2, written by the agent's own Interner: frame, stack and site
    records the hits refer to, so the fuzz reaches the decoding of those too."""
    interner = Interner()
    out = []
    for rec in recs:
        if rec.get("type") == "header":
            rec = dict(rec, schema=2)
        if rec.get("type") != "hit":
            out.append(rec)
            continue
        data = interner.encode_hit(rec["seq"], rec["breakpoint"], rec["thread"], rec["time"], rec["frames"],
                                   rec.get("truncated", False), rec.get("signal"))
        out.extend(json.loads(line) for line in data.decode().splitlines())
    return out


def test_the_interned_fixture_reads_back_as_the_original(tmp_path, capsys):
    """(so that the schema-2 half of the fuzz starts from a good session)"""
    p = write(tmp_path / "s2.jsonl", interned(records()))
    assert main(["export", str(p), "--format", "json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert main(["export", str(SIGMOID), "--format", "json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert [h["frames"] for h in json_hits(two)] == [h["frames"] for h in json_hits(one)] and len(one["hits"]) == 4


def mutate(rng: random.Random) -> bytes:
    recs = records()
    if rng.random() < 0.5:
        recs = interned(recs)
    lines: list[str] = []
    for _ in range(rng.randint(1, 3)):
        rec = rng.choice(recs)
        places = list(_paths(rec))
        if places:
            where = rng.choice(places)
            parent = rec
            for step in where[:-1]:
                parent = parent[step]
            if rng.random() < 0.15 and isinstance(parent, dict):
                parent.pop(where[-1], None)
            else:
                parent[where[-1]] = _odd(rng)
    lines = [json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in recs]
    data = ("\n".join(lines) + "\n").encode()
    roll = rng.random()
    if roll < 0.15:  # bytes damaged on disk
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        data = bytes(buf)
    elif roll < 0.25:  # cut anywhere
        data = data[: rng.randrange(len(data))]
    elif roll < 0.3:  # lines shuffled or repeated
        parts = data.splitlines(keepends=True)
        rng.shuffle(parts)
        data = b"".join(parts + parts[: rng.randint(0, 3)])
    return data


def test_no_mutated_session_gives_a_traceback(tmp_path, capsys):
    rng = random.Random(FUZZ_SEED)
    d = tmp_path / "sessions"
    d.mkdir()
    outcomes = {0: 0, 2: 0}
    for case in range(FUZZ_CASES):
        p = d / f"case{case:04d}.jsonl"
        p.write_bytes(mutate(rng))
        runs = [["export", str(p), "--format", fmt] for fmt in ("markdown", "json", "folded")]
        runs += [["show", str(p), "--all-frames"], ["diff", str(p), str(SIGMOID)]]
        for argv in runs:
            try:
                code = main(argv)
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"seed {FUZZ_SEED} case {case}: {' '.join(argv[:1])} raised {exc!r}\n"
                            f"{p.read_bytes()[:2000]!r}")
            captured = capsys.readouterr()
            assert code in (0, 2), (case, argv)
            assert raw_controls(captured.out) == [] and raw_controls(captured.err) == [], (case, argv)
            if code == 2:
                assert len(captured.err.strip().splitlines()) == 1, (case, argv, captured.err)
            outcomes[code] += 1
        try:
            SessionSource.open(p)
        except Exception as exc:  # noqa: BLE001
            assert type(exc).__name__ == "SessionError", (case, exc)
    assert main(["sessions", "--session-dir", str(d)]) == 0
    assert raw_controls(capsys.readouterr().out) == []
    # The mutations are mostly survivable damage, some fatal: both paths were taken.
    assert outcomes[0] > 0 and outcomes[2] > 0, outcomes


# ---------------------------------------------------------------- export never replaces a recording

def test_export_refuses_to_write_over_a_session_file(tmp_path, capsys):
    d = tmp_path / "sessions"
    d.mkdir()
    own = d / f"{SIGMOID_ID}.jsonl"
    shutil.copy(SIGMOID, own)
    other = shutil.copy(SIGMOID, d / "20260101-000000-0000.jsonl")
    before = own.read_bytes()
    for target in (own, d / "." / own.name, other):
        for fmt, force in (("markdown", []), ("json", ["--force"])):
            assert main(["export", SIGMOID_ID, "--session-dir", str(d), "-o", str(target), "--format", fmt,
                         *force]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(f"pttrace: will not write over {target}: it is ")
    assert own.read_bytes() == before and other.read_bytes() == before
    # A notes file of the same name stem, or any other file, is written as before.
    notes = d / f"{SIGMOID_ID}.md"
    notes.write_text("old notes\n")
    assert main(["export", SIGMOID_ID, "--session-dir", str(d), "-o", str(notes), "--force"]) == 0
    assert notes.read_text().startswith("# pttrace")


# ---------------------------------------------------------------- session directories are untrusted too

@pytest.fixture
def no_hang():
    """A load that blocks (a FIFO opened for reading) or loops fails the test instead of hanging it."""
    import signal

    def late(signum, frame):
        raise TimeoutError("a session load hung")

    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def exported_hits(capsys, path) -> int:
    assert main(["export", str(path), "--format", "json"]) == 0
    return len(json.loads(capsys.readouterr().out)["hits"])


def with_children(recs: list[dict], *sessions: str, pid: int = 4242) -> list[dict]:
    return recs + [{"type": "process", "pid": pid + i, "session": s} for i, s in enumerate(sessions)]


def test_a_number_too_big_for_a_hit_table_is_a_damaged_line(tmp_path, capsys):
    recs = records()
    next(r for r in recs if r["type"] == "hit")["seq"] = 99999999999999999999999
    p = write(tmp_path / "big.jsonl", recs)
    for argv in (["show", str(p)], ["export", str(p), "--format", "json"], ["export", str(p), "--format", "folded"],
                 ["export", str(p)], ["diff", str(p), str(SIGMOID)]):
        assert main(argv) == 0, argv
        assert "seq is a number out of range" in capsys.readouterr().err
    assert exported_hits(capsys, p) == 3


def test_a_number_too_big_in_an_interned_hit_is_skipped_and_sessions_counts_as_show_does(tmp_path, capsys):
    # GIVEN a schema-2 session (hits by site) with a seq too big for the hit table, and a hit line whose seq
    # is no integer at all
    recs = interned(records())
    next(r for r in recs if r["type"] == "hit")["seq"] = 99999999999999999999999
    p = write(tmp_path / "big.jsonl", [*recs, '{"type":"hit","seq":1e400}'])
    # THEN show and every export skip both, saying why, with no traceback
    for argv in (["show", str(p)], ["export", str(p), "--format", "json"], ["export", str(p)]):
        assert main(argv) == 0, argv
        assert "seq is a number out of range" in capsys.readouterr().err
    assert exported_hits(capsys, p) == 3
    # and `sessions` counts the hits show counts, the two lines as damaged
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("big "))
    assert re.search(r" 3 +completed \(2 damaged lines\)", row), row


def test_an_end_record_show_cannot_read_is_not_a_completed_session_in_the_listing(tmp_path, capsys):
    # GIVEN an end record whose exit code no 64-bit column holds
    recs = records()
    end = next(r for r in recs if r["type"] == "end")
    end["exit_code"] = 99999999999999999999999
    p = write(tmp_path / "end.jsonl", recs)
    # THEN show skips it (the session has no end: interrupted) and `sessions` says what show says
    assert main(["show", str(p)]) == 0
    captured = capsys.readouterr()
    assert "exit_code is a number out of range" in captured.err and " interrupted " in captured.out
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("end "))
    assert re.search(r" interrupted \(1 damaged line\)", row), row


@pytest.mark.parametrize("kind, field, value", [
    ("site", "stack", 99999999999999999999999),  # a site of an undefined stack
    ("site", "thread", {"id": 99999999999999999999999}),
    ("frame", "frame", None),
    ("stack", "frames", [424242]),  # a stack of an undefined frame
])
def test_hits_of_a_damaged_definition_are_not_counted_by_sessions_either(tmp_path, capsys, kind, field, value):
    # GIVEN an interned session whose first definition of that kind show cannot read (all hits share it)
    recs = interned(records())
    next(r for r in recs if r["type"] == kind)[field] = value
    p = write(tmp_path / "def.jsonl", recs)
    shown = exported_hits(capsys, p)
    assert shown < 4
    # THEN `sessions` counts the hits show counts (it counted every hit line: 4 where show had 0)
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("def "))
    assert re.search(rf" {shown} +\w+ \(\d+ damaged lines?\)", row), (shown, row)


def test_process_records_naming_their_own_file_or_each_other_add_nothing(tmp_path, capsys, no_hang):
    # GIVEN a session whose 30 process records name its own file, and another that names it back
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(a, with_children(records(), *(["a.jsonl"] * 30), "b.jsonl"))
    write(b, with_children(records(), "a.jsonl", "b.jsonl", pid=5000))
    # THEN each file's hits are counted once, however often it is named, on every load
    assert exported_hits(capsys, a) == 8
    assert exported_hits(capsys, a) == 8
    assert exported_hits(capsys, b) == 8
    assert main(["show", str(a)]) == 0
    out = capsys.readouterr().out
    assert "8 hits" in out and "already read" in out


def _special_files(d) -> dict[str, str]:
    """What a crafted directory may hold under session names, and how `sessions` must list each."""
    os.mkfifo(d / "fifo.jsonl")
    os.symlink("/dev/zero", d / "zero.jsonl")
    os.symlink(SIGMOID, d / "link.jsonl")
    os.symlink("loop.jsonl", d / "loop.jsonl")  # Path.resolve raises on it (Python 3.11): it was a traceback
    (d / "empty.jsonl").write_bytes(b"")
    (d / "dir.jsonl").mkdir()
    recs = records()
    recs[0]["schema"] = 99
    write(d / "future.jsonl", recs)
    return {"fifo": "unreadable", "zero": "unreadable", "link": "unreadable", "loop": "unreadable", "empty": "empty",
            "dir": "unreadable", "future": "unreadable"}


def test_fifos_devices_links_and_empty_files_named_like_sessions_are_skipped_with_a_sentence(tmp_path, capsys,
                                                                                               no_hang):
    expected = _special_files(tmp_path)
    write(tmp_path / "good.jsonl", records())
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name, status in expected.items():
        assert rows[name].rstrip().endswith(status), rows[name]
    assert "schema 99" in rows["future"] and "FIFO" in rows["fifo"] and "symbolic link" in rows["zero"]
    assert rows["good"].rstrip().endswith("completed")
    for name in ("fifo", "zero", "dir", "future", "empty"):
        code = main(["show", str(tmp_path / f"{name}.jsonl")])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, (name, err)
    # `last` is never a FIFO or a link, whatever their times, nor a newer file that is not a session
    (tmp_path / "notes.jsonl").write_text("# pttrace notes\n")
    assert main(["show", "last", "--session-dir", str(tmp_path)]) == 0
    assert "Sigmoid" in capsys.readouterr().out


def test_a_child_session_that_is_a_fifo_a_device_or_a_link_is_not_read(tmp_path, capsys, no_hang):
    _special_files(tmp_path)
    (tmp_path / "outside").mkdir()
    write(tmp_path / "outside" / "o.jsonl", records())
    os.symlink(tmp_path / "outside" / "o.jsonl", tmp_path / "inside.jsonl")
    main_file = write(tmp_path / "main.jsonl", with_children(records(), "fifo.jsonl", "zero.jsonl", "link.jsonl",
                                                             "dir.jsonl", "empty.jsonl", "future.jsonl",
                                                             "inside.jsonl", "../outside/o.jsonl", "none.jsonl",
                                                             "loop.jsonl", "x" * 5000))
    assert exported_hits(capsys, main_file) == 4
    assert main(["show", str(main_file)]) == 0
    out = capsys.readouterr().out
    assert out.count("not read") + out.count("cannot be read") >= 11, out
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("main "))
    assert re.search(r" 4 +completed", row), row


def test_a_session_naming_a_hard_link_of_itself_counts_its_hits_once(tmp_path, capsys, no_hang):
    # GIVEN a session whose process record names h.jsonl, a hard link of the session's own file
    a = write(tmp_path / "a.jsonl", with_children(records(), "h.jsonl"))
    os.link(a, tmp_path / "h.jsonl")
    # THEN show, export and sessions count its 4 hits once, under either name (they counted 8 and 4)
    assert exported_hits(capsys, a) == 4
    assert exported_hits(capsys, tmp_path / "h.jsonl") == 4
    assert main(["show", str(a)]) == 0
    assert "already read" in capsys.readouterr().out
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("a ", "h "))]
    assert len(rows) == 2 and all(re.search(r" 4 +completed", row) for row in rows), rows


def test_no_mutated_session_directory_gives_a_traceback_a_hang_or_an_inflated_count(tmp_path, capsys, no_hang):
    """The seeded fuzz, from files to directories: children named by process records (their own file,
    each other, missing, outside), links, FIFOs, device links and damaged children."""
    rng = random.Random(FUZZ_SEED + 1)
    kinds = ["self", "peer", "fifo", "dev", "link-out", "missing", "dotdot", "damaged", "good", "dir", "empty",
             "loop", "hardlink-self"]
    for case in range(max(4, FUZZ_CASES // 4)):
        d = tmp_path / f"dir{case}"
        d.mkdir()
        names, good, damaged = [], 0, 0
        for i, kind in enumerate(rng.sample(kinds, rng.randint(2, len(kinds)))):
            name = f"c{i}.jsonl"
            if kind == "self":
                name = "main.jsonl"
            elif kind == "peer":
                write(d / name, with_children(records(), "main.jsonl", name, pid=7000))
                good += 4
            elif kind == "fifo":
                os.mkfifo(d / name)
            elif kind == "dev":
                os.symlink("/dev/zero", d / name)
            elif kind == "link-out":
                os.symlink(SIGMOID, d / name)
            elif kind == "dotdot":
                name = "../" + name
            elif kind == "damaged":
                (d / name).write_bytes(mutate(rng))
                damaged += 1
            elif kind == "good":
                write(d / name, records())
                good += 4
            elif kind == "dir":
                (d / name).mkdir()
            elif kind == "empty":
                (d / name).write_bytes(b"")
            elif kind == "loop":
                os.symlink(name, d / name)
            elif kind == "hardlink-self":
                name = "hard.jsonl"  # made once main.jsonl is written, below
            names += [name] * rng.randint(1, 3)
        rng.shuffle(names)
        main_file = write(d / "main.jsonl", with_children(records(), *names))
        if "hard.jsonl" in names:
            os.link(main_file, d / "hard.jsonl")
        for argv in (["show", str(main_file)], ["export", str(main_file), "--format", "folded"],
                     ["sessions", "--session-dir", str(d)], ["diff", str(main_file), str(SIGMOID)]):
            try:
                code = main(argv)
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"seed {FUZZ_SEED + 1} case {case}: {argv[0]} raised {exc!r}; children {names}")
            captured = capsys.readouterr()
            assert code == 0, (case, argv, captured.err)
            assert raw_controls(captured.out) == []
        hits = exported_hits(capsys, main_file)
        # every file once, however often it is named: the main's 4, each good child's 4, and what a damaged
        # child kept (its 4, some repeated by the mutation: at most 8)
        assert 4 + good <= hits <= 4 + good + 8 * damaged, (case, names, hits)
