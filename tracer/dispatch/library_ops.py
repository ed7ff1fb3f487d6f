"""``--op ns::name``: the functions of an operator a library registers itself (TORCH_LIBRARY), read from
the code of its TORCH_LIBRARY_IMPL blocks, and the boxing templates the library built for them."""
from __future__ import annotations

import os

from tracer.dispatch.classify import classify, short_name
from tracer.dispatch.ops import (LABEL_PREFIX, OpFunction, OpRef, OpResolution, function_order, keyset_where, library_op,
                        takes_keyset, unqualified)

# The boxing templates of torch's headers, instantiated in the library for a kernel it registers: the
# dispatcher's hops of the operator's calls, between Dispatcher::call/callBoxed and the kernel.
_LIBRARY_HOPS = ("c10::impl::make_boxed_from_unboxed_functor", "c10::impl::wrap_kernel_functor_unboxed_",
                 "c10::impl::call_functor_with_args_from_stack", "c10::impl::detail::WrapFunctionIntoRuntimeFunctor_",
                 "c10::impl::detail::WrapFunctionIntoFunctor_")


def resolve_library_op(spec: str, libraries: list[str]) -> OpResolution:
    """The kernels the libraries' TORCH_LIBRARY_IMPL (and TORCH_LIBRARY) blocks register for ``ns::name``
    (read from the blocks' code: tracer/symbols/registrations.py), each with its block's dispatch key,
    and the boxing templates instantiated for them (found by the kernel's function type in their
    template arguments). A template built for a function *type* serves every kernel of that type: it is
    broken on as a *stash* (its key set kept, no hit), and becomes a hop only when a kernel of the
    operator then runs below it (tracer/gdb/agent/stash.py)."""
    import time

    from tracer import symbols
    from tracer.symbols import names as _names

    t0 = time.perf_counter()
    namespace, name, overload = library_op(spec) or ("", "", None)
    ref = OpRef(name, overload or "")
    res = OpResolution(spec, [ref])
    label = LABEL_PREFIX + spec.strip()
    chosen: dict[tuple[str, int], OpFunction] = {}
    for lib in libraries:
        try:
            regs = symbols.registered_kernels(lib, namespace)
        except symbols.SymbolError as exc:
            res.warnings.append(f"{os.path.basename(lib)} could not be read for {spec}: {exc}")
            continue
        mine = [(key, m) for op, key, m in regs if op.split("::")[-1] in (name, f"{name}.{overload}")
                and (overload is None or op.endswith(f".{overload}") or (not overload and "." not in op))]
        for key, m in mine:
            k = (m.library, m.address)
            if k not in chosen:
                chosen[k] = OpFunction(function=m.name, short=short_name(m.name) or m.name, library=m.library,
                                       address=m.address, layer="kernel", role="kernel", op=spec.strip(),
                                       dispatch_key=key, label=label,
                                       note=f"registered for {key} by {namespace}'s TORCH_LIBRARY blocks")
        if not mine:
            continue
        # The templates instantiated for these kernels: by function type (shared), or naming the kernel.
        wanted = []
        for _key, m in mine:
            parsed = _names.parse(m.name)
            qual = "::".join(c for c in parsed.components if c != "(anonymous namespace)")
            wanted.append((f"(*){parsed.params}", f"&{qual}>"))
        for m in symbols.search_symbols(["WrapFunctionIntoRuntimeFunctor_", "WrapFunctionIntoFunctor_"], [lib]):
            if m.plt or m.cold:
                continue
            qual = unqualified(m.name)
            if not qual.startswith(_LIBRARY_HOPS) or not qual.endswith(("::call", "::operator()")) and \
                    not qual.startswith("c10::impl::call_functor_with_args_from_stack"):
                continue
            shared = any(t in m.name for t, _ in wanted)
            if not shared and not any(n in m.name for _, n in wanted):
                continue
            k = (m.library, m.address)
            if k in chosen:
                continue
            chosen[k] = OpFunction(function=m.name, short=short_name(m.name) or m.name, library=m.library,
                                   address=m.address, layer=classify(m.name, m.library), role="adapter",
                                   op=spec.strip(), label=label, takes_keyset=takes_keyset(m.name),
                                   note=("built for the kernel's function type: a hop only when a kernel of "
                                         "this operator runs below it") if shared else None)
            chosen[k].stash = True
            chosen[k].size = m.size
    res.functions = sorted(chosen.values(), key=function_order)
    for f in res.functions:
        f.keyset_at = keyset_where(f.function, None)
    res.seconds = time.perf_counter() - t0
    return res
