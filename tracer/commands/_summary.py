"""The end-of-run summary printed by ``run`` and ``attach`` in batch mode."""
from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracer.commands._console import make_console
from tracer.errors import PttraceError
from tracer.export import processes as PR
from tracer.export.paths import frame_location, frame_note, is_interpreter_loop, torchscript_rows, visible_frames
from tracer.session.model import Breakpoint, Session
from tracer.text.escape import visible

LAYER_STYLE = {
    "python": "bold green",
    "interpreter": "dim",
    "binding": "cyan",
    "dispatcher": "magenta",
    "autograd": "yellow",
    "kernel": "bold red",
    "torchscript": "bright_cyan",
    "compiler": "steel_blue",
    "parallel": "bright_magenta",
    "generated": "bright_yellow",
    "runtime": "blue",
}


def _suggest(spec: str, session: Session) -> list[str]:
    from tracer.symbols import suggest, torch_libraries

    try:
        libs = torch_libraries(session.info.argv[0]) if session.info.argv else []
        return suggest(spec, libs, limit=5)
    except (PttraceError, OSError):
        return []


def print_summary(session: Session, config=None, quiet: bool = False, console: Console | None = None) -> None:
    console = console or make_console(soft_wrap=False)
    info = session.info
    # Every string here comes from the session (the target's names, its warnings): into Text, never
    # into markup, where ``[/x]`` would be read as a tag.
    if quiet:
        console.print(Text(str(session.path)))
        return
    console.print()
    console.rule(Text(f"pttrace session {info.id}"))
    status = Text.assemble("status: ", (info.status, "bold"))
    if info.exit_code is not None:
        status.append(f" (exit code {info.exit_code})")
    status.append(f"   hits: {len(session.hits)}")
    console.print(status)
    for w in info.warnings:
        console.print(Text.assemble(("warning:", "yellow"), f" {w}"))
    if PR.several(session):
        _print_processes(console, session)
    for bp in session.breakpoints:
        _print_breakpoint(console, bp, session)
    console.print(Text.assemble("\nsession saved to ", (str(session.path), "bold")))
    console.print(Text(f"export it with: pttrace export {info.id} -o notes.md"))


def _print_processes(console: Console, session: Session) -> None:
    """Every process of the run, its hits, how it ended: grouped by rank under torchrun."""
    console.print()
    hosts = PR.hosts(session.processes)
    groups = PR.groups(session)  # helper programs that are not Python are in the warnings, one line each
    console.print(Text(f"processes: {len(groups)}" + (f" on {len(hosts)} hosts" if len(hosts) > 1 else ""),
                       style="bold"))
    for group in groups:
        line = Text.assemble(("  ", ""), (group.label, "bold"), f"  {len(group.hits)} hit(s)")
        if group.process is not None:
            line.append(f"  {PR.describe(group.process, len(hosts) > 1).split(': ', 1)[-1]}", style="dim")
        console.print(line, overflow="ellipsis", no_wrap=True)


# A never-resolved name that torch's libraries do define (its own name among the suggestions).
NOT_LOADED = "torch's libraries define it, but the program never loaded the one that does (does it import torch?)"

# A breakpoint's locations listed in the summary; an --op breakpoint has dozens (the rest: the export).
SHOWN_LOCATIONS = 8


