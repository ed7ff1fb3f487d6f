"""A session as a markdown document people keep: metadata, breakpoints, and each distinct call path once.

Every name that reaches the page goes through one of the escapers below, because C++ names are full
of characters markdown means something by: ``<`` and ``>`` (HTML), ``*`` and ``_`` (emphasis), ``|``
(table cells) and backticks (code spans). Inside a code span only backticks and, in a table, pipes
matter; inside HTML (``<summary>``) only ``&<>"``; inside a fenced block nothing but a longer fence.
"""
from __future__ import annotations

import html
import os
import re
import shlex

from tracer.export import op_calls as O
from tracer.export import values as V
from tracer.export import paths as P
from tracer.export import processes as PR
from tracer.export.local_files import SourceTrust
from tracer.export.source import SourceReader, commit_url, github_url, language, pinned_ref
from tracer.session.hit_table import HitTable
from tracer.session.model import Breakpoint, Frame, Hit, Session

# ---------------------------------------------------------------- escaping

_MD_SPECIAL_RE = re.compile(r"([\\`*_\[\]<>|&~])")
_BACKTICKS_RE = re.compile(r"`+")


def text(s: object) -> str:
    """Plain text on one line, with the characters that mean something mid-line backslash-escaped.

    Never used at the start of a line, where ``#``, ``-`` or ``1.`` would also need care.
    """
    return _MD_SPECIAL_RE.sub(r"\\\1", " ".join(str(s).split()))


def code(s: object, in_table: bool = False) -> str:
    """An inline code span that holds ``s`` verbatim (a longer backtick fence than any run inside)."""
    s = " ".join(str(s).splitlines())
    runs = [len(m) for m in _BACKTICKS_RE.findall(s)]
    fence = "`" * (max(runs) + 1 if runs else 1)
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ")) else ""
    out = f"{fence}{pad}{s}{pad}{fence}"
    # GFM splits table cells on pipes before it parses code spans; ``\|`` is turned back into ``|``.
    return out.replace("|", "\\|") if in_table else out


def hcode(s: object) -> str:
    """A name inside raw HTML (``<summary>``): entities, not backslashes."""
    return f"<code>{html.escape(' '.join(str(s).split()), quote=True)}</code>"  # a blank line would end the HTML block


def fenced(body: str, lang: str = "") -> list[str]:
    runs = [len(m) for m in _BACKTICKS_RE.findall(body)]
    fence = "`" * max(3, (max(runs) + 1) if runs else 3)
    return [f"{fence}{lang}", *body.splitlines(), fence]


def link(label_md: str, url: str) -> str:
    return f"[{label_md}]({url})"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(c if c else " " for c in cells) + " |"


_MERMAID_ENTITIES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "`": "#96;", "#": "#35;", "&": "#amp;",
                     "|": "#124;", "\n": " "}


def mermaid_label(s: str) -> str:
    return "".join(_MERMAID_ENTITIES.get(ch, ch) for ch in s)


# ---------------------------------------------------------------- document

_LAYER_COLOURS = {
    "python": "#d5f5d5", "interpreter": "#eeeeee", "binding": "#f3d9f7", "dispatcher": "#d6e4ff",
    "autograd": "#fff1c2", "kernel": "#ffd6d6", "runtime": "#e8e8e8", "torchscript": "#d4f4f7", "compiler": "#dbe6f5",
    "parallel": "#ecdcf7", "generated": "#fde3cf",
}


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


