"""Where one torch build keeps what pttrace reads: one frozen ``TorchLayout`` of byte offsets and enums.

Two sources, both of the installed build itself, never of a torch pttrace was written against:
- **The probe** (``probe.py``), run once by the target's interpreter, makes tensors of known shape,
  dtype, device and autograd state and finds each field in its own memory: ``TensorImpl``'s
  ``sizes_and_strides_``, ``storage_offset_``, ``numel_``, ``data_type_`` (and the TypeMeta index of
  every dtype torch has, which is its ``c10::ScalarType``), ``device_opt_``, ``key_set_``,
  ``storage_``, ``autograd_meta_``; ``StorageImpl``'s data pointer; ``AutogradMeta``'s ``grad_fn_``,
  ``requires_grad_``, ``is_view_``; where ``THPVariable`` keeps its tensor.
- **The wheel's headers** (``torch/include``) for enums no tensor shows: ``DeviceType``, ``Layout``,
  ``MemoryFormat``, ``c10::Scalar``'s tag and where its value starts, ``IListRefTag``.

The result is cached under pttrace's cache dir keyed by the build-ids of libc10, libtorch_cpu and
libtorch_python and the interpreter (a ``PyObject`` header is the interpreter's), and travels to the
gdb agent as JSON. A field that cannot be established is None, with the reason in ``problems``: the
readers then say a value is unreadable, and why, instead of guessing. Standard library only.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from functools import cached_property

from tracer.elfparts import file_build_id as build_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
# pathlib is not imported: this module runs inside gdb too (the agent reads values with its layouts), where
# pathlib's import (with urllib.parse and ipaddress) was ~6% of the agent's, before the target may start.


def _read(include: str, rel: str) -> str:
    with open(os.path.join(include, rel), errors="replace") as fh:
        return fh.read()

FORMAT = 7  # a new field in TorchLayout: a new format, so cached layouts are made again
_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
# torch's names for DeviceType, Layout and MemoryFormat enumerators (``str(torch.device)``, ``torch.strided``).
_DEVICE_NAMES = {"PrivateUse1": "privateuseone"}
_LAYOUT_NAMES = {"Strided": "strided", "Sparse": "sparse_coo", "SparseCsr": "sparse_csr", "Mkldnn": "_mkldnn",
                 "SparseCsc": "sparse_csc", "SparseBsr": "sparse_bsr", "SparseBsc": "sparse_bsc", "Jagged": "jagged"}
_FORMAT_NAMES = {"Contiguous": "contiguous_format", "Preserve": "preserve_format", "ChannelsLast": "channels_last",
                 "ChannelsLast3d": "channels_last_3d"}


class LayoutUnknown(Exception):
    """The layout of this torch could not be established: one sentence saying why."""


@dataclass(frozen=True)
class Dtype:
    """One torch dtype as the target's build numbers it."""

    index: int  # TypeMeta index == c10::ScalarType value
    name: str  # torch's name: float32, bfloat16, complex64, qint8
    itemsize: int
    is_complex: bool = False
    is_floating_point: bool = False


# The TensorImpl and StorageImpl offsets no tensor is read without.
_IMPL_FIELDS = ("sizes_and_strides", "inline_dims", "storage_offset", "numel", "data_type", "device_opt", "key_set",
                "storage", "storage_data", "autograd_meta")


@dataclass(frozen=True)
class ImplFields:
    """``TorchLayout``'s offsets that a tensor is read by, every one established (``TorchLayout.impl_fields``),
    and ``span``: the bytes of a TensorImpl the tensor reader reads at once, up to the last field it uses."""

    sizes_and_strides: int
    inline_dims: int
    storage_offset: int
    numel: int
    data_type: int
    device_opt: int
    key_set: int
    storage: int
    storage_data: int
    autograd_meta: int
    span: int


