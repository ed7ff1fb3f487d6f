"""Where a frame's code lives: an excerpt from a readable file, and a GitHub link into PyTorch's tree.

Paths come in three shapes on a real machine:
  - installed Python files and headers: ``.../site-packages/torch/nn/modules/activation.py``,
    ``.../site-packages/torch/include/ATen/core/boxing/KernelFunction_impl.h`` (the header lives in
    ``aten/src/ATen/...`` in the repository);
  - CI build paths baked into DWARF: ``/__w/pytorch/pytorch/torch/csrc/utils/tensor_numpy.cpp``;
  - a local checkout: ``/home/me/pytorch/aten/src/ATen/native/UnaryOps.cpp``.
Generated files (``build/``, ``ATen/ops/``, ``autograd/generated/``...) are not in the repository,
so they get no link rather than a link to a 404.
"""
from __future__ import annotations

import functools
import os
import re
import site
import sys
import sysconfig
from urllib.parse import quote

from tracer.export.local_files import NO_TRUST, SourceTrust, read_text, source_lines
from tracer.session.model import Frame

GITHUB = "https://github.com/pytorch/pytorch"

_INCLUDE_RE = re.compile(r"(?:^|/)torch/include/(.+)$")
_PACKAGE_RE = re.compile(r"/(?:site|dist)-packages/((?:torch|torchgen|functorch)/.+)$")
# A source root of the repository, found anywhere in a build or checkout path.
_ROOT_RE = re.compile(r"(?:^|/)((?:aten/src|c10|caffe2|torchgen|functorch|torch/csrc|torch/headeronly)/.+)$")
# Python files of a checkout used in place (``pip install -e``): the repository directory is named pytorch*.
_CHECKOUT_PY_RE = re.compile(r"(?:^|/)pytorch[^/]*/(torch/.+\.py)$")

_GENERATED_RE = re.compile(
    r"^(?:aten/src/ATen/ops/"
    r"|aten/src/ATen/(?:[A-Za-z]+Functions(?:_inl)?|Functions|NativeFunctions|NativeMetaFunctions"
    r"|MethodOperators|Operators|RedispatchFunctions|RegistrationDeclarations|VmapGeneratedPlumbing"
    r"|Config|LazyIr|LazyNonNativeIr|ViewMetaClasses)\.h$"
    r"|aten/src/ATen/(?:Operators|Register|UfuncCPU|Functions|ViewMetaClasses)[^/]*\.cpp$"
    r"|aten/src/ATen/core/(?:TensorBody|aten_interned_strings|enum_tag)\.h$"
    r"|c10/macros/cmake_macros\.h$"
    r"|torch/csrc/autograd/generated/|torch/csrc/lazy/generated/"
    r"|torch/csrc/api/include/torch/version\.h$"
    r"|torch/version\.py$|torch/_C/)"
)


def _header_path(rest: str) -> str | None:
    """The repository path of a header installed under ``torch/include/``."""
    if rest.startswith("ATen/"):
        return "aten/src/" + rest
    if rest.startswith(("c10/", "caffe2/", "torch/")):
        return rest
    return None  # third-party headers shipped with the wheel: pybind11, fmt, dnnl, ...


def _packaged_path(path: str) -> str | None:
    """An installed package file's repository path: Python files as they are, and torchgen's copies of
    the codegen inputs (``torchgen/packaged/ATen/native/native_functions.yaml`` is
    ``aten/src/ATen/native/native_functions.yaml``, ``torchgen/packaged/autograd/...`` is ``tools/autograd/...``)."""
    if path.startswith("torchgen/packaged/ATen/"):
        return "aten/src/" + path[len("torchgen/packaged/"):]
    if path.startswith("torchgen/packaged/autograd/"):
        return "tools/" + path[len("torchgen/packaged/"):]
    return path if path.endswith(".py") else None  # .so, .pyi stubs (mostly generated), data files


def repo_path(file: str | None) -> str | None:
    """The path of ``file`` inside the pytorch/pytorch repository, or None if it is not (or generated)."""
    if not file:
        return None
    f = file.replace("\\", "/")
    path: str | None = None
    m = _INCLUDE_RE.search(f)
    if m:
        path = _header_path(m.group(1))
    else:
        m = _PACKAGE_RE.search(f)
        if m:
            path = _packaged_path(m.group(1))
        else:
            m = _ROOT_RE.search(f)
            if m:
                prefix = f[: m.start(1)]
                # ``build/aten/src/ATen/Operators_2.cpp`` is generated at build time.
                path = None if re.search(r"(?:^|/)build/", prefix) else m.group(1)
            else:
                m = _CHECKOUT_PY_RE.search(f)
                path = m.group(1) if m else None
    if path is None or _GENERATED_RE.search(path):
        return None
    return os.path.normpath(path).replace(os.sep, "/")


_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
_RELEASE_RE = re.compile(r"^(\d+\.\d+\.\d+)(?:\+[A-Za-z0-9.]+)?$")


