"""Generate tracer/pyruntime/tables.py: CPython 3.10-3.12 struct offsets, read from a debug build's DWARF.

CPython 3.13+ describes its own layout in ``_Py_DebugOffsets``; older versions do not, so the few
offsets the Python-frame reader needs are taken once from the DWARF of a debug build (gdb reads it)
and kept in the package as data. Offsets depend on the minor version and the pointer size only, not on
the distribution, for the default (non-debug, GIL) build of x86-64 and aarch64 Linux.

    python scripts/gen_pyruntime_layouts.py                 # the pyenv builds under ~/.pyenv/versions
    python scripts/gen_pyruntime_layouts.py --print LIBPYTHON   # one build's layout as JSON

tests/integration/test_pyruntime_layouts.py checks the table against each build's DWARF.
"""
from __future__ import annotations

import json
import os
import pprint
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tracer" / "pyruntime" / "tables.py"
PYENV = Path.home() / ".pyenv" / "versions"
BUILDS = ("3.10", "3.11", "3.12")
# 3.13+ keep their offsets in _Py_DebugOffsets: FIELDS names them too, to check that table against DWARF.
CHECKED = ("3.13",)

# Our field name -> (C type, field path) per minor version; a version missing from a row lacks the field.
FIELDS = {
    "runtime.interpreters_head": {"*": ("_PyRuntimeState", "interpreters.head")},
    "interp.next": {"*": ("PyInterpreterState", "next")},
    "interp.id": {"*": ("PyInterpreterState", "id")},
    "interp.modules": {"3.10": ("PyInterpreterState", "modules"), "3.11": ("PyInterpreterState", "modules"),
                       "3.12": ("PyInterpreterState", "imports.modules"),
                       "3.13": ("PyInterpreterState", "imports.modules")},
    "interp.threads_head": {"3.10": ("PyInterpreterState", "tstate_head"),
                            "*": ("PyInterpreterState", "threads.head")},
    "tstate.next": {"*": ("PyThreadState", "next")},
    "tstate.interp": {"*": ("PyThreadState", "interp")},
    "tstate.thread_id": {"*": ("PyThreadState", "thread_id")},
    "tstate.native_thread_id": {"3.11": ("PyThreadState", "native_thread_id"),
                                "3.12": ("PyThreadState", "native_thread_id"),
                                "3.13": ("PyThreadState", "native_thread_id")},
    "tstate.frame": {"3.10": ("PyThreadState", "frame"), "3.13": ("PyThreadState", "current_frame")},
    "tstate.cframe": {"3.11": ("PyThreadState", "cframe"), "3.12": ("PyThreadState", "cframe")},
    "cframe.current_frame": {"3.11": ("_PyCFrame", "current_frame"), "3.12": ("_PyCFrame", "current_frame")},
    "frame.previous": {"3.10": ("PyFrameObject", "f_back"), "*": ("_PyInterpreterFrame", "previous")},
    "frame.code": {"3.10": ("PyFrameObject", "f_code"), "3.13": ("_PyInterpreterFrame", "f_executable"),
                   "*": ("_PyInterpreterFrame", "f_code")},
    "frame.lasti": {"3.10": ("PyFrameObject", "f_lasti")},
    "frame.instr": {"3.11": ("_PyInterpreterFrame", "prev_instr"), "3.12": ("_PyInterpreterFrame", "prev_instr"),
                    "3.13": ("_PyInterpreterFrame", "instr_ptr")},
    "frame.owner": {"3.10": None, "*": ("_PyInterpreterFrame", "owner")},
    "frame.is_entry": {"3.11": ("_PyInterpreterFrame", "is_entry")},
    "code.filename": {"*": ("PyCodeObject", "co_filename")},
    "code.name": {"*": ("PyCodeObject", "co_name")},
    "code.qualname": {"3.10": None, "*": ("PyCodeObject", "co_qualname")},
    "code.firstlineno": {"*": ("PyCodeObject", "co_firstlineno")},
    "code.linetable": {"*": ("PyCodeObject", "co_linetable")},
    "code.code_adaptive": {"3.10": None, "*": ("PyCodeObject", "co_code_adaptive")},
    "code.names": {"*": ("PyCodeObject", "co_names")},
    "tuple.size": {"*": ("PyTupleObject", "ob_base.ob_size")},
    "tuple.items": {"*": ("PyTupleObject", "ob_item")},
    "bytes.size": {"*": ("PyBytesObject", "ob_base.ob_size")},
    "bytes.data": {"*": ("PyBytesObject", "ob_sval")},
    "unicode.length": {"*": ("PyASCIIObject", "length")},
    "unicode.state": {"*": ("PyASCIIObject", "state")},
}
SIZES = {"unicode.ascii_size": "PyASCIIObject", "unicode.compact_size": "PyCompactUnicodeObject"}
STATE_BITS = ("kind", "compact", "ascii")
OWNERS = {"owner.generator": "FRAME_OWNED_BY_GENERATOR", "owner.cstack": "FRAME_OWNED_BY_CSTACK"}