class MarkdownRenderer:
    """The document: the session's facts, its breakpoints, what --eval printed, and its call paths; a
    frame's rows and sources are ``FrameText``'s, the operator calls' tables ``operator_calls``'."""

    def __init__(self, session: Session, all_frames: bool = False, context: int = 2,
                 reader: SourceReader | None = None, finder=None, trust: SourceTrust | None = None):
        self.session = session
        self.info = session.info
        self.all_frames = all_frames
        self.context = context
        self.finder = finder  # a tracer.sources.SourceFinder: sources of frames without DWARF
        if trust is None:
            trust = SourceTrust(dirs=(finder.source_dir,) if finder is not None and finder.source_dir else ())
        self.reader = reader or SourceReader(session.info.cwd, finder.local_file if finder else None, trust)
        self.ref = pinned_ref(self.info.torch_git_version, self.info.torch_version)
        self.cwd = self.info.cwd
        self.frames = FrameText(self.reader, finder, self.ref, self.cwd, context)

    # -- top
    def render(self) -> str:
        hits = self.session.hits
        if not isinstance(hits, HitTable):
            hits = HitTable(hits)
        # Only the hits of --op breakpoints are looked at one by one (a hot breakpoint's million are not).
        calls = O.group_calls(hits.where(O.is_op_site))
        # One call of an operator stops at each of its hops: its path is shown once, by its deepest hop.
        shown = hits.where(lambda site: not O.is_op_site(site)) if calls else hits
        if calls:
            shown.extend(c.deepest for c in calls)
            shown.sort()
        paths = P.group(shown, self.all_frames)
        # The body first: finding sources may add warnings, which the header shows.
        body = (self.processes() + self.breakpoints() + operator_calls(calls, self.cwd)
                + self.call_paths(paths, calls) + self.evaluated() + self.getting_source(paths))
        out = self.header(paths, calls) + body
        return "\n".join(out).rstrip() + "\n"

    def header(self, paths: list[P.CallPath], calls: list[O.OpCall]) -> list[str]:
        info = self.info
        command = shlex.join(info.argv) if info.argv else None
        # The title as the reader would type it (``python scripts/x.py``); the table keeps the full command.
        short = shlex.join([os.path.basename(info.argv[0]), *info.argv[1:]]) if info.argv else None
        title = f"# pttrace: {code(short)}" if short else f"# pttrace session {code(info.id)}"
        torch = text(info.torch_version) if info.torch_version else "unknown"
        commit = "unknown"
        if info.torch_git_version:
            commit = code(info.torch_git_version, in_table=True)
            if self.ref == info.torch_git_version.strip():
                commit = link(code(info.torch_git_version[:12], in_table=True), commit_url(self.ref))
        mode = text(info.mode) + (f" (pid {info.pid})" if info.pid is not None else "")
        date = text(info.started or "unknown")
        if info.ended:
            date += f" to {text(info.ended)}"
        status = text(info.status)
        if info.exit_code is not None:
            status += f" (exit code {info.exit_code})"
        told = list(info.warnings) + (self.finder.notes if self.finder else [])
        warnings = "<br>".join(text(w) for w in told) if told else "none"
        n_hits = len(self.session.hits)
        rows = [
            ("session", code(info.id, in_table=True)),
            ("command", code(command, in_table=True) if command else "unknown"),
            ("mode", mode),
            ("Python", text(info.python) if info.python else "unknown"),
            ("torch", torch),
            ("torch git commit", commit),
            ("gdb", text(info.gdb_version) if info.gdb_version else "unknown"),
            ("date", date),
            ("status", status),
            ("hits", f"{n_hits:,} in {plural(len(paths), 'distinct call path')}"
                     + (f" ({plural(len(calls), 'operator call')})" if calls else "")),
            ("warnings", warnings),
        ]
        if PR.several(self.session):
            rows.insert(-1, ("processes", f"{len(PR.groups(self.session))} (see *Processes*)"))
        hosts = PR.hosts(self.session.processes)
        if len(hosts) > 1:
            rows.insert(-1, ("hosts", ", ".join(code(h, in_table=True) for h in hosts)))
        if info.cwd:
            rows.insert(2, ("working directory", code(info.cwd, in_table=True)))
        lines = [title, "", "| | |", "|---|---|"]
        lines += [row([f"**{k}**", v]) for k, v in rows]
        lines.append("")
        return lines

    def processes(self) -> list[str]:
        """Every process of the run with its hits (by rank under torchrun), its command line and end."""
        if not PR.several(self.session):
            return []
        several_hosts = len(PR.hosts(self.session.processes)) > 1
        host = ["host"] if several_hosts else []
        lines = ["## Processes", "", row(["process", *host, "parent", "command", "started – ended", "end", "hits"]),
                 "|---|" + "---|" * len(host) + "---|---|---|---|---:|"]
        for group in PR.groups(self.session):
            p = group.process
            if p is None:
                lines.append(row([text(group.label), *[""] * len(host), "", "", "", "", f"{len(group.hits):,}"]))
                continue
            lines.append(row([text(p.label), *([text(p.host or "?")] if several_hosts else []), text(p.ppid or ""),
                              code(PR.command(p), in_table=True), text(PR.timespan(p)), text(p.outcome),
                              f"{len(group.hits):,}"]))
        lines.append("")
        return lines

    def breakpoints(self) -> list[str]:
        lines = ["## Breakpoints", ""]
        if not self.session.breakpoints:
            return lines + ["No breakpoints were recorded.", ""]
        lines += [row(["breakpoint", "resolved locations", "hits"]), "|---|---|---:|"]
        for bp in self.session.breakpoints:
            where = self.op_locations(bp) if bp.spec.startswith(O.OP_LABEL) else self.locations(bp)
            lines.append(row([code(bp.spec, in_table=True), where, f"{bp.hits:,}"]))
        lines.append("")
        return lines

    def op_locations(self, bp: Breakpoint) -> str:
        """An operator's breakpoint: how many functions, in which libraries, the names behind a fold."""
        if not bp.locations:
            return self.locations(bp)
        libs = sorted({loc.library.rsplit("/", 1)[-1] for loc in bp.locations if loc.library})
        names = sorted({_short(loc.function) for loc in bp.locations if loc.function})
        head = (f"{plural(len(bp.locations), 'function')} of {code(O.qualified(O.op_of_label(bp.spec) or ''), True)}"
                + (f" in {', '.join(code(x, in_table=True) for x in libs)}" if libs else ""))
        listed = "<br>".join(hcode(n) for n in names)
        return f"{head}<details><summary>their names</summary>{listed}</details>"

    def locations(self, bp: Breakpoint) -> str:
        parts: list[str] = []
        for loc in bp.locations:
            s = code(loc.function or (hex(loc.address) if loc.address is not None else "??"), in_table=True)
            if loc.library:
                s += " in " + code(loc.library.rsplit("/", 1)[-1], in_table=True)
            if loc.file:
                where = P.display_path(loc.file, self.cwd)
                if loc.line:
                    where += f":{loc.line}"
                url = github_url(loc.file, loc.line, self.ref)
                s += " at " + (link(code(where, in_table=True), url) if url else code(where, in_table=True))
            elif loc.address is not None and loc.function:
                s += f" at {code(hex(loc.address), in_table=True)}"
            if loc.note:
                s += f" ({text(loc.note)})"
            if not loc.enabled:
                s += " (disabled)"
            parts.append(s)
        if bp.error:
            parts.append("not set: " + text(bp.error))
        if bp.suggestions:
            parts.append("try " + ", ".join(code(x, in_table=True) for x in bp.suggestions))
        if not parts:
            parts.append("pending: never resolved" if bp.pending else "no locations")
        return "<br>".join(parts)

    def evaluated(self) -> list[str]:
        """``--eval``: a table of each expression's text at the first hits."""
        from tracer.session.evals import first_hits

        if not self.session.evals:
            return []
        shown, more = first_hits(self.session.evals)
        exprs = list(dict.fromkeys(v.expr for _, values in shown for v in values))
        lines = ["## Evaluated at each hit (`--eval`)", "",
                 f"gdb evaluated {plural(len(exprs), 'expression')} in the frame each hit stopped in "
                 f"({plural(len(self.session.evals), 'hit')}).", "",
                 row(["hit", *(code(e, in_table=True) for e in exprs)]), row(["---"] * (len(exprs) + 1))]
        for seq, values in shown:
            by_expr = {v.expr: v for v in values}
            cells = []
            for e in exprs:
                v = by_expr.get(e)
                cells.append("" if v is None else (f"error: {text(v.error)}" if v.error is not None
                                                   else code(v.text, in_table=True)))
            lines.append(row([f"#{seq}", *cells]))
        if more:
            lines += ["", f"… and {plural(more, 'hit')} more: the JSON export (`--format json`) has every one."]
        return lines + [""]

    # -- paths
    def call_paths(self, paths: list[P.CallPath], calls: list[O.OpCall]) -> list[str]:
        lines = ["## Call paths", ""]
        if not paths:
            return lines + ["No hits were recorded.", ""]
        n_hits = sum(p.count for p in paths)
        intro = (f"{plural(n_hits, 'hit')} took {plural(len(paths), 'distinct call path')}. "
                 "Each path runs top-down, from the outermost Python frame to the innermost native frame.")
        if calls:
            intro += (" An operator call is counted once, by its deepest hop (the one with the longest stack); "
                      "its other hops are under *Operator calls*.")
        if not self.all_frames:
            hidden = sum(p.hidden for p in paths)
            if hidden:
                intro += (" Interpreter and start-up frames are folded away "
                          f"({plural(hidden, 'frame')} over all paths); `--all-frames` shows them.")
        lines += [intro, ""]
        studied, imports = P.reading_order(paths, [bp.spec for bp in self.session.breakpoints])
        if not studied:  # only import-time hits: they are what this session is about
            studied, imports = imports, []
        for n, path in enumerate(studied, 1):
            lines += self.call_path(n, path)
        if imports:
            lines += self.import_paths(len(studied) + 1, imports)
        return lines

    def import_paths(self, first: int, paths: list[P.CallPath]) -> list[str]:
        """The paths taken while modules were imported, summarised: one row each, the full path folded."""
        lines = ["## At import time", "",
                 f"{plural(sum(p.count for p in paths), 'hit')} in {plural(len(paths), 'distinct call path')} ran "
                 "while a module was being imported (CPython's import machinery is on their Python stack): "
                 "what a library does as it loads. One row each; each full path is folded below it.", "",
                 row(["path", "innermost function", "layer", "library", "imported at", "hits"]),
                 "|---:|---|---|---|---|---:|"]
        for n, path in enumerate(paths, first):
            inner = path.innermost
            origin = P.innermost_python(path.frames)
            lines.append(row([str(n), code(path.title, in_table=True),
                              text(P.layer_of(inner)) if inner is not None else "",
                              code(P.library_name(inner) or "", in_table=True) if inner is not None else "",
                              code(P.frame_location(origin, self.cwd), in_table=True) if origin else "",
                              str(path.count)]))
        lines.append("")
        for n, path in enumerate(paths, first):
            lines += ["<details>", f"<summary>Path {n}: {hcode(path.title)}</summary>", ""]
            lines += self.call_path(n, path, brief=True)
            lines += ["</details>", ""]
        return lines

    def call_path(self, n: int, path: P.CallPath, brief: bool = False) -> list[str]:
        heading = f"### Path {n}: {code(path.title)}"
        origin = P.innermost_python(path.frames) or P.launch_origin(path.first)
        if origin is not None and origin is not path.innermost and origin.file:
            heading += f" from {code(P.frame_location(origin, self.cwd))}"
        lines = [f"{heading} ({plural(path.count, 'hit')})", ""]
        facts = []
        if path.breakpoints:
            facts.append("breakpoint " + ", ".join(code(b) for b in path.breakpoints))
        if PR.several(self.session):
            pids = list(dict.fromkeys(h.thread.pid for h in path.hits))
            labels = [_process_label(self.session, pid) for pid in pids[:5]]
            facts.append(("process " if len(pids) == 1 else "processes ") + ", ".join(text(x) for x in labels)
                         + (f" and {len(pids) - 5} more" if len(pids) > 5 else ""))
        threads = path.threads
        facts.append(("thread " if len(threads) == 1 else "threads ") + ", ".join(text(t) for t in threads[:5])
                     + (f" and {len(threads) - 5} more" if len(threads) > 5 else ""))
        seqs = [h.seq for h in path.hits[:5]]
        facts.append(("hit " if path.count == 1 else "hits ") + ", ".join(f"#{s}" for s in seqs)
                     + (", …" if path.count > len(seqs) else ""))
        if path.signals:
            facts.append("stopped by signal " + ", ".join(code(s) for s in path.signals))
        if path.hidden:
            facts.append(f"{plural(path.hidden, 'frame')} folded")
        launches = list(dict.fromkeys(t for t in (P.launch_text(h, self.session.hits, self.cwd)
                                                  for h in path.hits[:5]) if t))
        if launches:
            facts += [text(t) for t in launches]
        elif P.in_parallel_worker(path.frames):
            facts.append(text(P.WORKER_NOTE))
        lines += [" · ".join(facts), ""]
        if path.truncated:
            lines += ["The recorded stack was truncated: the outermost frames are missing.", ""]
        if not path.frames:
            return lines + ["No frames were recorded for this stop.", ""]
        lines += ["Layers: " + " → ".join(path.layers), ""]
        if not brief:
            lines += mermaid(n, path)
        lines += with_carried(["#", "layer", "function", "dispatch key", "library", "file:line"],
                              [(self.frames.row(i, f), path.first, f) for i, f in enumerate(path.frames, 1)])
        lines += [""] + shape_lines(path)
        if brief:  # an import-time path: its table says enough, the excerpts would bury the paths studied
            return lines
        for i, frame in enumerate(path.frames, 1):
            lines += self.frames.details(i, frame)
            lines += self.frames.kernel_details(i, P.generated_kernel(path.frames, i - 1, self.cwd))
            lines += torchscript_details(i, frame, self.session, self.cwd)
        return lines

    def getting_source(self, paths: list[P.CallPath]) -> list[str]:
        """How to get the C++ behind the frames that only point at a header, a yaml entry or nothing."""
        bare = {f.key() for p in paths for f in p.frames if f.kind == "native" and not f.file}
        if not bare:
            return []
        commit = self.info.torch_git_version
        checkout = (f"`git clone https://github.com/pytorch/pytorch && git -C pytorch checkout {commit}`"
                    if commit else "a checkout of PyTorch at the traced version (`torch.version.git_version`)")
        return ["## Getting the C++ source", "",
                f"{plural(len(bare), 'native frame')} above {'has' if len(bare) == 1 else 'have'} no file:line: "
                "the library has symbols but no DWARF (a release wheel). What is shown for them comes from the "
                "headers and codegen inputs the wheel ships (`torch/include`, `native_functions.yaml`, "
                "`derivatives.yaml`). For the `.cpp` files behind them:", "",
                f"- check out PyTorch at this session's commit, {checkout}, and export again with "
                f"`pttrace export {self.info.id} --source-dir pytorch` (`show` and `view` take it too): each frame "
                "gets its definition's file:line in the checkout;",
                "- or build PyTorch with debug information (`DEBUG=1` or `REL_WITH_DEB_INFO=1` "
                "`python setup.py develop`) and record again: every frame gets its file:line from DWARF.", ""]


