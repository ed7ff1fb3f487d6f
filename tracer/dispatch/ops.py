"""Operators: from ``aten::NAME[.overload]`` to every function that implements it, and key sets.

People think in operators (``aten::sigmoid``, ``aten::add.Tensor``), the libraries in mangled C++
symbols. This module maps one to the other from the symbol index (``tracer.symbols``), never from
gdb's regex search (DESIGN.md section 2: ``rbreak`` takes minutes at libtorch scale):

- ``resolve_op(spec, libraries, facts)`` finds, for the operator and its overloads, the dispatcher
  entry points ``at::_ops::S::call``/``redispatch``, the autograd (``VariableType``), ADInplaceOrView,
  tracer and functionalization kernels, the ``wrapper_<Key>_...`` kernel wrappers, the boxing adapters
  for those of them that exist only inlined, the structured kernels and meta functions, the
  ``at::native`` kernels (one per CPU capability, told apart through their ``DispatchStub`` tables), and
  the backward (the generated autograd Node and ``NAME_backward``). ``@plt`` stubs and
  ``[clone .cold]`` parts are left out. Each becomes an address breakpoint for the agent.
- ``torch_facts(python)`` asks the target interpreter (once per torch install; cached) for its
  torch version, its operators and overloads, and its DispatchKeySet bit layout; ``key_table`` is that
  layout as it is stored in a session (``storage.decode_keyset`` turns raw bits into key names).

Naming conventions of the generated code (torchgen), for an operator ``N`` with overload ``o``:
  ``at::_ops::S``                      S = N, or N_o               (add.Tensor -> add_Tensor)
  ``VariableType::X`` and kin          X = cpp, or cpp_o           cpp = N, plus ``_out`` for out= overloads
  ``wrapper_<Key>_X`` (structured)     wrapper_CPU_add_Tensor, wrapper_CPU_sigmoid_out_out
  ``wrapper_<Key>_o_cpp`` (others)     wrapper_MkldnnCPU__sigmoid, wrapper_Lazy_out_sigmoid_out
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracer import probes, settings
from tracer.dispatch import native_functions
from tracer.dispatch.classify import classify, short_name, target_of
from tracer.text.cxxtext import split_top
from tracer.errors import UsageError

# CPU capabilities ATen compiles its vectorised kernels for (one copy per capability).
CAPABILITY_NAMESPACES = ("DEFAULT", "AVX2", "AVX512", "VSX", "ZVECTOR", "SVE", "SVE128", "SVE256", "SVE512", "NEON")
LABEL_PREFIX = "op:"

# Roles, in the order a call meets them (and the order ``pttrace ops`` lists them).
ROLES = (
    "entry", "redispatch", "autograd", "ADInplaceOrView", "functionalization", "tracer", "adapter",
    "kernel wrapper", "direct call", "meta function", "structured kernel", "native function", "native kernel",
    "backward node", "kernel",
)
# Static-dispatch namespaces (at::cpu::sigmoid...) and the key their functions belong to.
_STATIC_NAMESPACES = {
    "cpu": "CPU", "meta": "Meta", "compositeexplicitautograd": "CompositeExplicitAutograd",
    "compositeexplicitautogradnonfunctional": "CompositeExplicitAutogradNonFunctional",
    "compositeimplicitautograd": "CompositeImplicitAutograd", "mkldnncpu": "MkldnnCPU",
    "quantizedcpu": "QuantizedCPU", "sparsecpu": "SparseCPU", "sparsecsrcpu": "SparseCsrCPU",
}
# The backend suffix of a structured kernel's name (native_functions.yaml: ``CPU: mm_out_cpu``).
_BACKEND_SUFFIXES = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS", "xpu": "XPU", "meta": "Meta",
                     "sparse_cpu": "SparseCPU", "sparse_csr_cpu": "SparseCsrCPU", "mkldnn": "MkldnnCPU"}
_ADAPTERS = ("c10::impl::wrap_kernel_functor_unboxed_", "c10::impl::make_boxed_from_unboxed_functor")
_STUB_RE = re.compile(r"^at::native::DispatchStub<.*, at::native::(\w+)_stub_DECLARE_DISPATCH_type>::([A-Z][A-Z0-9_]*)$")


# ---------------------------------------------------------------------------------------------------
# What the target's torch says about itself
# ---------------------------------------------------------------------------------------------------
_FACTS_SCRIPT = r"""
import json, sys
out = {}
import torch
out["torch_version"] = torch.__version__
try:
    out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
