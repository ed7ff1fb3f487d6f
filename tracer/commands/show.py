"""``pttrace show SESSION``: the distinct call paths of a session as a tree, one colour per layer; first, with
``--op``, the operator calls: each hop with its key set and what changed since the hop before."""
from __future__ import annotations

import argparse
import shlex

from tracer.commands._sessions import add_session_dir, load
from tracer.commands._sources import add_source_dir, finder_for


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("show", help="print the distinct call paths of a session",
                              description="Print the distinct call paths of a recorded session, top-down, "
                                          "coloured by layer.")
    p.add_argument("session", metavar="SESSION", help="a session id, a unique prefix, a path, or `last`")
    p.add_argument("--all-frames", action="store_true",
                   help="keep interpreter and start-up frames (folded away by default)")
    add_session_dir(p)
    add_source_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text
    from rich.tree import Tree

    from tracer.commands._console import make_console
    from tracer.export import paths as P
    from tracer.export.tree import add_op_calls, add_path, path_label, plural

    session = load(args.session, args)
    info = session.info
    paths = P.group(session.hits, args.all_frames)
    root_label = Text()
    root_label.append(f"session {info.id}", style="bold")
    if info.argv:
        root_label.append(f"  {shlex.join(info.argv)}")
    root_label.append(f"  {info.status}", style="green" if info.status == "completed" else "yellow")
    root_label.append(f"  {plural(len(session.hits), 'hit')} in {plural(len(paths), 'distinct call path')}",
                      style="cyan")
    tree = Tree(root_label)
    finder = finder_for(args, session)
    body = Tree("")
    if not paths:
        body.add(Text("no hits were recorded", style="grey50"))
    paths = list(paths)
    from tracer.export import processes as PR

    if PR.several(session):
        # Hits grouped by process (by rank under torchrun); each process's own distinct paths.
        n = 0
        several_hosts = len(PR.hosts(session.processes)) > 1
        for group in PR.groups(session):
            node = body.add(Text.assemble((group.label, "bold"), f"  {plural(len(group.hits), 'hit')}",
                                          (f"  {PR.describe(group.process, several_hosts).split(': ', 1)[-1]}"
                                           if group.process else "", "grey50")))
            for path in P.group(group.hits, args.all_frames):
                n += 1
                add_path(node, path_label(n, path, info.cwd), path, info.cwd, finder=finder)
        paths = []
    add_op_calls(body, session.hits, info.cwd)
    for n, path in enumerate(paths, 1):
        add_path(body, path_label(n, path, info.cwd), path, info.cwd, finder=finder)
    if session.evals:
        add_evals(body, session.evals)
    if session.graphs:
        add_graphs(body, session.graphs)
    for warning in [*info.warnings, *finder.notes]:  # after the paths: finding sources may add notes
        tree.add(Text(f"warning: {warning}", style="yellow"))
    tree.children += body.children
    make_console().print(tree)
    return 0


def add_graphs(body, graphs) -> None:
    """TorchScript: each graph the interpreter ran, once, as ``graph->dump()`` prints it (read from memory)."""
    from rich.text import Text

    from tracer.export.paths import GRAPH_NOT_READ

    for graph in graphs.values():
        node = body.add(Text(f"TorchScript graph of {graph.function or '?'} (read from memory; {GRAPH_NOT_READ})",
                             style="bold"))
        for line in graph.dump():
            node.add(Text(line, style="steel_blue"))
        if graph.why:
            node.add(Text(f"not read: {graph.why}", style="yellow"))


def add_evals(body, evaluated) -> None:
    """``--eval``: each expression's text at the first hits, errors in red."""
    from rich.text import Text

    from tracer.session.evals import first_hits

    shown, more = first_hits(evaluated)
    node = body.add(Text(f"evaluated at each hit (--eval), {len(evaluated):,} hit{'s' if len(evaluated) != 1 else ''}",
                         style="bold"))
    for seq, values in shown:
        hit = node.add(Text(f"hit #{seq}", style="cyan"))
        for v in values:
            hit.add(Text(v.line(), style="red" if v.error is not None else ""))
    if more:
        node.add(Text(f"… {more:,} more hits: `pttrace export --format json` has every one", style="grey50"))
