"""``pttrace ops NAME[.OVERLOAD]``: the functions ``--op`` would break on, next to the op's dispatch table.

The functions come from the libraries' symbol tables (``tracer.dispatch.ops``), grouped by layer and dispatch
key; the dispatch table is what the target interpreter's torch says (``torch._C._dispatch_dump_table``),
so a reader sees both what is registered for each key and which symbols exist for it.

Also here: the ``--op``/``--layer`` options of ``run`` and ``attach`` (``trace_options``) and the
operator-hop table printed after a batch run (``print_op_hops``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from tracer.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("ops", help="list the functions `--op NAME` breaks on, next to the op's dispatch table",
                       description="Resolve an ATen operator (sigmoid, add.Tensor, aten::mm) to every function "
                                   "of it in torch's libraries, from their symbol tables, grouped by layer and "
                                   "dispatch key; and show the operator's dispatch table as the interpreter's "
                                   "torch reports it (torch._C._dispatch_dump_table).")
    p.add_argument("op", metavar="NAME[.OVERLOAD]", help="the operator, e.g. sigmoid, add.Tensor, aten::mm")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="whose torch to ask (default: the interpreter running pttrace)")
    add_op_selection_options(p)
    p.add_argument("--lib", dest="libs", action="append", default=[], metavar="FILE",
                   help="with ns::name (an operator of one's own TORCH_LIBRARY): the library that registers it "
                        "(loaded by the interpreter for the dispatch table); repeat for more")
    p.add_argument("--json", action="store_true", help="print one JSON object, for scripts")
    p.set_defaults(func=run)


def add_op_selection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variants", action="store_true",
                   help="with an operator: also its out= overloads and its in-place variant (NAME.out, NAME_)")
    p.add_argument("--no-backward", dest="backward", action="store_false",
                   help="with an operator: leave out its backward (the autograd Node and NAME_backward)")


def add_trace_options(p: argparse.ArgumentParser) -> None:
    """``--op``, ``--layer`` and their modifiers, for ``run`` and ``attach``."""
    from tracer.session.records import LAYERS

    p.add_argument("--op", dest="ops", action="append", default=[], metavar="NAME[.OVERLOAD]",
                   help="break on every function of this ATen operator (entry points, autograd, kernel "
                        "wrappers, native kernels, its backward), resolved from the symbol tables; or, as ns::name, "
                        "the kernels of one's own TORCH_LIBRARY operator, in every library the target loads; repeat "
                        "for more; `pttrace ops NAME` lists them")
    add_op_selection_options(p)
    # --follow-ops, not --follow-ops: beside --no-follow-children it read as that flag's opposite. The old
    # spelling still works.
    p.add_argument("--follow-ops", "--follow", dest="follow", action="store_true",
                   help="with --op: also record the operators called inside it (a CompositeImplicitAutograd "
                        "kernel's decomposition: conv2d -> convolution -> ...), down to their kernels, as hops "
                        "of its calls")
    p.add_argument("--layer", dest="layers", action="append", default=[], metavar="LAYER",
                   help="record only hits whose innermost frame is in this layer (" + ", ".join(LAYERS) +
                        "); repeat for more")


# ---------------------------------------------------------------------------------------------------
# run / attach
# ---------------------------------------------------------------------------------------------------
def trace_options(args: argparse.Namespace, python: str, pid: int | None, quiet: bool = False) -> dict:
    """The ``TraceConfig`` fields these options give: ``layers``, ``address_breakpoints`` (``--op``),
    ``dispatch_keys`` or ``dispatch_keys_later``."""
    from tracer.session.records import LAYERS

    layers = list(getattr(args, "layers", None) or [])
    bad = [x for x in layers if x not in LAYERS]
    if bad:
        raise UsageError(f"--layer {bad[0]!r} is not a layer; choose from {', '.join(LAYERS)}.")
    fields: dict = {"layers": tuple(dict.fromkeys(layers))}
    specs = list(getattr(args, "ops", None) or [])
    variants = bool(getattr(args, "variants", False))
    backward = bool(getattr(args, "backward", True))
    follow = bool(getattr(args, "follow", False))
    if not specs and (variants or not backward or follow):
        raise UsageError("--variants, --no-backward and --follow-ops go with --op NAME.")
    # An attached process may run a virtual environment's Python, whose executable is the base
    # interpreter: find its torch from what it has mapped, and import that torch for the facts.
    attached = _torch_of_pid(pid) if pid else None
    pythonpath = attached[1] if attached else None
    # Where this torch build keeps a tensor's fields (tracer.values: a probe, cached by build): asked while
    # gdb starts, handed to the agent before the first hit.
    fields["values_layout_later"] = _in_background(_values_layout, python, attached)
    if not specs:
        # Only for decoding recorded key sets, when a session is read: asked while gdb starts.
        fields["dispatch_keys_later"] = _in_background(_key_table_quietly, python, attached)
        return fields
    import time

    from tracer import symbols
    from tracer.dispatch import library_ops, op_follow, ops
    t0 = time.perf_counter()
    libraries = attached[0] if attached else symbols.torch_libraries(python)
    # Operators of one's own TORCH_LIBRARY (ns::name): found in torch's libraries now, and in every
    # library loaded later (tracer/recorder/later_libraries.py).
    own = [s for s in specs if ops.library_op(s) is not None]
    specs = [s for s in specs if s not in own]
    fields["library_ops"] = tuple(own)
    facts = ops.torch_facts(python, libraries, pythonpath=pythonpath)
    results = ops.resolve_ops(specs, libraries, facts, variants=variants, backward=backward)
    address_breakpoints: list[dict] = []
    for spec in own:  # (an attach hears of the libraries already loaded as gdb attaches: they are searched then)
        address_breakpoints.extend(library_ops.resolve_library_op(spec, libraries).address_breakpoints())
    notes: list[str] = []
    for res in results:
        if not res.functions:
            raise UsageError(f"--op {res.request}: no function of " +
                             ", ".join("aten::" + r.aten for r in res.ops) + " in torch's libraries.",
                             hint=f"`pttrace ops {res.request}` shows what is registered for it.")
        address_breakpoints.extend(res.address_breakpoints())
        if not follow:
            notes.extend(res.composite_notes())
    fields["address_breakpoints"] = tuple(address_breakpoints)
    # The operators' dispatch tables as the target's torch reports them: which keys fall through, which
    # kernel a key selects (the decision at each hop, README "Reading sessions"); written at the end.
    fields["dispatch_tables_later"] = _in_background(
        _op_tables, python, {r.struct: r.aten for res in results for r in res.ops}, pythonpath)
    if follow:
        fields["follow"] = dict(op_follow.follow_config(results, libraries), python=python, libraries=list(libraries),
                                pythonpath=pythonpath)
        if fields["follow"]["trigger"] is None:
            notes.append(f"--follow-ops: {op_follow.FOLLOW_TRIGGER} is not in torch's libraries, so the operators called "
                         "inside the followed ones are not recorded")
    fields["notes"] = tuple(notes)
    fields["dispatch_keys"] = facts.key_table if facts is not None else None
    if not quiet:
        took = time.perf_counter() - t0
        for spec in own:
            print(f"pttrace: --op {spec}: its kernels are looked for in every library the target loads "
                  "(TORCH_LIBRARY_IMPL blocks)", file=sys.stderr)
        for res in results:
            libs = sorted({os.path.basename(f.library) for f in res.functions})
            print(f"pttrace: --op {res.request}: {len(res.functions)} functions of "
                  f"{', '.join('aten::' + r.aten for r in res.ops)} in {', '.join(libs)}", file=sys.stderr)
        if facts is None:
            print("pttrace: could not ask the interpreter's torch for its operators and key numbering; "
                  "overloads are taken as given and key sets will not be decoded", file=sys.stderr)
        print(f"pttrace: resolved in {took:.1f} s", file=sys.stderr)
    return fields


def _values_layout(python: str, attached: tuple | None) -> dict:
    """{layout: its JSON, vtables: {library: {offset: vtable name}}} for the agent; raises LayoutUnknown."""
    from tracer import settings, symbols
    from tracer.values import layout as values_layout
    from tracer.values.vtables import node_vtables

    libraries = attached[0] if attached else symbols.torch_libraries(python)
    found = values_layout.establish(python, libraries, settings.cache_dir(), attached[1] if attached else None)
    try:
        tables = node_vtables(libraries, settings.cache_dir())
    except Exception:  # names of grad_fn nodes are extra: without them a tensor is still read
        tables = {}
    return {"layout": found.to_json(), "vtables": {lib: {str(k): v for k, v in t.items()} for lib, t in tables.items()}}


def _op_tables(python: str, structs: dict[str, str], pythonpath: str | None) -> dict:
    """{struct: {op, rows: [{key, fallthrough, registered_at, kind}]}} from ``_dispatch_dump_table``."""
    from tracer.dispatch.dispatch_tables import finish_dispatch_tables, start_dispatch_tables

    names = {struct: "aten::" + aten for struct, aten in structs.items()}
    tables = finish_dispatch_tables(start_dispatch_tables(python, list(names.values()), pythonpath=pythonpath))
    return {struct: {"op": name, "rows": tables[name]["rows"]} for struct, name in names.items()
            if "rows" in tables.get(name, {})}


def _in_background(fn, *args):
    """``fn(*args)`` on a daemon thread, as a Future (a Ctrl-C or a failed start never waits for it), whose
    thread starts at its ``start()``: after gdb is spawned (``TraceConfig.start_background``), so that its
    imports and reads do not take the GIL from the command's own way to gdb's start (pttrace's start to gdb's
    spawn 0.34 -> 0.18 s, medians of 4 runs at load 9); they overlap gdb's start-up instead, as meant.
    Asking for its result starts it if nothing did."""
    import threading
    from concurrent.futures import Future

    class Later(Future):
        def __init__(self) -> None:
            super().__init__()
            self._thread = threading.Thread(target=self._work, name="pttrace-key-table", daemon=True)
            self._start_lock = threading.Lock()

        def _work(self) -> None:
            try:
                self.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever asks for the result
                self.set_exception(exc)

        def start(self) -> None:
            with self._start_lock:
                if self._thread.ident is None:
                    self._thread.start()

        def result(self, timeout: float | None = None):
            self.start()
            return super().result(timeout)

        def exception(self, timeout: float | None = None):
            self.start()
            return super().exception(timeout)

    return Later()


def _key_table_quietly(python: str, attached: tuple | None = None) -> dict | None:
    """The key numbering for decoding recorded key sets; a run without it loses nothing else."""
    try:
        from tracer.dispatch import ops

        if attached:
            return ops.key_table(python, attached[0], pythonpath=attached[1])
        return ops.key_table(python)
    except Exception:
        return None


def _torch_of_pid(pid: int):
    from tracer.dispatch import ops

    return ops.torch_of_process(pid)


def print_op_hops(session, console=None) -> None:
    """After a batch run with ``--op``: each distinct hop the operators' breakpoints stopped in."""
    from rich.text import Text

    from tracer.commands._console import make_console
    from tracer.dispatch import ops

    hits = [h for h in session.hits if (h.breakpoint or "").startswith(ops.LABEL_PREFIX) and h.frames]
    if not hits:
        return
    console = console or make_console(soft_wrap=True)
    rows: dict[tuple, list] = {}
    for h in hits:
        f = h.frames[-1]
        cap = ops.capability_of_label(h.breakpoint)
        key = (f.function, f.keyset, cap)
        if key in rows:
            rows[key][0] += 1
        else:
            rows[key] = [1, f, cap]
    console.print()
    console.print(Text("operator hops: the frame each --op hit stopped in, in first-hit order, with the "
                       "DispatchKeySet it was called with", style="bold"))
    width = min(60, max(len(_hop_name(f, cap)) for _, f, cap in rows.values()))
    for count, f, cap in rows.values():
        line = Text(f"  {count:>4}  ")
        line.append(f"{f.layer or '?':<11}", style="magenta")
        line.append(_hop_name(f, cap).ljust(width), style="bold")
        text = ops.keyset_text(f, innermost=True)
        line.append("  " + text, style="green" if f.keys else "dim")
        console.print(line)