except Exception:
    out["cpu_capability"] = None
KS, DK = torch._C.DispatchKeySet, torch._C.DispatchKey

def names(bits):
    try:
        text = repr(KS.from_raw_repr(bits))
    except Exception:
        return None
    inner = text[text.find("(") + 1 : text.rfind(")")]
    return [n.strip() for n in inner.split(",") if n.strip()]

enum_bits = {}
for n, k in DK.__members__.items():
    try:
        raw = KS(k).raw_repr()
    except Exception:
        continue
    if raw and raw & (raw - 1) == 0:
        enum_bits.setdefault(raw.bit_length() - 1, n)
dense = KS(DK.Dense).raw_repr()
nb = dense.bit_length() - 1  # backend-component bits sit below the first functionality bit
keys, bits = [], {}
for b in range(nb):
    nm = names(dense | (1 << b))
    bits[b] = nm[0] + "Bit" if nm and len(nm) == 1 else None
for f in range(nb, 64):
    single = names(1 << f)
    if single is None:
        continue
    if single:
        if len(single) == 1:
            keys.append([single[0], 1 << f])
            bits[f] = single[0]
        continue
    per_backend = False
    for b in range(nb):
        nm = names((1 << f) | (1 << b))
        if nm and len(nm) == 1:
            keys.append([nm[0], (1 << f) | (1 << b)])
            per_backend = True
    if per_backend:
        bits[f] = enum_bits.get(f) or "functionality bit %d" % f
out["key_table"] = {"torch_version": torch.__version__, "backend_bits": nb, "keys": keys,
                    "bits": {str(b): n for b, n in bits.items() if n}}
# A fresh thread's local key sets are torch's defaults (its TLS words are zero): what the stored words
# are XORed with (c10/core/impl/LocalDispatchKeySet.h).
import threading
_tls = []
def _probe():
    try:
        _tls.extend([torch._C._dispatch_tls_local_include_set().raw_repr(),
                     torch._C._dispatch_tls_local_exclude_set().raw_repr()])
    except Exception:
        pass
_t = threading.Thread(target=_probe)
_t.start()
_t.join()
if len(_tls) == 2:
    out["key_table"]["tls_defaults"] = _tls
is_out = {}
for s in torch._C._jit_get_all_schemas():
    if s.name.startswith("aten::"):
        is_out[(s.name[6:], s.overload_name)] = any(getattr(a, "is_out", False) for a in s.arguments)
ops = {}
for full in torch._C._dispatch_get_all_op_names():
    if full.startswith("aten::"):
        name, _, ov = full[6:].partition(".")
        ops.setdefault(name, []).append([ov, bool(is_out.get((name, ov), ov == "out" or ov.endswith("_out")))])
out["ops"] = ops
sys.stdout.write("\n" + json.dumps(out) + "\n")
"""
FACTS_FORMAT = 2  # 2: the key table has tls_defaults


@dataclass
class TorchFacts:
    """What the target interpreter's torch reports: version, operators, the DispatchKeySet layout."""

    torch_version: str | None
    cpu_capability: str | None
    key_table: dict | None
    ops: dict[str, list[tuple[str, bool]]]  # name -> [(overload, is_out)]

    def overloads(self, name: str) -> list[tuple[str, bool]] | None:
        found = self.ops.get(name)
        return [(o, bool(out)) for o, out in found] if found is not None else None


def _cache_dir() -> Path:
    return settings.cache_dir() / "ops"


