"""The command line. The only place where errors become messages and exit codes."""
from __future__ import annotations

import sys

if sys.argv[1:2] in (["run"], ["attach"]):
    # Before anything else is imported: a Ctrl-C raised inside an import can be swallowed by importlib's lock
    # bookkeeping and lost, or leave its lock held (commands/_signals.py); held, the run ends at once instead.
    from tracer.commands import _signals

    _signals.hold()

import argparse  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402

from tracer import __version__
from tracer.errors import PttraceError
from tracer.text.escape import visible

# Each subcommand lives in tracer/commands/<module>.py with ``add_parser(subparsers)`` that sets
# ``func=run`` on its parser, and ``run(args) -> int``. argparse needs every parser up front, so each
# module keeps its imports light (heavy ones inside run).
COMMANDS = ["run", "attach", "where", "ops", "sessions", "show", "export", "diff", "view"]


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` tells it ($COLUMNS, else stdout's terminal,
    else 80), read with ``os`` alone."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, its width found without ``shutil``: argparse makes a formatter for every
    ``add_argument`` and imports shutil (with bz2, lzma, fnmatch) for its width, ~3 ms of a warm
    ``pttrace where`` (target 0.1 s) that prints no help."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser with that formatter; subcommands' parsers are of this class too."""

    def __init__(self, *args, formatter_class=_Formatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser, or with ``only`` just that one's: each command module imports what its
    options need, and a ``pttrace where`` that loaded all nine spent ~50 ms on others' imports."""
    parser = _Parser(
        prog="pttrace",
        description="Record the call path from Python down to PyTorch's C++ kernels, under gdb.",
    )
    parser.add_argument("--version", action="version", version=f"pttrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ([only] if only in COMMANDS else COMMANDS):
        importlib.import_module(f"tracer.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # a Ctrl-C from the parser's set-up on (run/attach hold it once they start)
        print("pttrace: interrupted.", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    # Everything after a bare `--` belongs to the traced script, never to pttrace; so does everything
    # after `run -m MODULE` / `run -c CODE`, as for python.
    passthrough: list[str] = []
    if argv[:1] == ["run"]:
        from tracer.commands.run import split_argv

        argv, passthrough = split_argv(argv)
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:] + passthrough
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PttraceError as exc:
        # Messages quote paths, names and records: the one place they reach the terminal.
        print(f"pttrace: {visible(exc.message)}", file=sys.stderr)
        if exc.hint:
            print(f"  {visible(exc.hint)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
