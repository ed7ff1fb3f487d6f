"""Call paths for the terminal: rich ``Tree``s, one colour per layer (``show`` and ``diff``).

Names go into ``Text`` objects, never into markup strings: ``[clone .cold]`` and ``<…>`` would be
read as rich markup otherwise.
"""
from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from tracer.export import paths as P
from tracer.session.model import Frame

LAYER_STYLES = {
    "python": "green",
    "interpreter": "grey50",
    "binding": "magenta",
    "dispatcher": "bright_blue",
    "autograd": "yellow",
    "kernel": "bold red",
    "torchscript": "cyan",
    "compiler": "steel_blue",
    "parallel": "magenta",
    "generated": "bright_yellow",
    "runtime": "grey62",
}
_LAYER_WIDTH = max(len(k) for k in LAYER_STYLES)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def frame_text(frame: Frame, cwd: str | None = None, dim: bool = False, finder=None) -> Text:
    layer = P.layer_of(frame)
    style = LAYER_STYLES.get(layer, "")
    t = Text()
    name_style = ("bold " if layer in ("kernel", "python") else "") + style
    t.append(f"{layer:<{_LAYER_WIDTH}}  ", style=style if not dim else "grey50")
    t.append(P.short_of(frame), style=name_style if not dim else "grey50")
    key = P.dispatch_key_of(frame)
    if key:
        t.append(f"  [{key}]", style="cyan" if not dim else "grey50")
    lib = P.library_name(frame)
    if lib:
        t.append(f"  {lib}", style="grey50")
    loc = P.frame_location(frame, cwd)
    if loc:
        t.append(f"  {loc}", style="grey62" if not dim else "grey50")
    if frame.kind == "python" and frame.source:
        t.append(f"  {frame.source.strip()}", style="italic" if not dim else "grey50")
    if frame.inlined:
        t.append("  (inlined)", style="grey50")
    rows = P.torchscript_rows(frame) if frame.torchscript else []
    note = P.frame_note(frame)
    if note and not rows:
        t.append(f"  [{note}]", style="bold steel_blue" if not dim else "grey50")
    for r in rows:  # the scripted levels it runs, interleaved here as Python frames are at eval frames
        t.append(f"\n  ↳ {r.label(cwd)}", style=("yellow" if r.why else "bold steel_blue") if not dim else "grey50")
    if not loc and finder is not None and frame.kind != "python":
        t.append_text(_found_line(frame, cwd, finder, dim))
    return t


def _found_line(frame: Frame, cwd: str | None, finder, dim: bool) -> Text:
    """A second line under a frame without DWARF: the first place pttrace found for it, and that line's text."""
    t = Text()
    refs = finder.refs(frame.function, frame.library)
    if not refs:
        return t
    first = refs[0]
    where = (P.display_path(first.file, cwd) or "") + (f":{first.line}" if first.line else "")
    t.append(f"\n  ↳ {first.label} ", style="cyan" if not dim else "grey50")
    t.append(where, style="grey62" if not dim else "grey50")
    if len(refs) > 1:
        t.append(f" (+{len(refs) - 1} more)", style="grey50")
    text = finder.line_text(first.file, first.line)
    if text:
        t.append(f"  {text.strip()}", style="italic" if not dim else "grey50")
    return t


def path_label(n: int | str, path: P.CallPath, cwd: str | None = None, counts: str | None = None) -> Text:
    t = Text()
    t.append(f"path {n}", style="bold")
    t.append(f"  {counts or plural(path.count, 'hit')}", style="bold cyan")
    t.append(f"  {path.title}", style="bold")
    origin = P.innermost_python(path.frames) or P.launch_origin(path.first)
    if origin is not None and origin is not path.innermost:
        loc = P.frame_location(origin, cwd)
        if loc:
            t.append(f"  from {loc}", style="green")
    if path.breakpoints:
        t.append("  breakpoint " + ", ".join(path.breakpoints), style="grey62")
    if path.signals:
        t.append("  signal " + ", ".join(path.signals), style="bold red")
    if path.first.launched_by is not None:
        lb = path.first.launched_by
        t.append(f"  (a parallel worker; launched by thread {lb.thread.id})" if lb.thread else
                 f"  (a parallel worker; launcher not found: {lb.why})", style="magenta")
    elif P.in_parallel_worker(path.frames):
        t.append(f"  ({P.WORKER_NOTE})", style="magenta")
    return t


def add_path(parent: Tree, label: Text, path: P.CallPath, cwd: str | None = None,
             diverge_at: int | None = None, note: str | None = None, finder=None) -> Tree:
    """A path node with one child per frame, top-down. Frames before ``diverge_at`` are dimmed."""
    node = parent.add(label)
    if path.truncated:
        node.add(Text("(stack truncated: outermost frames missing)", style="grey50"))
    if not path.frames:
        node.add(Text("(no frames recorded)", style="grey50"))
    for i, frame in enumerate(path.frames):
        dim = diverge_at is not None and i < diverge_at
        t = frame_text(frame, cwd, dim=dim, finder=finder)
        if diverge_at is not None and i == diverge_at and note:
            t.append(f"  ← {note}", style="bold")
        kernel = P.generated_kernel(path.frames, i, cwd)
        if kernel is not None:
            t.append_text(kernel_text(kernel, cwd, dim))
        child = node.add(t)
        if path.hits and diverge_at is None:
            add_values(child, path.first, frame)
    if path.hits and diverge_at is None:
        add_shapes(node, path)
    return node