def _facts_key(python: str, libraries: list[str], pythonpath: str | None = None) -> str:
    """The facts' cache key: the interpreter, and torch's core libraries by content (build-id), not by path or
    time, so that a new venv or a reinstall of the same wheel keeps them (its first run re-asked torch: ~1.3-1.6 s
    of wall time and ~100 MB, a second interpreter importing torch beside the target's start)."""
    from tracer.elfparts import file_identity

    parts = [os.path.realpath(python), os.environ.get("ATEN_CPU_CAPABILITY", ""), str(FACTS_FORMAT), pythonpath or ""]
    for lib in libraries:
        base = os.path.basename(lib)
        if base.startswith(("libtorch_cpu", "libc10.", "_C")):
            ident = file_identity(lib)
            if ident is not None:
                parts.append(f"{base}:{ident}")
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def torch_facts(python: str, libraries: list[str] | None = None, timeout: float = 120,
                use_cache: bool = True, pythonpath: str | None = None) -> TorchFacts | None:
    """Ask ``python``'s torch (imported in a child process; ~2 s) or the cache. None if it cannot say.

    ``pythonpath``: a directory to import torch from (the site-packages of an attached process whose
    executable is a virtual environment's base interpreter)."""
    if libraries is None:
        try:
            from tracer.symbols import torch_libraries

            libraries = torch_libraries(python)
        except Exception:
            libraries = []
    path = _cache_dir() / f"facts-{_facts_key(python, libraries, pythonpath)}.json"
    data = None
    if use_cache and libraries:
        try:
            data = json.loads(path.read_text())
            if data.get("format") != FACTS_FORMAT:
                data = None
        except (OSError, ValueError):
            data = None
    if data is None:
        try:
            proc = probes.run([python, "-c", _FACTS_SCRIPT], timeout=timeout, env=child_env(pythonpath))
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        try:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None
        data["format"] = FACTS_FORMAT
        if libraries:
            settings.write_cache_file(path, json.dumps(data), ".facts-")
    ops = {k: [(o, bool(out)) for o, out in v] for k, v in (data.get("ops") or {}).items()}
    return TorchFacts(data.get("torch_version"), data.get("cpu_capability"), data.get("key_table"), ops)


def key_table(python: str, libraries: list[str] | None = None, pythonpath: str | None = None) -> dict | None:
    """The DispatchKeySet numbering of ``python``'s torch, as stored in a session; None if unknown."""
    facts = torch_facts(python, libraries, pythonpath=pythonpath)
    return facts.key_table if facts is not None else None


