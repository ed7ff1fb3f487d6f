"""Where a native frame's source is, without DWARF: its definition, its operator's yaml entries, its template.

A frame of a release wheel has a demangled name and a library. From the library's place
(``.../site-packages/torch/lib/libtorch_cpu.so``) follow the headers the wheel ships
(``torch/include``) and torchgen's packaged yaml and templates; a PyTorch checkout given as the
source directory adds its ``.cpp`` files. Each place found is a ``SourceRef`` labelled by how it was
found. The indexes are built once per tree and cached (``tags.py``); a finder keeps them loaded.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from tracer.text.cxxtext import split_top
from tracer.errors import UsageError
from tracer.text.escape import visible
from tracer.sources import generated, names, tags, yaml_ops

DEFINITION = "definition"
OP = "op"
GENERATED = "generated from"


@dataclass(frozen=True)
class SourceRef:
    label: str  # DEFINITION, OP or GENERATED
    file: str  # a file on this machine
    line: int | None
    what: str  # one line saying what is there: the schema, "template of Operators_*.cpp", the qualified name
    candidates: int = 1  # how many definitions were left for the frame (several: all are shown)
    end: int | None = None  # a definition's last line, when the parser knows it

    def to_dict(self) -> dict:
        return {"label": self.label, "file": self.file, "line": self.line, "end": self.end, "what": self.what,
                "candidates": self.candidates}


def _torch_dir_of_library(library: str | None) -> str | None:
    if not library:
        return None
    lib_dir = os.path.dirname(library)
    if os.path.basename(lib_dir) == "lib" and os.path.isdir(os.path.join(os.path.dirname(lib_dir), "include")):
        return os.path.dirname(lib_dir)
    return None


def _looks_like_torch(library: str | None) -> bool:
    return library is not None and os.path.basename(library).startswith(("libtorch", "libc10"))


def installed_torch_dir() -> str | None:
    """The torch package of the interpreter running pttrace, found without importing it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


def wheel_commit(torch_dir: str) -> str | None:
    try:
        text = Path(torch_dir, "version.py").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("git_version"):
            return line.split("=", 1)[1].strip().strip("'\"") or None
    return None


def _signature_params(signature: str | None) -> list[str] | None:
    if not signature or not signature.startswith("("):
        return None
    close = names._matching(signature, 0, "(", ")")
    inner = signature[1:close] if close > 0 else signature[1:]
    return [names.strip_param_name(p) for p in split_top(inner) if p and p.strip() != "void"]


def _distance(defn: tags.Definition, parsed: names.ParsedName) -> tuple[int, int] | None:
    """How far a definition is from the frame's parameter and class template types, as (conflicts,
    -concrete matches) to sort by; None: it cannot be this definition."""
    wild = names.template_params(defn.template) | names.template_params(defn.class_template)
    conflicts = concrete = 0

    def add(result: tuple[int, int] | None) -> bool:
        nonlocal conflicts, concrete
        if result is None:
            return False
        conflicts += result[0]
        concrete += result[1]
        return True

    source_params = _signature_params(defn.signature)
    if parsed.params is not None and source_params is not None:
        if not add(names.type_conflicts(list(parsed.params), source_params, wild)):
            return None
    if defn.specialization and parsed.class_targs:
        spec_args = split_top(defn.specialization.strip()[1:-1])
        frame_args = list(parsed.class_targs)
        if len(spec_args) != len(frame_args) and not (spec_args and names.is_pack(spec_args[-1])):
            return None
        for fa, sa in zip(frame_args, spec_args):
            if sa.strip() in wild:
                continue
            sp = names.function_type_params(sa)
            if sp is not None:
                fp = names.function_type_params(fa)
                if fp is None or not add(names.type_conflicts(fp, sp, wild)):
                    return None
            else:
                add((0, 1) if names.base_type(fa) == names.base_type(sa) else (1, 0))
    return conflicts, -concrete


def best_definitions(candidates: list[tags.Definition], parsed: names.ParsedName) -> list[tags.Definition]:
    """The definitions closest to the frame's types (fewest conflicts, then the most specialized);
    all of them when none fits: never one picked silently."""
    scored = [(c, d) for d in candidates if (c := _distance(d, parsed)) is not None]
    if not scored:
        return candidates
    low = min(c for c, _ in scored)
    return [d for c, d in scored if c == low]


