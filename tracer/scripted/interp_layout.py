"""Where one torch build keeps what TorchScript's interpreter is running, for a reader of its memory (the
agent, tracer/gdb/agent/torchscript.py; the recorder hands it over, tracer/recorder/torchscript.py).

At a hit inside ``InterpreterStateImpl::run*`` the thread-local ``torch::jit::tls_int_state_ptr_`` (a
LOCAL TLS symbol of libtorch_cpu.so, in ``.symtab`` only) points at the running ``InterpreterStateImpl``;
its ``std::vector<Frame>`` holds per scripted function the ``CodeImpl`` and ``pc``, ``instructions_source_
[pc]`` the graph ``Node``, whose ``source_range_`` and ``callstack_`` (the inlined callees) give the
function, file and line. Measured on torch 2.13.0 CPU (/tmp/sc/tsprobe/FINDINGS.md): lines 8, 16, 18, 23
of tests/targets/jit_script.py read exactly, with pttrace's CFI-only libtorch_cpu (no symbols in gdb).

Three things are established here, per build, never assumed:
- **TLS**: gdb has no symbols for libtorch_cpu on pttrace's normal path, so the agent computes the
  address itself: the module id sits in the GOT slot of a ``R_X86_64_DTPMOD64`` relocation against
  symbol 0 (the library's own), and the variable at ``DTV[modid] + st_value``.
- **Offsets** from the wheel's own headers compiled with ``g++ -S`` (no link, ~2 min under load),
  ``-DNDEBUG`` as release wheels are built: without it ``code_impl.h`` adds ``full_operator_table_`` and
  ``function_name_`` moves by 24 bytes. ``InterpreterStateImpl`` is private to interpreter.cpp, so where
  it keeps its frames is not here: the reader must find and validate it in memory.
- **Node kinds**: a builtin ``c10::Symbol``'s value is its index in ``FORALL_NS_SYMBOLS`` (preprocessed
  with ``g++ -E``); a kind past that table was interned at run time and has no name here.

Cached by libtorch_cpu's build-id. Standard library only.
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

from tracer.values.layout import build_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
# pathlib is imported where a Path is made (pttrace's side): this module runs inside gdb too (values.layout
# says why it keeps pathlib out of the agent's import).

FORMAT = 2
TLS_SYMBOL = b"_ZN5torch3jitL18tls_int_state_ptr_E"
# The interpreter's loop: a hit whose stack has a pc in one of these reads the interpreter's frames
RUN_PREFIXES = (b"_ZN5torch3jit20InterpreterStateImpl11runTemplate", b"_ZN5torch3jit20InterpreterStateImpl7runImpl")
R_X86_64_DTPMOD64 = 16
STT_TLS = 6
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")

# (name in the layout, C++ type, member) compiled against the wheel's headers
FIELDS = (
    ("frame_code", "Frame", "function"), ("frame_pc", "Frame", "pc"),
    ("code_sources", "CodeImpl", "instructions_source_"), ("code_name", "CodeImpl", "function_name_"),
    ("node_kind", "Node", "kind_"), ("node_range", "Node", "source_range_"), ("node_callstack", "Node", "callstack_"),
    ("range_source", "SourceRange", "source_view_"), ("range_start", "SourceRange", "start_"),
    ("source_filename", "Source", "filename_"), ("source_first_line", "Source", "starting_line_no_"),
    ("source_line_starts", "Source", "line_starting_offsets_"),
    ("call_callee", "InlinedCallStack", "callee_"), ("call_name", "InlinedCallStack", "fn_name_"),
    ("call_range", "InlinedCallStack", "source_range_"),
    # the graph a CodeImpl runs, walked node by node (what graph->dump() prints)
    ("code_graph", "CodeImpl", "graph_"), ("graph_block", "Graph", "block_"),
    ("block_output", "Block", "output_"), ("block_input", "Block", "input_"),
    ("node_next", "Node", "next_in_graph"), ("node_inputs", "Node", "inputs_"), ("node_outputs", "Node", "outputs_"),
    ("node_blocks", "Node", "blocks_"), ("value_unique", "Value", "unique_"), ("value_name", "Value", "unique_name_"),
)
SIZES = (("frame_size", "Frame"), ("range_size", "SourceRange"))
_HEADERS = ("torch/csrc/jit/runtime/interpreter/code_impl.h", "torch/csrc/jit/runtime/interpreter/frame.h",
            "torch/csrc/jit/ir/ir.h", "torch/csrc/jit/ir/scope.h")


@dataclass
class InterpreterLayout:
    """Byte offsets in one build (None: not established; ``problems`` says why)."""

    tls_modid_slot: int | None = None  # GOT slot (relative to the load base) holding libtorch_cpu's TLS module id
    tls_offset: int | None = None  # tls_int_state_ptr_ within the module's TLS block
    offsets: dict[str, int] = field(default_factory=dict)
    symbols: list[str] = field(default_factory=list)  # builtin c10::Symbol value -> "ns::name"
    run_ranges: list[list[int]] = field(default_factory=list)  # [offset, size] of the interpreter's loop
    problems: list[str] = field(default_factory=list)

    def symbol(self, kind: int) -> str | None:
        return self.symbols[kind] if 0 <= kind < len(self.symbols) else None


def tls_location(library: str) -> tuple[int, int, list[list[int]]]:
    """(GOT slot of the library's own TLS module id, offset of tls_int_state_ptr_ in its TLS block, the
    [offset, size] of the interpreter loop's functions). Raises ValueError with one sentence when the
    library has no TLS slot or variable."""
    with open(library, "rb") as f:
        data = f.read()
    head = _EHDR.unpack_from(data, 0)
    shoff, shentsize, shnum = head[6], head[11], head[12]
    sections = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    slot = offset = None
    ranges: list[list[int]] = []
    for sh in sections:
        if sh[1] == 4 and slot is None:  # SHT_RELA
            for r_offset, r_info, _ in _RELA.iter_unpack(data[sh[4]:sh[4] + sh[5]]):
                if r_info & 0xFFFFFFFF == R_X86_64_DTPMOD64 and r_info >> 32 == 0:
                    slot = r_offset
                    break
        if sh[1] == 2:  # SHT_SYMTAB; its sh_link is the string table
            strtab = sections[sh[6]]
            names = data[strtab[4]:strtab[4] + strtab[5]]
            at = names.find(b"\0" + TLS_SYMBOL + b"\0")
            if at < 0:
                continue
            loops = {m.start() + 1 for p in RUN_PREFIXES for m in re.finditer(b"\0" + re.escape(p), names)}
            for st_name, st_info, _, _, st_value, st_size in _SYM.iter_unpack(data[sh[4]:sh[4] + sh[5]]):
                if st_name == at + 1 and st_info & 0xF == STT_TLS:
                    offset = st_value
                elif st_name in loops and st_value and st_size:
                    ranges.append([st_value, st_size])
    if slot is None:
        raise ValueError(f"{os.path.basename(library)} has no TLS module-id relocation of its own")
    if offset is None:
        raise ValueError(f"{os.path.basename(library)}'s symbol table has no {TLS_SYMBOL.decode()}")
    return slot, offset, sorted(ranges)


def _probe_source() -> str:
    lines = ["#include <sstream>", "#include <string>", "#include <vector>", "#include <memory>",
             "#include <optional>", "#include <unordered_map>", "#include <mutex>", "#include <functional>",
             "#define private public", "#define protected public"]
    lines += [f"#include <{h}>" for h in _HEADERS]
    lines += ["using namespace torch::jit;", "using namespace torch::jit::interpreter;"]
    lines += [f"extern const unsigned long ptt_{n} = __builtin_offsetof({t}, {m});" for n, t, m in FIELDS]
    lines += [f"extern const unsigned long ptt_{n} = sizeof({t});" for n, t in SIZES]
    return "\n".join(lines) + "\n"


def parse_assembly(text: str) -> dict[str, int]:
    """``ptt_NAME:`` then ``.quad N`` (or ``.zero 8`` for 0) in g++'s output."""
    out = {}
    for m in re.finditer(r"^ptt_(\w+):\s*\n\s*\.(quad|zero)\s+(\d+)", text, re.M):
        out[m.group(1)] = int(m.group(3)) if m.group(2) == "quad" else 0
    return out


def header_offsets(include: str, compiler: str = "g++", timeout: float = 900) -> dict[str, int]:
    """The FIELDS and SIZES compiled against ``include``. Raises ValueError with why."""
    import subprocess  # here, as below: the agent inside gdb imports this module, and needs neither
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="pttrace-ts-") as tmp:
        src, asm = Path(tmp, "probe.cpp"), Path(tmp, "probe.s")
        src.write_text(_probe_source())
        cmd = [compiler, "-std=c++20", "-DNDEBUG", "-O0", "-w", "-S", f"-I{include}",
               f"-I{include}/torch/csrc/api/include", str(src), "-o", str(asm)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"{compiler} could not compile torch's interpreter headers ({exc})") from None
        if done.returncode != 0:
            raise ValueError(f"{compiler} could not compile torch's interpreter headers: "
                             f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
        found = parse_assembly(asm.read_text())
    missing = [n for n, *_ in (*FIELDS, *SIZES) if n not in found]
    if missing:
        raise ValueError(f"the header probe did not give {', '.join(missing)}")
    return found


def builtin_symbols(include: str, compiler: str = "g++", timeout: float = 300) -> list[str]:
    """Builtin c10::Symbol names in value order: FORALL_NS_SYMBOLS expanded by the preprocessor."""
    text = ("#include <ATen/core/interned_strings.h>\n#define PTT_KEY(ns, s) PTTSYM ns::s\n"
            "FORALL_NS_SYMBOLS(PTT_KEY)\n")
    import subprocess

    try:
        done = subprocess.run([compiler, "-std=c++17", "-E", "-P", "-w", f"-I{include}", "-x", "c++", "-"],
                              input=text, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"{compiler} could not preprocess torch's interned strings ({exc})") from None
    names = re.findall(r"PTTSYM (\w+::\w+)", done.stdout)
    if done.returncode != 0 or not names:
        raise ValueError("torch's interned strings (FORALL_NS_SYMBOLS) could not be expanded")
    return names


def cache_path(libtorch_cpu: str, cache_dir: Path | None) -> Path | None:
    key = build_id(libtorch_cpu)
    return cache_dir / "scripted" / f"interpreter-{FORMAT}-{key}.json" if cache_dir is not None and key else None


def cached(libtorch_cpu: str, cache_dir: Path | None) -> InterpreterLayout | None:
    """The layout established before for this build, or None."""
    path = cache_path(libtorch_cpu, cache_dir)
    if path is None or not path.exists():
        return None
    try:
        return InterpreterLayout(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def establish(libtorch_cpu: str, include: str, cache_dir: Path | None) -> InterpreterLayout:
    """The layout of this build, from the cache when its build-id was seen before. Only a layout without
    problems is cached: a probe that failed (no g++, a timeout under load) is tried again next time."""
    found = cached(libtorch_cpu, cache_dir)
    if found is not None:
        return found
    path = cache_path(libtorch_cpu, cache_dir)
    layout = InterpreterLayout()
    try:
        layout.tls_modid_slot, layout.tls_offset, layout.run_ranges = tls_location(libtorch_cpu)
    except (OSError, ValueError, struct.error) as exc:
        layout.problems.append(f"the interpreter's thread-local state cannot be found: {exc}")
    try:
        layout.offsets = header_offsets(include)
    except ValueError as exc:
        layout.problems.append(str(exc))
    try:
        layout.symbols = builtin_symbols(include)
    except ValueError as exc:
        layout.problems.append(f"graph node kinds are not named: {exc}")
    if path is not None and not layout.problems:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(layout)))
        os.replace(tmp, path)
    return layout