def torch_of_process(pid: int) -> tuple[list[str], str] | None:
    """(torch's libraries, the directory torch is imported from) of a running process that has loaded
    torch, from its memory map; None if it has not (yet). For ``attach``: ``/proc/PID/exe`` of a virtual
    environment's Python is the base interpreter, which may not see the environment's torch."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            mapped = [line.split(None, 5)[5].strip() for line in fh if len(line.split(None, 5)) == 6]
    except OSError:
        return None
    package = None
    for path in mapped:
        m = re.search(r"^(/.*/torch)/(?:lib/[^/]+\.so[^/]*|_C[^/]*\.so)$", path)
        if m and os.path.isdir(m.group(1)):
            package = m.group(1)
            break
    if package is None:
        return None
    libdir = os.path.join(package, "lib")
    libs = sorted(os.path.join(libdir, f) for f in os.listdir(libdir) if f.endswith(".so")) \
        if os.path.isdir(libdir) else []
    libs += sorted(os.path.join(package, f) for f in os.listdir(package) if f.startswith("_C") and f.endswith(".so"))
    return libs, os.path.dirname(package)


def child_env(pythonpath: str | None = None) -> dict:
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env




# ---------------------------------------------------------------------------------------------------
# Operator names
# ---------------------------------------------------------------------------------------------------
_OP_RE = re.compile(r"^(?:aten::)?([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z0-9_]*))?$")


def parse_op(spec: str) -> tuple[str, str | None]:
    """``"add.Tensor"`` -> ``("add", "Tensor")``; ``"sigmoid"`` -> ``("sigmoid", None)`` (every overload);
    ``"sigmoid.default"`` -> ``("sigmoid", "")`` (the overload without a name)."""
    m = _OP_RE.match(spec.strip())
    if not m:
        raise UsageError(f"--op {spec!r} is not an operator name; give NAME or NAME.OVERLOAD, e.g. sigmoid or "
                         "add.Tensor.")
    name, overload = m.group(1), m.group(2)
    if overload == "default":
        overload = ""
    return name, overload


@dataclass(frozen=True)
class OpRef:
    """One overload of one ATen operator, and the names the generated code gives it."""

    name: str
    overload: str = ""
    out: bool = False
    backward: bool = False  # resolved as the backward of the requested op

    @property
    def aten(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def struct(self) -> str:  # at::_ops::<struct>
        return f"{self.name}_{self.overload}" if self.overload else self.name

    @property
    def cpp(self) -> str:
        return self.name + "_out" if self.out else self.name

    @property
    def kernel_name(self) -> str:  # VariableType::<x>, wrapper_<Key>_<x> (structured)
        return f"{self.cpp}_{self.overload}" if self.overload else self.cpp

    @property
    def unstructured_name(self) -> str:  # wrapper_<Key>_<o>_<cpp>
        return f"{self.overload}_{self.cpp}"

    @property
    def base(self) -> str:  # what kernels and stubs are named after: sigmoid_ -> sigmoid
        return self.name.rstrip("_") or self.name


def camel(name: str) -> str:
    """``mse_loss`` -> ``MseLoss``: how generated autograd Nodes are named (``MseLossBackward0``)."""
    return "".join(p[:1].upper() + p[1:] for p in name.split("_") if p)


def op_refs(spec: str, facts: TorchFacts | None, variants: bool = False,
            backward: bool = True) -> list[OpRef]:
    """The operator overloads ``--op spec`` stands for (the backward ones flagged)."""
    name, overload = parse_op(spec)
    refs: list[OpRef] = []

    def add(ref: OpRef) -> None:
        if ref not in refs:
            refs.append(ref)

    if facts is not None and facts.ops:
        known = facts.overloads(name)
        if known is None:
            close = difflib.get_close_matches(name, list(facts.ops), n=5, cutoff=0.6)
            raise UsageError(f"aten::{name} is not an operator of torch {facts.torch_version or ''}".rstrip() + ".",
                             hint=("close names: " + ", ".join(close)) if close else None)
        if overload is not None:
            match = [(o, out) for o, out in known if o == overload]
            if not match:
                names = ", ".join(f"{name}.{o}" if o else name for o, _ in known)
                raise UsageError(f"aten::{name} has no overload {overload!r}; it has {names}.")
            for o, out in match:
                add(OpRef(name, o, out))
        else:
            # The default overload first: a kernel named after the bare op (structured_mm_out_cpu)
            # is attributed to the first overload it fits.
            for o, out in sorted(known, key=lambda k: k[0] != ""):
                if variants or not out:
                    add(OpRef(name, o, out))
            if variants and not name.endswith("_"):
                for o, out in facts.overloads(name + "_") or []:
                    add(OpRef(name + "_", o, out))
            if not refs:
                names = ", ".join(f"{name}.{o}" if o else name for o, _ in known)
                raise UsageError(f"aten::{name} has only out= overloads ({names}); name one, or add --variants.")
        if backward and not name.endswith("_backward") and any(not r.out for r in refs):
            bw = name.rstrip("_") + "_backward"
            for o, out in facts.overloads(bw) or []:
                if variants or not out:
                    add(OpRef(bw, o, out, backward=True))
        return refs
    # No word from torch: take the names as given, and the usual variants.
    out = overload is not None and (overload == "out" or overload.endswith("_out"))
    add(OpRef(name, overload or "", out))
    if variants and overload is None:
        add(OpRef(name, "out", True))
        if not name.endswith("_"):
            add(OpRef(name + "_", "", False))
    if backward and not name.endswith("_backward") and not out:
        add(OpRef(name.rstrip("_") + "_backward", "", False, backward=True))
    return refs


# ---------------------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------------------
@dataclass
class OpFunction:
    """One function of an operator that ``--op`` breaks on."""

    function: str  # demangled, with parameters
    short: str
    library: str
    address: int  # file-relative (st_value)
    layer: str
    role: str
    op: str  # the ATen operator (with overload) it belongs to
    dispatch_key: str | None = None
    capability: str | None = None
    label: str = ""
    takes_keyset: bool = False  # a DispatchKeySet parameter: readable when stopped at its entry
    keyset_at: str | None = None  # where (rdi, rsi, ...), or why it cannot be told
    note: str | None = None
    keys: tuple[str, ...] = ()  # every dispatch key it is registered for, when more than dispatch_key
    stash: bool = False  # a boxing template several kernels share: a hop only above this op's kernel
    size: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpResolution:
    request: str
    ops: list[OpRef]
    functions: list[OpFunction] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {function, why}
    stubs: list[dict] = field(default_factory=list)  # {stub, capability, function}: per-capability kernels
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def composite_notes(self) -> list[str]:
        """What ``--op`` does not follow: a CompositeImplicitAutograd kernel runs other operators inside it
        (conv2d runs convolution), whose functions are not this operator's."""
        notes = []
        for r in self.ops:
            composite = [f for f in self.functions if f.op == r.aten and f.role == "native function"
                         and f.dispatch_key == "CompositeImplicitAutograd"]
            if composite:
                notes.append(f"aten::{r.aten} has a CompositeImplicitAutograd kernel ({composite[0].short}): the "
                             f"operators it calls are not broken on by --op {self.request}; give them an --op "
                             "of their own")
        return notes

    def address_breakpoints(self) -> list[dict]:
        out = []
        own = library_op(self.request) is not None
        for f in self.functions:
            item = {"label": f.label, "library": f.library, "offset": f.address, "function": f.function,
                    "layer": _inlined_layer(f)}
            if f.stash:
                item.update(stash=True, size=f.size)
            elif own and f.role == "kernel":
                item["unstash"] = True  # its hit records the stashed hops above it first
            out.append(item)
        return out

    def to_dict(self) -> dict:
        return {"request": self.request,
                "ops": [{"name": r.name, "overload": r.overload, "out": r.out, "backward": r.backward}
                        for r in self.ops],
                "functions": [f.to_dict() for f in self.functions], "skipped": self.skipped, "stubs": self.stubs,
                "warnings": self.warnings, "seconds": round(self.seconds, 3)}


