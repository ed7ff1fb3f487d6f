"""``--source-dir DIR`` for the commands that show frames, and the SourceFinder they share."""
from __future__ import annotations

import argparse
import os

from tracer.errors import UsageError


def add_source_dir(p) -> None:
    """On a parser or an argument group."""
    p.add_argument("--source-dir", metavar="DIR", default=None,
                   help="a PyTorch source checkout: frames get the file:line of their definition in its .cpp "
                        "files, and DWARF paths from another machine are found in it "
                        "(default: $PTTRACE_SOURCE_DIR)")


def trust_for(finder):
    """What vouches for quoting a native frame's file: the source directory, and its library's DWARF here."""
    from tracer.export.local_files import SourceTrust

    dirs = (finder.source_dir,) if finder is not None and finder.source_dir else ()
    return SourceTrust(dirs=dirs, dwarf_files=_dwarf_file_names, dwarf_files_at=_dwarf_files_at)


def _dwarf_file_names(library: str):
    from tracer.symbols.source_names import dwarf_file_names  # only when a native file is here to vouch for

    return dwarf_file_names(library)


def _dwarf_files_at(library: str, offset: int):
    from tracer.symbols.source_names import dwarf_files_at

    return dwarf_files_at(library, offset)


def finder_for(args: argparse.Namespace, session=None):
    """The SourceFinder for a command: its --source-dir (or $PTTRACE_SOURCE_DIR), the session's torch commit."""
    from tracer.sources import SourceFinder, source_dir_setting

    commit = session.info.torch_git_version if session is not None else None
    return SourceFinder(source_dir_setting(getattr(args, "source_dir", None)), commit)


def checked_source_dir(args: argparse.Namespace) -> str | None:
    """The command's --source-dir, if given and a directory (else a UsageError before any work)."""
    given = getattr(args, "source_dir", None)
    if given and not os.path.isdir(given):
        raise UsageError(f"--source-dir {given} is not a directory")
    return given
