"""Build the pttrace_demo operator library with -g -O0 and print the path of the built .so.

The library (scripts/debug_ext/) registers ``pttrace_demo::scale_add`` (CPU kernel),
``pttrace_demo::scale_add_twice`` (CompositeImplicitAutograd) and ``pttrace_demo::boxed_scale`` (a boxed
CPU kernel: its arguments an IValue stack) with TORCH_LIBRARY / TORCH_LIBRARY_IMPL: a real debug build
whose frames carry DWARF file:line, for the tests and the demo.

Building takes ~20 s, so the result is cached in ``$PTTRACE_CACHE/debug_ext`` (default
``tests/.cache/debug_ext``) together with a stamp of its inputs; while the stamp matches, this script
prints the path without importing torch.

    python scripts/build_debug_ext.py            # -> /…/debug_ext/pttrace_demo.so
    python scripts/build_debug_ext.py --force    # rebuild
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCES = HERE / "debug_ext"
NAME = "pttrace_demo"
# -O0 keeps every function out of line; -g gives DWARF 5 with gcc 12.
CFLAGS = ["-g", "-O0"]


def build_dir(debug: bool = True) -> Path:
    base = os.environ.get("PTTRACE_CACHE")
    return (Path(base) if base else ROOT / "tests" / ".cache") / ("debug_ext" if debug else "debug_ext_nodwarf")


def torch_version_stamp() -> str:
    """The installed torch, identified without importing it (its version file sits beside it)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("build_debug_ext: torch is not installed in this interpreter")
    version_file = Path(spec.origin).with_name("version.py")
    return version_file.read_text() if version_file.exists() else spec.origin


def cflags(debug: bool = True) -> list[str]:
    return CFLAGS if debug else [f for f in CFLAGS if f != "-g"]


def input_stamp(debug: bool = True) -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCES.iterdir()):
        if path.suffix in {".cpp", ".h"}:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(" ".join(cflags(debug)).encode())
    digest.update(torch_version_stamp().encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def build(force: bool = False, verbose: bool = False, debug: bool = True) -> Path:
    """The library's path, built if needed; ``debug=False`` builds it without -g (no DWARF), as a
    release wheel's libraries are, elsewhere."""
    out_dir = build_dir(debug)
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / f"{NAME}.so"
    stamp_file = out_dir / "stamp"
    stamp = input_stamp(debug)
    if not force and library.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return library

    from torch.utils import cpp_extension  # heavy: only when a build is needed

    stamp_file.unlink(missing_ok=True)
    cpp_extension.load(
        name=NAME,
        sources=[str(SOURCES / "pttrace_demo.cpp")],
        extra_cflags=cflags(debug),
        extra_ldflags=["-g"] if debug else [],
        extra_include_paths=[str(SOURCES)],
        build_directory=str(out_dir),
        is_python_module=False,
        verbose=verbose,
    )
    if not library.exists():
        raise SystemExit(f"build_debug_ext: the build finished but {library} is missing")
    stamp_file.write_text(stamp)
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the cached build is current")
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    parser.add_argument("--no-debug", action="store_true",
                        help="build without -g (no DWARF), into its own directory: a stand-in for a release build")
    args = parser.parse_args(argv)
    print(build(force=args.force, verbose=args.verbose, debug=not args.no_debug))
    return 0


if __name__ == "__main__":
    sys.exit(main())