def _inlined_layer(f: "OpFunction") -> str | None:
    """For an adapter broken on because its kernel exists only inlined into it: that kernel's layer
    (``--layer kernel`` then counts a hit there as the kernel's)."""
    if f.role != "adapter":
        return None
    target = target_of(f.function)
    return classify(target, f.library) if target else None


def unqualified(demangled: str) -> str:
    """The qualified name without parameters, clones or anonymous namespaces."""
    from tracer.symbols import names as _names

    base, _ = _names.split_clones(demangled)
    parsed = _names.parse(base)
    comps = [c for c in parsed.components if c != "(anonymous namespace)"]
    return "::".join(comps)


def _needles(refs: list[OpRef], backward: bool) -> tuple[list[str], str]:
    """Substrings of mangled names to search for, and a regex every candidate must match."""
    tokens: set[str] = set()
    wrapper_tails: set[str] = set()
    plain: set[str] = set()
    for r in refs:
        for ident in (r.struct, r.kernel_name, r.cpp, r.cpp + "f" if r.out else r.cpp):
            tokens.add(ident)
        wrapper_tails.update({"_" + r.kernel_name, "_" + r.unstructured_name})
        plain.update({f"{r.base}_kernel", f"structured_{r.base}", f"{r.base}_stub_DECLARE_DISPATCH_type"})
        if r.overload:
            plain.add(f"structured_{r.name}_{r.overload}")
        if backward and not r.backward:
            plain.add(camel(r.base) + "Backward")
    needles = sorted({f"{len(t)}{t}" for t in tokens} | wrapper_tails | plain)
    # A length prefix follows a non-digit, or the anonymous namespace's ``_GLOBAL__N_1``.
    alternatives = [rf"(?:(?<![0-9])|(?<=_N_1)){len(t)}{re.escape(t)}" for t in sorted(tokens)]
    alternatives += [rf"wrapper_[A-Za-z0-9]+{re.escape(t)}" for t in sorted(wrapper_tails)]
    alternatives += [re.escape(p) for p in sorted(plain)]
    return needles, "|".join(alternatives)


def _capability_of(qual: str) -> str | None:
    parts = qual.split("::")
    if len(parts) >= 3 and parts[0] == "at" and parts[1] == "native" and parts[2] in CAPABILITY_NAMESPACES:
        return parts[2]
    return None


