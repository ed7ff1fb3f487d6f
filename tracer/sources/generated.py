"""Frames in code generated at build time, and the codegen template each was generated from.

The generated files (``Operators_2.cpp``, ``RegisterCPU_0.cpp``, ``VariableType_3.cpp``,
``python_torch_functions_1.cpp``...) are not in the wheel nor in the repository, but their templates
ship under ``torchgen/packaged/``: the template's placeholder line is where the frame's function was
pasted in, and the yaml entry (``yaml_ops``) says what was pasted.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tracer.sources.yaml_ops import YamlEntry

# (what the qualified name looks like, template under torchgen/packaged, placeholder, generated files)
_RULES: tuple[tuple[re.Pattern, str, str, str], ...] = (
    (re.compile(r"^at::_ops::\w+::(?:call|redispatch)$"), "ATen/templates/Operators.cpp", "${definitions}",
     "Operators_*.cpp"),
    (re.compile(r"^at::(?:wrapper_[A-Za-z0-9]+_|structured_)\w+"), "ATen/templates/RegisterDispatchDefinitions.ini",
     "${dispatch_anonymous_definitions}", "Register<Key>_*.cpp"),
    (re.compile(r"^torch::autograd::VariableType::\w+$"), "autograd/templates/VariableType.cpp",
     "${type_derived_method_definitions}", "VariableType_*.cpp"),
    (re.compile(r"^torch::autograd::generated::\w+Backward\d+"), "autograd/templates/Functions.cpp",
     "${autograd_function_definitions}", "torch/csrc/autograd/generated/Functions.cpp"),
    (re.compile(r"^torch::ADInplaceOrView::\w+$"), "autograd/templates/ADInplaceOrViewType.cpp",
     "${inplace_or_view_method_definitions}", "ADInplaceOrViewType_*.cpp"),
    (re.compile(r"^torch::TraceType::\w+$"), "autograd/templates/TraceType.cpp", "${trace_method_definitions}",
     "TraceType_*.cpp"),
)
_BINDING_RE = re.compile(r"^torch::autograd::THPVariable_\w+$")
_PY_MODULE_TEMPLATES = {None: "python_torch_functions.cpp", "nn": "python_nn_functions.cpp",
                        "linalg": "python_linalg_functions.cpp", "special": "python_special_functions.cpp",
                        "fft": "python_fft_functions.cpp", "sparse": "python_sparse_functions.cpp",
                        "nested": "python_nested_functions.cpp"}


@dataclass(frozen=True)
class Template:
    path: str  # under torchgen/packaged
    placeholder: str
    generates: str


def templates_for(qualified: str, n_params: int | None, ops: list[YamlEntry]) -> list[Template]:
    """The templates a function was generated from; [] for hand-written code. A name codegen uses is
    taken as generated only when the yaml knows its operator (``THPVariable_tensor`` is hand-written)."""
    for pattern, path, placeholder, generates in _RULES:
        if pattern.match(qualified):
            if not ops:
                return []
            return [Template(path, placeholder, generates)]
    if _BINDING_RE.match(qualified) and ops:
        out: dict[str, Template] = {}
        for e in ops:
            if "function" in e.variants and n_params != 2:
                name = _PY_MODULE_TEMPLATES.get(e.python_module)
                if name:
                    out[name] = Template(f"autograd/templates/{name}", "${py_methods}", name.replace(".cpp", "_*.cpp"))
            if "method" in e.variants and e.python_module is None:
                out["m"] = Template("autograd/templates/python_variable_methods.cpp", "${py_methods}",
                                    "python_variable_methods.cpp")
        return list(out.values())
    return []


@functools.lru_cache(maxsize=64)
def placeholder_line(path: str, placeholder: str) -> int | None:
    """The line of a template where the placeholder stands (the first one not in a comment)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, text in enumerate(fh, 1):
                if placeholder in text and not text.lstrip().startswith("//"):
                    return n
    except OSError:
        return None
    return None
