"""A shared session must not pull local files into notes or onto the screen: a file is read for a frame
only when it is plausibly the source that frame names (tracer/export/local_files.py).

Sessions are crafted the way an attacker would: frames naming /etc/shadow, /proc/self/environ, an
ssh key, ``..`` paths relative to the session's cwd, a ``.py`` symlink to a secret, a binary; each is
exported (every format), shown, and located by the TUI's source pane, through ``tracer.cli.main``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracer.cli import main
from tracer.export.local_files import SourceTrust, source_lines
from tracer.session.model import Frame
from tracer.tui import source_files as SF

PASSWD = Path("/etc/passwd").read_text().splitlines()


@pytest.fixture(autouse=True)
def quiet_env(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("PTTRACE_SOURCE_DIR", raising=False)
    monkeypatch.delenv("PTTRACE_SESSION_DIR", raising=False)


def py(file, line, source):
    return {"kind": "python", "function": "f", "file": file, "line": line, "layer": "python", "source": source}


def native(file, line, library="/nonexistent/libnothing.so"):
    return {"kind": "native", "function": "g()", "short": "g", "library": library, "address": 4096,
            "file": file, "line": line, "layer": "runtime"}


@pytest.fixture
def place(tmp_path):
    """A home with secrets, a project the session says it ran in, and a checkout given as --source-dir."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SECRET-1\nSECRET-2\nSECRET-3\n")
    (home / ".ssh" / "key.py").symlink_to(home / ".ssh" / "id_rsa")  # a .py name for a secret
    (home / "config.cpp").write_text("SECRET-1\nSECRET-2\n")  # source-like, but nothing vouches for it
    project = home / "work" / "project"
    project.mkdir(parents=True)
    (project / "train.py").write_text("import torch\nx = torch.ones(3)\ny = x.sigmoid()\nprint('CONTEXT-OK')\n")
    (project / "blob.py").write_bytes(b"SECRET-1\n\0SECRET-2\n")  # a binary with a .py name
    (project / "escape.py").write_text("a = 1\nb = '\x1b]0;owned\x07'\nc = 3\n")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "kernel.cpp").write_text("// kernel\nint k() {\n  return 1;\n}\n// CHECKOUT-CONTEXT\n")
    (checkout / "id_rsa").write_text("SECRET-1\nSECRET-2\n")  # under the source dir, but not source
    return tmp_path, home, project, checkout


def hostile_session(tmp_path, project, frames):
    header = {"type": "header", "schema": 1, "session": {
        "id": "crafted", "mode": "run", "argv": ["python", "train.py"], "cwd": str(project)}}
    hit = {"type": "hit", "seq": 1, "breakpoint": "g", "thread": {"id": 1}, "time": 1.0, "frames": frames}
    path = tmp_path / "crafted.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (header, hit, {"type": "end", "status": "completed"})) + "\n")
    return path


def crafted_frames(home, project, checkout):
    return [
        py("train.py", 3, "y = x.sigmoid()"),  # the one honest Python frame: quoted with its context
        py("/etc/shadow", 1, "root:*:20228:0:99999:7:::"),
        py("../../../../../../../../etc/passwd", 1, PASSWD[0]),  # relative to cwd, escaping it
        py(str(project / ".." / ".." / ".." / ".." / ".." / "etc" / "passwd"), 1, PASSWD[0]),
        py("/proc/self/environ", 1, "PATH=/usr/bin"),
        py(str(home / ".ssh" / "id_rsa"), 1, "SECRET-1"),
        py(str(home / ".ssh" / "key.py"), 1, "SECRET-1"),
        py("blob.py", 1, "SECRET-1"),
        py("escape.py", 2, "b = '\x1b]0;owned\x07'"),
        native("/etc/passwd", 1),
        native(str(home / "config.cpp"), 1),
        native("../../../../../../../etc/passwd", 1),
        native(str(checkout / "id_rsa"), 1),
        native(str(checkout / "kernel.cpp"), 3),  # quoted only with --source-dir
    ]


def outputs(session: Path, checkout: Path, capsys) -> dict[str, str]:
    out = {}
    for name, argv in {
        "markdown": ["export", str(session)],
        "markdown+dir": ["export", str(session), "--source-dir", str(checkout)],
        "json": ["export", str(session), "--format", "json", "--source-dir", str(checkout)],
        "folded": ["export", str(session), "--format", "folded"],
        "show": ["show", str(session), "--source-dir", str(checkout)],
    }.items():
        assert main(argv) == 0, name
        captured = capsys.readouterr()
        out[name] = captured.out + captured.err
    return out


def test_no_view_of_a_crafted_session_reads_a_file_it_should_not(place, capsys):
    tmp_path, home, project, checkout = place
    session = hostile_session(tmp_path, project, crafted_frames(home, project, checkout))
    for name, text in outputs(session, checkout, capsys).items():
        # Recorded text may be shown as recorded; anything read from those files may not.
        assert "SECRET-2" not in text and "SECRET-3" not in text, name
        assert PASSWD[1] not in text, name
        assert "\x1b" not in text, name
    md = outputs(session, checkout, capsys)
    # The honest frames are still quoted, with lines around the one that ran.
    assert "CONTEXT-OK" in md["markdown"]
    assert "CHECKOUT-CONTEXT" not in md["markdown"] and "CHECKOUT-CONTEXT" in md["markdown+dir"]
    assert "b = '\\x1b]0;owned\\x07'" in md["markdown"] and "c = 3" in md["markdown"]