def _family(qual: str, refs: list[OpRef], backward: bool) -> tuple[str, OpRef, str | None] | None:
    """(role, op, dispatch key) if ``qual`` (an unqualified-of-anonymous name) is a function of these ops."""
    for r in refs:
        if qual in (f"at::_ops::{r.struct}::call", f"at::_ops::{r.struct}::redispatch"):
            return ("entry" if qual.endswith("::call") else "redispatch"), r, None
        x = r.kernel_name
        if qual == f"torch::autograd::VariableType::{x}":
            return "autograd", r, "Autograd"
        if qual == f"torch::ADInplaceOrView::{x}":
            return "ADInplaceOrView", r, "ADInplaceOrView"
        if qual == f"torch::TraceType::{x}":
            return "tracer", r, "Tracer"
        if qual == f"at::functionalization::{x}":
            return "functionalization", r, "Functionalize"
        m = re.fullmatch(r"at::wrapper_([A-Za-z0-9]+)_(.*)", qual)
        if m and m.group(2) in (x, r.unstructured_name):
            return "kernel wrapper", r, m.group(1)
        m = re.fullmatch(r"at::([a-z]+)::(\w+)", qual)
        if m and m.group(1) in _STATIC_NAMESPACES and m.group(2) in (r.cpp, r.cpp + "f" if r.out else r.cpp):
            return "direct call", r, _STATIC_NAMESPACES[m.group(1)]
        m = re.fullmatch(r"at::meta::structured_(\w+)::meta", qual)
        if m and m.group(1) in (r.name, r.struct, r.kernel_name):
            return "meta function", r, None
        m = re.fullmatch(r"at::native::structured_(\w+)::impl", qual)
        if m and m.group(1) in (r.cpp, r.base + "_out", r.kernel_name, f"{r.base}_out_{r.overload}"):
            return "structured kernel", r, None
        # A backend's own structured kernel is named after its yaml dispatch entry: mm_out_cpu (CPU).
        if m and m.group(1).startswith(r.base + "_out_"):
            backend = _BACKEND_SUFFIXES.get(m.group(1)[len(r.base) + 5:])
            if backend:
                return "structured kernel", r, backend
        m = re.fullmatch(r"at::native::(?:(\w+)::)?(\w+)_kernel", qual)
        if m and m.group(2) == r.base and (m.group(1) is None or m.group(1) in CAPABILITY_NAMESPACES):
            return "native kernel", r, None
        if backward and not r.backward:
            m = re.fullmatch(r"torch::autograd::generated::(\w+)Backward\d+::apply", qual)
            if m and m.group(1) == camel(r.base):
                return "backward node", r, "Autograd"
    return None