@dataclass(frozen=True)
class TorchLayout:
    """Byte offsets in one torch build (None: not established; ``problems`` says why)."""

    torch_version: str | None = None
    # c10::TensorImpl
    sizes_and_strides: int | None = None  # SizesAndStrides: the dimension count, then its storage
    inline_dims: int | None = None  # up to this many dims inline (sizes, then strides); else a heap pointer
    storage_offset: int | None = None
    numel: int | None = None
    data_type: int | None = None  # uint16 TypeMeta index
    device_opt: int | None = None  # std::optional<Device>: int8 type, int8 index, bool engaged
    key_set: int | None = None  # uint64 DispatchKeySet
    storage: int | None = None  # intrusive_ptr<StorageImpl>
    autograd_meta: int | None = None  # unique_ptr<AutogradMetaInterface>
    extra_meta: int | None = None  # unique_ptr<ExtraMeta>; its first field: unique_ptr<SymbolicShapeMeta>
    storage_data: int | None = None  # StorageImpl: DataPtr's data pointer
    storage_nbytes: int | None = None  # StorageImpl: its size in bytes (a SymInt)
    # torch::autograd::AutogradMeta
    grad_fn: int | None = None  # the Node pointer (intrusive_ptr, or a shared_ptr's element pointer)
    requires_grad: int | None = None  # bool
    is_view: int | None = None  # bool
    node_object_cdata: int | None = None  # THPCppFunction (a grad_fn object): its Node pointer
    thp_variable_cdata: int | None = None  # THPVariable: its TensorImpl pointer
    py_tp_name: int | None = None  # PyTypeObject: tp_name (a C string), tp_base (the base type)
    py_tp_base: int | None = None
    py_tensor_base: str | None = None  # the C type every tensor class derives from: torch._C.TensorBase
    undefined_key_set: int | None = None  # UndefinedTensorImpl's key set (it has no device)
    dtypes: tuple[Dtype, ...] = ()
    # Key sets of tensors whose layout is not strided, less a dense CPU tensor's: layout name -> bits.
    layout_bits: tuple[tuple[str, int], ...] = ()
    compressed_layout: int | None = None  # SparseCsrTensorImpl's layout_ byte (csr, csc, bsr, bsc)
    compressed_layouts: tuple[tuple[int, str], ...] = ()  # its values -> torch's names
    # enums from the headers: value -> torch's name
    device_types: tuple[tuple[int, str], ...] = ()
    layouts: tuple[tuple[int, str], ...] = ()
    memory_formats: tuple[tuple[int, str], ...] = ()
    scalar_tags: tuple[str, ...] = ()  # c10::Scalar::Tag enumerators in order (HAS_d, HAS_i, ...)
    scalar_value: int | None = None  # offset of c10::Scalar's value union (after the int tag)
    ilistref_tags: tuple[str, ...] = ()  # c10::IListRefTag enumerators in order
    ivalue_tags: tuple[str, ...] = ()  # c10::IValue::Tag enumerators in order (None, Tensor, ...)
    problems: tuple[str, ...] = ()

    def dtype(self, index: int) -> Dtype | None:
        return self._dtype_table.get(index)

    def enum_name(self, table: str, value: int) -> str | None:
        return self._enum_tables[table].get(value)

    # Lookups made once per layout (a hit reads several tensors; cached_property writes the instance's
    # __dict__ directly, which a frozen dataclass allows).
    @cached_property
    def _dtype_table(self) -> dict[int, Dtype]:
        return {d.index: d for d in self.dtypes}

    @cached_property
    def shape_cache(self) -> dict:
        """TensorImpl bytes -> the shape read from them (tracer.values.tensor), for this layout only."""
        return {}

    @cached_property
    def tensor_missing(self) -> list[str]:
        """The TensorImpl fields a tensor cannot be read without that this layout lacks."""
        return [n for n in _IMPL_FIELDS if getattr(self, n) is None]

    @cached_property
    def impl_fields(self) -> ImplFields | None:
        """The offsets a tensor is read by; None while one is not established (``tensor_missing`` names it)."""
        if self.tensor_missing:
            return None
        found: dict[str, int] = {n: getattr(self, n) for n in _IMPL_FIELDS}
        span = max(found["key_set"] + 8, found["device_opt"] + 3, found["data_type"] + 2, found["numel"] + 8,
                   found["storage_offset"] + 8, found["storage"] + 8, found["autograd_meta"] + 8,
                   (self.extra_meta or 0) + 8, found["sizes_and_strides"] + 8 * (1 + 2 * found["inline_dims"]))
        return ImplFields(**found, span=span)

    @cached_property
    def _enum_tables(self) -> dict[str, dict[int, str]]:
        return {t: dict(getattr(self, t)) for t in ("device_types", "layouts", "memory_formats", "compressed_layouts")}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TorchLayout:
        """The layout a ``to_json`` wrote; unknown keys are ignored, missing ones are None."""
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["dtypes"] = tuple(Dtype(**d) for d in kw.get("dtypes") or ())
        for name in ("layout_bits", "device_types", "layouts", "memory_formats", "compressed_layouts"):
            kw[name] = tuple((a, b) for a, b in kw.get(name) or ())
        for name in ("scalar_tags", "ilistref_tags", "ivalue_tags", "problems"):
            kw[name] = tuple(kw.get(name) or ())
        return cls(**kw)