def _hop_name(f, cap) -> str:
    name = f.short or f.function or "?"
    if f.dispatch_key:
        name += f" [{f.dispatch_key}]"
    if cap:
        name += f" ({cap} build)"
    return name


# ---------------------------------------------------------------------------------------------------
# pttrace ops
# ---------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    from tracer import symbols
    from tracer.dispatch import ops
    from tracer.dispatch.dispatch_tables import finish_dispatch_tables, start_dispatch_tables, table_entry
    for lib in args.libs:
        if not os.path.isfile(lib):
            raise UsageError(f"--lib {lib}: no such file.")
    if ops.library_op(args.op) is not None:
        return _run_library_op(args)
    if args.libs:
        raise UsageError("--lib goes with an operator of one's own TORCH_LIBRARY (ns::name).")
    libraries = symbols.torch_libraries(args.python)
    facts = ops.torch_facts(args.python, libraries)
    refs = ops.op_refs(args.op, facts, variants=args.variants, backward=args.backward)
    # The dispatch tables come from a second interpreter (importing torch: ~2 s): start it first.
    proc = start_dispatch_tables(args.python, [r.aten for r in refs])
    try:
        res = ops.resolve_op(args.op, libraries, facts, variants=args.variants, backward=args.backward, refs=refs)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    tables = finish_dispatch_tables(proc)
    if facts is None:
        res.warnings.insert(0, f"could not ask the torch of {args.python} for its operators: overloads are taken "
                               "as given")
    if args.json:
        out = {"python": args.python, "torch_version": facts.torch_version if facts else None,
               "cpu_capability": facts.cpu_capability if facts else None,
               "libraries": [os.path.abspath(x) for x in libraries], **res.to_dict(),
               "dispatch_tables": {}}
        for r in refs:
            t = tables.get(r.aten) or tables.get("*") or {"error": "no answer"}
            entry = dict(t)
            if "rows" in t:
                entry["rows"] = [dict(row, **table_entry([row["key"]], row["registered_at"], res.functions,
                                                              r.aten).to_dict()) for row in t["rows"]]
            out["dispatch_tables"][r.aten] = entry
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
        return 0 if res.functions else 1
    _print(args, res, refs, facts, tables, libraries)
    return 0 if res.functions else 1


