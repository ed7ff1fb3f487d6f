"""Which layer of PyTorch a native frame belongs to, its dispatch key, and a readable short name.

A pure function over (demangled name, library), driven by the rule tables below. This module is also
imported by the agent inside gdb, so it uses the standard library only.

Layers, outermost to innermost (DESIGN.md section 3):
  python       a Python frame (decided by the caller, not here)
  interpreter  CPython's own C code: libpython, the python executable
  binding      libtorch_python.so: THP*, pybind11, invokeOperatorFromPython, torch::utils
  dispatcher   at::_ops::X::call/redispatch, c10::Dispatcher, boxing adapters
  autograd     VariableType, generated Nodes, the Engine, ADInplaceOrView, functionalization
  torchscript  TorchScript's interpreter and graph executors (torch::jit in libtorch_cpu)
  compiler     torch.compile's machinery around a compiled graph: dynamo's eval-frame hook and guards
               (libtorch_python's dynamo_*, torch::dynamo::), and for Python frames dynamo's and
               AOTAutograd's runtime wrappers and inductor's output-code glue (python_layer)
  kernel       wrapper_<Key>_<op>, structured kernels, at::native, at::cpu, TensorIterator's loops
  parallel     intra-op parallelism: at::parallel_for/parallel_reduce, invoke_parallel, the thread
               pools, OpenMP (libgomp, libiomp5, libomp)
  generated    code compiled while the program ran: inductor's (torchinductor_*) and cpp_extension's
               JIT builds (torch_extensions/), by library
  runtime      everything else: allocator, libc, BLAS
"""
from __future__ import annotations

import re
from functools import lru_cache