def resolve_op(spec: str, libraries: list[str], facts: TorchFacts | None = None, variants: bool = False,
               backward: bool = True, refs: list[OpRef] | None = None) -> OpResolution:
    """Every function of operator ``spec`` in ``libraries`` (see the module docstring)."""
    import time

    from tracer import symbols

    t0 = time.perf_counter()
    refs = refs if refs is not None else op_refs(spec, facts, variants=variants, backward=backward)
    res = OpResolution(spec, refs)
    label = LABEL_PREFIX + spec.strip().removeprefix("aten::")
    needles, pattern = _needles(refs, backward)
    entries = native_functions.entries_for(libraries)
    if entries is None:
        res.warnings.append("native_functions.yaml is not next to this torch (torchgen/packaged): the plain "
                            "at::native functions of non-structured operators are not broken on")
    wanted = _native_kernels(refs, entries or {})
    if wanted:
        prefixes = sorted({_mangled_prefix(q) for q in wanted})
        needles += prefixes
        pattern += "|" + "|".join(re.escape(p) for p in prefixes)
    found = symbols.search_symbols(needles, libraries, pattern=pattern, kinds=("function", "object"))
    chosen: dict[tuple[str, int], OpFunction] = {}
    adapters = []
    own: set[str] = set()  # qualified names that have a body of their own
    stubs = []
    natives: dict[str, list] = {}
    for m in found:
        if m.kind == "object":
            sm = _STUB_RE.match(unqualified(m.name)) if "DispatchStub" in m.name else None
            if sm and sm.group(2) != "CPU_CAPABILITY":
                stubs.append((m, sm.group(1), sm.group(2)))
            continue
        if m.plt:
            continue
        if m.name.startswith(_ADAPTERS):
            if not m.cold:
                adapters.append(m)
            continue
        qual = unqualified(m.name)
        fam = _family(qual, refs, backward) if qual not in wanted else None
        if fam is None and qual not in wanted:
            continue
        if m.cold:
            res.skipped.append({"function": m.name, "why": "cold part (split off the function's body)"})
            continue
        own.add(qual)
        if fam is None:
            natives.setdefault(qual, []).append(m)
            continue
        role, ref, key = fam
        cap = _capability_of(qual) if role == "native kernel" else None
        _add(chosen, m, role, ref, key, cap, label)
    for qual, ms in natives.items():
        _add_native(chosen, res, ms, wanted[qual], label)
    # Kernels behind each DispatchStub: the pointer the stub's per-capability slot holds.
    bases = {r.base: r for r in refs}
    for m, base, cap in stubs:
        stub_ref = bases.get(base)
        if stub_ref is None:
            continue
        ptr = symbols.read_pointer(m.library, m.address)
        if not ptr:
            # No kernel compiled for this capability: DispatchStub falls back to the next lower one.
            res.stubs.append({"stub": f"{base}_stub", "capability": cap, "function": None})
            continue
        at = symbols.symbol_at(m.library, ptr)
        if at is None or at[1] != 0:
            res.warnings.append(f"{base}_stub[{cap}] points at {ptr:#x}, which starts no function")
            continue
        fn = at[0]
        res.stubs.append({"stub": f"{base}_stub", "capability": cap, "function": fn.name})
        prior = chosen.get((fn.library, fn.address))
        if prior is not None:
            prior.capability = cap
            prior.label = f"{label}[{cap}]"
        else:
            _add(chosen, fn, "native kernel", stub_ref, None, cap, label, note=f"{base}_stub's {cap} kernel")
    for f in chosen.values():
        if f.role == "native kernel" and f.capability and not f.label.endswith("]"):
            f.label = f"{label}[{f.capability}]"
    # Adapters only for kernels that exist nowhere but inlined into them.
    for m in adapters:
        target = target_of(m.name)
        tq = unqualified(target) if target else ""
        fam = _family(tq, refs, backward) if tq else None
        if fam is None:
            continue
        if tq in own:
            res.skipped.append({"function": m.name, "why": f"adapter: {short_name(target)} is broken on itself"})
            continue
        role, ref, key = fam
        _add(chosen, m, "adapter", ref, key, None, label,
             note=f"{short_name(target)} exists only inlined into this adapter")
    res.functions = sorted(chosen.values(), key=function_order)
    returns = native_functions.return_types(entries).get if entries else None
    for f in res.functions:
        f.keyset_at = keyset_where(f.function, returns)
    res.seconds = time.perf_counter() - t0
    return res


def _add(chosen: dict, m, role: str, ref: OpRef, key: str | None, cap: str | None, label: str,
         note: str | None = None, keys: tuple[str, ...] = ()) -> None:
    k = (m.library, m.address)
    if k in chosen:
        return
    chosen[k] = OpFunction(
        function=m.name, short=short_name(m.name) or m.name, library=m.library, address=m.address,
        layer=classify(m.name, m.library), role=role, op=ref.aten, dispatch_key=key, capability=cap,
        label=f"{label}[{cap}]" if cap else label, takes_keyset=takes_keyset(m.name), note=note,
        keys=keys if len(keys) > 1 else (),
    )


def keyset_where(function: str, returns) -> str | None:
    from tracer.dispatch import keyset_abi

    sig = keyset_abi.signature_from_name(function, returns)
    arg = keyset_abi.locate(sig) if sig is not None else None
    if arg is None:
        return None
    if arg.register:
        return arg.register
    return f"the stack at rsp+{arg.stack}" if arg.stack else f"unknown: {arg.why}"


def _native_kernels(refs: list[OpRef], entries: dict) -> dict[str, list[tuple]]:
    """{qualified at::native name: [(op, yaml kernel, the op's argument count)]} for the ops' dispatch
    entries, and the structured kernels of the out= overload an op delegates to (add.Tensor runs add.out's)."""
    wanted: dict[str, list[tuple]] = {}
    for r in refs:
        entry = entries.get(r.aten)
        if entry is None:
            continue
        kernels = list(entry.kernels)
        delegate = entries.get(entry.delegate) if entry.delegate else None
        if delegate is not None:
            kernels += [k for k in delegate.kernels if k.structured]
        for k in kernels:
            wanted.setdefault(k.qualified, []).append((r, k, entry.arguments))
    return wanted


def _mangled_prefix(qual: str) -> str:
    """``at::native::relu`` -> ``N2at6native4reluE``: how its (non-template) name starts when mangled."""
    return "N" + "".join(f"{len(c)}{c}" for c in qual.split("::")) + "E"


