"""An index of C++ definitions in a source tree, made by universal-ctags and cached.

ctags parses C++ for real (scopes, templates and their specializations, signatures), so the index
knows ``c10::impl::wrap_kernel_functor_unboxed_::call`` twice, once inside each partial
specialization of its class, with the specialization's pattern. Building it over torch/include (9,291
headers) takes a couple of seconds (``bench/bench_sources.py``); it is built once per tree and kept
under the pttrace cache, keyed by what identifies the tree's content (``tree_stamp``). A file edited
since the index was built is parsed again on its own when a lookup lands in it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import UsageError

SOURCE_SUFFIXES = (".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".ipp", ".tcc", ".cpp", ".cc", ".cxx", ".c", ".cu")
SKIP_DIRS = {".git", "third_party", "node_modules", "__pycache__", ".cache"}
KIND = "srcdefs"
VERSION = 4  # bump when what the index holds changes (it is part of every tree's cache key)
_OPERATOR_SPACE_RE = re.compile(r"^operator\s+(?=[^\w\s])")
# kinds: f function definitions, c/s classes and structs (kept only when specialized: they disambiguate
# members of a partially specialized template)
# PyTorch's macros that define functions, as ATen/TensorMeta.h defines them (ctags expands -D macros):
# TORCH_IMPL_FUNC(sigmoid_out) is at::native::structured_sigmoid_out::impl.
_MACROS = [
    "TORCH_IMPL_FUNC(name)=void structured_##name::impl",
    "TORCH_META_FUNC(name)=void structured_##name::meta",
    "TORCH_META_FUNC2(name, overload)=void structured_##name##_##overload::meta",
    "TORCH_PRECOMPUTE_META_FUNC(name)=structured_##name::meta_return_ty structured_##name::meta",
    "TORCH_PRECOMPUTE_META_FUNC2(name, overload)=structured_##name##_##overload::meta_return_ty "
    "structured_##name##_##overload::meta",
]
_CTAGS_ARGS = ["--output-format=json", "--sort=no", "-f", "-", "--language-force=C++", "--kinds-C++=fcs",
               "--fields=+neSZ", "--fields-C++=+{template}{specialization}", "--extras=-q",
               *(f"-D{m}" for m in _MACROS), "-L", "-"]


@dataclass(frozen=True)
class Definition:
    qualified: str  # a::b::f, anonymous namespaces left out
    file: str  # absolute path
    line: int
    end: int | None
    signature: str | None  # "(OperatorKernel * functor,DispatchKeySet,ParameterTypes...args)"
    template: str | None  # the function's own template parameter list
    class_template: str | None  # the enclosing class's template parameter list
    specialization: str | None  # the enclosing class's specialization pattern, "<K,R (Args...)>"


@functools.lru_cache(maxsize=1)
def ctags_path() -> str:
    found = shutil.which("ctags")
    if found is None:
        raise UsageError("universal-ctags is not installed: finding definitions in C++ source needs it",
                         hint="install it: apt-get install universal-ctags (scripts/setup.sh does)")
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    if "Universal Ctags" not in version:
        raise UsageError(f"{found} is not universal-ctags (its JSON output and C++ scopes are needed)",
                         hint="install it: apt-get install universal-ctags (scripts/setup.sh does)")
    return found


def _source_files(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(SOURCE_SUFFIXES)]
    return out


def _normalize_scope(scope: str | None) -> str:
    if not scope:
        return ""
    return "::".join(p for p in scope.split("::") if not p.startswith("__anon"))


def run_ctags(files: list[str], jobs: int | None = None) -> list[dict]:
    """Every tag ctags finds in ``files``, as its JSON objects (split over ``jobs`` processes)."""
    if not files:
        return []
    exe = ctags_path()
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(files) // 200 + 1))
    chunks = [files[i::jobs] for i in range(jobs)]

    def one(chunk: list[str]) -> list[dict]:
        proc = subprocess.run([exe, *_CTAGS_ARGS], input="\n".join(chunk), capture_output=True, text=True,
                              errors="replace")
        tags = []
        for line in proc.stdout.splitlines():
            try:
                tag = json.loads(line)
            except ValueError:
                continue
            if tag.get("_type") == "tag":
                tags.append(tag)
        return tags

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(chunks)) as pool:
        return [t for part in pool.map(one, chunks) for t in part]


def definitions_from_tags(tags: list[dict]) -> list[Definition]:
    """Function definitions, each with the template facts of its enclosing class (found by line range)."""
    classes: dict[tuple[str, str], list[dict]] = {}
    for t in tags:
        if t.get("kind") in ("struct", "class"):
            qual = "::".join(x for x in (_normalize_scope(t.get("scope")), t["name"]) if x)
            classes.setdefault((t["path"], qual), []).append(t)
    out = []
    for t in tags:
        if t.get("kind") != "function" or t.get("scopeKind") == "function" or t["name"].startswith("__anon"):
            continue
        scope = _normalize_scope(t.get("scope"))
        name = _OPERATOR_SPACE_RE.sub("operator", t["name"])  # ctags: "operator ()"; demangled: "operator()"
        qual = f"{scope}::{name}" if scope else name
        class_template = specialization = None
        if t.get("scopeKind") in ("struct", "class"):
            for c in classes.get((t["path"], scope), ()):
                if c.get("line", 0) <= t.get("line", 0) <= (c.get("end") or 1 << 30):
                    class_template, specialization = c.get("template"), c.get("specialization")
                    break
        out.append(Definition(qual, os.path.abspath(t["path"]), int(t.get("line") or 0), t.get("end"),
                              t.get("signature"), t.get("template"), class_template, specialization))
    return out


def _git_head(root: Path) -> str | None:
    """The commit a checkout has out, read from .git without running git."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head[4:].strip()
        common = git
        if (git / "commondir").exists():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        for base in (git, common):
            if (base / ref).exists():
                return (base / ref).read_text().strip()
        for base in (git, common):
            packed = base / "packed-refs"
            if packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
    except (OSError, IndexError):
        return None
    return None


