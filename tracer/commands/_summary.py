"""The end-of-run summary printed by ``run`` and ``attach`` in batch mode."""
from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracer.errors import PttraceError
from tracer.export.paths import frame_location, visible_frames
from tracer.model import Breakpoint, Session

LAYER_STYLE = {
    "python": "bold green",
    "interpreter": "dim",
    "binding": "cyan",
    "dispatcher": "magenta",
    "autograd": "yellow",
    "kernel": "bold red",
    "torchscript": "bright_cyan",
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
    console = console or Console(highlight=False, soft_wrap=False)
    info = session.info
    if quiet:
        console.print(session.path)
        return
    console.print()
    console.rule(f"pttrace session {info.id}")
    status = f"[bold]{info.status}[/]"
    if info.exit_code is not None:
        status += f" (exit code {info.exit_code})"
    console.print(f"status: {status}   hits: {len(session.hits)}")
    for w in info.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    for bp in session.breakpoints:
        _print_breakpoint(console, bp, session)
    console.print(f"\nsession saved to [bold]{session.path}[/]")
    console.print(f"export it with: pttrace export {info.id} -o notes.md")


def _print_breakpoint(console: Console, bp: Breakpoint, session: Session) -> None:
    console.print()
    resolved = [loc for loc in bp.locations if loc.address]
    title = Text.assemble(("breakpoint ", "bold"), (bp.spec, "bold cyan"), f"  {bp.hits} hit(s)")
    console.print(title)
    if not resolved:
        console.print("  [red]never resolved[/]: no function of that name was loaded by the program.")
        suggestions = bp.suggestions or _suggest(bp.spec, session)
        if suggestions:
            console.print("  did you mean: " + ", ".join(suggestions))
        return
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
    table.add_column("location")
    table.add_column("library")
    table.add_column("address")
    table.add_column("note")
    for loc in bp.locations:
        where = loc.function or "?"
        if loc.file:
            where += f"  ({loc.file}:{loc.line})"
        table.add_row(Text(where), os.path.basename(loc.library or "?"), hex(loc.address) if loc.address else "?",
                      loc.note or ("" if loc.enabled else "disabled"))
    console.print(table)
    first = next((h for h in session.hits if h.breakpoint == bp.spec), None)
    if first is None:
        return
    console.print(f"  call path of hit #{first.seq} (thread {first.thread.id} {first.thread.name or ''}), "
                  "outermost first:")
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
            loc = f"  {frame_location(f, cwd)}" if f.file else ""
            line = Text.assemble((f"  {f.layer or '?':<11}", style), (f.short or f.function or hex(f.address or 0)),
                                 (key, "bold"), (f"  {os.path.basename(f.library or '?')}{loc}", "dim"))
        console.print(line, overflow="ellipsis", no_wrap=True)
