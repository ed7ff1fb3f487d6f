"""``pttrace diff A B``: which call paths only A took, which only B took, which both took.

Paths are compared by names and package-relative locations (``portable_key``), so two recordings
from different machines or virtualenvs still line up. A path found on one side only is shown with
the frames it shares with its closest match on the other side dimmed, and the first frame that
differs marked.
"""
from __future__ import annotations

import argparse
import shlex

from tracer.commands._sessions import add_session_dir, load

# Finding the closest match compares every pair of paths; past this many pairs, skip it.
MAX_PAIRS = 250_000


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("diff", help="compare the call paths of two sessions",
                              description="Compare two recorded sessions: the call paths only in A, "
                                          "only in B, and in both.")
    p.add_argument("a", metavar="A", help="a session id, a unique prefix, a path, or `last`")
    p.add_argument("b", metavar="B", help="a session id, a unique prefix, a path, or `last`")
    p.add_argument("--all-frames", action="store_true",
                   help="compare interpreter and start-up frames too (folded away by default)")
    add_session_dir(p)
    p.set_defaults(func=run)


def common_prefix(a: tuple, b: tuple) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def compare(paths_a: list, paths_b: list) -> tuple[list, list, list]:
    """(only in A, only in B, [(path in A, path in B), ...]) by path key."""
    keys_b = {p.key: p for p in paths_b}
    keys_a = {p.key for p in paths_a}
    only_a = [p for p in paths_a if p.key not in keys_b]
    only_b = [p for p in paths_b if p.key not in keys_a]
    both = [(p, keys_b[p.key]) for p in paths_a if p.key in keys_b]
    return only_a, only_b, both


def closest(path, others: list) -> int | None:
    """Index of the first frame where ``path`` leaves the path of ``others`` it shares most with."""
    if not others:
        return None
    best = max(common_prefix(path.key, o.key) for o in others)
    return best


def run(args: argparse.Namespace) -> int:
    from rich.text import Text
    from rich.tree import Tree

    from tracer.commands._console import make_console
    from tracer.export import paths as P
    from tracer.export.tree import add_path, path_label, plural

    a = load(args.a, args)
    b = load(args.b, args)
    paths_a = P.group(a.hits, args.all_frames, portable=True, cwd=a.info.cwd)
    paths_b = P.group(b.hits, args.all_frames, portable=True, cwd=b.info.cwd)
    only_a, only_b, both = compare(paths_a, paths_b)
    console = make_console()

    for name, s, paths in (("A", a, paths_a), ("B", b, paths_b)):
        t = Text()
        t.append(f"{name}  ", style="bold")
        t.append(s.info.id, style="bold")
        if s.info.argv:
            t.append(f"  {shlex.join(s.info.argv)}")
        t.append(f"  {s.info.status}  {plural(len(s.hits), 'hit')} in {plural(len(paths), 'call path')}",
                 style="cyan")
        console.print(t)
    console.print()

    find_divergence = len(paths_a) * len(paths_b) <= MAX_PAIRS
    for title, own, other, mine, theirs in (
        ("only in A", only_a, paths_b, a, "B"),
        ("only in B", only_b, paths_a, b, "A"),
    ):
        tree = Tree(Text(f"{title}: {plural(len(own), 'call path')}", style="bold"))
        for n, path in enumerate(own, 1):
            at = closest(path, other) if find_divergence else None
            if at is not None and at >= len(path.frames):
                at = None
            note = f"differs from every path in {theirs} from here" if at is not None else None
            add_path(tree, path_label(n, path, mine.info.cwd), path, mine.info.cwd, diverge_at=at, note=note)
        console.print(tree)
        console.print()

    tree = Tree(Text(f"in both: {plural(len(both), 'call path')}", style="bold"))
    for n, (pa, pb) in enumerate(both, 1):
        label = path_label(n, pa, a.info.cwd, counts=f"A {plural(pa.count, 'hit')}, B {plural(pb.count, 'hit')}")
        tree.add(label)
    console.print(tree)
    return 0