def checkout_commit(root: str | Path, pytorch_only: bool = False) -> str | None:
    """The commit of the git checkout holding ``root`` (it or a parent has .git), if any; with
    ``pytorch_only``, only when that checkout is PyTorch's (it has aten/src/ATen)."""
    p = Path(root).resolve()
    for d in (p, *p.parents):
        if (d / ".git").exists():
            if pytorch_only and not (d / "aten" / "src" / "ATen").is_dir():
                return None
            return _git_head(d)
    return None


def tree_stamp(root: str, files: list[str] | None = None) -> str:
    """What identifies a tree's content, cheaply: an installed torch's version file for its headers,
    a checkout's commit (and index time) for a checkout, else every file's size and mtime."""
    real = os.path.realpath(root)
    parts = [f"v{VERSION}", shutil.which("ctags") or "", real]
    version = Path(real).parent / "version.py"
    if Path(real).name == "include" and version.exists():
        st = version.stat()
        parts += ["wheel", version.read_text(errors="replace"), str(st.st_mtime_ns)]
    else:
        commit = checkout_commit(real)
        git_index = next((d / ".git" / "index" for d in (Path(real), *Path(real).parents) if (d / ".git").exists()),
                         None)
        if commit and git_index is not None and git_index.exists():
            parts += ["git", commit, str(git_index.stat().st_mtime_ns)]
        else:
            for f in files if files is not None else _source_files(real):
                try:
                    st = os.stat(f)
                except OSError:
                    continue
                parts.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
    return hashlib.sha1("\n".join(parts).encode("utf-8", "replace")).hexdigest()