def operator_calls(calls: list[O.OpCall], cwd: str | None) -> list[str]:
    """*Operator calls*: each call's hops, grouped by the Python line the calls came from."""
    if not calls:
        return []
    lines = ["## Operator calls", "",
             f"The {plural(sum(len(c.hits) for c in calls), 'hit')} of the operators' breakpoints are "
             f"{plural(len(calls), 'call')}: each call's hops in the order they ran, with the "
             "`DispatchKeySet` each was called with and the keys handled since the hop before. "
             "Calls are grouped by the Python line they came from; calls that took the same hops with "
             "the same key sets are shown once.", ""]
    for site in O.by_call_site(calls):
        lines += _call_site(site, cwd)
    return lines


def _call_site(site: O.CallSite, cwd: str | None) -> list[str]:
    frame = site.frame
    where = P.frame_location(frame, cwd) if frame is not None else None
    heading = f"### {code(where)}" if where else "### (no Python frame)"
    if frame is not None and frame.source:
        heading += f": {code(frame.source.strip())}"
    lines = [heading, ""]
    for calls in site.variants:
        first = calls[0]
        seqs = [h.seq for c in calls for h in c.hits]
        followed = first.followed()
        op, *others = [o for o in first.ops() if O.FOLLOWED not in o] or ["?"]
        head = f"{plural(len(calls), 'call')} of {code(O.qualified(op))}"
        if others:
            head += ", through functions resolved for " + ", ".join(code(O.qualified(o)) for o in others)
        if followed:
            head += (", with the operators it called (`--follow-ops`), each under the one that called it: "
                     + ", ".join(code(o) for o in followed))
        span = f"hit #{seqs[0]}" if len(seqs) == 1 else f"hits #{min(seqs)} to #{max(seqs)}"
        lines += [f"{head} ({span})", ""]
        heads = ["#", "operator"][: 1 + bool(followed)] + ["hop", "layer", "called with", "since the hop before"]
        lines += with_carried(heads, [(_hop_row(i, hop, followed=bool(followed)), hop.hit, hop.frame)
                                      for i, hop in enumerate(first.hops(), 1)]) + [""]
    return lines