# ---------------------------------------------------------------------------------------------------
# From the probe's report and the headers to a layout
# ---------------------------------------------------------------------------------------------------
def from_probe(report: dict, include: str | None) -> TorchLayout:
    """A layout from the probe's JSON report and the headers under ``include`` (None: no headers)."""
    t, ag = report.get("tensor") or {}, report.get("autograd") or {}
    problems = list(report.get("problems") or [])
    dtypes = tuple(sorted((Dtype(int(k), v["name"], int(v["itemsize"]), bool(v.get("is_complex")),
                                 bool(v.get("is_floating_point"))) for k, v in (report.get("dtypes") or {}).items()),
                          key=lambda d: d.index))
    enums = header_enums(include) if include else {}
    if not include:
        problems.append("no torch/include headers beside the libraries: devices other than the probe's, "
                        "layouts, memory formats, scalars and tensor lists are not decoded")
    devices = enums.get("DeviceType", ())
    meta = report.get("meta_device_type")
    if devices and meta is not None and dict(devices).get(meta) != "meta":
        problems.append(f"the headers' DeviceType does not match the probe's (Meta is {meta}): devices not decoded")
        devices = ()
    undefined = report.get("undefined") or {}
    extra = None
    if t.get("autograd_meta") is not None and report.get("extra_meta_null") and include:
        # The header puts extra_meta_ right after autograd_meta_, and the symbolic sizes first in ExtraMeta.
        try:
            text = _read(include, "c10/core/TensorImpl.h")
        except OSError:
            text = ""
        if re.search(r"autograd_meta_ = nullptr;\s*(?:(?:protected:|public:|private:|//[^\n]*)\s*)*"
                     r"std::unique_ptr<c10::ExtraMeta> extra_meta_", text) and \
                re.search(r"struct C10_API ExtraMeta \{\s*std::unique_ptr<c10::SymbolicShapeMeta>", text):
            extra = t["autograd_meta"] + 8
    if extra is None:
        problems.append("ExtraMeta not placed: a tensor with symbolic sizes cannot be told apart")
    return TorchLayout(
        torch_version=report.get("torch_version"), sizes_and_strides=t.get("sizes_and_strides"),
        inline_dims=t.get("inline_dims"), storage_offset=t.get("storage_offset"), numel=t.get("numel"),
        data_type=t.get("data_type"), device_opt=t.get("device_opt"), key_set=t.get("key_set"),
        storage=t.get("storage"), autograd_meta=t.get("autograd_meta"), extra_meta=extra, storage_data=report.get("storage_data"),
        storage_nbytes=report.get("storage_nbytes"),
        grad_fn=ag.get("grad_fn"), requires_grad=ag.get("requires_grad"), is_view=ag.get("is_view"),
        node_object_cdata=report.get("node_object_cdata"), thp_variable_cdata=report.get("thp_variable_cdata"),
        py_tp_name=(report.get("py_type") or {}).get("tp_name"), py_tp_base=(report.get("py_type") or {}).get("tp_base"),
        py_tensor_base=(report.get("py_type") or {}).get("tensor_base"),
        undefined_key_set=undefined.get("key_set") if undefined.get("device_engaged") == 0 else None,
        dtypes=dtypes, layout_bits=tuple((k, int(v)) for k, v in sorted((report.get("layout_bits") or {}).items())),
        compressed_layout=report.get("compressed_layout"),
        compressed_layouts=tuple(sorted((int(k), v) for k, v in (report.get("compressed_layouts") or {}).items())),
        device_types=devices, layouts=enums.get("Layout", ()), memory_formats=enums.get("MemoryFormat", ()),
        scalar_tags=enums.get("Tag", ()), scalar_value=enums.get("scalar_value"),
        ilistref_tags=enums.get("IListRefTag", ()), ivalue_tags=enums.get("IValueTag", ()), problems=tuple(problems))