# Rules are tried in order; the first whose name pattern matches (and library pattern, if any) wins.
# (layer, name regex, library regex or None)
_RULES: list[tuple[str, str, str | None]] = [
    # --- generated: a library compiled at run time, whatever its functions are called.
    ("generated", r"", r"(^|/)torchinductor_[^/]*/|(^|/)torch_extensions/"),
    # --- parallel: OpenMP's runtime, by library and by its entry points.
    ("parallel", r"", r"(^|/)lib(gomp|iomp5|omp)[^/]*\.so"),
    ("parallel", r"^(GOMP_|gomp_|omp_|__kmp|__kmpc_)", None),
    # --- interpreter: CPython itself, by library first, then by its naming conventions.
    ("interpreter", r"", r"(^|/)(libpython[0-9.]*\.so|python[0-9.]*$)"),
    ("interpreter", r"^(_?Py[A-Z_]|_Py|cfunction_|method_vectorcall|slot_tp_|vectorcall_|do_call_core|"
                    r"pymain_|run_mod|run_eval_code_obj|pyrun_file|builtin_|wrapper_call\b)", None),
    # --- compiler: dynamo's frame-evaluation hook, its guards and compiled autograd (libtorch_python),
    # AOT Inductor's runtime; before binding, which would take every libtorch_python function.
    ("compiler", r"^dynamo_|^dynamo__|(^|::)torch::dynamo::|(^|::)torch::inductor::|"
                 r"^run_root_guard_manager\(", None),
    # --- autograd before dispatcher: adapters whose target is an autograd kernel are autograd hops.
    ("autograd", r"(^|::)torch::autograd::(VariableType|generated|Engine|Node|"
                 r"(anonymous namespace)::|CppNode|PyNode|impl::|forward_ad)", None),
    ("autograd", r"(^|::)torch::ADInplaceOrView::", None),
    ("autograd", r"(^|::)at::functionalization::|(^|::)at::functorch::|(^|::)torch::functorch::", None),
    ("autograd", r"^torch::autograd::(call_function|validate_outputs|python::PythonEngine|VariableHooks::|"
                 r"autogradNotImplemented|basicAutogradNotImplemented)", None),
    # --- binding: the Python extension surface.
    ("binding", r"^(torch::autograd::)?THP|^THP|^pybind11::|^torch::jit::invokeOperatorFromPython|"
                r"^torch::jit::(createStackForSchema|_get_operation_for_overload_or_packet)|"
                r"^torch::utils::|^torch::(PythonArgParser|PythonArgs|FunctionSignature|FunctionParameter)|"
                r"^(torch::)?initModule|(^|::)initModule\(", None),
    ("binding", r"", r"(^|/)libtorch_python\.so"),
    # --- torchscript: its interpreter, graph executors and compiled functions.
    ("torchscript", r"(^|::)torch::jit::", None),
    # --- parallel: ATen's intra-op parallelism, before the kernels whose lambdas it runs.
    ("parallel", r"(^|::)at::(parallel_for|parallel_reduce|parallel_dim_reduction|launch|intraop_\w+|"
                 r"init_num_threads|internal::(invoke_parallel|_parallel_run|launch_no_thread_state|"
                 r"lazy_init_num_threads|set_thread_num))\b|(^|::)at::PTThreadPool|(^|::)c10::ThreadPool::|"
                 r"(^|::)c10::TaskThreadPoolBase::", None),
    # --- kernel wrappers: the dispatch key lives in the name.
    ("kernel", r"(^|::)wrapper_[A-Za-z0-9]+_", None),
    ("kernel", r"(^|::)at::native::|(^|::)at::cpu::|(^|::)at::compositeexplicitautograd|"
               r"(^|::)at::compositeimplicitautograd|(^|::)at::meta::|(^|::)structured_|"
               r"(^|::)at::TensorIteratorBase::|(^|::)at::internal::|(^|::)at::vec::|"
               r"(^|::)at::two_pass_reduction\b|"  # TensorIterator's reductions (before at::NAME( below)
               r"(^|::)c10::function_ref<void \(char\*\*", None),
    # --- dispatcher.
    ("dispatcher", r"^at::_ops::|(^|::)c10::Dispatcher::|(^|::)c10::OperatorHandle::|"
                   r"(^|::)c10::impl::(wrap_kernel_functor_unboxed_|make_boxed_from_unboxed_functor|"
                   r"BoxedKernelWrapper|call_functor_with_args_from_stack|boxArgs|OperatorEntry|"
                   r"detail::WrapFunctionInto(Runtime)?Functor_)|"
                   r"(^|::)c10::BoxedKernel::|(^|::)c10::KernelFunction::|(^|::)at::Tensor::[a-z_0-9]+\(|"
                   r"^at::[a-z_0-9]+\(", None),
    # The user's own TORCH_LIBRARY kernels have names of their own: see kernel_below_adapter().
]



@lru_cache(maxsize=None)
def compiled_rules() -> list[tuple[str, re.Pattern, re.Pattern | None]]:
    """The rules compiled, at the first frame classified rather than at import: their ~40 patterns were a fifth of
    the agent's import inside gdb, which the target's start waits for (the agent compiles them while the target
    starts, ``pttrace-warm``), and pttrace needs them only once hits come."""
    return [(layer, re.compile(name), re.compile(lib) if lib else None) for layer, name, lib in _RULES]


# Template adapters name the kernel they wrap: ``CompileTimeFunctionPointer<SIG, &TARGET>``.
_TARGET_RE = re.compile(r"CompileTimeFunctionPointer<.*?, &([^>]+?)>")
_KEY_RE = re.compile(r"(?:^|::)wrapper_([A-Za-z0-9]+?)_{1,2}[A-Za-z0-9]")
# Keys whose names contain no underscore but are followed by ``__`` (in-place/out variants).
_KNOWN_KEY_PREFIXES = (
    "CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
    "QuantizedCPU", "SparseCPU", "SparseCsrCPU", "MkldnnCPU", "NestedTensorCPU", "Meta", "CPU", "CUDA",
    "MPS", "XPU", "ZeroTensor", "Conjugate", "Negative", "Functionalize",
)
_AUTOGRAD_KEY_RE = re.compile(r"(?:^|::)(VariableType|ADInplaceOrView)::")
# RegisterBackendSelect.cpp's kernels: the operator's own name in at's anonymous namespace (``ones``), no
# ``wrapper_`` prefix; an adapter around one names it as its target.
_BACKEND_SELECT_RE = re.compile(r"^at::\(anonymous namespace\)::[a-z][a-z0-9_]*(\(|$)")


