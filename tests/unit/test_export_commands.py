"""``pttrace sessions | show | export | diff`` through ``tracer.cli.main``, as a user runs them."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import private_mount_prefix, run_child
from tests.unit.export_support import SIGMOID, SIGMOID_ID, code_spans, tables, unclosed_fence
from tracer.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    # rich wraps at 80 columns when not on a terminal; the assertions look for whole lines.
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("PTTRACE_SESSION_DIR", raising=False)


@pytest.fixture
def sdir(tmp_path):
    d = tmp_path / "sessions"
    d.mkdir()
    shutil.copy(SIGMOID, d / f"{SIGMOID_ID}.jsonl")
    return d


def write_truncated(path, keep_lines: int, cut: int = 200, then: str = "\n"):
    """The first ``keep_lines`` lines, then the next one cut short, then ``then``: with a line break,
    a damaged line (a writer that died mid-record, and another that went on); without, the last
    record of a session still being written."""
    lines = SIGMOID.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:keep_lines]) + lines[keep_lines][:cut] + then)
    return path


# ---------------------------------------------------------------- sessions

def test_sessions_lists_id_date_command_breakpoints_hits_status(sdir, capsys):
    write_truncated(sdir / "20260523-090000-aaaa.jsonl", keep_lines=7)
    assert main(["sessions", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    for header in ("id", "date", "command", "breakpoints", "hits", "status"):
        assert header in out
    row = next(line for line in out.splitlines() if SIGMOID_ID in line)
    assert "2026-05-22 10:15" in row and "python scripts/hello-world.py" in row
    assert "THPVariable_tensor" in row and " 4 " in row and "completed" in row
    assert "wrapper_CPU_sigmoid_backward" in out
    cut = next(line for line in out.splitlines() if "20260523-090000-aaaa" in line)
    assert " 2 " in cut and "interrupted (1 damaged line)" in cut


def test_sessions_does_not_list_a_breakpoint_removed_during_the_run(sdir, capsys):
    """A breakpoint added then removed in the TUI (its record, then ``removed: true``) is not listed, as
    ``show`` and the TUI do not list it."""
    import json

    path = sdir / f"{SIGMOID_ID}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    added = json.dumps({"type": "breakpoint", "spec": "at::cpu::sigmoid_backward", "locations": []}) + "\n"
    removed = json.dumps({"type": "breakpoint", "spec": "at::cpu::sigmoid_backward", "removed": True}) + "\n"
    path.write_text("".join(lines[:-1] + [added, removed, lines[-1]]))
    assert main(["sessions", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert "THPVariable_tensor" in out and "at::cpu::sigmoid_backward" not in out


def test_sessions_list_the_program_by_name_and_fit_the_terminal(sdir, capsys, monkeypatch):
    # Recorded commands start with the interpreter's full path: only its name is listed.
    session = SIGMOID.read_text().splitlines()
    header = json.loads(session[0])
    header["session"]["argv"] = ["/home/someone/projects/venvs/torch-2.13/bin/python3", "scripts/hello-world.py"]
    (sdir / f"{SIGMOID_ID}.jsonl").write_text("\n".join([json.dumps(header)] + session[1:]) + "\n")
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["sessions", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines())
    row = next(line for line in out.splitlines() if SIGMOID_ID in line)
    assert "/home/someone" not in out and " python3 " in row and "scripts/hello-world.py" in out
    assert SIGMOID_ID in out  # the id, what `show` and `export` take, is never folded


def test_sessions_in_an_empty_directory(tmp_path, capsys):
    assert main(["sessions", "--session-dir", str(tmp_path / "none")]) == 0
    assert "No sessions in" in capsys.readouterr().out


def test_session_dir_from_the_environment(sdir, capsys, monkeypatch):
    monkeypatch.setenv("PTTRACE_SESSION_DIR", str(sdir))
    assert main(["sessions"]) == 0
    assert SIGMOID_ID in capsys.readouterr().out


# ---------------------------------------------------------------- show

def test_show_prints_each_distinct_path_top_down(sdir, capsys):
    assert main(["show", "last", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert f"session {SIGMOID_ID}" in out and "4 hits in 4 distinct call paths" in out
    assert out.count("path ") >= 4
    lines = out.splitlines()
    module = next(i for i, line in enumerate(lines) if "hello-world.py:13" in line and "<module>" in line)
    kernel = next(i for i, line in enumerate(lines) if line.rstrip().endswith("at::wrapper_CPU_sigmoid  [CPU]  libtorch_cpu.so"))
    assert module < kernel
    assert "cfunction_call" not in out


@pytest.mark.parametrize("newest", ["example-renamed", SIGMOID_ID])
def test_last_is_the_most_recently_written_session_whatever_its_name(sdir, capsys, newest):
    shutil.copy(SIGMOID, sdir / "example-renamed.jsonl")  # sorts after the dated ids
    older = ({"example-renamed", SIGMOID_ID} - {newest}).pop()
    os.utime(sdir / f"{older}.jsonl", (1_000_000_000, 1_000_000_000))
    os.utime(sdir / f"{newest}.jsonl", (2_000_000_000, 2_000_000_000))
    assert main(["export", "last", "--format", "folded", "--session-dir", str(sdir), "-o",
                 str(sdir / "out.folded")]) == 0
    err = capsys.readouterr().err
    assert main(["show", "last", "--session-dir", str(sdir)]) == 0
    assert "wrote 4 hits as folded" in err and f"session {SIGMOID_ID}" in capsys.readouterr().out
    from tracer.session import storage

    assert storage.resolve("last", sdir).stem == newest


def test_show_all_frames_and_prefix(sdir, capsys):
    assert main(["show", SIGMOID_ID[:8], "--all-frames", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert "cfunction_call" in out and "interpreter" in out


def test_show_names_with_rich_markup_characters(tmp_path, capsys):
    # "[clone .cold]" would be eaten as rich markup if names were not plain Text.
    text = SIGMOID.read_text().replace(
        "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)\",\"short\":\"at::wrapper_CPU_sigmoid\"",
        "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&) [clone .cold]\",\"short\":\"at::wrapper_CPU_sigmoid [clone .cold]\"")
    p = tmp_path / "cold.jsonl"
    p.write_text(text)
    assert main(["show", str(p)]) == 0
    assert "at::wrapper_CPU_sigmoid [clone .cold]" in capsys.readouterr().out


# ---------------------------------------------------------------- export

def test_export_markdown_to_stdout_by_default(sdir, capsys):
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# pttrace: `python scripts/hello-world.py`")
    assert unclosed_fence(out) is None
    assert "at::wrapper_CPU_sigmoid" in code_spans(out)


def test_export_each_format_to_a_file(sdir, tmp_path, capsys):
    md, js, fo = tmp_path / "notes.md", tmp_path / "s.json", tmp_path / "s.folded"
    assert main(["export", str(sdir / f"{SIGMOID_ID}.jsonl"), "-o", str(md)]) == 0
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "-o", str(js)]) == 0  # format from suffix
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "--format", "folded", "-o", str(fo)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "wrote 4 hits as markdown" in captured.err
    assert md.read_text().startswith("# pttrace:")
    assert json.loads(js.read_text())["session"]["id"] == SIGMOID_ID
    assert len(fo.read_text().splitlines()) == 4
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_export_all_frames(sdir, capsys):
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "--format", "folded", "--all-frames"]) == 0
    assert "_PyEval_EvalFrame" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["missing-dir/notes.md", "a-directory"])
def test_export_to_an_unwritable_path_is_one_sentence_and_exit_2(sdir, tmp_path, capsys, target):
    (tmp_path / "a-directory").mkdir()
    out = tmp_path / target
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith(f"pttrace: cannot write {out}:") and err.endswith(".") and "\n" not in err
    assert "Traceback" not in captured.err


# Mounts the directory ($1) read-only onto itself, then runs the rest: in a private mount namespace,
# where root too is refused a write (EROFS), as on a read-only file system.
_READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def test_export_to_a_read_only_directory(sdir, tmp_path):
    # GIVEN a directory mounted read-only (root can write into any directory mode allows, not into this)
    prefix = private_mount_prefix()
    assert prefix is not None, "unshare cannot make a private mount namespace here"
    ro = tmp_path / "ro"
    ro.mkdir()
    # WHEN pttrace exports into it
    proc = run_child([*prefix, "sh", "-c", _READ_ONLY, "sh", str(ro), sys.executable, "-m", "tracer", "export",
                      SIGMOID_ID, "--session-dir", str(sdir), "-o", str(ro / "n.md")],
                     capture_output=True, text=True, timeout=120, cwd=ROOT, env=dict(os.environ, COLUMNS="250"))
    # THEN one sentence names the file and the reason, exit 2, and nothing was written
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith(f"pttrace: cannot write {ro / 'n.md'}:") and "\n" not in err, err
    assert "Read-only file system" in err and "Traceback" not in err
    assert proc.stdout == "" and list(ro.iterdir()) == []


def test_a_truncated_file_names_the_bad_line_and_exports_the_good_part(tmp_path, capsys):
    # GIVEN a session cut in the middle of its fourth hit (line 9), with no closing line
    p = write_truncated(tmp_path / "cut.jsonl", keep_lines=8)
    # WHEN exported
    assert main(["export", str(p)]) == 0
    captured = capsys.readouterr()
    # THEN one sentence names line 9, and the three whole hits are all there
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"pttrace: line 9 of {p} is damaged (not valid JSON")
    md = captured.out
    assert unclosed_fence(md) is None
    meta = dict((k.strip("*"), v) for k, v in tables(md)[0][1:])
    assert meta["status"] == "interrupted"
    assert meta["hits"] == "3 in 3 distinct call paths"
    assert "line 9 of the session file is damaged" in meta["warnings"]
    assert "at::wrapper_CPU_sigmoid" in code_spans(md)
    assert "at::wrapper_CPU_sigmoid_backward" not in md


def test_a_session_being_written_exports_its_complete_lines_without_complaint(tmp_path, capsys):
    # GIVEN a session whose writer is in the middle of its fourth hit: the last line has no line break yet
    p = write_truncated(tmp_path / "live.jsonl", keep_lines=8, then="")
    # WHEN exported, and listed
    assert main(["export", str(p)]) == 0
    captured = capsys.readouterr()
    # THEN the complete hits are there, and nothing calls the half-written line damaged
    assert captured.err == ""
    meta = dict((k.strip("*"), v) for k, v in tables(captured.out)[0][1:])
    assert meta["hits"] == "3 in 3 distinct call paths" and "damaged" not in meta["warnings"]
    assert main(["sessions", "--session-dir", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "live" in line)
    assert "damaged" not in row and " 3 " in row


def test_a_truncated_file_exports_as_json_too(tmp_path, capsys):
    p = write_truncated(tmp_path / "cut.jsonl", keep_lines=8)
    assert main(["export", str(p), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [h["seq"] for h in doc["hits"]] == [1, 2, 3]
    assert doc["session"]["status"] == "interrupted"


def test_a_future_schema_is_one_sentence_and_exit_2(tmp_path, capsys):
    lines = SIGMOID.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema"] = 99
    p = tmp_path / "future.jsonl"
    p.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    assert main(["export", str(p)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "schema 99" in captured.err and len(captured.err.strip().splitlines()) == 1


def test_unknown_and_ambiguous_sessions(sdir, capsys):
    shutil.copy(SIGMOID, sdir / "20260522-101502-9999.jsonl")
    assert main(["export", "nope", "--session-dir", str(sdir)]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["show", "20260522", "--session-dir", str(sdir)]) == 2
    assert "ambiguous" in capsys.readouterr().err


def test_not_a_session_file(tmp_path, capsys):
    p = tmp_path / "notes.jsonl"
    p.write_text("hello\n")
    assert main(["export", str(p)]) == 2
    assert "is not a pttrace session: line 1" in capsys.readouterr().err


# ---------------------------------------------------------------- diff

def test_diff_paths_only_in_a_only_in_b_and_in_both(tmp_path, capsys):
    # GIVEN A (the full run) and B (the run cut before backward, recorded in another virtualenv)
    a = tmp_path / "a.jsonl"
    shutil.copy(SIGMOID, a)
    b = tmp_path / "b.jsonl"
    lines = SIGMOID.read_text().replace("/work/main/.venv", "/home/u/env").splitlines(keepends=True)
    sigmoid_hit = json.loads(lines[7])
    sigmoid_hit["seq"] = 5
    for f in sigmoid_hit["frames"]:
        if f.get("function") == "Sigmoid.forward":
            f["line"] = 362  # torch changed under B
    b.write_text("".join(lines[:8]) + json.dumps(sigmoid_hit) + "\n" + lines[-1])
    # WHEN compared
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    # THEN
    sections = {s.split(":")[0]: s for s in out.split("\n\n") if s.startswith(("only in", "in both"))}
    assert "only in A: 1 call path" in sections["only in A"]
    assert "at::wrapper_CPU_sigmoid_backward" in sections["only in A"]
    assert "only in B: 1 call path" in sections["only in B"]
    assert "torch/nn/modules/activation.py:362" in sections["only in B"]
    assert "differs from every path in A from here" in sections["only in B"]
    marked = next(line for line in sections["only in B"].splitlines() if "differs from every path" in line)
    assert "activation.py:362" in marked
    assert "in both: 3 call paths" in sections["in both"]
    assert "A 1 hit, B 1 hit" in sections["in both"]


def test_diff_of_a_session_with_itself(sdir, capsys):
    assert main(["diff", SIGMOID_ID, "last", "--session-dir", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert "only in A: 0 call paths" in out and "only in B: 0 call paths" in out
    assert "in both: 4 call paths" in out


def test_export_refuses_to_overwrite_without_force(sdir, tmp_path, capsys):
    md = tmp_path / "notes.md"
    md.write_text("my own notes\n")
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "-o", str(md)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"pttrace: {md} exists; pass --force to overwrite it."
    assert md.read_text() == "my own notes\n"
    assert main(["export", SIGMOID_ID, "--session-dir", str(sdir), "-o", str(md), "--force"]) == 0
    assert md.read_text().startswith("# pttrace:")


def test_export_finds_the_sources_of_a_session_recorded_in_another_checkout(tmp_path, capsys, monkeypatch):
    """Recorded under /elsewhere/checkout (its own venv): the notes quote this checkout's files and
    this interpreter's torch, as the TUI's source pane does, not one bare recorded line."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    moved = tmp_path / "moved.jsonl"
    moved.write_text(SIGMOID.read_text().replace("/work/main", "/elsewhere/checkout"))
    monkeypatch.chdir(root)
    assert main(["export", str(moved)]) == 0
    out = capsys.readouterr().out
    assert "/elsewhere/checkout" in out  # the recorded paths are still named
    assert "y = model(x)" in out and "print(y)" in out  # hello-world.py:13 with the lines around it
    assert "return torch.sigmoid(input)" in out and "Runs the forward pass." in out