def _print_breakpoint(console: Console, bp: Breakpoint, session: Session) -> None:
    console.print()
    resolved = [loc for loc in bp.locations if loc.address]
    title = Text.assemble(("breakpoint ", "bold"), (bp.spec, "bold cyan"), f"  {bp.hits} hit(s)")
    console.print(title)
    if not resolved:
        console.print("  [red]never resolved[/]: no function of that name was loaded by the program.")
        suggestions = bp.suggestions or _suggest(bp.spec, session)
        others = [s for s in suggestions if s != bp.spec]
        if len(others) < len(suggestions):  # "did you mean: initModule" for initModule said nothing
            console.print(f"  {NOT_LOADED}.")
        if others:
            console.print(Text("  did you mean: " + ", ".join(visible(s) for s in others)))
        return
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
    table.add_column("location")
    table.add_column("library")
    table.add_column("address")
    table.add_column("note")
    for loc in bp.locations[:SHOWN_LOCATIONS if len(bp.locations) > SHOWN_LOCATIONS + 2 else None]:
        where = loc.function or "?"
        if loc.file:
            where += f"  ({loc.file}:{loc.line})"
        table.add_row(Text(where), Text(os.path.basename(loc.library or "?")),
                      hex(loc.address) if loc.address else "?", Text(loc.note or ("" if loc.enabled else "disabled")))
    console.print(table)
    if len(bp.locations) > SHOWN_LOCATIONS + 2:
        console.print(Text(f"  … and {len(bp.locations) - SHOWN_LOCATIONS} more locations: every one is in the "
                           f"session's export (pttrace export {session.info.id}, or --format json)", style="dim"))
    first = next((h for h in session.hits if h.breakpoint == bp.spec), None)
    if first is None:
        return
    process = session.process(first.thread.pid) if PR.several(session) else None
    where = f"{process.label}, " if process is not None else ""
    console.print(Text(f"  call path of hit #{first.seq} ({where}thread {first.thread.id} {first.thread.names}), "
                       "outermost first:"))
    cwd = session.info.cwd
    # Start-up and interpreter frames folded, paths relative to site-packages or the working directory:
    # what fits a terminal line is the part a reader needs (torch/nn/modules/activation.py:361).
    for f in visible_frames(first.frames):
        style = LAYER_STYLE.get(f.layer or "", "")
        if f.kind == "python":
            line = Text.assemble(("  python     ", style), f"{frame_location(f, cwd) or '?'} ",
                                 (f.function or "?", "bold"))
            if f.source:
                line.append(f"   {f.source}", style="dim")
        else:
            key = f" [{f.dispatch_key}]" if f.dispatch_key else ""
            place = f"  {frame_location(f, cwd)}" if f.file else ""
            line = Text.assemble((f"  {f.layer or '?':<10} ", style),  # a space even after "torchscript"
                                 (f.short or f.function or hex(f.address or 0)),
                                 (key, "bold"), (f"  {os.path.basename(f.library or '?')}{place}", "dim"))
        console.print(line, overflow="ellipsis", no_wrap=True)
        if f.kind == "native" and is_interpreter_loop(f.function):
            rows = torchscript_rows(f)
            for r in rows:  # the scripted levels the interpreter ran, under its frame
                console.print(Text(f"      ↳ {r.label(cwd)}", style="yellow" if r.why else "steel_blue"),
                              overflow="ellipsis", no_wrap=True)
            if not rows:
                console.print(Text(f"      ↳ {frame_note(f)}", style="yellow"), overflow="ellipsis", no_wrap=True)
    _print_carried(console, bp, session, first)


def _print_carried(console: Console, bp: Breakpoint, session: Session, first) -> None:
    """The first hit's arguments, a line each, and the distinct argument shapes of the breakpoint's hits
    when they differ (hits of one path with different shapes are told apart)."""
    from tracer.export import values as V

    fv = V.frame_values(first, first.frames[-1]) if first.frames else None
    for i, arg in enumerate(fv.args if fv is not None else ()):
        console.print(Text(f"    {V.arg_text(arg, i)}"), overflow="ellipsis", no_wrap=True)
    # Shapes of the hits stopped in the same function as the first (an --op breakpoint stops at every hop:
    # another hop's arguments are another signature, not another shape).
    here = first.frames[-1].function if first.frames else None
    sites = getattr(session.hits, "sites", None)
    hits = [s.hit(0, 0.0) for s in sites if s.breakpoint == bp.spec] if sites is not None else [
        h for h in session.hits if h.breakpoint == bp.spec]
    shapes = V.shapes([h for h in hits if h.frames and h.frames[-1].function == here])
    if len(shapes) > 1:
        where = first.frames[-1].short or here
        console.print(Text(f"  {len(shapes)} distinct argument shapes at {where}:"))
        for text in shapes[:10]:
            console.print(Text(f"    {text}"), overflow="ellipsis", no_wrap=True)
        if len(shapes) > 10:
            console.print(Text(f"    … and {len(shapes) - 10} more (pttrace show)", style="dim"))