def _hop_row(i: int, hop: O.Hop, followed: bool = False) -> str:
    from tracer.dispatch.ops import capability_of_label, keyset_text

    f = hop.frame
    name = code(P.short_of(f), in_table=True)
    if f.dispatch_key:
        name += f" [{text(f.dispatch_key)}]"
    cap = capability_of_label(hop.hit.breakpoint)
    if cap:
        name += f" ({text(cap)} build)"
    if hop.keys is not None:
        called = ", ".join(text(k) for k in hop.keys) or "(empty)"
    else:
        called = f"<i>{text(keyset_text(f))}</i>"
    change = []
    if hop.handled():
        change.append("handled " + ", ".join(text(k) for k in hop.handled()))
    if hop.added():
        change.append("added " + ", ".join(text(k) for k in hop.added()))
    cells = [str(i), name, P.layer_of(f), called, "; ".join(change)]
    if followed:  # which operator the hop is a function of, indented by how deep it nests
        indent = "&nbsp;&nbsp;" * hop.depth + ("↳ " if hop.depth else "")
        cells.insert(1, indent + code(hop.op or "?", in_table=True))
    return row(cells)


def mermaid(n: int, path: P.CallPath) -> list[str]:
    """One node per run of consecutive frames in the same layer, outermost first."""
    runs: list[tuple[str, list[Frame]]] = []
    for f in path.frames:
        layer = P.layer_of(f)
        if runs and runs[-1][0] == layer:
            runs[-1][1].append(f)
        else:
            runs.append((layer, [f]))
    lines = ["```mermaid", "flowchart LR"]
    for i, (layer, frames) in enumerate(runs):
        names = P.short_of(frames[0])
        if len(frames) > 1:
            names += f" … {P.short_of(frames[-1])}" if len(frames) > 2 else f", {P.short_of(frames[-1])}"
        label = mermaid_label(f"{layer}: {names}")
        lines.append(f'  p{n}n{i}["{label}"]:::{layer}')
    if len(runs) > 1:
        lines.append("  " + " --> ".join(f"p{n}n{i}" for i in range(len(runs))))
    for layer in dict.fromkeys(layer for layer, _ in runs):
        lines.append(f"  classDef {layer} fill:{_LAYER_COLOURS.get(layer, '#ffffff')},stroke:#555555")
    lines += ["```", ""]
    return lines