def add_values(node: Tree, hit, frame: Frame) -> None:
    """What ``frame`` carried at ``hit``: a line an argument, then the dispatcher's decision there."""
    from tracer.export import values as V

    fv = V.frame_values(hit, frame)
    if fv is None:
        return
    for i, arg in enumerate(fv.args):
        style = "grey50" if arg.get("unreadable") and "tensor" not in arg else ""
        node.add(Text(V.arg_text(arg, i), style=style))
    for line in V.decision_lines(fv):
        node.add(Text(line, style="cyan"))


def add_shapes(node: Tree, path: P.CallPath) -> None:
    """A path whose hits carried different argument shapes lists them (the values of its first hit are
    under its innermost frame)."""
    from tracer.export import values as V

    found = V.shapes(path._distinct)
    if len(found) > 1:
        sub = node.add(Text(f"{len(found)} distinct argument shapes", style="bold"))
        for text in found:
            sub.add(Text(text))


def kernel_text(kernel, cwd: str | None, dim: bool = False) -> Text:
    """Lines under a frame of inductor-generated code: the kernel, its ops and FX nodes, the user's lines
    they came from, where its source is, and what is missing (``tracer.scripted.inductor``)."""
    t = Text()
    style = "grey50" if dim else "bold steel_blue"
    t.append(f"\n  ↳ {kernel.summary()}", style=style)
    for node in kernel.user_lines:
        t.append(f"\n  ↳ from {P.display_path(node.file, cwd)}:{node.line} {node.function}", style=style)
        if node.code:
            t.append(f"  {node.code}", style="italic" if not dim else "grey50")
    if kernel.cpp:
        t.append(f"\n  ↳ generated {P.display_path(kernel.cpp, cwd)}:{kernel.cpp_line or '?'}", style="grey62")
    if kernel.module:
        t.append(f"\n  ↳ called from {P.display_path(kernel.module, cwd)}:{kernel.module_line or '?'}", style="grey62")
    if kernel.missing:
        t.append(f"\n  ↳ {kernel.missing}", style="yellow" if not dim else "grey50")
    return t


def keys_text(keys) -> str:
    return ", ".join(keys) or "(empty)"


def add_op_calls(parent: Tree, hits: list, cwd: str | None = None) -> None:
    """The ``--op`` hits as operator calls (``tracer.export.op_calls``): by Python call site, each call's
    hops in order with the key set each was called with, decoded, and what changed since the hop before
    (the keys handled in between, or added); ``--follow-ops``'s operators indented under their callers."""
    from tracer.export import op_calls as O
    from tracer.dispatch.ops import capability_of_label, keyset_text

    calls = O.group_calls(hits)
    if not calls:
        return
    node = parent.add(Text(f"operator calls: {plural(len(calls), 'call')}, each hop with the DispatchKeySet it "
                           "was called with and the keys handled since the hop before", style="bold"))
    for site in O.by_call_site(calls):
        label = Text("from ", style="grey50")
        where = P.frame_location(site.frame, cwd) if site.frame is not None else None
        label.append(where or "(no Python frame)", style="green")
        if site.frame is not None and site.frame.source:
            label.append(f"  {site.frame.source.strip()}", style="italic")
        site_node = node.add(label)
        for variant in site.variants:
            first = variant[0]
            followed = first.followed()
            op = next((o for o in first.ops() if O.FOLLOWED not in o), "?")
            head = Text(f"{plural(len(variant), 'call')} of {O.qualified(op)}", style="bold")
            if followed:
                head.append(f", following {', '.join(followed)}", style="")
            seqs = [h.seq for c in variant for h in c.hits]
            head.append(f"  hits #{min(seqs)}" + (f" to #{max(seqs)}" if len(seqs) > 1 else ""), style="grey50")
            v_node = site_node.add(head)
            for i, hop in enumerate(first.hops(), 1):
                f = hop.frame
                layer = P.layer_of(f)
                t = Text(f"{i:>3}  ", style="grey50")
                if followed:
                    t.append("  " * hop.depth + (hop.op or "?"), style="cyan" if hop.depth else "bold cyan")
                    t.append("  ")
                t.append(f"{layer:<{_LAYER_WIDTH}}  ", style=LAYER_STYLES.get(layer, ""))
                t.append(P.short_of(f), style="bold" if layer == "kernel" else "")
                if f.dispatch_key:
                    t.append(f" [{f.dispatch_key}]", style="cyan")
                cap = capability_of_label(hop.hit.breakpoint)
                if cap:
                    t.append(f" ({cap} build)")
                if hop.keys is not None:
                    t.append(f"  keys: {keys_text(hop.keys)}", style="green")
                    if f.keyset is not None:
                        t.append(f" ({f.keyset:#x})", style="grey50")
                else:
                    t.append(f"  {keyset_text(f)}", style="grey50")
                if hop.handled():
                    t.append(f"  handled {', '.join(hop.handled())}", style="yellow")
                if hop.added():
                    t.append(f"  added {', '.join(hop.added())}", style="yellow")
                add_values(v_node.add(t), hop.hit, f)