# Runs inside gdb's Python: prints {name: [offset, size]} for the fields named in argv.
_GDB_SNIPPET = r'''
import json, sys, gdb
spec = json.loads(open(sys.argv_spec).read())
out = {}
for key, (ctype, path) in spec["fields"].items():
    t = gdb.lookup_type(ctype).strip_typedefs()
    off = 0
    for part in path.split("."):
        f = {x.name: x for x in t.fields()}[part]
        off += f.bitpos // 8
        t = f.type.strip_typedefs()
    out[key] = [off, t.sizeof]
for key, ctype in spec["sizes"].items():
    out[key] = gdb.lookup_type(ctype).sizeof
state = {f.name: f for f in gdb.lookup_type("PyASCIIObject").strip_typedefs()["state"].type.fields()}
for name in spec["bits"]:
    out["unicode.state." + name] = [state[name].bitpos, state[name].bitsize]
for key, enumerator in spec["owners"].items():
    try:
        out[key] = int(gdb.parse_and_eval(enumerator))
    except gdb.error:
        pass
print("LAYOUT " + json.dumps(out, sort_keys=True))
'''


def fields_for(minor: str) -> dict:
    out = {}
    for key, per in FIELDS.items():
        where = per[minor] if minor in per else per.get("*")
        if where is not None:
            out[key] = where
    return out


def dwarf_layout(libpython: str, minor: str, fields: dict | None = None) -> dict:
    """What the build's DWARF says, for the fields the reader uses (runs gdb -nx on the library);
    ``fields``: {name: (C type, field path)} instead of the table's."""
    spec = {"fields": fields_for(minor) if fields is None else fields, "sizes": SIZES, "bits": STATE_BITS,
            "owners": OWNERS}
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        code_path = os.path.join(tmp, "layout.py")
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        with open(code_path, "w", encoding="utf-8") as fh:
            fh.write(f"import sys\nsys.argv_spec = {spec_path!r}\n" + _GDB_SNIPPET)
        # -nx: no ~/.gdbinit (nor auto-loaded helpers); --batch: exit after the commands.
        proc = subprocess.run(["gdb", "-nx", "--batch", "-ex", f"source {code_path}", libpython],
                              capture_output=True, text=True, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("LAYOUT "):
            return json.loads(line[len("LAYOUT "):])
    raise RuntimeError(f"gdb could not read the layout of {libpython}: {proc.stderr.strip()[-500:]}")


def pyenv_version(minor: str) -> str | None:
    """The newest patch release of ``minor`` that pyenv built here ("3.12.1"): offsets do not change
    between patch releases, and each machine has its own."""
    found = []
    for home in PYENV.glob(f"{minor}.*") if PYENV.is_dir() else ():
        patch = home.name[len(minor) + 1:]
        if patch.isdigit() and (home / "lib" / f"libpython{minor}.so.1.0").exists():
            found.append((int(patch), home.name))
    return max(found)[1] if found else None


def libpython_of(minor: str) -> str | None:
    """pyenv's shared libpython of ``minor`` (its newest patch release here), or None."""
    version = pyenv_version(minor)
    return str(PYENV / version / "lib" / f"libpython{minor}.so.1.0") if version else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--print"] and len(argv) == 3:
        print(json.dumps(dwarf_layout(argv[1], argv[2]), indent=1, sort_keys=True))
        return 0
    missing = [minor for minor in BUILDS if libpython_of(minor) is None]
    if missing:
        print(f"gen_pyruntime_layouts: no pyenv build of {', '.join(missing)} under {PYENV}", file=sys.stderr)
        return 2
    table = {minor: dwarf_layout(libpython_of(minor), minor) for minor in BUILDS}
    sources = ", ".join(f"{m}: pyenv {pyenv_version(m)}" for m in BUILDS)
    TABLE.write_text(
        '"""CPython struct offsets per minor version (x86-64/aarch64 Linux, default build): '
        '{name: [offset, size]}.\n\n'
        f"Generated by scripts/gen_pyruntime_layouts.py from the DWARF of {sources}; do not edit.\n"
        '"""\n'
        f"LAYOUTS = {pprint.pformat(table, width=110, sort_dicts=True)}\n", encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
