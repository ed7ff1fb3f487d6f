"""Shared by the export tests: the recorded sigmoid session, and a CommonMark reading of markdown.

``tests/data/sigmoid_session.jsonl`` is a session of ``scripts/hello-world.py`` in the exact storage
format, with frame names taken from the torch 2.13 CPU wheel (``nm -C libtorch_cpu.so``) and
libpython 3.11 (DWARF): breakpoints on ``THPVariable_tensor`` (2 hits), ``wrapper_CPU_sigmoid`` and
``wrapper_CPU_sigmoid_backward``. Interpreter and start-up frames are kept, as gdb sees them.
"""
from __future__ import annotations

import copy
import html
import re
from pathlib import Path

from markdown_it import MarkdownIt

from tracer.session import storage
from tracer.session.model import Frame, Hit, Session, Thread

DATA = Path(__file__).resolve().parent.parent / "data"
SIGMOID = DATA / "sigmoid_session.jsonl"
SIGMOID_ID = "20260522-101502-5f3a"
TORCH_COMMIT = "cf30153c4c131c8164ee7798e5022d810682e2cb"

KERNEL = "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
CPU_ADAPTER = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
    "c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&), &at::(anonymous namespace)::wrapper_CPU_sigmoid>, "
    "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&> >, at::Tensor (at::Tensor const&)>::call("
    "c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)"
)


def load_sigmoid() -> Session:
    return storage.load(SIGMOID)


def hit_by_breakpoint(session: Session, spec: str) -> Hit:
    return next(h for h in session.hits if h.breakpoint == spec)


def clone_hit(hit: Hit, seq: int, **changes) -> Hit:
    new = copy.deepcopy(hit)
    new.seq = seq
    for k, v in changes.items():
        setattr(new, k, v)
    return new


def native(function: str, library: str = "/opt/lib/libtorch_cpu.so", **kw) -> Frame:
    from tracer.dispatch import classify

    return Frame(kind="native", function=function, short=classify.short_name(function), library=library,
                 layer=kw.pop("layer", classify.classify(function, library)),
                 dispatch_key=classify.dispatch_key(function), **kw)


def python(function: str, file: str, line: int, source: str | None = None) -> Frame:
    return Frame(kind="python", function=function, short=function, file=file, line=line, layer="python",
                 source=source)


def one_hit_session(frames: list[Frame], **info) -> Session:
    """A small session around one stack, sharing the sigmoid session's metadata."""
    s = load_sigmoid()
    for k, v in info.items():
        setattr(s.info, k, v)
    s.hits = [Hit(seq=1, breakpoint="b", thread=Thread(id=1, name="python"), time=0.1, frames=frames)]
    return s


# ---------------------------------------------------------------- reading markdown back

def parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def tables(md: str) -> list[list[list[str]]]:
    """Every table as rows of cell *inline source*, header row first, as a CommonMark+GFM parser sees it."""
    tokens = parser().parse(md)
    out: list[list[list[str]]] = []
    row: list[str] | None = None
    for tok in tokens:
        if tok.type == "table_open":
            out.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            out[-1].append(row)
            row = None
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
    return out


def code_spans(md: str) -> list[str]:
    """The text of every inline code span, wherever it is (tables, headings, links, paragraphs)."""
    out = []
    for tok in parser().parse(md):
        if tok.type == "inline":
            out += [c.content for c in tok.children or [] if c.type == "code_inline"]
    return out


def fences(md: str) -> list[tuple[str, str]]:
    """(info, content) of every fenced block."""
    return [(t.info, t.content) for t in parser().parse(md) if t.type == "fence"]


def html_code(md: str) -> list[str]:
    """Unescaped ``<code>`` contents inside raw HTML blocks (``<summary>``)."""
    out = []
    for t in parser().parse(md):
        if t.type == "html_block":
            out += [html.unescape(m) for m in re.findall(r"<code>(.*?)</code>", t.content)]
    return out


def unclosed_fence(md: str) -> int | None:
    """The line of a fence that is never closed (CommonMark rules), or None."""
    open_at = None
    char = ""
    length = 0
    for n, line in enumerate(md.splitlines(), 1):
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 3:
            continue
        m = re.match(r"(`{3,}|~{3,})(.*)$", stripped)
        if not m:
            continue
        fence = m.group(1)
        if open_at is None:
            open_at, char, length = n, fence[0], len(fence)
        elif fence[0] == char and len(fence) >= length and not m.group(2).strip():
            open_at = None
    return open_at


# ---------------------------------------------------------------- big sessions, written as the agent writes them

def write_hot_session(path: Path, hits: int, paths: int = 3, threads: int = 2, end: bool = True) -> None:
    """A schema-2 session of ``hits`` hits of a hot breakpoint, written with the agent's own ``Interner``
    (``records.py``): the sigmoid session's recorded stacks, ``paths`` of them taking turns (each with a
    different Python line) on ``threads`` threads; a killed writer's file if not ``end``. For export and
    view at scale (tests and ``bench/``); a million hits take ~10 s to write."""
    from tracer.session import records

    base = load_sigmoid()
    w = storage.SessionWriter(path)
    w.header(base.info)
    for bp in base.breakpoints:
        w.breakpoint(bp)
    stacks = []
    for n in range(paths):
        frames = [records.CachedFrame(f.to_dict()) for f in base.hits[n % len(base.hits)].frames]
        for i, f in enumerate(frames):
            if f["kind"] == "python":
                frames[i] = records.CachedFrame({**f, "line": f["line"] + 1000 * (n // len(base.hits))})
        stacks.append((base.hits[n % len(base.hits)].breakpoint, frames))
    thread_dicts = [{"id": t + 1, "name": "python" if t == 0 else f"worker-{t}", "lwp": 4000 + t}
                    for t in range(threads)]
    interner = records.Interner()
    chunk: list[bytes] = []
    with open(path, "ab") as fh:
        for seq in range(1, hits + 1):
            spec, frames = stacks[seq % paths]
            chunk.append(interner.encode_hit(seq, spec, thread_dicts[seq % threads], 1000.0 + seq * 1e-4, frames))
            if len(chunk) >= 10000:
                fh.write(b"".join(chunk))
                chunk = []
        fh.write(b"".join(chunk))
    if end:
        w.end("completed", 0)
    w.close()


def json_hits(doc: dict) -> list[dict]:
    """The hits of a JSON export (contract 2: a hit names its stack, a stack its frames) each with its
    ``frames`` written out, as contract 1 had them."""
    stacks = [[doc["frames"][i] for i in ids] for ids in doc["stacks"]]
    return [{**h, "frames": stacks[h["stack"]]} for h in doc["hits"]]