class FrameText:
    """A frame as the page shows it: its row in a path's table, its details with the source around its line
    (from DWARF, or found without it), and the inductor kernel it runs."""

    def __init__(self, reader: SourceReader, finder, ref: str | None, cwd: str | None, context: int) -> None:
        self.reader = reader
        self.finder = finder  # a tracer.sources.SourceFinder: sources of frames without DWARF
        self.ref = ref  # the torch commit GitHub links point at
        self.cwd = cwd
        self.context = context

    def row(self, i: int, frame: Frame) -> str:
        name = code(P.short_of(frame), in_table=True)
        if frame.inlined:
            name += " (inlined)"
        note = P.frame_note(frame)
        if note:
            name += f" ({text(note)})"
        key = P.dispatch_key_of(frame)
        lib = P.library_name(frame)
        return row([str(i), P.layer_of(frame), name, text(key) if key else "", code(lib, in_table=True) if lib else "",
                    self.where(frame)])

    def where(self, frame: Frame) -> str:
        loc = P.frame_location(frame, self.cwd)
        if loc is None:
            refs = self.refs(frame)
            if not refs:
                return ""
            more = f" (+{len(refs) - 1})" if len(refs) > 1 else ""
            return f"{refs[0].label}: {self.ref_link(refs[0], in_table=True)}{more}"
        url = github_url(frame.file, frame.line, self.ref)
        return link(code(loc, in_table=True), url) if url else code(loc, in_table=True)

    def refs(self, frame: Frame) -> list:
        if self.finder is None or frame.kind == "python" or frame.file:
            return []
        return self.finder.refs(frame.function, frame.library)

    def ref_link(self, ref, in_table: bool = False) -> str:
        where = f"{P.display_path(ref.file, self.cwd)}:{ref.line}" if ref.line else P.display_path(ref.file, self.cwd)
        url = github_url(ref.file, ref.line, self.ref)
        return link(code(where, in_table), url) if url else code(where, in_table)

    def details(self, i: int, frame: Frame) -> list[str]:
        layer = P.layer_of(frame)
        summary = f"{i}. {hcode(P.short_of(frame))} ({html.escape(layer)})"
        body: list[str] = []
        if frame.kind != "python" and frame.function:
            body += ["Full name:", ""] + fenced(frame.function, "text") + [""]
        facts = []
        # Paths as the reader's own machine would have them: under site-packages, the working directory or
        # PyTorch's tree, not under the recording machine's home or venv.
        if frame.library:
            facts.append(f"library {code(P.display_path(frame.library, self.cwd))}")
        if frame.address is not None:
            facts.append(f"address {code(hex(frame.address))}")
        if frame.file:
            facts.append(f"file {code(P.frame_location(frame, self.cwd))}")
        if frame.decl_file or frame.decl_line:
            decl_file = P.display_path(frame.decl_file or frame.file, self.cwd)
            decl = f"{decl_file}:{frame.decl_line}" if frame.decl_line else decl_file
            facts.append(f"declared at {code(decl)}")
        if frame.inlined:
            facts.append("inlined into its caller")
        if facts:
            body += ["- " + f for f in facts] + [""]
        url = github_url(frame.file, frame.line, self.ref)
        if url and self.ref:  # a link has a commit to point at
            label = code(P.frame_location(frame, self.cwd))
            body += [f"On GitHub at {code(self.ref[:12])}: {link(label, url)}", ""]
        body += self.source(frame)
        body += self.found_sources(frame)
        if not body:
            return []
        return ["<details>", f"<summary>{summary}</summary>", "", *body, "</details>", ""]

    def source(self, frame: Frame) -> list[str]:
        lang = language(frame.file) or ("python" if frame.kind == "python" else "")
        # Only a file that is plausibly this frame's source is quoted (local_files.source_lines): for a
        # Python frame, one whose line says what the recording says; else the line as it ran.
        excerpt = self.reader.excerpt(frame, self.context)
        recorded = frame.source if frame.kind == "python" else None
        if excerpt is not None:
            width = len(str(excerpt[-1][0]))
            body = "\n".join(f"{'>' if n == frame.line else ' '} {n:>{width}}  {t}" for n, t in excerpt)
            return fenced(body, lang) + [""]
        if recorded:
            return fenced(f"> {frame.line}  {recorded.strip()}" if frame.line else recorded.strip(), lang) + [""]
        return []

    def found_sources(self, frame: Frame) -> list[str]:
        """The places pttrace found for a frame without DWARF, each with its excerpt."""
        refs = self.refs(frame)
        if not refs:
            return []
        out = ["Source found without DWARF (labelled by how it was found):", ""]
        for ref in refs:
            several = f" (one of {ref.candidates} that fit)" if ref.candidates > 1 else ""
            out += [f"- **{text(ref.label)}**{several}: {self.ref_link(ref)} {code(ref.what)}", ""]
            excerpt = self.reader.found_excerpt(ref.file, ref.line, self.context)
            if excerpt is not None:
                width = len(str(excerpt[-1][0]))
                lines = "\n".join(f"{'>' if n == ref.line else ' '} {n:>{width}}  {t}" for n, t in excerpt)
                out += [f"  {x}" for x in fenced(lines, language(ref.file))] + [""]
        return out

    def kernel_details(self, i: int, kernel) -> list[str]:
        """Frame ``i`` runs an inductor kernel: which, its ops and FX nodes, the user's lines they came
        from next to the generated code that calls it (``tracer.scripted.inductor``)."""
        if kernel is None:
            return []
        out = [f"**Frame {i} is inductor-generated code.** {text(kernel.summary())}", ""]
        if kernel.nodes:
            out += [row(["FX node", "ATen op", "from"]), "|---|---|---|"]
            for n in kernel.nodes:
                where = f"{P.display_path(n.file, self.cwd)}:{n.line} {n.function}" if n.file else ""
                out.append(row([code(n.name, in_table=True), code(n.op or "?", in_table=True),
                                (code(where, in_table=True) + (f" {code(n.code, in_table=True)}" if n.code else ""))
                                if where else "not recorded"]))
            out.append("")
        for n in kernel.user_lines:
            excerpt = self.reader.found_excerpt(n.file, n.line, self.context)
            if excerpt is not None:
                out += [f"The user's line, {code(P.display_path(n.file, self.cwd) + ':' + str(n.line))}:", ""]
                out += self._numbered(excerpt, n.line, n.file)
        if kernel.module and kernel.module_line:
            excerpt = self.reader.found_excerpt(kernel.module, kernel.module_line, self.context)
            if excerpt is not None:
                out += [f"The generated module calls it at {code(kernel.module + ':' + str(kernel.module_line))}:", ""]
                out += self._numbered(excerpt, kernel.module_line, kernel.module)
        if kernel.cpp and kernel.cpp_line:
            excerpt = self.reader.found_excerpt(kernel.cpp, kernel.cpp_line, self.context)
            if excerpt is not None:
                out += [f"Its generated C++, {code(kernel.cpp + ':' + str(kernel.cpp_line))}:", ""]
                out += self._numbered(excerpt, kernel.cpp_line, kernel.cpp)
        if kernel.missing:
            out += [f"Not known: {text(kernel.missing)}.", ""]
        return out

    @staticmethod
    def _numbered(excerpt: list, mark: int, file: str) -> list[str]:
        width = len(str(excerpt[-1][0]))
        body = "\n".join(f"{'>' if n == mark else ' '} {n:>{width}}  {t}" for n, t in excerpt)
        return fenced(body, language(file)) + [""]