def test_the_tui_source_pane_locates_only_the_plausible_sources(place, monkeypatch):
    _tmp, home, project, checkout = place
    frames = [Frame.from_dict(f) for f in crafted_frames(home, project, checkout)]
    shown = {f.file for f in frames if SF.locate(f, cwd=str(project)).path is not None}
    assert shown == {"train.py", "escape.py"}
    monkeypatch.setenv("PTTRACE_SOURCE_DIR", str(checkout))  # what `view --source-dir` sets
    shown = {f.file for f in frames if SF.locate(f, cwd=str(project)).path is not None}
    assert shown == {"train.py", "escape.py", str(checkout / "kernel.cpp")}
    lines = SF.read_lines(project / "escape.py")
    assert lines[1] == "b = '\\x1b]0;owned\\x07'"


def test_a_native_source_is_read_when_its_librarys_dwarf_names_it(place):
    _tmp, home, _project, _checkout = place
    config = str(home / "config.cpp")
    frame = Frame.from_dict(native(config, 1, library="/opt/ext/my_ops.so"))
    assert source_lines(frame, config) is None
    named = SourceTrust(dwarf_files=lambda lib: {config} if lib == "/opt/ext/my_ops.so" else set())
    assert source_lines(frame, config, named) == ("SECRET-1", "SECRET-2")
    # The same file named by a frame of another library is not vouched for.
    other = Frame.from_dict(native(config, 1, library="/opt/ext/other.so"))
    assert source_lines(other, config, named) is None
    # Nor is a special file, whatever vouches for it.
    environ = Frame.from_dict(native("/proc/self/environ", 1, library="/opt/ext/my_ops.so"))
    assert source_lines(environ, "/proc/self/environ",
                        SourceTrust(dirs=("/",), dwarf_files=lambda lib: {"/proc/self/environ"})) is None


def test_a_frame_recorded_with_its_offset_is_vouched_for_by_the_unit_holding_it(place):
    """A frame named by pttrace (library and offset): the files of the unit at that offset decide, and the
    whole library's are never asked for (a full debug build: every unit's tables, minutes)."""
    _tmp, home, _project, _checkout = place
    config = str(home / "config.cpp")
    frame = Frame.from_dict(native(config, 1, library="/opt/ext/big.so"))
    frame.offset = 0x1234
    asked = []

    def unit_files(lib, offset):
        asked.append((lib, offset))
        return {config} if offset == 0x1234 else set()

    def every_file(lib):
        raise AssertionError("the whole library's files asked for")

    trust = SourceTrust(dwarf_files=every_file, dwarf_files_at=unit_files)
    assert source_lines(frame, config, trust) == ("SECRET-1", "SECRET-2")
    frame.offset = 0x9999  # another unit: it does not name the file
    assert source_lines(frame, config, trust) is None
    assert asked == [("/opt/ext/big.so", 0x1234), ("/opt/ext/big.so", 0x9999)]


def test_the_debug_extension_vouches_for_its_own_sources(debug_ext):
    """The real witness: the debug build's DWARF names its .cpp; a library that is not here names nothing."""
    from tracer.symbols.source_names import dwarf_file_names

    names = dwarf_file_names(str(debug_ext))
    demo = Path(__file__).resolve().parents[2] / "scripts" / "debug_ext" / "pttrace_demo.cpp"
    assert str(demo) in names, sorted(names)[:5]
    assert any("/torch/include/" in n for n in names)  # the boxing templates it instantiates
    assert dwarf_file_names("/nonexistent/lib.so") == frozenset()
    line = next(n for n, text in enumerate(demo.read_text().splitlines(), 1) if text.startswith("at::Tensor scale_add_cpu"))
    frame = Frame(kind="native", function="scale_add_cpu", library=str(debug_ext), file=str(demo), line=line)
    assert source_lines(frame, demo, SourceTrust(dwarf_files=dwarf_file_names))[line - 1].startswith("at::Tensor scale_add_cpu")


def test_a_file_in_the_source_dir_that_links_out_of_it_is_never_read(place, capsys):
    # GIVEN a checkout holding a symlink to a file outside it, which defines a function and holds secrets
    tmp_path, home, project, checkout = place
    outside = home / "defs.cpp"
    outside.write_text("namespace evil {\nint leak() {\n  return 1;  // SECRET-2\n}\n}  // SECRET-3\n")
    (checkout / "linked.cpp").symlink_to(outside)
    (checkout / "sub").mkdir()
    (checkout / "sub" / "up.cpp").symlink_to(outside)
    # WHEN a session's frames name it: by the function it defines (found by the definition index), by a
    # path recorded on another machine (mapped onto the checkout), and by its path in the checkout
    frames = [dict(native(None, None), function="evil::leak()", short="evil::leak"),
              native("/home/else/pytorch/linked.cpp", 2), native("/home/else/pytorch/sub/up.cpp", 2),
              native(str(checkout / "linked.cpp"), 3)]
    session = hostile_session(tmp_path, project, frames)
    # THEN nothing of it is read, in any view
    for name, text in outputs(session, checkout, capsys).items():
        assert "SECRET-2" not in text and "SECRET-3" not in text, name
    # AND the checkout's own files are still read
    assert "CHECKOUT-CONTEXT" in outputs(hostile_session(tmp_path, project, [native(str(checkout / "kernel.cpp"), 3)]),
                                         checkout, capsys)["markdown+dir"]