def _param_count(demangled: str) -> int | None:
    from tracer.symbols import names as _names

    params = _names.parse(demangled).params
    if not params:
        return None
    inner = params[1 : params.rfind(")")]
    return len(split_top(inner))


def _add_native(chosen: dict, res: OpResolution, ms: list, claims: list[tuple], label: str) -> None:
    """The functions of one at::native name the yaml file gives; when C++ overloads share the name, the
    ones whose parameter count is the operator's (at::native::view is also view.dtype's kernel)."""
    for m in ms:
        fit = claims
        if len(ms) > 1:
            n = _param_count(m.name)
            fit = [c for c in claims if c[1].structured or c[2] == n]
        if not fit:
            res.skipped.append({"function": m.name, "why": "an overload of the same name with other parameters"})
            continue
        ref, kernel, _ = fit[0]
        role = "structured kernel" if kernel.structured else "native function"
        note = "registered by default (no dispatch entry)" if kernel.implicit else None
        _add(chosen, m, role, ref, kernel.keys[0], None, label, note=note, keys=kernel.keys)


def function_order(f: OpFunction) -> tuple:
    return (ROLES.index(f.role) if f.role in ROLES else len(ROLES), f.op, f.dispatch_key or "",
            f.capability or "", f.function, f.address)


def takes_keyset(function: str) -> bool:
    from tracer.dispatch import keyset_abi

    return keyset_abi.takes_keyset(function)


def resolve_ops(specs: list[str], libraries: list[str], facts: TorchFacts | None = None, variants: bool = False,
                backward: bool = True) -> list[OpResolution]:
    """Several ``--op``s; a function two of them share is broken on once (under the first)."""
    out = []
    seen: set[tuple[str, int]] = set()
    for spec in specs:
        res = resolve_op(spec, libraries, facts, variants=variants, backward=backward)
        kept = []
        for f in res.functions:
            if (f.library, f.address) in seen:
                continue
            seen.add((f.library, f.address))
            kept.append(f)
        res.functions = kept
        out.append(res)
    return out


# ---------------------------------------------------------------------------------------------------
# Operators a library registers itself (TORCH_LIBRARY): ``--op ns::name``
# ---------------------------------------------------------------------------------------------------
_LIBRARY_OP_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z0-9_]*))?$")
def library_op(spec: str) -> tuple[str, str, str | None] | None:
    """``myns::myop[.overload]`` -> (namespace, name, overload): an operator of a TORCH_LIBRARY of one's own
    (``aten::`` names are torch's own: None)."""
    m = _LIBRARY_OP_RE.match(spec.strip())
    if not m or m.group(1) == "aten":
        return None
    return m.group(1), m.group(2), m.group(3)


# ---------------------------------------------------------------------------------------------------
# Reading recorded hops
# ---------------------------------------------------------------------------------------------------
def capability_of_label(label: str | None) -> str | None:
    """``op:sigmoid[AVX512]`` -> ``AVX512``: which CPU-capability copy of a kernel the hit stopped in."""
    if label and label.startswith(LABEL_PREFIX) and label.endswith("]") and "[" in label:
        return label[label.rindex("[") + 1 : -1]
    return None


def keyset_text(frame, innermost: bool = True) -> str:
    """What can be said about the DispatchKeySet a hop ran with, without guessing."""
    name = getattr(frame, "function", None) or ""
    keyset = getattr(frame, "keyset", None)
    keys = getattr(frame, "keys", None)
    if keyset is not None:
        if keys is not None:
            return f"{', '.join(keys) or '(empty)'}  ({keyset:#x})"
        return f"{keyset:#x} (this session has no key numbering to decode it)"
    note = getattr(frame, "keyset_note", None)
    if note:
        return f"not read: {note}"
    if takes_keyset(name):
        if innermost:
            return "not read (the DispatchKeySet argument could not be read at this stop)"
        return "not read (it is read only at the frame a breakpoint stopped in)"
    key = getattr(frame, "dispatch_key", None)
    if name.startswith("at::_ops::") and "::call(" in name:
        return "no key-set parameter: it computes one from the arguments"
    if key:
        return f"no key-set parameter; registered for {key}"
    return "no key-set parameter"
