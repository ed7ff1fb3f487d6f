"""What an unnamed-frames warning tells to do: each step only when its fact was found (pure logic over facts
read from dpkg and apt; the real lookup runs in tests/integration/test_unnamed_frames.py)."""
from __future__ import annotations

from tracer.recorder.tailer import unnamed_warning
from tracer.session.model import Frame
from tracer.symbols.debug_packages import DebugAdvice, _fields

BID = "571d98e01096d5c1c32420d229a6731a0a50d2a0"


def test_a_package_whose_build_ids_name_the_file_is_the_one_to_install():
    said = DebugAdvice("/usr/lib/libx.so.1", BID, "libx1:amd64", "1.0-1", holder="libx1-dbgsym=1.0-1",
                       looked_for=("libx1-dbgsym",)).what_to_do(interpreter=False)
    assert said.startswith(f"`apt-get install libx1-dbgsym=1.0-1` installs its debug symbols (its Build-Ids name "
                           f"this file's build-id {BID})")
    assert "--python" not in said  # not the interpreter


def test_a_debug_package_for_another_version_says_which_pair_matches():
    said = DebugAdvice("/usr/bin/python3.11", BID, "python3.11-minimal", "3.11.2-6+deb12u6",
                       other="python3.11-dbg=3.11.2-6+deb12u8",
                       looked_for=("python3.11-minimal-dbgsym", "python3.11-dbg")).what_to_do(interpreter=True)
    assert said.startswith("apt has python3.11-dbg=3.11.2-6+deb12u8, whose debug files are for its source's packages "
                           f"at 3.11.2-6+deb12u8: this file's build-id {BID} (of python3.11-minimal 3.11.2-6+deb12u6) "
                           "is not among them; `apt-get install python3.11-minimal=3.11.2-6+deb12u8 "
                           "python3.11-dbg=3.11.2-6+deb12u8` brings both to 3.11.2-6+deb12u8; "), said
    assert said.endswith("(pyenv's builds keep their DWARF)")


def test_no_package_known_says_where_it_looked_and_the_debug_file_it_would_read():
    said = DebugAdvice("/lib/libffi.so.8", BID, "libffi8:amd64", "3.4.4-1",
                       looked_for=("libffi8-dbgsym", "libffi8-dbg", "libffi-dbg")).what_to_do(interpreter=False)
    assert said == ("apt here knows no debug package for libffi8 3.4.4-1 (looked for libffi8-dbgsym, libffi8-dbg, "
                    f"libffi-dbg); a debug file of build-id {BID} in DIR/.build-id/57/{BID[2:]}.debug is read with "
                    "`--debug-dir DIR`")
    assert DebugAdvice("/opt/x.so", None).what_to_do(False) == (
        "it has no build-id: its debug file is looked for by its .gnu_debuglink name (if it has one) beside it, in "
        "its .debug/ and under each `--debug-dir DIR`")


def test_apt_stanza_fields_keep_continuation_lines_out():
    stanza = "Package: python3.11-dbg\nVersion: 3.11.2-6+deb12u8\nDescription: Debug\n more text: here\nBuild-Ids: a b"
    assert _fields(stanza) == {"Package": "python3.11-dbg", "Version": "3.11.2-6+deb12u8", "Description": "Debug",
                               "Build-Ids": "a b"}


def test_frames_in_no_file_are_told_without_advice():
    frames = [Frame("native", address=0x7F0000001000), Frame("native", address=0x7F0000002000)]
    assert unnamed_warning("", frames) == (
        "frames outside every file the target mapped have no function name (2 frames of the first call path): code "
        "in anonymous memory (JIT-compiled), or return addresses gdb read where the stack holds none; they are "
        "shown by address")
