"""pttrace vs plain gdb, side by side: start-up to the first recorded hit, hot-breakpoint throughput,
peak memory, and a check that what was recorded is the right call path.

    .venv/bin/python bench/bench_run.py            # 5 rounds (about 4-5 minutes here)
    .venv/bin/python bench/bench_run.py --quick    # 2 rounds
    .venv/bin/python bench/bench_run.py -n 3 --only init,hot --no-write
    .venv/bin/python bench/bench_run.py -n 3 --only init,sigmoid --base DIR --warm-only --no-write   # A/B

Every round runs each variant of each case once, in turn (pttrace, then gdb, then the next
variant...), so slow drifts of a noisy machine hit all of them alike; the tables show medians over
the rounds and ratios of medians. The results are printed and written to ``bench/RESULTS.md``,
section "Run and attach" (other sections of that file are left as they are).

Cases
  init     ``--break initModule`` on scripts/hello-world.py, stop at the first hit (``--max-hits 1``)
  sigmoid  the same with ``--break wrapper_CPU_sigmoid`` (a kernel in libtorch_cpu.so)
  hot      bench/hot_add.py: ``torch.add`` 2,000 times under ``--break at::_ops::add_Tensor::call``;
           the loop's own wall time is measured inside the target, so per-hit cost excludes start-up
           (pttrace with and without the whole-stack reuse, `PTTRACE_NO_STACK_REUSE=1`, alternate in each round).
           Also on an interpreter without DWARF, pttrace and gdb `bt` alike: Debian's /usr/bin/python3.11
           (libpython static, no debug info) in a venv it made, with ``pip install torch==2.13.0`` (made
           once under $XDG_CACHE_HOME/pttrace-bench). Then, once, an independent oracle on that interpreter:
           the Python frames pttrace attach records at a hit of ``wrapper_CPU_sigmoid`` against py-spy's and
           pystack's reading of the same stack (tests/targets/sigmoid_stop.py stops itself there).

CPU time (init and sigmoid) is that of every process of the run (pttrace, its gdb and the target; gdb and
the target), from wait4: less moved by other processes' load than wall time.

Peak memory is the sum of the peak RSS (VmHWM, polled from /proc every 20 ms) of the debugger's
processes: pttrace itself plus its gdb, or the one plain gdb. The traced Python is reported apart.

A run whose recorded path is wrong counts as a failure, printed loudly, and the script exits 1.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
VENV_PY = ROOT / ".venv" / "bin" / "python"
PTTRACE = ROOT / ".venv" / "bin" / "pttrace"
HELLO = "scripts/hello-world.py"
HOT = "bench/hot_add.py"
HOT_N = 2000
DEBIAN_PY = Path("/usr/bin/python3.11")
ORACLE_TARGET = ROOT / "tests" / "targets" / "sigmoid_stop.py"
PYBT_N = 200  # `bt; py-bt` costs ~50 ms a hit: 2,000 of them would take the whole budget
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "Run and attach"
ADD_OP = "at::_ops::add_Tensor::call"


# ------------------------------------------------------------------------------------------------
# Measuring one process tree
# ------------------------------------------------------------------------------------------------
def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _ppid_map() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
            out[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


class TreeSampler(threading.Thread):
    """Polls the process tree under ``root``: the peak RSS of each debugger process and of the target.

    Debugger processes: the root itself, and every process named gdb whose parent is not a gdb.
    Target: any process whose parent is a gdb (the traced Python; a forked gdb before its exec is
    counted there too, which is why tool processes are chosen by their parent).
    """

    def __init__(self, root: int, interval: float = 0.02, rescan_every: int = 5):
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.rescan_every = rescan_every
        self.peaks: dict[int, int] = {}
        self.roles: dict[int, str] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        # Finding the tree means reading every /proc/*/stat (~1 ms here): do it every 100 ms, and in
        # between only re-read the high-water marks of the processes already found (cheap).
        n = 0
        while not self._halt.is_set():
            if n % self.rescan_every == 0:
                self.rescan()
            self.read_peaks()
            n += 1
            self._halt.wait(self.interval)

    def sample(self) -> None:
        self.rescan()
        self.read_peaks()

    def rescan(self) -> None:
        ppid = _ppid_map()
        children: dict[int, list[int]] = {}
        for pid, parent in ppid.items():
            children.setdefault(parent, []).append(pid)
        todo = [self.root]
        gdbs = {pid for pid, role in self.roles.items() if role in ("gdb", "tool-gdb")}
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, []))
            if pid == self.root:
                # Re-checked every time: right after the fork the root is not gdb yet.
                if self.roles.get(pid) != "tool-gdb":
                    self.roles[pid] = "tool-gdb" if _comm(pid) == "gdb" else "tool"
                if self.roles[pid] == "tool-gdb":
                    gdbs.add(pid)
                continue
            if self.roles.get(pid) in ("gdb", "target"):
                continue  # "other" is looked at again: a fork may not have exec'd gdb yet
            if ppid.get(pid) in gdbs:
                role = "target"
            elif _comm(pid) == "gdb":
                role = "gdb"
                gdbs.add(pid)
            else:
                role = "other"
            self.roles[pid] = role

    def read_peaks(self) -> None:
        for pid, role in self.roles.items():
            if role == "other":
                continue
            hwm = _status_kb(pid, "VmHWM:")
            if hwm is not None and hwm > self.peaks.get(pid, 0):
                self.peaks[pid] = hwm

    def stop(self) -> None:
        self._halt.set()
        self.join(2)

    def tool_peak_kb(self) -> int:
        root = self.peaks.get(self.root, 0)
        gdbs = [kb for pid, kb in self.peaks.items() if self.roles.get(pid) == "gdb"]
        return root + (max(gdbs) if gdbs else 0)

    def target_peak_kb(self) -> int:
        return max([kb for pid, kb in self.peaks.items() if self.roles.get(pid) == "target"] or [0])


@dataclass
class RunResult:
    wall: float
    rc: int
    tool_kb: int
    target_kb: int
    stdout: Path
    extra: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    cpu: float | None = None  # user + system seconds of the process and every descendant it (or they) reaped


def _wait_with_usage(proc: subprocess.Popen, timeout: float) -> tuple[int, float | None]:
    """Wait for ``proc`` as Popen.wait does, but through wait4: its exit status and its CPU time, which
    counts the descendants waited for (pttrace's gdb, and gdb's target)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.005)