def torchscript_details(i: int, frame: Frame, session: Session, cwd: str | None) -> list[str]:
    """Frame ``i`` is TorchScript's interpreter: the scripted lines it ran and their graph nodes (read from
    its memory), then the graphs of those functions."""
    if frame.kind != "native" or not P.is_interpreter_loop(frame.function):
        return []
    rows = P.torchscript_rows(frame)
    if not rows:
        return [f"**Frame {i} is TorchScript's interpreter.** {text(P.frame_note(frame) or '')}", ""]
    out = [f"**Frame {i} is TorchScript's interpreter**, running (outermost first):", "",
           row(["scripted function", "file:line", "line", "graph node"]), "|---|---|---|---|"]
    for r in rows:
        where = f"{P.display_path(r.file, cwd) or '?'}:{r.line if r.line is not None else '?'}"
        out.append(row([code(r.function or "?", in_table=True), code(where, in_table=True) if r.file else "",
                        code(r.text, in_table=True) if r.text else (text(f"not read: {r.why}") if r.why else ""),
                        code(r.node, in_table=True) if r.node else ""]))
    out.append("")
    for graph in P.frame_graphs(frame, session.graphs):
        out += [f"The graph of {code(graph.function or '?')} (what {code('graph->dump()')} prints, read from "
                f"memory; {text(P.GRAPH_NOT_READ)}):", ""]
        out += fenced("\n".join(graph.dump())) + [""]
        if graph.why:
            out += [f"Not read: {text(graph.why)}.", ""]
    return out