def _run_library_op(args: argparse.Namespace) -> int:
    """``pttrace ops ns::name [--lib FILE]``: the kernels the libraries' TORCH_LIBRARY_IMPL blocks register
    for it, the boxing templates built for them, and its dispatch table (the libraries loaded first)."""
    from rich.text import Text

    from tracer import symbols
    from tracer.commands._console import make_console
    from tracer.dispatch import library_ops
    from tracer.dispatch.dispatch_tables import finish_dispatch_tables, start_dispatch_tables
    spec = args.op.strip()
    libraries = symbols.torch_libraries(args.python) + [os.path.abspath(x) for x in args.libs]
    proc = start_dispatch_tables(args.python, [spec], load=[os.path.abspath(x) for x in args.libs])
    try:
        res = library_ops.resolve_library_op(spec, libraries)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    table = finish_dispatch_tables(proc)
    entry = dict(table.get(spec) or table.get("*") or {"error": "no answer"})
    if not res.functions and not args.libs:
        res.warnings.append(f"no library registers a kernel for {spec}: give the one that does with --lib FILE")
    if args.json:
        out = {"python": args.python, "libraries": libraries, **res.to_dict(), "dispatch_tables": {spec: entry}}
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
        return 0 if res.functions else 1
    console = make_console(soft_wrap=True)
    for w in res.warnings:
        console.print(Text(f"warning: {w}", style="yellow"))
    libs = sorted({os.path.basename(f.library) for f in res.functions})
    console.print(Text(f"--op {spec} breaks on {len(res.functions)} functions (in {', '.join(libs) or 'no library'})",
                       style="bold"))
    for f in res.functions:
        console.print(_function_row(f, [(f"[{f.dispatch_key}]", "bold")] if f.dispatch_key else []))
    console.print()
    console.print(Text(f"dispatch table of {spec}", style="bold"))
    if "rows" not in entry:
        console.print(Text(f"  not available: {entry.get('error')}", style="yellow"))
        return 0 if res.functions else 1
    fallbacks = [r for r in entry["rows"] if r.get("kind") != "kernel"]
    for r in entry["rows"]:
        if r.get("kind") != "kernel":
            continue
        mine = [f.short for f in res.functions if f.role == "kernel" and f.dispatch_key == r["key"]]
        line = Text(f"  {r['key']:<32}", style="bold")
        line.append(_short_path(r["registered_at"]), style="dim")
        line.append("  " + (", ".join(mine) or "no function of its own found (inlined, or a lambda)"),
                    style="green" if mine else "yellow")
        console.print(line)
    if fallbacks:
        console.print(Text(f"  and {len(fallbacks)} keys served by torch's backend fallbacks (--json lists them)",
                           style="dim"))
    return 0 if res.functions else 1