class DefinitionIndex:
    """Definitions of one source tree by qualified name; ``lookup`` re-parses files edited since.

    Each name's entries are kept as one string (fields split by \\x1f, entries by \\x1e) and taken
    apart on lookup, and the names are spread over SHARDS cache files by a hash of the name, read
    when a name in them is first looked up: one path's frames read a few shards of torch/include's
    index (~5 ms) instead of all of it (~25 ms).
    """

    SHARDS = 64

    def __init__(self, root: str, shards: list[dict[str, str] | None], files: list[str], built_at: int,
                 load=None, store=None):
        self.root = root
        self._shards = shards  # None: not read yet
        self._files = files
        self._built_at = built_at  # ns: files modified after this are parsed again when looked up
        self._load = load  # shard number -> its dict, or None when the cached file is gone or damaged
        self._store = store  # writes a whole index to the cache
        self._fresh: set[int] = set()

    @classmethod
    def build(cls, root: str, use_cache: bool = True) -> "DefinitionIndex":
        from tracer.symbols import cache  # here: importing tracer.symbols costs ~25 ms (a TUI imports us)

        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise UsageError(f"{root} is not a directory")
        key = cache.FileKey(real, 0, 0, "tree-" + tree_stamp(real))

        def store(index: "DefinitionIndex") -> None:
            for n, shard in enumerate(index._shards):
                cache.write(key, KIND, shard, f"-{n}")
            cache.write(key, KIND, (index._files, index._built_at))  # last: it says the shards are there

        if use_cache:
            stored = cache.read(key, KIND)
            if stored is not None:
                files, built_at = stored
                return cls(real, [None] * cls.SHARDS, files, built_at, load=lambda n: cache.read(key, KIND, f"-{n}"),
                           store=store)
        index = cls._parse(real)
        if use_cache:
            store(index)
        return index

    @classmethod
    def _parse(cls, real: str) -> "DefinitionIndex":
        import time

        started = time.time_ns()
        files = _source_files(real)
        numbers = {f: n for n, f in enumerate(files)}
        grouped: dict[str, list[str]] = {}
        for d in definitions_from_tags(run_ctags(files)):
            n = numbers.get(d.file)
            if n is None:
                numbers[d.file] = n = len(files)
                files.append(d.file)
            grouped.setdefault(d.qualified, []).append(_encode(n, d))
        built: list[dict[str, str]] = [{} for _ in range(cls.SHARDS)]
        for q, v in grouped.items():
            built[_shard_of(q, cls.SHARDS)][q] = "\x1e".join(v)
        shards: list[dict[str, str] | None] = list(built)
        return cls(real, shards, files, started)

    def _shard(self, qualified: str) -> dict[str, str]:
        return self._shard_at(_shard_of(qualified, len(self._shards)))

    def _all(self) -> list[dict[str, str]]:
        return [self._shard_at(n) for n in range(len(self._shards))]

    def _shard_at(self, n: int) -> dict[str, str]:
        shard = self._shards[n]
        if shard is None:
            self._read_shard(n)
            shard = self._shards[n]
            assert shard is not None  # read, or the whole tree parsed again
        return shard

    def _read_shard(self, n: int) -> None:
        shard = self._load(n) if self._load else None
        if shard is None:  # a shard file gone or damaged: parse the tree again, and cache it whole
            fresh = self._parse(self.root)
            self._shards, self._files, self._built_at, self._load = fresh._shards, fresh._files, fresh._built_at, None
            if self._store:
                self._store(self)
        else:
            self._shards[n] = shard

    def __len__(self) -> int:
        return sum(v.count("\x1e") + 1 for shard in self._all() for v in shard.values())

    def _entries(self, qualified: str) -> list[Definition]:
        raw = self._shard(qualified).get(qualified)
        return [_decode(qualified, e, self._files) for e in raw.split("\x1e")] if raw else []

    def _refresh(self, file_no: int) -> None:
        """Parse one file again if it changed after the index was built (a checkout being edited)."""
        if file_no in self._fresh:
            return
        self._fresh.add(file_no)
        path = self._files[file_no]
        try:
            if os.stat(path).st_mtime_ns <= self._built_at:
                return
        except OSError:
            return
        fresh: dict[str, list[str]] = {}
        for d in definitions_from_tags(run_ctags([path], jobs=1)):
            fresh.setdefault(d.qualified, []).append(_encode(file_no, d))
        for shard in self._all():
            for q in list(shard):
                kept = [e for e in shard[q].split("\x1e") if int(e.split("\x1f", 1)[0]) != file_no]
                kept += fresh.pop(q, [])
                if kept:
                    shard[q] = "\x1e".join(kept)
                else:
                    del shard[q]
        for q, v in fresh.items():
            self._shard(q)[q] = "\x1e".join(v)

    def lookup(self, qualified: str) -> list[Definition]:
        raw = self._shard(qualified).get(qualified)
        for file_no in {int(e.split("\x1f", 1)[0]) for e in raw.split("\x1e")} if raw else ():
            self._refresh(file_no)
        return self._entries(qualified)

    def lookup_suffix(self, name: str) -> list[Definition]:
        """Definitions whose qualified name ends with ``::name`` (or is ``name``): ``pttrace where``'s
        way of matching a short name. A scan of every name: for a command, not for a view's frames."""
        tail = "::" + name
        found = [q for shard in self._all() for q in shard if q == name or q.endswith(tail)]
        return [d for q in found for d in self.lookup(q)]


def _shard_of(qualified: str, shards: int) -> int:
    return zlib.crc32(qualified.encode("utf-8", "replace")) % shards


def _encode(file_no: int, d: Definition) -> str:
    fields = (file_no, d.line, d.end, d.signature, d.template, d.class_template, d.specialization)
    return "\x1f".join("" if x is None else str(x) for x in fields)


def _decode(qualified: str, entry: str, files: list[str]) -> Definition:
    n, line, end, sig, tmpl, ctmpl, spec = entry.split("\x1f")
    return Definition(qualified, files[int(n)], int(line), int(end) if end else None, sig or None, tmpl or None,
                      ctmpl or None, spec or None)
