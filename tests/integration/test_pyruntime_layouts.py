"""The reader's layouts are what each debug build's DWARF says (gdb reads the DWARF).

3.10-3.12: the table kept in tracer/pyruntime/tables.py. 3.13: the layout parsed from the
_Py_DebugOffsets a running interpreter holds. 3.10-3.13: the object offsets the thread-name reader uses
(tracer/pyruntime/objects.py).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests import pythons
from tracer.pyruntime import layout as L
from tracer.pyruntime import objects as O
from tracer.pyruntime.process import open_runtime
from tracer.pyruntime.tables import LAYOUTS

pytestmark = pytest.mark.gdb

_spec = importlib.util.spec_from_file_location("gen_pyruntime_layouts",
                                               Path(pythons.ROOT) / "scripts" / "gen_pyruntime_layouts.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# Layout attribute -> the table's name for it.
ATTRS = {
    "interpreters_head": "runtime.interpreters_head", "interp_next": "interp.next", "interp_id": "interp.id",
    "interp_threads_head": "interp.threads_head", "interp_modules": "interp.modules", "ts_next": "tstate.next",
    "ts_interp": "tstate.interp",
    "ts_thread_id": "tstate.thread_id", "ts_native_thread_id": "tstate.native_thread_id",
    "ts_frame": "tstate.frame", "ts_cframe": "tstate.cframe", "cf_current": "cframe.current_frame",
    "f_previous": "frame.previous", "f_code": "frame.code", "f_lasti": "frame.lasti", "f_instr": "frame.instr",
    "f_owner": "frame.owner", "f_is_entry": "frame.is_entry", "co_filename": "code.filename",
    "co_name": "code.name", "co_qualname": "code.qualname", "co_firstlineno": "code.firstlineno",
    "co_linetable": "code.linetable", "co_code_adaptive": "code.code_adaptive", "bytes_size": "bytes.size",
    "bytes_data": "bytes.data", "u_length": "unicode.length", "u_state": "unicode.state",
    "co_names": "code.names", "tuple_size": "tuple.size", "tuple_items": "tuple.items",
}


def _as_dwarf_names(lay: L.Layout) -> dict:
    out = {key: getattr(lay, attr) for attr, key in ATTRS.items() if getattr(lay, attr) is not None}
    out["unicode.ascii_size"] = lay.u_ascii_size
    out["unicode.compact_size"] = lay.u_compact_size
    out["unicode.state.kind"] = lay.kind_shift
    out["unicode.state.compact"] = lay.compact_bit
    out["unicode.state.ascii"] = lay.ascii_bit
    return out


def _offsets(dwarf: dict) -> dict:
    """DWARF's [offset, size] pairs as offsets (bit positions for the state bits), owner values left out."""
    return {k: (v[0] if isinstance(v, list) else v) for k, v in dwarf.items() if not k.startswith("owner.")}


@pytest.mark.parametrize("minor", gen.BUILDS)
def test_table_equals_dwarf(minor):
    lib = gen.libpython_of(minor)
    if lib is None:
        pytest.skip(f"no pyenv {minor} under {gen.PYENV}")
    dwarf = gen.dwarf_layout(lib, minor)
    assert LAYOUTS[minor] == dwarf
    lay = L.from_table(int(minor.split(".")[1]))
    assert _as_dwarf_names(lay) == _offsets(dwarf)
    assert lay.shim_owners == ({dwarf["owner.cstack"]} if "owner.cstack" in dwarf else set())


def test_debug_offsets_equal_dwarf_313():
    python = pythons.pyenv_python(13)
    if python is None:
        pytest.skip("pyenv 3.13 is not installed")
    dwarf = gen.dwarf_layout(gen.libpython_of("3.13"), "3.13")
    proc = pythons.start_stopped(python)
    try:
        runtime, mem = open_runtime(proc.pid)
        mem.close()
    finally:
        pythons.finish(proc)
    lay = runtime.layout
    assert lay.minor == 13
    assert _as_dwarf_names(lay) == _offsets(dwarf)
    assert lay.shim_owners == {dwarf["owner.cstack"]}


# objects.py's offsets: (C type, field path) -> what the module uses.
_OBJECT_FIELDS = {
    "ob_type": (("PyObject", "ob_type"), lambda o: O.OB_TYPE),
    "md_dict": (("PyModuleObject", "md_dict"), lambda o: O.MD_DICT),
    "ma_keys": (("PyDictObject", "ma_keys"), lambda o: O.MA_KEYS),
    "ma_values": (("PyDictObject", "ma_values"), lambda o: O.MA_VALUES),
    "tp_basicsize": (("PyTypeObject", "tp_basicsize"), lambda o: O.TP_BASICSIZE),
    "tp_flags": (("PyTypeObject", "tp_flags"), lambda o: O.TP_FLAGS),
    "tp_dictoffset": (("PyTypeObject", "tp_dictoffset"), lambda o: O.TP_DICTOFFSET),
    "dk_nentries": (("PyDictKeysObject", "dk_nentries"), lambda o: o.keys_nentries),
    "dk_indices": (("PyDictKeysObject", "dk_indices"), lambda o: o.keys_indices),
    "ht_cached_keys": (("PyHeapTypeObject", "ht_cached_keys"), lambda o: o.cached_keys),
}


@pytest.mark.parametrize("minor", gen.BUILDS + gen.CHECKED)
def test_object_offsets_equal_dwarf(minor):
    lib = gen.libpython_of(minor)
    if lib is None:
        pytest.skip(f"no pyenv {minor} under {gen.PYENV}")
    o = O.OBJECTS[int(minor.split(".")[1])]
    fields = {name: where for name, (where, _) in _OBJECT_FIELDS.items()}
    if o.keys_log2:
        fields |= {"dk_log2_size": ("PyDictKeysObject", "dk_log2_size"), "dk_kind": ("PyDictKeysObject", "dk_kind"),
                   "values": ("PyDictValues", "values")}
    else:
        fields["dk_size"] = ("PyDictKeysObject", "dk_size")
    long_size, long_digits = (("long_value.lv_tag", "long_value.ob_digit") if o.long_tag
                              else ("ob_base.ob_size", "ob_digit"))
    fields |= {"long_size": ("PyLongObject", long_size), "long_digits": ("PyLongObject", long_digits)}
    dwarf = gen.dwarf_layout(lib, minor, fields)
    assert {name: dwarf[name][0] for name in _OBJECT_FIELDS} == {n: f(o) for n, (_, f) in _OBJECT_FIELDS.items()}
    assert (dwarf["long_size"][0], dwarf["long_digits"][0]) == (O.LONG_SIZE, O.LONG_DIGITS)
    if o.keys_log2:  # three bytes from offset 8: log2 size, log2 index bytes, kind
        assert (dwarf["dk_log2_size"][0], dwarf["dk_kind"][0], dwarf["values"][0]) == (8, 10, o.values_items)
    else:
        assert dwarf["dk_size"] == [8, 8] and o.values_items == 0
