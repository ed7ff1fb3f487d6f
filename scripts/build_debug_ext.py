"""Build the pttrace_demo operator library with -g -O0 and print the path of the built .so.

The library (scripts/debug_ext/) registers ``pttrace_demo::scale_add`` (CPU kernel),
``pttrace_demo::scale_add_twice`` (CompositeImplicitAutograd) and ``pttrace_demo::boxed_scale`` (a boxed
CPU kernel: its arguments an IValue stack) with TORCH_LIBRARY / TORCH_LIBRARY_IMPL: a real debug build
whose frames carry DWARF file:line, for the tests and the demo.

Building takes ~15 s of CPU, so the result is cached in ``$PTTRACE_CACHE/debug_ext`` (default
``tests/.cache/debug_ext``) together with a stamp of its inputs; while the stamp matches, this script
prints the path without importing torch. ``--no-debug`` gives the same library without DWARF, as a release
build's are, in ``debug_ext_nodwarf``: linked again from the -g build's object with the debug sections left
out (gcc's code does not depend on -g), ~0.3 s instead of a second compile of ~20 s of CPU.

    python scripts/build_debug_ext.py              # -> /…/debug_ext/pttrace_demo.so
    python scripts/build_debug_ext.py --no-debug   # -> /…/debug_ext_nodwarf/pttrace_demo.so
    python scripts/build_debug_ext.py --force      # rebuild
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import shlex
import subprocess
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


def input_stamp() -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCES.iterdir()):
        if path.suffix in {".cpp", ".h"}:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    digest.update(torch_version_stamp().encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def build(force: bool = False, verbose: bool = False, debug: bool = True) -> Path:
    """The library's path, built if needed; ``debug=False`` gives it without DWARF (as a release wheel's
    libraries are), elsewhere. One build at a time: the one without DWARF is linked from the -g build's
    object, and two test workers may ask at once."""
    lock_dir = build_dir().parent
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "debug_ext.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        library = _build_debug(force, verbose)
        return library if debug else _link_without_dwarf(library, force)


def _build_debug(force: bool, verbose: bool) -> Path:
    out_dir = build_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / f"{NAME}.so"
    stamp_file = out_dir / "stamp"
    stamp = input_stamp()
    if not force and library.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return library

    from torch.utils import cpp_extension  # heavy: only when a build is needed

    # torch builds with ninja, which it looks for on PATH: the venv's own (pyproject.toml's test tools) is
    # found without the venv activated, on a machine that has no ninja of its own.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    stamp_file.unlink(missing_ok=True)
    cpp_extension.load(
        name=NAME,
        sources=[str(SOURCES / "pttrace_demo.cpp")],
        extra_cflags=CFLAGS,
        extra_ldflags=["-g"],
        extra_include_paths=[str(SOURCES)],
        build_directory=str(out_dir),
        is_python_module=False,
        verbose=verbose,
    )
    if not library.exists():
        raise SystemExit(f"build_debug_ext: the build finished but {library} is missing")
    stamp_file.write_text(stamp)
    return library


def _link_without_dwarf(debug_library: Path, force: bool) -> Path:
    """The -g build's object linked again as torch's build linked it (its build.ninja's command), with
    the linker leaving out every debug section: the code is the same, the library has no DWARF, and its
    build-id (a hash of what the linker wrote) is its own."""
    out_dir = build_dir(debug=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / f"{NAME}.so"
    stamp_file = out_dir / "stamp"
    stamp = hashlib.sha256((debug_library.parent / "stamp").read_bytes() + b"\0strip-debug").hexdigest()
    if not force and library.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return library
    stamp_file.unlink(missing_ok=True)
    ninja = dict(line.split(" = ", 1) for line in (debug_library.parent / "build.ninja").read_text().splitlines()
                 if " = " in line and not line.startswith(" "))
    ldflags = [flag for flag in shlex.split(ninja["ldflags"]) if flag != "-g"]
    partial = library.with_suffix(".so.partial")
    subprocess.run([ninja["cxx"], str(debug_library.parent / f"{NAME}.o"), *ldflags, "-Wl,--strip-debug",
                    "-o", str(partial)], check=True)
    partial.replace(library)
    stamp_file.write_text(stamp)
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the cached build is current")
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    parser.add_argument("--no-debug", action="store_true",
                        help="the library without DWARF, in its own directory: a stand-in for a release build")
    args = parser.parse_args(argv)
    print(build(force=args.force, verbose=args.verbose, debug=not args.no_debug))
    return 0


if __name__ == "__main__":
    sys.exit(main())