def target_of(function: str) -> str | None:
    """The kernel a boxing/unboxing adapter wraps, if its template names one."""
    m = _TARGET_RE.search(function)
    return m.group(1).strip() if m else None


@lru_cache(maxsize=65536)
def dispatch_key(function: str | None) -> str | None:
    """The dispatch key a kernel wrapper (or an adapter around one) was registered for."""
    if not function:
        return None
    name = function
    target = target_of(function)
    if target:
        name = target
    m = re.search(r"(?:^|::)wrapper_([A-Za-z0-9_]+)", name)
    if m:
        rest = m.group(1)
        for key in _KNOWN_KEY_PREFIXES:
            if rest.startswith(key + "_"):
                return key
        km = _KEY_RE.search(name)
        if km:
            return km.group(1)
    am = _AUTOGRAD_KEY_RE.search(name)
    if am:
        return "Autograd" if am.group(1) == "VariableType" else "ADInplaceOrView"
    if target and _BACKEND_SELECT_RE.match(target):
        return "BackendSelect"
    return None


@lru_cache(maxsize=65536)
def classify(function: str | None, library: str | None) -> str:
    """The layer of a native frame. Adapters are classified by the kernel they wrap."""
    name = drop_return_type(function or "")
    target = target_of(name)
    if target:
        layer = _match(target, library)
        # The adapter itself is dispatcher plumbing unless it wraps an autograd kernel.
        if layer == "autograd":
            return "autograd"
        return "dispatcher"
    return _match(name, library)


def _match(name: str, library: str | None) -> str:
    lib = library or ""
    for layer, name_re, lib_re in compiled_rules():
        if lib_re is not None:
            if not lib or not lib_re.search(lib):
                continue
            if name_re.pattern and not name_re.search(name):
                continue
            return layer
        if name and name_re.search(name):
            return layer
    return "runtime"


# The characters the name scanners below act on; every other one only moves them along. Torch's template names
# run to thousands of characters: scanning them one by one in Python was most of a first hit's fill (py-spy).
_PARENS = re.compile(r"[()]")
_ARGS_MARKS = re.compile(r"[<{>}(]")


def _matching_paren(name: str, start: int) -> int | None:
    depth = 0
    for m in _PARENS.finditer(name, start):
        if m.group() == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    return None


def _strip_args(name: str) -> str:
    """Drop the parameter list (and trailing qualifiers) from a demangled name, keeping templates."""
    depth = 0
    for m in _ARGS_MARKS.finditer(name):
        ch, i = m.group(), m.start()
        if ch in "<{":
            depth += 1
        elif ch in ">}":
            depth = max(0, depth - 1)
        elif depth == 0:  # "("
            if name.startswith("(anonymous namespace)", i):
                continue
            if name.endswith("operator", 0, i) and name.startswith("()", i):
                continue  # operator() is a name, not the parameter list
            if name.startswith("()", i - 1) and name.endswith("operator(", 0, i):
                continue
            close = _matching_paren(name, i)
            if close is not None and name.startswith("::", close + 1):
                continue  # a local scope: foo(int)::{lambda()#1}::operator()
            return name[:i]
    return name


# What drop_return_type looks at: brackets, spaces, and an ``operator`` that starts a name (not preceded by a
# letter, digit or "_": ``\w`` is exactly ``isalnum() or "_"``); drop_return_type was ~0.14 s of a sigmoid first
# hit's fill at load 10, one character at a time.
_RETURN_TYPE_MARKS = re.compile(r"[<(\[{>)\]} ]|(?<!\w)operator")