# (what the layout calls it, the enum's name, the headers that declare it, newest place first)
_ENUM_FILES = (
    ("DeviceType", "DeviceType", ("torch/headeronly/core/DeviceType.h", "c10/core/DeviceType.h")),
    ("Layout", "Layout", ("torch/headeronly/core/Layout.h", "c10/core/Layout.h")),
    ("MemoryFormat", "MemoryFormat", ("torch/headeronly/core/MemoryFormat.h", "c10/core/MemoryFormat.h")),
    ("Tag", "Tag", ("c10/core/Scalar.h",)),
    ("IListRefTag", "IListRefTag", ("ATen/core/IListRef.h",)),
    ("IValueTag", "Tag", ("ATen/core/ivalue.h",)),
)
_COMPLEX_FILES = ("torch/headeronly/util/complex.h", "c10/util/complex.h")


def header_enums(include: str) -> dict:
    """The enums pttrace decodes, from the headers under ``include``: name -> ((value, torch name), ...)
    or, for the tags, the enumerator names in order; ``scalar_value``: where a Scalar's value starts."""
    out: dict = {}
    for key, enum, candidates in _ENUM_FILES:
        for rel in candidates:
            try:
                text = _read(include, rel)
            except OSError:
                continue
            entries = parse_enum(text, enum)
            if entries:
                out[key] = entries
                break
    names = {"DeviceType": lambda n: _DEVICE_NAMES.get(n, n.lower()), "Layout": lambda n: _LAYOUT_NAMES.get(n),
             "MemoryFormat": lambda n: _FORMAT_NAMES.get(n)}
    for enum, name in names.items():
        if enum in out:
            out[enum] = tuple((v, name(n)) for n, v in out[enum] if name(n) and not n.startswith("COMPILE_TIME"))
    for enum in ("Tag", "IListRefTag", "IValueTag"):
        if enum in out:
            out[enum] = tuple(n for n, _ in out[enum])
    # c10::Scalar is {Tag tag; union v_t {double, int64_t, uint64_t, c10::complex<double>, pointer} v;}: the
    # union is aligned as its most aligned member; c10::complex<T> is declared alignas(2 * sizeof(T)).
    for rel in _COMPLEX_FILES:
        try:
            text = _read(include, rel)
        except OSError:
            continue
        out["scalar_value"] = 16 if re.search(r"struct\s+alignas\(\s*sizeof\(T\)\s*\*\s*2\s*\)\s+complex", text) else 8
        break
    return out