def carried_cell(hit: Hit, frame: Frame) -> str:
    """What ``frame`` carried at ``hit``: a line an argument, then the dispatcher's decision."""
    fv = V.frame_values(hit, frame)
    if fv is None:
        return " "
    lines = [V.arg_text(a, i) for i, a in enumerate(fv.args)] + V.decision_lines(fv)
    return "<br>".join(text(x) for x in lines) or " "


def _process_label(session: Session, pid: int | None) -> str:
    process = session.process(pid)
    return process.label if process else f"pid {pid}"


def with_carried(heads: list[str], rows: list[tuple[str, Hit, Frame]]) -> list[str]:
    """A table, with a *carried* column when a row's hit carried values (a session recorded before
    values were read keeps its tables as they were): ``rows`` are (row, hit, frame)."""
    carried = any(hit.values for _, hit, _ in rows)
    heads = heads + ["carried"] * carried
    return [row(heads), "|---:|" + "---|" * (len(heads) - 1)] + [
        line + f" {carried_cell(hit, frame)} |" if carried else line for line, hit, frame in rows]


def shape_lines(path: P.CallPath) -> list[str]:
    """A path whose hits carried different argument shapes lists them."""
    shapes = V.shapes(path._distinct)
    if len(shapes) < 2:
        return []
    return [f"Its hits carried {len(shapes)} distinct argument shapes:", ""] + [f"- {text(s)}" for s in shapes] + [""]


def _short(function: str) -> str:
    from tracer.dispatch.classify import short_name

    return short_name(function) or function


def render(session: Session, all_frames: bool = False, context: int = 2, reader: SourceReader | None = None,
           finder=None, trust: SourceTrust | None = None) -> str:
    """The markdown document for ``session``."""
    return MarkdownRenderer(session, all_frames=all_frames, context=context, reader=reader, finder=finder,
                            trust=trust).render()