def _function_row(f, tags: list[tuple[str, str]]):
    """One function of an operator, as `pttrace ops` lists it: name, role, TAGS (text, style), where it
    receives its DispatchKeySet, its note."""
    from rich.text import Text

    row = Text("    ")
    row.append(f.short, style="bold")
    row.append(f"  {f.role}", style="cyan")
    for text, style in tags:
        row.append(f"  {text}", style=style)
    if f.keyset_at:
        row.append(f"  (DispatchKeySet at entry: {f.keyset_at})", style="dim")
    if f.note:
        row.append(f"  {f.note}", style="dim")
    return row


def _short_path(path: str) -> str:
    where, _, line = path.rpartition(":")
    if not line.isdigit():
        where, line = path, ""
    if "site-packages/" in where:
        shown = where.split("site-packages/", 1)[1]
    else:
        shown = os.path.basename(where)
    return f"{shown}:{line}" if line else shown


def _print(args, res, refs, facts, tables, libraries) -> None:
    from rich.text import Text

    from tracer.commands._console import make_console
    from tracer.dispatch.dispatch_tables import table_entry

    console = make_console(soft_wrap=True)
    head = Text()
    head.append(", ".join("aten::" + r.aten for r in refs if not r.backward), style="bold")
    backward = [r for r in refs if r.backward]
    if backward:
        head.append("  and its backward " + ", ".join("aten::" + r.aten for r in backward))
    if facts is not None:
        head.append(f"   torch {facts.torch_version}", style="dim")
    head.append(f"   {args.python}", style="dim")
    console.print(head)
    if facts is not None and facts.cpu_capability:
        console.print(Text(f"this machine runs the {facts.cpu_capability} build of kernels compiled per CPU "
                           "capability", style="dim"))
    for w in res.warnings:
        console.print(f"[yellow]warning:[/] {w}")

    console.print()
    libs = sorted({os.path.basename(f.library) for f in res.functions})
    title = Text(f"--op {args.op} breaks on {len(res.functions)} functions", style="bold")
    title.append(f"  (in {', '.join(libs) or 'no library'}; resolved from the symbol tables of "
                 f"{len(libraries)} libraries in {res.seconds:.2f} s)", style="dim")
    console.print(title)
    groups: dict[tuple, list] = {}
    for f in res.functions:
        key = f.dispatch_key
        if f.role == "native kernel":
            key = "per CPU capability" if f.capability else None
        groups.setdefault((f.layer, key), []).append(f)
    for (layer, key), fs in groups.items():
        line = Text("  ")
        line.append(layer, style="bold magenta")
        if key:
            line.append(f"  [{key}]", style="bold")
        console.print(line)
        for f in fs:
            tags = [(f"aten::{f.op}", "dim")] if len(refs) > 1 else []
            if f.capability:
                mark = "  <- this machine" if facts is not None and facts.cpu_capability == f.capability else ""
                tags.append((f"{f.capability}{mark}", "green"))
            console.print(_function_row(f, tags))
    fallbacks = [s for s in res.stubs if not s["function"]]
    for s in fallbacks:
        console.print(Text(f"  {s['stub']}: no {s['capability']} kernel compiled; the next lower capability's "
                           "runs instead", style="dim"))
    cold = sum(1 for s in res.skipped if s["why"].startswith("cold"))
    adapters = sum(1 for s in res.skipped if s["why"].startswith("adapter"))
    if cold or adapters:
        console.print(Text(f"  left out: {cold} [clone .cold] parts, {adapters} adapters around kernels broken on "
                           "directly; @plt stubs are never listed", style="dim"))

    for r in refs:
        console.print()
        t = tables.get(r.aten) or tables.get("*") or {"error": "no answer"}
        head = Text(f"dispatch table of aten::{r.aten}", style="bold")
        head.append(f"  (torch._C._dispatch_dump_table('aten::{r.aten}'))", style="dim")
        console.print(head)
        if "error" in t:
            console.print(f"  [yellow]not available:[/] {t['error']}")
            continue
        for keys, row in _grouped(t["rows"]):
            line = Text("  ")
            shown = ", ".join(keys) if len(keys) <= 4 else ", ".join(keys[:3]) + f", … ({len(keys)} keys)"
            line.append(shown, style="bold")
            kind = ("fallthrough " if row["fallthrough"] else "") + (row["kind"] or "")
            line.append(f"   {kind}", style="cyan")
            line.append(f"   {_short_path(row['registered_at'])}", style="dim")
            line.append_text(_entry_text(row, table_entry(keys, row["registered_at"], res.functions, r.aten)))
            console.print(line)