def parse_enum(text: str, name: str) -> tuple[tuple[str, int], ...]:
    """``enum class NAME [: type] { A, B = 3, ... }`` -> ((A, 0), (B, 3), ...); macro-built entries
    (``IListRefTag``'s ``TORCH_ILISTREF_FORALL_TAGS``) are expanded from the ``#define`` in ``text``."""
    m = re.search(r"enum\s+class\s+" + re.escape(name) + r"\b[^{;]*\{(.*?)\}", text, re.S)
    if not m:
        return ()
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", m.group(1), flags=re.S)
    body = re.sub(r"#\s*(?:define|undef)[^\n]*", "", body)
    for macro in re.findall(r"\b([A-Z][A-Z0-9_]+)\(\w+\)", body):
        d = re.search(r"(?m)^[ \t]*#define\s+" + macro + r"\([^)]*\)((?:[^\n]*\\\n)*[^\n]*)", text)
        if d:
            items = ", ".join(re.findall(r"_\((\w+)", d.group(1)))
            body = re.sub(re.escape(macro) + r"\(\w+\)", items + ",", body)
    out, value = [], -1
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        ident, _, expr = item.partition("=")
        ident = ident.strip()
        if not re.fullmatch(r"[A-Za-z_]\w*", ident):
            return ()
        if expr.strip():
            try:
                value = int(expr.strip(), 0)
            except ValueError:
                return ()  # an expression pttrace does not evaluate: no enum rather than a wrong one
        else:
            value += 1
        out.append((ident, value))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# Establishing the layout of an installed torch (probe + cache)
# ---------------------------------------------------------------------------------------------------
def _key_libraries(libraries: list[str]) -> list[str]:
    wanted = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")
    return sorted(p for p in libraries if os.path.basename(p).split(".so")[0] + ".so" in wanted)


def cache_key(python: str, libraries: list[str]) -> str | None:
    """What identifies a layout: the build-ids of torch's core libraries and the interpreter; None if a
    core library is missing or has no build-id (then nothing is cached)."""
    libs = _key_libraries(libraries)
    if len(libs) < 3:
        return None
    ids = [build_id(p) for p in libs]
    known = [i for i in ids if i is not None]
    if len(known) < len(ids):
        return None
    parts = [str(FORMAT), os.path.realpath(python)] + known
    import hashlib  # here: the agent inside gdb imports this module, and needs neither hashlib nor subprocess

    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def include_dir(libraries: list[str]) -> str | None:
    """``torch/include`` of the torch the libraries belong to; None if the wheel has no headers."""
    for p in _key_libraries(libraries):
        inc = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(p))), "include")
        if os.path.isdir(os.path.join(inc, "c10")):
            return inc
    return None


def establish(python: str, libraries: list[str], cache_dir: Path | None, pythonpath: str | None = None,
              timeout: float = 120) -> TorchLayout:
    """The layout of ``python``'s torch: from the cache, else from a probe run (a few seconds, once per
    build). Raises LayoutUnknown with the reason when the probe cannot run or finds nothing."""
    key = cache_key(python, libraries)
    path = cache_dir / "values" / f"layout-{key}.json" if cache_dir is not None and key else None
    if path is not None:
        try:
            return TorchLayout.from_json(path.read_text())
        except (OSError, ValueError, TypeError):
            pass
    report = run_probe(python, pythonpath, timeout)
    layout = from_probe(report, include_dir(libraries))
    if path is not None:
        from tracer import settings  # pttrace's side only: the agent inside gdb reads layouts, never writes them

        settings.write_cache_file(path, layout.to_json(), ".layout-")
    return layout


def run_probe(python: str, pythonpath: str | None = None, timeout: float = 120) -> dict:
    """The probe's report, run by ``python`` (which must import torch). Raises LayoutUnknown."""
    import subprocess

    from tracer import probes  # pttrace's side only, as settings above

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = probes.run([python, str(_PROBE)], timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LayoutUnknown(f"the layout probe could not run with {python}: {exc}") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LayoutUnknown(f"the layout probe failed with {python} (exit {proc.returncode}): {last}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise LayoutUnknown("the layout probe's report is not JSON") from None