def pinned_ref(torch_git_version: str | None, torch_version: str | None = None) -> str | None:
    """The commit to link to; a release tag when the commit is unknown; None if neither is known."""
    if torch_git_version and _COMMIT_RE.match(torch_git_version.strip()):
        return torch_git_version.strip()
    m = _RELEASE_RE.match((torch_version or "").strip())
    return f"v{m.group(1)}" if m else None


def github_url(file: str | None, line: int | None, ref: str | None) -> str | None:
    if ref is None:
        return None
    path = repo_path(file)
    if path is None:
        return None
    url = f"{GITHUB}/blob/{quote(ref, safe='')}/{quote(path, safe='/')}"
    return f"{url}#L{line}" if line else url


def commit_url(ref: str) -> str:
    kind = "tree" if ref.startswith("v") else "commit"
    return f"{GITHUB}/{kind}/{quote(ref, safe='')}"


_LANGS = {
    ".py": "python", ".pyi": "python",
    ".c": "c", ".h": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp",
    ".cu": "cuda", ".cuh": "cuda", ".yaml": "yaml", ".mm": "objective-c++", ".m": "objective-c",
}


def language(file: str | None) -> str:
    if not file:
        return ""
    return _LANGS.get(os.path.splitext(file)[1].lower(), "")


_PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")


@functools.lru_cache(maxsize=1)
def package_roots() -> tuple[str, ...]:
    """This interpreter's site-packages directories."""
    roots: list[str] = []
    try:
        roots += site.getsitepackages()
    except AttributeError:  # some virtualenv layouts lack it
        pass
    roots.append(sysconfig.get_paths().get("purelib", ""))
    roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return tuple(dict.fromkeys(r for r in roots if r and os.path.isdir(r)))


def relocated(file: str, cwd: str | None) -> list[str]:
    """Where a file recorded in another checkout or environment may be here: under the current
    directory when it was under the recording's ``cwd``, under this interpreter's site-packages
    when it was under another's (same package, another prefix). The source pane and the exports
    look in the same places."""
    out: list[str] = []
    if os.path.isabs(file):
        if cwd:
            prefix = cwd.rstrip("/") + "/"
            if file.startswith(prefix):
                out.append(os.path.join(os.getcwd(), file[len(prefix):]))
    elif cwd:
        out.append(os.path.join(os.getcwd(), file))
    for marker in _PACKAGE_DIRS:
        cut = file.rfind(marker)
        if cut >= 0:
            out += [os.path.join(root, file[cut + len(marker):]) for root in package_roots()]
    return [p for p in dict.fromkeys(out) if p != file]


class SourceReader:
    """Reads the file each frame names through ``local_files.source_lines`` (the one check of what
    may be shown), and cuts excerpts around a line. Relative paths (DWARF without ``comp_dir``, a
    script run from the session's cwd) are tried against ``cwd``; ``mapper`` maps a recorded path onto
    this machine (``SourceFinder.local_file``: a DWARF path from another machine in ``--source-dir``)."""

    def __init__(self, cwd: str | None = None, mapper=None, trust: SourceTrust = NO_TRUST):
        self.cwd = cwd
        self.mapper = mapper
        self.trust = trust
        self._seen: dict[tuple, tuple[str, ...] | None] = {}

    def lines(self, frame: Frame) -> tuple[str, ...] | None:
        key = (frame.kind, frame.file, frame.library, frame.line, frame.source)
        if key not in self._seen:
            self._seen[key] = next((text for text in (source_lines(frame, c, self.trust)
                                                      for c in self._candidates(frame.file or "")) if text), None)
        return self._seen[key]

    def _candidates(self, file: str) -> list[str]:
        found = [file] if os.path.isabs(file) or not self.cwd else [os.path.join(self.cwd, file), file]
        found += relocated(file, self.cwd)
        mapped = self.mapper(file) if self.mapper else None
        return found + [mapped] if mapped else found

    def excerpt(self, frame: Frame, context: int = 2) -> list[tuple[int, str]] | None:
        """``[(lineno, text), ...]`` around the frame's line, or None if no file here may be shown for it."""
        if not frame.file or not frame.line or frame.line < 1:
            return None
        return _cut(self.lines(frame), frame.line, context)

    def found_excerpt(self, file: str, line: int | None, context: int = 2) -> list[tuple[int, str]] | None:
        """The same around a place pttrace found itself (``SourceRef``: the definition index of the
        installed torch or of ``--source-dir``), never a path a session names."""
        if not line or line < 1:
            return None
        return _cut(read_text(file), line, context)


def _cut(text: tuple[str, ...] | None, line: int, context: int) -> list[tuple[int, str]] | None:
    if text is None or line > len(text):
        return None
    lo = max(1, line - context)
    hi = min(len(text), line + context)
    return [(n, text[n - 1]) for n in range(lo, hi + 1)]