def _entry_text(row: dict, entry):
    """What a table entry runs: its function, or the adapters it is inlined into, then what it calls."""
    from rich.text import Text

    from tracer.dispatch.dispatch_tables import generated_registration

    text = Text()
    called = ", ".join(f.short for f in entry.calls)
    if row["registered_at"].split(":")[0].endswith(".py"):
        text.append("   a Python kernel", style="yellow")
        over = [f.short for f in entry.registered] + entry.inlined
        if over:
            text.append(f" (registered over {', '.join(over)})", style="dim")
        return text
    if entry.registered:
        text.append("   -> " + ", ".join(f.short for f in entry.registered), style="green")
    if entry.adapters:
        text.append(f"   {', '.join(entry.inlined)}: no function of its own, inlined into ", style="yellow")
        text.append(", ".join(f.short for f in entry.adapters), style="green")
    if called:
        text.append(f"   which calls {called}", style="green")
    if not (entry.registered or entry.adapters or called) and "fallback" not in row["kind"]:
        if generated_registration(row["registered_at"]):
            text.append("   no function of its own found in these libraries", style="yellow")
        else:
            text.append("   registered by hand (not generated code): --op does not break on it", style="dim")
    return text


def _grouped(rows: list[dict]) -> list[tuple[list[str], dict]]:
    """Rows with the same registration (file:line, kind, fallthrough) shown once, with all their keys."""
    groups: dict[tuple, tuple[list[str], dict]] = {}
    for row in rows:
        k = (row["registered_at"], row["kind"], row["fallthrough"])
        if k in groups:
            groups[k][0].append(row["key"])
        else:
            groups[k] = ([row["key"]], row)
    return list(groups.values())