def drop_return_type(name: str) -> str:
    """A function template's demangled name starts with its return type
    (``at::Tensor c10::Dispatcher::call<…>(…)``): the name proper follows the last space outside
    brackets before the parameter list (``operator bool``, ``operator new`` keep their keyword)."""
    if " " not in name:
        return name
    depth = 0
    cut = -1
    for m in _RETURN_TYPE_MARKS.finditer(_strip_args(name)):
        ch = m.group()
        if ch == "operator":
            break  # operator<, operator(), operator new: nothing after this is a return type's
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth = max(0, depth - 1)
        elif depth == 0:  # a space
            cut = m.start()
    return name[cut + 1:] if cut >= 0 else name


def _elide_templates(name: str, keep: int = 0) -> str:
    """Replace template argument lists deeper than ``keep`` with ``<…>``."""
    out = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == keep + 1:
                out.append("<…>")
            if depth <= keep:
                out.append(ch)
            continue
        if ch == ">":
            if depth <= keep:
                out.append(ch)
            depth = max(0, depth - 1)
            continue
        if depth <= keep:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=65536)
def short_name(function: str | None) -> str | None:
    """A readable name: no parameters, no anonymous namespaces, templates folded.

    An adapter keeps the kernel it wraps in view: ``wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>``.
    """
    if not function:
        return function
    function = drop_return_type(function)
    target = target_of(function)
    base = _strip_args(function)
    base = base.replace("(anonymous namespace)::", "")
    if target:
        head = _elide_templates(base)
        head = head.replace("<…>", "")
        leaf = _strip_args(target).replace("(anonymous namespace)::", "").split("::")[-1]
        parts = head.split("::")
        # Keep the adapter's own last name component.
        return f"{parts[-1] if parts[-1] else head}<…{leaf}…>" if parts[-1] not in ("call", "operator()") \
            else f"{parts[-2] if len(parts) > 1 else head}<…{leaf}…>::{parts[-1]}"
    folded = _elide_templates(base)
    return folded


# The boxing/unboxing adapters that call a kernel directly (their callee is the kernel).
_ADAPTER_RE = re.compile(r"(^|::)c10::impl::(wrap_kernel_functor_unboxed_|detail::WrapFunctionInto(Runtime)?Functor_)")


def is_adapter(function: str | None) -> bool:
    return function is not None and _ADAPTER_RE.search(function) is not None


def kernel_below_adapter(callee_layer: str | None, caller_function: str | None) -> bool:
    """Whether a frame is a kernel because of who called it, not what it is called.

    A kernel registered with TORCH_LIBRARY_IMPL (a user's extension, ``pttrace_demo::scale_add_cpu``)
    has a name no rule knows; a runtime-function adapter (``WrapFunctionIntoRuntimeFunctor_``) does not
    even name it. But the function an adapter calls is the kernel it wraps: so a frame that would
    otherwise be ``runtime``, called directly by an adapter, is a kernel (its dispatch key unknown).
    """
    return callee_layer == "runtime" and is_adapter(caller_function)


def is_plt(function: str | None) -> bool:
    return function is not None and function.endswith("@plt")


def is_cold_clone(function: str | None) -> bool:
    return function is not None and ("[clone .cold" in function or function.endswith(".cold"))


# Python files of torch.compile's machinery (dynamo's eval-frame wrappers, AOTAutograd's runtime wrappers,
# inductor's compiled-graph call), by path inside the torch package; inductor's generated modules by
# their cache directory.
_COMPILER_FILES = re.compile(r"(^|/)torch/(_dynamo/|_functorch/_aot_autograd/|_functorch/aot_autograd\.py$|"
                             r"_inductor/(output_code|codecache|runtime/|async_compile|utils)\b)")
_GENERATED_FILES = re.compile(r"(^|/)torchinductor_[^/]*/")


@lru_cache(maxsize=65536)
def python_layer(file: str | None) -> str:
    """The layer of a Python frame: ``compiler`` for torch.compile's own wrappers, ``generated`` for
    inductor's output module, ``python`` otherwise (the user's code and the rest of torch)."""
    if file:
        if _GENERATED_FILES.search(file):
            return "generated"
        if _COMPILER_FILES.search(file):
            return "compiler"
    return "python"