def start_establishing(libtorch_cpu: str, include: str, cache_dir: Path) -> Path | None:
    """Establish the layout in a process of its own (``python -m tracer.scripted.interp_layout``), which
    outlives a short run so that the next one finds it cached; one at a time per build (a lock file with
    its pid). Returns where the layout will be written, or None when it cannot be."""
    from pathlib import Path

    path = cache_path(libtorch_cpu, cache_dir)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_suffix(".lock")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        if _holder_alive(lock):
            return path
        lock.unlink(missing_ok=True)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return path
    import subprocess

    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tracer.scripted.interp_layout", libtorch_cpu, include,
                                 str(cache_dir), str(lock)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    except OSError:
        os.close(fd)
        lock.unlink(missing_ok=True)
        return None
    os.write(fd, str(proc.pid).encode())
    os.close(fd)
    return path


def being_established(path: Path) -> bool:
    """A probe (this pttrace's or another's) is writing ``path`` now: its lock names a live process."""
    lock = path.with_suffix(".lock")
    return lock.exists() and _holder_alive(lock)


def _holder_alive(lock: Path) -> bool:
    try:
        pid = int(lock.read_text().strip() or 0)
        if pid <= 0:
            return time.time() - lock.stat().st_mtime < 10  # being written
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    """``LIBTORCH_CPU INCLUDE CACHE_DIR LOCK``: establish and cache, then drop the lock."""
    from pathlib import Path

    libtorch_cpu, include, cache_dir, lock = argv
    try:
        establish(libtorch_cpu, include, Path(cache_dir))
    finally:
        Path(lock).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