def inside(path: str, root: str) -> bool:
    """``path``'s real path (every symlink resolved) lies in ``root``'s: a file looked up in a directory
    is read only from there, never through a link that leads out of it."""
    top = os.path.realpath(root).rstrip(os.sep) + os.sep
    return os.path.realpath(path).startswith(top)


def map_onto(recorded: str, source_dir: str) -> str | None:
    """A path recorded on another machine, found under ``source_dir`` by its longest existing tail
    (what gdb's ``set substitute-path`` does, without having to name the old prefix)."""
    parts = [p for p in recorded.replace("\\", "/").split("/") if p and p not in (".", "..")]
    for i in range(len(parts)):
        candidate = os.path.join(source_dir, *parts[i:])
        if os.path.isfile(candidate) and inside(candidate, source_dir):
            return candidate
    return None


class SourceFinder:
    """Finds SourceRefs for frames; one per view, holding its indexes. ``notes`` are warnings to show."""

    def __init__(self, source_dir: str | None = None, session_commit: str | None = None,
                 torch_dir: str | None = None):
        if source_dir is not None and not os.path.isdir(source_dir):
            raise UsageError(f"--source-dir {source_dir} is not a directory")
        self.source_dir = os.path.realpath(source_dir) if source_dir else None
        self.session_commit = session_commit
        self.default_torch = torch_dir
        self.notes: list[str] = []
        self._header_indexes: dict[str, tags.DefinitionIndex | None] = {}
        self._source_index: tags.DefinitionIndex | None = None
        self._cache: dict[tuple, list[SourceRef]] = {}
        self._told: set[str] = set()
        self._lines: dict[str, list[str]] = {}
        self._lock = threading.RLock()
        if self.source_dir:
            self._check_commit(self.source_dir)

    def _note(self, text: str) -> None:
        if text not in self._told:
            self._told.add(text)
            self.notes.append(text)

    def _check_commit(self, source_dir: str) -> None:
        theirs = tags.checkout_commit(source_dir, pytorch_only=True)
        ours = self.session_commit or (wheel_commit(self.default_torch or installed_torch_dir() or "") or None)
        if theirs and ours and not (theirs.startswith(ours) or ours.startswith(theirs)):
            self._note(f"the source directory {self.source_dir} has commit {theirs[:12]} out, but the torch "
                       f"traced was built from {ours[:12]}: its line numbers may not match "
                       f"(git -C {self.source_dir} checkout {ours[:12]})")

    # -- trees
    def torch_dir(self, library: str | None) -> str | None:
        """The installed torch whose headers and yaml stand for the frame's: its library's own, else the
        one given or the one beside pttrace (a session from another machine), said when it is another build."""
        found = _torch_dir_of_library(library) or self.default_torch or installed_torch_dir()
        if found is None:
            if _looks_like_torch(library):
                self._note("no torch installation found here: frames without DWARF get no sources "
                           "(install the traced torch, or give --source-dir)")
            return None
        commit = wheel_commit(found)
        if self.session_commit and commit and not commit.startswith(self.session_commit[:12]):
            self._note(f"sources are read from the torch at {found} (commit {commit[:12]}), not from the traced "
                       f"torch (commit {self.session_commit[:12]}): their lines may differ")
        return found

    def _headers(self, torch_dir: str) -> tags.DefinitionIndex | None:
        if torch_dir not in self._header_indexes:
            include = os.path.join(torch_dir, "include")
            index = None
            if os.path.isdir(include):
                try:
                    index = tags.DefinitionIndex.build(include)
                except UsageError as e:
                    self._note(f"no definitions from torch's headers: {e}")
            self._header_indexes[torch_dir] = index
        return self._header_indexes[torch_dir]

    def source_index(self) -> tags.DefinitionIndex | None:
        if self.source_dir and self._source_index is None:
            try:
                self._source_index = tags.DefinitionIndex.build(self.source_dir)
            except UsageError as e:
                self._note(f"no definitions from {self.source_dir}: {e}")
                self.source_dir = None
        return self._source_index

    def local_file(self, recorded: str | None) -> str | None:
        """A DWARF path from another machine, mapped onto the source directory; None if not there."""
        if not recorded or not self.source_dir:
            return None
        if recorded.startswith(self.source_dir + os.sep):
            return recorded if inside(recorded, self.source_dir) else None
        return map_onto(recorded, self.source_dir)

    def line_text(self, file: str, line: int | None) -> str | None:
        """The text of a line of a found file (its files are read once each)."""
        if not line:
            return None
        if file not in self._lines:
            try:
                with open(file, encoding="utf-8", errors="replace") as fh:
                    self._lines[file] = fh.read().splitlines()
            except OSError:
                self._lines[file] = []
        lines = self._lines[file]
        return visible(lines[line - 1]) if line <= len(lines) else None

    # -- frames
    def refs(self, function: str | None, library: str | None = None) -> list[SourceRef]:
        """Every place this function's source can be found, most direct first."""
        if not function:
            return []
        key = (function, library)
        with self._lock:  # a TUI looks up from worker threads: one index build at a time
            if key not in self._cache:
                self._cache[key] = self._find(function, library)
            return self._cache[key]

    def known(self, function: str | None, library: str | None = None) -> list[SourceRef] | None:
        """The refs already found for this function, None if it was not looked up yet (a lookup may
        have to build an index: a view does it off its UI thread)."""
        return self._cache.get((function, library)) if function else []

    def _find(self, function: str, library: str | None) -> list[SourceRef]:
        parsed = names.parse(function)
        if parsed is None:
            return []
        qualified = parsed.qualified
        out: list[SourceRef] = []
        torch_dir = self.torch_dir(library)
        candidates: list[tags.Definition] = []
        source = self.source_index()
        if source is not None and self.source_dir:
            candidates += [d for d in source.lookup(qualified) if inside(d.file, self.source_dir)]
        if torch_dir:
            headers = self._headers(torch_dir)
            include = os.path.join(torch_dir, "include")
            if headers is not None:
                candidates += [d for d in headers.lookup(qualified) if inside(d.file, include)]
        # A --source-dir that is (or holds) the wheel's own torch/include indexes the same headers twice.
        seen: set[tuple[str, int | None]] = set()
        unique = []
        for d in candidates:
            key = (os.path.realpath(d.file), d.line)
            if key not in seen:
                seen.add(key)
                unique.append(d)
        chosen = best_definitions(unique, parsed)
        out += [SourceRef(DEFINITION, d.file, d.line, d.qualified + (d.signature or ""), len(chosen), d.end)
                for d in chosen]
        if torch_dir:
            out += self._op_refs(torch_dir, qualified, parsed)
        return out

    def _op_refs(self, torch_dir: str, qualified: str, parsed: names.ParsedName) -> list[SourceRef]:
        torchgen = os.path.join(os.path.dirname(torch_dir), "torchgen")
        nf_path = yaml_ops.packaged_file(torchgen, "ATen", "native", "native_functions.yaml")
        if nf_path is None:
            return []
        d_path = yaml_ops.packaged_file(torchgen, "autograd", "derivatives.yaml")
        native = yaml_ops.native_functions(nf_path)
        deriv = yaml_ops.derivatives(d_path) if d_path else None
        ops, grads = yaml_ops.ops_of(qualified, native, deriv)
        out = [SourceRef(OP, e.file, e.line, f"- func: {e.schema}", len(ops)) for e in ops]
        out += [SourceRef(OP, e.file, e.line, f"- name: {e.schema}" + (f"  (makes {e.node})" if e.node else ""),
                          len(grads)) for e in grads]
        n_params = len(parsed.params) if parsed.params is not None else None
        for t in generated.templates_for(qualified, n_params, ops or grads):
            path = yaml_ops.packaged_file(torchgen, *t.path.split("/"))
            if path:
                out.append(SourceRef(GENERATED, path, generated.placeholder_line(path, t.placeholder),
                                     f"{t.placeholder} in the template of {t.generates}"))
        return out

    def where(self, name: str) -> list[tags.Definition]:
        """Definitions in the source directory for a name as ``pttrace where`` takes it."""
        index = self.source_index()
        if index is None:
            return []
        parsed = names.parse(name)
        if parsed is None:
            return []
        q = parsed.qualified.lstrip(":")
        found = index.lookup(q) if name.startswith("::") else index.lookup_suffix(q)
        return best_definitions(found, parsed) if parsed.params is not None else found


def source_dir_setting(flag: str | None) -> str | None:
    """``--source-dir`` if given, else the settings' (``$PTTRACE_SOURCE_DIR``), else None."""
    from tracer import settings

    return flag or settings.current().source_dir