def run_measured(argv: list[str], out: Path, env: dict | None = None, timeout: float = 600,
                 cwd: Path = ROOT) -> RunResult:
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, start_new_session=True)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        cpu = None
        try:
            rc, cpu = _wait_with_usage(proc, timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            rc = proc.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
    return RunResult(wall, rc, sampler.tool_peak_kb(), sampler.target_peak_kb(), out, cpu=cpu)


# ------------------------------------------------------------------------------------------------
# Checking what was recorded
# ------------------------------------------------------------------------------------------------
def _session_hits(session_dir: Path) -> tuple[list, str | None]:
    """The hits of the one session in ``session_dir`` (``storage.load``: fill records applied), and the
    status it ended with (None without a session)."""
    files = sorted(session_dir.glob("*.jsonl"))
    if len(files) != 1:
        return [], None
    sys.path.insert(0, str(ROOT))
    from tracer.session import storage

    session = storage.load(files[0])
    return list(session.hits), session.info.status


def _native_names(frames: list) -> list[str]:
    return [f.function or "" for f in frames if f.kind == "native"]


def _in_order(names: list[str], wanted: list[str]) -> str | None:
    """None if each wanted substring appears in a frame, in this order (outermost first)."""
    i = 0
    for name in names:
        if i < len(wanted) and wanted[i] in name:
            i += 1
    return None if i == len(wanted) else wanted[i]


def _has_python(frames: list, file_end: str, source_part: str) -> bool:
    return any(f.kind == "python" and (f.file or "").endswith(file_end) and source_part in (f.source or "")
               for f in frames)


def _innermost_is(frames: list, function: str, library: str) -> bool:
    return bool(frames) and function in (frames[-1].function or "") and library in (frames[-1].library or "")


def _completed(status: str | None) -> list[str]:
    return [] if status == "completed" else [f"session status {status!r}, not completed"]


SIGMOID_PATH = ["THPVariable_sigmoid", "at::_ops::sigmoid::call", "sigmoid", "at::_ops::sigmoid::redispatch",
                "wrapper_CPU_sigmoid"]


def check_pttrace_init(hits: list, status: str | None) -> list[str]:
    errs = []
    if len(hits) != 1:
        return [f"expected 1 hit, the session has {len(hits)}"]
    fr = hits[0].frames
    if not _innermost_is(fr, "initModule", "libtorch_python"):
        last = fr[-1] if fr else None
        errs.append(f"innermost frame is {last and last.function!r} in {last and last.library!r}, not initModule")
    if not _has_python(fr, "hello-world.py", "import torch"):
        errs.append("no Python frame `hello-world.py: import torch`")
    if not _has_python(fr, "torch/__init__.py", ""):
        errs.append("no Python frame in torch/__init__.py")
    return errs + _completed(status)


def check_pttrace_sigmoid(hits: list, status: str | None) -> list[str]:
    errs = []
    if len(hits) != 1:
        return [f"expected 1 hit, the session has {len(hits)}"]
    fr = hits[0].frames
    names = _native_names(fr)
    if not names or "wrapper_CPU_sigmoid" not in names[-1]:
        errs.append(f"innermost native frame is {names[-1] if names else None!r}, not wrapper_CPU_sigmoid")
    missing = _in_order(names, SIGMOID_PATH)
    if missing:
        errs.append(f"native path lacks {missing!r} (in order {' -> '.join(SIGMOID_PATH)})")
    unnamed = [f for f in fr if f.kind == "native" and not f.function]
    if unnamed:
        errs.append(f"{len(unnamed)} native frame(s) without a name, e.g. in {unnamed[0].library}")
    if not _has_python(fr, "torch/nn/modules/activation.py", "torch.sigmoid"):
        errs.append("no Python frame `activation.py: torch.sigmoid(input)`")
    if not _has_python(fr, "hello-world.py", "model(x)"):
        errs.append("no Python frame `hello-world.py: y = model(x)`")
    return errs + _completed(status)


def check_pttrace_hot(hits: list, status: str | None) -> list[str]:
    errs = []
    if len(hits) != HOT_N:
        errs.append(f"expected {HOT_N} hits, the session has {len(hits)}")
    # The hits of one stack share one list of frames: each distinct list is checked once.
    paths = {id(h.frames): (h.frames, 0) for h in hits}
    for h in hits:
        paths[id(h.frames)] = (h.frames, paths[id(h.frames)][1] + 1)
    bad_inner = sum(n for fr, n in paths.values() if not _innermost_is(fr, ADD_OP, "libtorch_cpu"))
    bad_py = sum(n for fr, n in paths.values() if not _has_python(fr, "hot_add.py", "torch.add(a, b)"))
    if bad_inner:
        errs.append(f"{bad_inner} hit(s) whose innermost frame is not {ADD_OP} in libtorch_cpu.so")
    if bad_py:
        errs.append(f"{bad_py} hit(s) without the Python frame `hot_add.py: torch.add(a, b)`")
    return errs + _completed(status)


def check_gdb_bt(text: str, function: str, want_hits: int = 1, library: str | None = None,
                 python_source: str | None = None) -> list[str]:
    tops = [ln for ln in text.splitlines() if ln.startswith("#0 ") and function in ln
            and "@plt" not in ln and (library is None or library in ln)]
    errs = []
    if len(tops) != want_hits:
        errs.append(f"gdb printed {len(tops)} backtrace(s) stopped in {function}, expected {want_hits}")
    if python_source and python_source not in text:
        errs.append(f"the Python backtrace lacks {python_source!r}")
    return errs


# ------------------------------------------------------------------------------------------------
# The variants
# ------------------------------------------------------------------------------------------------
def debian_torch_venv() -> Path | None:
    """Debian's python3.11 in a venv of its own with torch 2.13.0 from pip, as a Debian user makes it
    (made once, kept under $XDG_CACHE_HOME/pttrace-bench); None, said once, where there is no such python."""
    if not DEBIAN_PY.exists():
        print(f"note: no {DEBIAN_PY}: the hot case runs on the DWARF interpreter only", file=sys.stderr)
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    home = cache / "pttrace-bench" / "debian-torch-venv"
    python = home / "bin" / "python"
    check = [str(python), "-c", "import torch; assert torch.__version__.startswith('2.13.0')"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"making {home} ({DEBIAN_PY} -m venv; pip install torch==2.13.0)", flush=True)
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([str(DEBIAN_PY), "-m", "venv", str(home)], check=True)
    subprocess.run([str(home / "bin" / "pip"), "install", "-q", "torch==2.13.0"], check=True)
    subprocess.run(check, check=True)
    return python


def oracle_check(python: Path, tmp: Path) -> tuple[str, list[str]]:
    """pttrace attach's Python frames of one hit against py-spy's and pystack's reading of the same
    stopped stack (on ``python``); a sentence for the report, and what disagreed."""
    sys.path.insert(0, str(ROOT))
    from tests import pythons
    from tracer.session import storage

    workdir = tmp / "oracle"
    workdir.mkdir()
    oracle = pythons.attach_then_stop(python, [str(ORACLE_TARGET)], [str(PTTRACE)], "wrapper_CPU_sigmoid", workdir)
    if oracle.pttrace.returncode != 0 or oracle.session is None:
        return "", [f"pttrace attach exited with {oracle.pttrace.returncode}: {oracle.pttrace.stderr[-500:]}"]
    hits = storage.load(oracle.session).hits
    if len(hits) != 1:
        return "", [f"pttrace attach recorded {len(hits)} hits, not 1"]
    frames = [(f.file, f.line, f.function) for f in reversed(hits[0].frames) if f.kind == "python"]
    errs = pythons.oracle_disagreements(frames, oracle, oracle.pid, "MainThread")
    sentence = (f"Independent oracle on the same interpreter without DWARF: the {len(frames)} Python frames "
                f"`pttrace attach` recorded at a hit of `wrapper_CPU_sigmoid` (from `{frames[0][2]}` out to "
                f"`{frames[-1][2]}`) are, file, line and name, what `py-spy dump --nonblocking` and "
                f"`pystack remote --no-block` read of the same stack "
                f"({'agree' if not errs else '**DISAGREE**'}).")
    return sentence, errs


def warm_up(cases: list[Case] | None = None) -> None:
    """Before the first round: one untimed hello-world.py, so that torch's libraries (~1 GB) and the script's modules
    are in the page cache for every variant of round 1 alike. Without it round 1's first variant (pttrace) was the
    first process of the benchmark to read them, and a round 1 alone missed its target (RESULTS.md, 10:58 run).

    Then one untimed run of each warm pttrace variant of ``cases`` (the first-hit ones: their breakpoint, this
    checkout's and each ``--base`` one's), so that the rows named "re-run (caches warm)" are re-runs in round 1 too:
    a checkout set up anew has a venv whose torch files are new, and the caches pttrace keyed by a library's path
    and modification time (torch's operator facts: a child interpreter importing torch, ~1.3-1.6 s of wall time and
    ~100 MB more at load 3) were rebuilt by round 1's run (the lead's 15:00 run: `initModule` 0.32x in round 1,
    230 MB, against 0.23-0.26x and 141 MB after). The first run's cost is the "first run (empty caches)" row's."""
    subprocess.run([str(VENV_PY), HELLO], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=600)
    for case in cases or []:
        for v in case.variants:
            if v.kind != "pttrace" or v.cold or case.key == "hot":
                continue
            with tempfile.TemporaryDirectory(prefix="pttrace-bench-warm-") as td:
                rundir = Path(td)
                (rundir / "sessions").mkdir()
                t0 = time.perf_counter()
                done = subprocess.run(v.make_argv(rundir), cwd=v.cwd or ROOT, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600,
                                      env=dict(os.environ, **v.env) if v.env else None)
                print(f"  warm-up (untimed): {case.key} {v.key}, {time.perf_counter() - t0:.2f} s, exit {done.returncode}",
                      flush=True)


def stale_bytecode() -> list[str]:
    """pttrace's modules whose bytecode is missing or older than the source: with PYTHONDONTWRITEBYTECODE set (as on
    this project's machines) each run compiles them again (~0.3 s of CPU a run for all of them): run
    scripts/setup.sh, which writes it, after the last change to the checkout."""
    import importlib.util

    stale = []
    for src in sorted((ROOT / "tracer").rglob("*.py")):
        pyc = Path(importlib.util.cache_from_source(str(src)))
        try:
            fresh = pyc.stat().st_mtime >= src.stat().st_mtime
        except OSError:
            fresh = False
        if not fresh:
            stale.append(str(src.relative_to(ROOT)))
    return stale


def python_helper() -> str | None:
    real = os.path.realpath(VENV_PY)
    for cand in [real + "-gdb.py", *sorted(str(p) for p in (Path(real).parent.parent / "lib").glob("libpython3*-gdb.py"))]:
        if os.path.isfile(cand):
            return cand
    return None


NOPLT = """python
import gdb
def _pt_bench_noplt(bp):
    try:
        for loc in bp.locations:
            if loc.enabled and (loc.function or "").endswith("@plt"):
                loc.enabled = False
    except Exception:
        pass
gdb.events.breakpoint_modified.connect(_pt_bench_noplt)
end
"""

BARE = """python
import gdb
class _PtBenchBare(gdb.Breakpoint):
    hits = 0
    def stop(self):
        _PtBenchBare.hits += 1
        return False
gdb.execute("set breakpoint pending on")
_PtBenchBare(%r)
gdb.events.exited.connect(lambda ev: print("BARE_HITS", _PtBenchBare.hits))
end
"""


def _hand_script(tmp: Path, bp: str, libs: list[str], with_pybt: bool) -> Path:
    """DESIGN.md's hand-written gdb script: read only the symbols this stop needs."""
    lines = ["set pagination off", "set confirm off", "set breakpoint pending on", "set auto-solib-add off",
             "catch load libtorch_python", "run"]
    lines += [f"sharedlibrary {lib}" for lib in libs]
    lines += ["delete 1", f"break {bp}", "continue", "bt"]
    if with_pybt:
        lines.append("py-bt")
    lines.append("kill")
    path = tmp / f"hand-{bp}.gdb"
    path.write_text("\n".join(lines) + "\n")
    return path


def _hot_script(tmp: Path, name: str, body: list[str], noplt: bool) -> Path:
    lines = ["set pagination off", "set confirm off", "set breakpoint pending on", "set print thread-events off"]
    if noplt:
        lines.append(NOPLT)
    lines += [f"break {ADD_OP}", "commands", "silent", *body, "continue", "end", "run"]
    path = tmp / f"hot-{name}.gdb"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Variant:
    key: str
    label: str
    make_argv: Callable[[Path], list[str]]  # rundir -> argv
    check: Callable[[Path, RunResult], list[str]]
    kind: str = "gdb"  # "pttrace" | "gdb" | "ref" (no debugger)
    once: bool = False  # a reference run: first round only
    cold: bool = False  # run with an empty cache directory (XDG_CACHE_HOME): a first run
    env: dict | None = None  # extra environment variables for this variant
    cwd: Path | None = None  # where it runs (ROOT if None): --base runs another checkout's pttrace from there


@dataclass
class Case:
    key: str
    title: str
    variants: list[Variant]


def _pttrace_check(fn):
    def check(rundir: Path, res: RunResult) -> list[str]:
        hits, status = _session_hits(rundir / "sessions")
        errs = fn(hits, status)
        if res.rc != 0:
            errs.append(f"pttrace exited with {res.rc}")
        return errs
    return check


def _hot_loop(rundir: Path, res: RunResult) -> list[str]:
    try:
        data = json.loads((rundir / "hot.json").read_text())
        res.extra["loop"] = float(data["seconds"])
        res.extra["n"] = int(data["n"])
        return []
    except (OSError, ValueError, KeyError):
        return ["the target wrote no loop time (did it run to its end?)"]


def build_cases(tmp: Path, helper: str | None, selected: set[str], full: bool,
                nodwarf: Path | None = None, bases: tuple[Path, ...] = (), warm_only: bool = False) -> list[Case]:
    py = str(VENV_PY)
    iex = ["-iex", f"add-auto-load-safe-path {helper}"] if helper else []
    gdb = shutil.which("gdb") or "gdb"
    cases = []

    def pt(bp: str, script: list[str], max_hits: int | None, python: Path | None = None) -> Callable:
        def argv(rundir: Path) -> list[str]:
            a = [str(PTTRACE), "run", "--break", bp, "--batch", "-q", "--session-dir", str(rundir / "sessions")]
            if python:
                a += ["--python", str(python)]
            if max_hits:
                a += ["--max-hits", str(max_hits)]
            return a + ["--", *[s.replace("{rundir}", str(rundir)) for s in script]]
        return argv

    def first_hit(bp: str, check) -> list[Variant]:
        """pttrace's warm first hit, and with --base the other checkout's, run from its directory with this
        venv's interpreter (``python -m tracer`` finds the package of the directory it runs in first)."""
        out = [Variant("pttrace", "pttrace run --max-hits 1", pt(bp, [HELLO], 1), _pttrace_check(check),
                       kind="pttrace")]
        for n, base in enumerate(bases):
            def argv(rundir: Path) -> list[str]:
                return [py, "-m", "tracer", "run", "--break", bp, "--batch", "-q", "--session-dir",
                        str(rundir / "sessions"), "--max-hits", "1", "--", HELLO]
            out.append(Variant("pttrace-base" + (str(n + 1) if n else ""),
                               f"pttrace run --max-hits 1, checkout {base.name}", argv, _pttrace_check(check),
                               kind="pttrace", cwd=base))
        if not warm_only:
            out.append(Variant("pttrace-cold", "pttrace run --max-hits 1, first run (empty caches)", pt(bp, [HELLO], 1),
                               _pttrace_check(check), kind="pttrace", cold=True))
        return out

    def plain(bp: str) -> Callable[[Path], list[str]]:
        return lambda rundir: [gdb, "-nx", "-batch", "-ex", "set breakpoint pending on", "-ex", f"break {bp}",
                               "-ex", "run", "-ex", "bt", "-ex", "kill", "--args", py, HELLO]

    def gdb_check(function: str, library: str | None = None, python_source: str | None = None):
        def check(rundir: Path, res: RunResult) -> list[str]:
            return check_gdb_bt(res.stdout.read_text(errors="replace"), function, 1, library, python_source)
        return check

    if "init" in selected:
        hand = _hand_script(tmp, "initModule", ["libtorch_python", "libpython"], with_pybt=True)
        cases.append(Case("init", "time to the first recorded hit: `--break initModule` (hello-world.py)", [
            *first_hit("initModule", check_pttrace_init),
            Variant("gdb", "gdb (plain: break, run, bt, kill)", plain("initModule"), gdb_check("initModule")),
            Variant("hand", "gdb, hand-written script (auto-solib-add off, 2 libraries, bt + py-bt)",
                    lambda rundir, h=hand: [gdb, "-nx", "-batch", *iex, "-x", str(h), "--args", py, HELLO],
                    gdb_check("initModule", python_source="import torch")),
        ]))
    if "sigmoid" in selected:
        hand = _hand_script(tmp, "wrapper_CPU_sigmoid", ["libtorch_cpu", "libtorch_python", "libpython"],
                            with_pybt=True)
        cases.append(Case("sigmoid", "time to the first recorded hit: `--break wrapper_CPU_sigmoid` (a kernel)", [
            *first_hit("wrapper_CPU_sigmoid", check_pttrace_sigmoid),
            Variant("gdb", "gdb (plain: break, run, bt, kill)", plain("wrapper_CPU_sigmoid"),
                    gdb_check("wrapper_CPU_sigmoid")),
            Variant("hand", "gdb, hand-written script (auto-solib-add off, 3 libraries, bt + py-bt)",
                    lambda rundir, h=hand: [gdb, "-nx", "-batch", *iex, "-x", str(h), "--args", py, HELLO],
                    gdb_check("wrapper_CPU_sigmoid", python_source="torch.sigmoid")),
        ]))
    if "hot" in selected:
        hot_args = [HOT, str(HOT_N), "--out", "{rundir}/hot.json"]

        def gdb_hot(script: Path, with_helper: bool = False, n: int = HOT_N, python: str = py) -> Callable:
            return lambda rundir: [gdb, "-nx", "-batch", *(iex if with_helper else []), "-x", str(script),
                                   "--args", python, HOT, str(n), "--out", str(rundir / "hot.json")]

        def hot_gdb_check(n: int, stops: int, pybt: bool = False):
            def check(rundir: Path, res: RunResult) -> list[str]:
                errs = _hot_loop(rundir, res)
                text = res.stdout.read_text(errors="replace")
                errs += check_gdb_bt(text, "add_Tensor::call", n, "libtorch_cpu")
                res.extra["stops"] = sum(1 for ln in text.splitlines() if ln.startswith("#0 "))
                if res.extra["stops"] != stops:
                    errs.append(f"gdb stopped {res.extra['stops']} times, expected {stops}")
                if pybt and text.count("torch.add(a, b)") < n:
                    errs.append(f"py-bt showed `torch.add(a, b)` {text.count('torch.add(a, b)')} times, "
                                f"expected {n}")
                return errs
            return check

        def bare_check(rundir: Path, res: RunResult) -> list[str]:
            errs = _hot_loop(rundir, res)
            m = re.search(r"BARE_HITS (\d+)", res.stdout.read_text(errors="replace"))
            n = int(m.group(1)) if m else 0
            res.extra["stops"] = n
            if n != HOT_N:
                errs.append(f"the bare breakpoint counted {n} hits, expected {HOT_N}")
            return errs

        def pt_hot_check(rundir: Path, res: RunResult) -> list[str]:
            return _hot_loop(rundir, res) + _pttrace_check(check_pttrace_hot)(rundir, res)

        bare = tmp / "hot-bare.gdb"
        bare.write_text("set pagination off\nset confirm off\n" + NOPLT + (BARE % ADD_OP) + "run\n")
        bt_script = _hot_script(tmp, "bt", ["bt"], noplt=True)
        variants = [
            Variant("pttrace", "pttrace run (full path, Python frames)", pt(ADD_OP, hot_args, None),
                    pt_hot_check, kind="pttrace"),
            Variant("pttrace-walk", "pttrace run, whole-stack reuse off (`PTTRACE_NO_STACK_REUSE=1`)",
                    pt(ADD_OP, hot_args, None), pt_hot_check, kind="pttrace", env={"PTTRACE_NO_STACK_REUSE": "1"}),
            Variant("gdb-bt", "gdb `commands; silent; bt; continue` (@plt stub disabled)",
                    gdb_hot(bt_script), hot_gdb_check(HOT_N, HOT_N)),
            Variant("bare", "gdb.Breakpoint whose stop() returns False (@plt disabled)", gdb_hot(bare), bare_check),
        ]
        if nodwarf:
            # Right after the DWARF interpreter's runs of the same round: the ratio of the two is the figure.
            variants.insert(1, Variant("pttrace-nodwarf", "pttrace run, Debian's python3.11 (no DWARF, libpython "
                                       "static)", pt(ADD_OP, hot_args, None, python=nodwarf), pt_hot_check,
                                       kind="pttrace"))
            variants.insert(4, Variant("gdb-bt-nodwarf", "gdb `bt` as above, Debian's python3.11 (no DWARF)",
                                       gdb_hot(bt_script, python=str(nodwarf)), hot_gdb_check(HOT_N, HOT_N)))
        if full:
            # Slow, and only there to show what a gdb user would get: one run each, not every round.
            variants.append(Variant("gdb-bt-typed", "gdb `commands; silent; bt; continue` as typed "
                                    "(also stops at the @plt stub; 1 run)",
                                    gdb_hot(_hot_script(tmp, "bt-typed", ["bt"], noplt=False)),
                                    hot_gdb_check(HOT_N, 2 * HOT_N), once=True))
            bare_typed = tmp / "hot-bare-typed.gdb"
            bare_typed.write_text("set pagination off\nset confirm off\n" + (BARE % ADD_OP) + "run\n")

            def bare_typed_check(rundir: Path, res: RunResult) -> list[str]:
                errs = _hot_loop(rundir, res)
                m = re.search(r"BARE_HITS (\d+)", res.stdout.read_text(errors="replace"))
                n = int(m.group(1)) if m else 0
                res.extra["stops"] = n
                if n != 2 * HOT_N:
                    errs.append(f"the bare breakpoint counted {n} stops, expected {2 * HOT_N} (call + @plt stub)")
                return errs

            variants.append(Variant("bare-typed", "gdb.Breakpoint, stop() returns False, @plt location left "
                                    "enabled (DESIGN.md's 0.4 ms; 1 run)", gdb_hot(bare_typed), bare_typed_check,
                                    once=True))
            variants.append(Variant("gdb-bt-pybt", f"gdb `commands; silent; bt; py-bt; continue` (@plt disabled; "
                                    f"{PYBT_N} hits, 1 run)",
                                    gdb_hot(_hot_script(tmp, "pybt", ["bt", "py-bt"], noplt=True), with_helper=True,
                                            n=PYBT_N),
                                    hot_gdb_check(PYBT_N, PYBT_N, pybt=True), once=True))
        variants.append(Variant("python", "python alone (no debugger; 1 run)",
                                lambda rundir: [py, HOT, str(HOT_N), "--out", str(rundir / "hot.json")],
                                _hot_loop, kind="ref", once=True))
        cases.append(Case("hot", f"hot breakpoint: {HOT_N:,} x `torch.add`, `--break {ADD_OP}`", variants))
    if "init" in selected or "sigmoid" in selected:
        ref = Variant("python", "python alone (no debugger; 1 run)", lambda rundir: [py, HELLO],
                      lambda rundir, res: [] if res.rc == 0 else [f"python exited with {res.rc}"], kind="ref",
                      once=True)
        cases[0].variants.append(ref)
    return cases


# ------------------------------------------------------------------------------------------------
# Running and reporting
# ------------------------------------------------------------------------------------------------
def machine_facts() -> dict:
    facts = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), "nproc": os.cpu_count()}
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
        facts["ram"] = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        facts["ram"] = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            facts["cpu"] = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "?")
    except OSError:
        facts["cpu"] = "?"
    try:
        facts["gdb"] = subprocess.run(["gdb", "-nx", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        facts["gdb"] = "?"
    try:
        facts["python"] = subprocess.run([str(VENV_PY), "-c", "import sys; print(sys.version.split()[0])"],
                                         capture_output=True, text=True).stdout.strip()
    except OSError:
        facts["python"] = "?"
    try:
        vp = next((ROOT / ".venv" / "lib").glob("python3*/site-packages/torch/version.py"))
        m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", vp.read_text(), re.M)
        facts["torch"] = m.group(1) if m else "?"
    except StopIteration:
        facts["torch"] = "?"
    facts["kernel"] = platform.release()
    facts["load"] = f"{os.getloadavg()[0]:.1f}"
    try:
        facts["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "tracer"], capture_output=True,
                               text=True).stdout.strip()
        if dirty:
            facts["commit"] += " + uncommitted changes under tracer/"
    except OSError:
        facts["commit"] = "?"
    return facts


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def _mb(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.0f} MB"


@dataclass
class Stats:
    runs: list[RunResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def med(self, attr: str) -> float | None:
        return _median([getattr(r, attr) for r in self.runs if getattr(r, attr) is not None])

    def med_extra(self, key: str) -> float | None:
        return _median([r.extra[key] for r in self.runs if key in r.extra])


def run_all(cases: list[Case], rounds: int, tmp: Path) -> dict[tuple[str, str], Stats]:
    stats: dict[tuple[str, str], Stats] = {}
    for rnd in range(rounds):
        for case in cases:
            for v in case.variants:
                if v.once and rnd > 0:
                    continue
                rundir = tmp / f"{case.key}-{v.key}-{rnd}"
                rundir.mkdir(parents=True)
                (rundir / "sessions").mkdir()
                env = dict(os.environ, **v.env) if v.env else None
                if v.cold:
                    # A first run: no gdb index cache, no pttrace symbol index, no cached torch facts.
                    env = dict(env or os.environ, XDG_CACHE_HOME=str(rundir / "empty-cache"))
                res = run_measured(v.make_argv(rundir), rundir / "stdout.txt", env=env, cwd=v.cwd or ROOT)
                errs = v.check(rundir, res)
                st = stats.setdefault((case.key, v.key), Stats())
                st.runs.append(res)
                extra = f" loop {res.extra['loop']:.3f} s" if "loop" in res.extra else ""
                cpu = f"  cpu {res.cpu:6.2f} s" if res.cpu is not None else ""
                print(f"  round {rnd + 1}/{rounds}  {case.key:8s} {v.key:13s} {res.wall:7.2f} s{cpu}  "
                      f"debugger {res.tool_kb / 1024:5.0f} MB  target {res.target_kb / 1024:4.0f} MB{extra}"
                      f"{'  CHECK FAILED' if errs else ''}", flush=True)
                if errs:
                    st.failures += [f"round {rnd + 1}: {e}" for e in errs]
                    print("\n" + "!" * 100, file=sys.stderr)
                    print(f"!!! CHECK FAILED: {case.key} / {v.label} (round {rnd + 1}) recorded the wrong thing:",
                          file=sys.stderr)
                    for e in errs:
                        print(f"!!!   {e}", file=sys.stderr)
                    print(f"!!!   output kept in {rundir}", file=sys.stderr)
                    print("!" * 100 + "\n", file=sys.stderr, flush=True)
                    rundir.rename(tmp.parent / f"pttrace-bench-failed-{case.key}-{v.key}-{rnd}-{os.getpid()}")
                else:
                    shutil.rmtree(rundir, ignore_errors=True)
    return stats


TARGETS = {
    "init": {"time": 0.4, "mem": 0.5},
    "sigmoid": {"time": 1.0, "mem": 1.2},
}


def _verdict(value: float | None, limit: float, higher_is_better: bool = False) -> str:
    if value is None:
        return "-"
    ok = value >= limit if higher_is_better else value <= limit
    return "met" if ok else "**NOT met**"


def _paired(a: Stats, b: Stats, key: str) -> float | None:
    """The median over rounds of a's figure over b's in the same round (both ran in each round)."""
    return _median([x.extra[key] / y.extra[key] for x, y in zip(a.runs, b.runs)
                    if x.extra.get(key) and y.extra.get(key)])


def _round_ratios(case: Case, stats: dict) -> list[str]:
    """Each pttrace variant's wall time over plain gdb's of the same round (the rounds alternate)."""
    gdb = stats.get((case.key, "gdb"))
    if not gdb:
        return []
    out = []
    for v in case.variants:
        st = stats.get((case.key, v.key))
        if v.kind != "pttrace" or v.cold or not st:
            continue
        ratios = [f"{r.wall / g.wall:.2f}x" for r, g in zip(st.runs, gdb.runs) if g.wall]
        cpus = [f"{r.cpu / g.cpu:.2f}x" for r, g in zip(st.runs, gdb.runs) if r.cpu and g.cpu]
        out.append(f"{v.label}, round by round against plain gdb's run of the same round: {', '.join(ratios)} "
                   f"(CPU time of all processes: {', '.join(cpus)}).")
    return ["", *out] if out else []


def _nodwarf_lines(stats: dict, pt: Stats, gl: float) -> list[str]:
    """The hot breakpoint on the interpreter without DWARF against the one with it, and against gdb `bt`."""
    nd, ndg = stats.get(("hot", "pttrace-nodwarf")), stats.get(("hot", "gdb-bt-nodwarf"))
    nl, pl = (nd.med_extra("loop") if nd else None), pt.med_extra("loop")
    if not nl or not pl:
        return []
    ratio, paired = nl / pl, _paired(nd, pt, "loop")
    ngl = ndg.med_extra("loop") if ndg else None
    bare = stats.get(("hot", "bare"))
    bl = bare.med_extra("loop") if bare else None
    out = [f"Without DWARF (Debian's python3.11: libpython static, no debug info, Python frames read by "
           f"pttrace's own reader from the ELF symbols; a venv it made, `pip install torch==2.13.0`): "
           f"{nl / HOT_N * 1000:.3f} ms a hit against {pl / HOT_N * 1000:.3f} ms on the DWARF interpreter, "
           f"{ratio:.2f}x (the median of each round's ratio: {_fmt(paired, 'x')}; target <= 1.10: "
           f"{_verdict(paired or ratio, 1.10)}); {gl / nl:.1f}x the hits/s of gdb `bt` on the DWARF interpreter "
           f"(target >= 5: {_verdict(gl / nl, 5, True)})"]
    if ngl:
        # gdb's bt is cheaper there: without DWARF it has no arguments or locals of libpython's frames to print.
        out[0] += (f"; {ngl / nl:.1f}x gdb `bt` on the same interpreter, whose bt prints no arguments of "
                   f"libpython's frames" + (f" (a bare gdb.Breakpoint is {ngl / bl:.1f}x it)" if bl else ""))
    out[0] += "."
    return out


def report(cases: list[Case], stats: dict, facts: dict, rounds: int,
           notes: dict[str, list[str]] | None = None) -> tuple[str, list[str]]:
    notes = notes or {}
    md: list[str] = []
    failures: list[str] = []
    md.append(f"Measured by `bench/bench_run.py` ({rounds} rounds, variants alternating within each round; "
              "medians, ratios of medians). Peak memory: sum of the peak RSS of the debugger's processes "
              "(pttrace + its gdb, or the one gdb), polled from /proc; the traced Python is shown apart. "
              "A variant whose recorded path fails its check is marked FAILED." +
              (" Before round 1, untimed: hello-world.py once (the page cache) and each warm pttrace first-hit "
               "variant once (its caches), so that round 1's re-runs are re-runs."
               if any(c.key in ("init", "sigmoid") for c in cases) else ""))
    md.append("")
    md.append(f"Machine: {facts['nproc']} cores ({facts['cpu']}), {facts['ram']} RAM, Linux {facts['kernel']}; "
              f"{facts['gdb']}; torch {facts['torch']}; Python {facts['python']}; pttrace at {facts['commit']}; "
              f"{facts['date']}. Load average {facts['load']} at the start, {facts.get('load_end', '?')} at the end "
              "(others' test suites share these 2 cores: trust the ratios within a round more than the seconds).")
    for case in cases:
        md.append("")
        md.append(f"### {case.title}")
        md.append("")
        base = stats.get((case.key, "gdb")) or stats.get((case.key, "gdb-bt"))
        base_wall = base.med("wall") if base else None
        base_mem = base.med("tool_kb") if base else None
        if case.key == "hot":
            base_loop = base.med_extra("loop") if base else None
            base_hps = HOT_N / base_loop if base_loop else None
            md.append("| variant | per hit | hits/s | vs gdb bt (hits/s) | loop (in target) | total wall | "
                      "peak RSS (debugger) | vs gdb | target RSS | recorded path |")
            md.append("|---|---|---|---|---|---|---|---|---|---|")
            for v in case.variants:
                st = stats.get((case.key, v.key))
                if not st:
                    continue
                loop = st.med_extra("loop")
                n = st.med_extra("n") or HOT_N
                per_hit = loop / n * 1000 if loop else None
                hps = n / loop if loop else None
                speed = base_hps and hps / base_hps if (hps and v.kind != "ref") else None
                mem = st.med("tool_kb") if v.kind != "ref" else None
                memr = mem / base_mem if (mem and base_mem) else None
                ok = "FAILED" if st.failures else ("ok" if v.kind != "ref" else "-")
                md.append(f"| {v.label} | {_fmt(per_hit, ' ms', 3)} | {_fmt(hps, '', 0)} | {_fmt(speed, 'x')} | "
                          f"{_fmt(loop, ' s', 3)} | {_fmt(st.med('wall'), ' s')} | {_mb(mem)} | {_fmt(memr, 'x')} | "
                          f"{_mb(st.med('target_kb'))} | {ok} |")
                failures += [f"{case.key}/{v.key}: {f}" for f in st.failures]
            pt = stats.get((case.key, "pttrace"))
            bare = stats.get((case.key, "bare"))
            if pt and base and bare:
                pl, bl, gl = pt.med_extra("loop"), bare.med_extra("loop"), base.med_extra("loop")
                if pl and bl and gl:
                    md.append("")
                    md.append(f"Targets: hits/s >= 5x gdb `bt` commands: {gl / pl:.1f}x ({_verdict(gl / pl, 5, True)}); "
                              f"per-hit cost within 3x of the bare breakpoint: {pl / bl:.1f}x "
                              f"({_verdict(pl / bl, 3)}); peak memory <= 1.2x gdb: "
                              f"{pt.med('tool_kb') / base_mem:.2f}x ({_verdict(pt.med('tool_kb') / base_mem, 1.2)}).")
                    walk = stats.get((case.key, "pttrace-walk"))
                    wl = walk.med_extra("loop") if walk else None
                    if wl:
                        md.append(f"Whole-stack reuse (a hit's native frames taken from an earlier walk of the same "
                                  f"stack, checked in one read of it): {pl / HOT_N * 1000:.3f} ms a hit with it, "
                                  f"{wl / HOT_N * 1000:.3f} ms without ({gl / wl:.1f}x gdb `bt`); "
                                  f"{wl / pl:.2f}x faster.")
                    typed = stats.get((case.key, "bare-typed"))
                    tl = typed.med_extra("loop") if typed else None
                    if tl:
                        md.append(f"Against DESIGN.md's bare figure (the @plt location left enabled: two stops a "
                                  f"call, {tl / HOT_N * 1000:.3f} ms): {pl / tl:.1f}x. Where the time goes and what "
                                  "would cut it: section \"Hot breakpoint: where a hit's time goes\".")
                    md += _nodwarf_lines(stats, pt, gl)
            md += notes.get(case.key, [])
        else:
            md.append("| variant | wall (median) | vs plain gdb | min-max | CPU, all processes | vs plain gdb | "
                      "peak RSS (debugger) | vs plain gdb | target RSS | recorded path |")
            md.append("|---|---|---|---|---|---|---|---|---|---|")
            base_cpu = base.med("cpu") if base else None
            for v in case.variants:
                st = stats.get((case.key, v.key))
                if not st:
                    continue
                wall = st.med("wall")
                walls = [r.wall for r in st.runs]
                ratio = wall / base_wall if (wall and base_wall and v.kind != "ref") else None
                mem = st.med("tool_kb") if v.kind != "ref" else None
                memr = mem / base_mem if (mem and base_mem) else None
                ok = "FAILED" if st.failures else ("ok" if v.kind != "ref" else "-")
                cpu = st.med("cpu")
                cpur = cpu / base_cpu if (cpu and base_cpu) else None
                md.append(f"| {v.label} | {_fmt(wall, ' s')} | {_fmt(ratio, 'x')} | {min(walls):.2f}-{max(walls):.2f} s "
                          f"| {_fmt(cpu, ' s')} | {_fmt(cpur, 'x')} "
                          f"| {_mb(mem)} | {_fmt(memr, 'x')} | {_mb(st.med('target_kb'))} | {ok} |")
                failures += [f"{case.key}/{v.key}: {f}" for f in st.failures]
            md += _round_ratios(case, stats)
            pt = stats.get((case.key, "pttrace"))
            tgt = TARGETS.get(case.key)
            if pt and base_wall and tgt:
                tr = pt.med("wall") / base_wall
                mr = pt.med("tool_kb") / base_mem
                md.append("")
                md.append(f"Targets: time ratio <= {tgt['time']}: {tr:.2f} ({_verdict(tr, tgt['time'])}); "
                          f"peak memory <= {tgt['mem']}x: {mr:.2f}x ({_verdict(mr, tgt['mem'])}).")
                cold = stats.get((case.key, "pttrace-cold"))
                if cold and cold.med("wall"):
                    md.append(f"Re-runs: a first run (empty `$XDG_CACHE_HOME`: gdb's index cache, pttrace's symbol "
                              f"index, CFI-only copies and torch facts all rebuilt) takes {cold.med('wall'):.2f} s; a second run, "
                              f"reusing them, {pt.med('wall'):.2f} s ({pt.med('wall') - cold.med('wall'):+.2f} s, "
                              f"{pt.med('wall') / cold.med('wall'):.2f}x).")
                if case.key == "sigmoid":
                    md.append("Most of plain gdb's run is reading libtorch_cpu.so's ~650k symbols; pttrace gives gdb "
                              "only that library's unwind tables (a CFI-only copy, cached by build-id) and names its "
                              "frames from its own symbol index: section \"Where gdb spends its time on "
                              "libtorch_cpu.so\".")
    if failures:
        md.append("")
        md.append("**Recorded-path checks that FAILED:**")
        md.append("")
        md += [f"- {f}" for f in failures]
    return "\n".join(md) + "\n", failures


def write_section(path: Path, title: str, body: str) -> None:
    """Replace (or append) the level-2 section ``## title`` in path, leaving the other sections alone."""
    text = path.read_text() if path.exists() else "# pttrace benchmarks\n"
    lines = text.splitlines(keepends=True)
    head = f"## {title}"
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == head), None)
    new = [head + "\n", "\n", body if body.endswith("\n") else body + "\n"]
    if start is None:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        out = lines + ["\n"] + new
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = lines[end:]
        out = lines[:start] + new + (["\n"] if tail else []) + tail
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text("".join(out))
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--quick", action="store_true", help="2 rounds, and the as-typed gdb hot variant left out")
    ap.add_argument("--only", default="init,sigmoid,hot", help="cases to run: init,sigmoid,hot")
    ap.add_argument("--no-write", action="store_true", help=f"print only; leave {RESULTS.name} alone")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--no-nodwarf", action="store_true", help="leave out the interpreter without DWARF (hot case)")
    ap.add_argument("--base", type=Path, action="append", default=[], metavar="DIR",
                    help="also run another checkout's pttrace (git worktree add --detach DIR COMMIT) in each round, "
                         "for init and sigmoid: an A/B of two trees in the same load (repeat for more)")
    ap.add_argument("--warm-only", action="store_true", help="leave out the first-run (empty caches) variants")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    selected = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = selected - {"init", "sigmoid", "hot"}
    if unknown:
        ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    if not PTTRACE.exists():
        ap.error(f"{PTTRACE} not found: run scripts/setup.sh first")
    helper = python_helper()
    if not helper:
        print("warning: no python3.X-gdb.py beside the interpreter: the hand-written and py-bt variants lack "
              "Python frames", file=sys.stderr)
    stale = stale_bytecode()
    if stale:
        print(f"warning: {len(stale)} of pttrace's modules have no up-to-date bytecode ({stale[0]}...): each run compiles "
              "them; run scripts/setup.sh first", file=sys.stderr)
    facts = machine_facts()
    print(f"{facts['gdb']}, torch {facts['torch']}, Python {facts['python']}, {facts['nproc']} cores, {facts['ram']}")
    nodwarf = debian_torch_venv() if "hot" in selected and not args.no_nodwarf else None
    t0 = time.time()
    notes: dict[str, list[str]] = {}
    oracle_errs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pttrace-bench-") as td:
        tmp = Path(td)
        cases = build_cases(tmp, helper, selected, full=not args.quick, nodwarf=nodwarf,
                            bases=tuple(b.resolve() for b in args.base), warm_only=args.warm_only)
        warm_up(cases)
        stats = run_all(cases, rounds, tmp)
        if nodwarf:
            sentence, oracle_errs = oracle_check(nodwarf, tmp)
            notes["hot"] = [sentence] if sentence else []
            oracle_errs = [f"hot/oracle: {e}" for e in oracle_errs]
    facts["load_end"] = f"{os.getloadavg()[0]:.1f}"
    body, failures = report(cases, stats, facts, rounds, notes)
    if oracle_errs:
        body += "\n**The independent oracle DISAGREED:**\n\n" + "".join(f"- {e}\n" for e in oracle_errs)
        failures += oracle_errs
    body += f"\n({time.time() - t0:.0f} s for the whole benchmark.)\n"
    print()
    print(body)
    if not args.no_write:
        write_section(args.results, SECTION, body)
        print(f"written to {args.results} (section \"{SECTION}\")")
    if failures:
        print("\n" + "!" * 100, file=sys.stderr)
        print(f"!!! {len(failures)} RECORDED-PATH CHECK(S) FAILED: a fast benchmark of a wrong recording is a failure",
              file=sys.stderr)
        print("!" * 100, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
