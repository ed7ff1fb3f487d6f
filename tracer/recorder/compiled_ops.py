"""``--op NAME`` on a compiled program: the inductor kernels that implement NAME, broken on as they load.

inductor compiles NAME (fused with others, or alone) into a kernel of its own: no ATen function of NAME
runs there, so ``--op``'s breakpoints never fire. Each generated library is read as it loads
(``tracer.scripted.inductor``: which kernel it holds and the ATen ops its name or the debug directory
says it implements); one that implements NAME gets a breakpoint on its ``kernel``, labelled
``inductor cpp_fused_…_0 (op:NAME)``, and the session says so. One whose ops cannot be told is said too.
"""
from __future__ import annotations

import logging
import os
from typing import Callable

from tracer.recorder import resolve

log = logging.getLogger("pttrace.recorder")


def op_names(address_breakpoints) -> list[str]:
    """``sigmoid`` from the labels ``op:sigmoid``/``op:sigmoid.out`` of --op's breakpoints (ATen's only)."""
    names = []
    for b in address_breakpoints:
        label = str(b.get("label") or "")
        if label.startswith("op:") and "::" not in label:
            names.append(label[3:].split(">", 1)[0].split("[", 1)[0].split(".", 1)[0].rstrip("_"))
    return list(dict.fromkeys(n for n in names if n))


def label(kernel_name: str, op: str) -> str:
    return f"inductor {kernel_name} (op:{op})"


class CompiledOps:
    """For each generated library loaded: breakpoints on its kernel for the --op names it implements."""

    def __init__(self, ops: list[str], warn: Callable[[str], None], cwd: str | None = None):
        self.ops = list(ops)
        self._warn = warn
        self._cwd = cwd

    def breakpoints_in(self, path: str) -> list[dict]:
        from tracer.scripted import inductor

        if not self.ops or not inductor.is_generated(path):
            return []
        kernel = inductor.describe(path, None, self._cwd)
        log.debug("generated library %s: %s", path, kernel)
        if kernel.cpp is not None and kernel.cpp_line is None:
            return []  # no kernel in it: inductor's probe of the CPU's vector instructions (__avx_chk_kernel)
        implemented = {op.split(".")[1] if op.startswith("aten.") else op for op in kernel.aten_ops}
        if kernel.name is None or not implemented:
            self._warn(f"--op {', '.join(self.ops)}: inductor's generated library {os.path.basename(path)} was "
                       f"loaded, and pttrace cannot tell which operators it implements "
                       f"({kernel.missing or 'its kernel name lists none'}): if it implements one, it runs "
                       "there without a hit")
            return []
        items: list[dict] = []
        for op in self.ops:
            if op not in implemented:
                continue
            found = [dict(b, label=label(kernel.name, op)) for b in resolve.breakpoints_in("::kernel", path)]
            others = sorted(implemented - {op})
            fused = f", fused with {', '.join(others)}" if others else ""
            if found:
                self._warn(f"--op {op}: inductor compiled aten.{op} into its kernel {kernel.name}{fused}: no ATen "
                           f"function of {op} runs there; pttrace breaks on that kernel instead (hits labelled "
                           f"'{label(kernel.name, op)}')")
            else:
                self._warn(f"--op {op}: inductor compiled aten.{op} into {kernel.name}{fused}, whose function "
                           f"pttrace cannot find in {os.path.basename(path)}: it runs there without a hit")
            items += found
        log.info("--op under compile: %s in %s: %s", kernel.name, path, items)
        return items
