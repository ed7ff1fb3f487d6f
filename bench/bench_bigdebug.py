"""A full-size debug build (bench/gen_big_debug.py: ~1.7 GB of DWARF in one library), pttrace against
plain gdb and addr2line, side by side in one run.

The library is called from a torch operator (bench/call_bigdebug.py), so the breakpoint sits under
torch's dispatcher. Measured, each round alternating the variants (medians over the rounds):

  first hit   ``--break big7::kernel_7_0``, the whole run to the target's end: pttrace's first run (empty
              caches) and re-run (its caches warm), plain gdb as typed (break, run, continue past the
              @plt stop, bt, py-bt, continue to the end) and gdb with its index cache warm; wall and the
              debugger side's peak RSS (pttrace + its gdb, or the one gdb). Every variant spans the same
              run: from its start until the target has exited and the debugger with it (pttrace: its
              session written), as python alone runs to its exit; each round runs the variants in
              another order (rotated), so that none always follows the same one
  where       ``pttrace where big7::kernel_7_0 --lib BIG`` with empty caches vs ``addr2line -f -C -i``
              of its address; then 1,000 code addresses spread over the library: pttrace's index (its
              cache warm, a fresh process) vs addr2line given them all in one call
  inline      breakpoints in functions called from inlined code (kernel_U_0's lambda, its insertion
              sort): every frame, the inlined functions' included, as addr2line lists them
  hot         ``--break bigU::tick_U`` hit HOT times: per-hit cost on this library and on its release
              build (the same library with ``objcopy --strip-debug``)

Every recording is checked: the hit in the right function, and every frame of the big library with
the file:line (and inlined chain) ``addr2line -f -C -i`` gives for its pc. ``--compressed`` runs on the
variant with zlib-compressed debug sections.

    .venv/bin/python bench/bench_bigdebug.py [-n ROUNDS] [--only first,where,inline,hot] [--compressed] [--no-write]
        [--variants pttrace-first,pttrace-again,gdb,gdb-cached,python]   (fewer: nothing written)

Every variant runs with Python's bytecode cache on, as a user's shell has it (an environment with
PYTHONDONTWRITEBYTECODE=1 makes pttrace and its agent compile their modules at every run: ~0.2 s).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run import PTTRACE, RESULTS, ROOT, VENV_PY, _fmt, _mb, _median, machine_facts, run_measured, \
    write_section  # noqa: E402

SECTION = "A full-size debug build"
UNIT = 7
FUNCTION = f"big{UNIT}::kernel_{UNIT}_0"
HOT_FUNCTION = f"big{UNIT}::tick_{UNIT}"
SOURCE = f"unit_{UNIT:04d}.cpp"
HOT_N = (200, 1200)
CALL = ROOT / "bench" / "call_bigdebug.py"


def set_unit(unit: int) -> None:
    global UNIT, FUNCTION, HOT_FUNCTION, SOURCE
    UNIT, FUNCTION, HOT_FUNCTION, SOURCE = unit, f"big{unit}::kernel_{unit}_0", f"big{unit}::tick_{unit}", \
        f"unit_{unit:04d}.cpp"


def library(compressed: bool, units: int | None) -> Path:
    cmd = [str(VENV_PY), str(ROOT / "bench" / "gen_big_debug.py")] + (["--compressed"] if compressed else [])
    cmd += ["--units", str(units)] if units else []
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def release_of(lib: Path) -> Path:
    rel = lib.with_name(lib.name.replace(".so", ".release.so"))
    if not rel.exists():
        tmp = rel.with_suffix(".tmp")
        subprocess.run(["nice", "-n", "19", "objcopy", "--strip-debug", str(lib), str(tmp)], check=True)
        tmp.replace(rel)
    return rel


# -- checks ----------------------------------------------------------------------------------------
def addr2line(lib: Path, addresses: list[int]) -> dict[int, list[str]]:
    out = subprocess.run(["addr2line", "-f", "-C", "-i", "-a", "-e", str(lib), *(hex(a) for a in addresses)],
                         capture_output=True, text=True, check=True).stdout
    blocks: dict[int, list[str]] = {}
    current = None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            current = int(line, 16)
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
    return blocks


def gdb_lines(lib: Path, addresses: list[int]) -> dict[int, str]:
    """gdb's file:line for addresses of the library file (``info line *ADDR``): the second opinion where
    addr2line and pttrace differ (binutils 2.40 keeps the previous sequence's file for a DWARF 5
    sequence that starts without setting one; DWARF says file 1, and gdb and pttrace read file 1)."""
    argv = ["gdb", "-nx", "-batch"]
    for a in addresses:
        argv += ["-ex", f"info line *{a:#x}"]
    out = subprocess.run([*argv, str(lib)], capture_output=True, text=True).stdout
    found = re.findall(r'Line (\d+) of "([^"]+)"\s+(?:starts at|is at) address (0x[0-9a-f]+)', out)
    answers = {}
    lines = iter(re.findall(r'^(Line \d+ of "[^"]+"|No line number information).*$', out, re.M))
    for a in addresses:
        text = next(lines, "")
        m = re.match(r'Line (\d+) of "([^"]+)"', text)
        answers[a] = f"{m.group(2)}:{m.group(1)}" if m else "??"
    del found
    return answers


def _strip_disc(text: str) -> str:
    return re.sub(r" \(discriminator \d+\)$", "", text)


def recorded_hits(session_dir: Path) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from tracer.session import storage

    files = sorted(session_dir.glob("*.jsonl"))
    if len(files) != 1:
        return []
    return [hit.to_dict() for hit in storage.load(files[0]).hits]


def physical_frames(frames: list[dict], lib: Path) -> list[tuple[int, list[dict]]]:
    """The frames of ``lib`` as one group a pc: (the pc looked up, its frames innermost first: the frames
    of the functions inlined there, then the one they are inlined in). A caller's pc is a return address:
    looked up at pc - 1, as addr2line's users and gdb do."""
    real = os.path.realpath(lib)
    groups: list[list[dict]] = []
    for f in frames:
        if f.get("library") and os.path.realpath(f["library"]) == real:
            if f.get("inlined") and groups and groups[-1][0].get("offset") == f.get("offset"):
                groups[-1].append(f)
            else:
                groups.append([f])
    last = frames[-1].get("offset") if frames else None
    return [(g[0]["offset"] - (0 if i == len(groups) - 1 and g[0]["offset"] == last else 1), g[::-1])
            for i, g in enumerate(groups) if g[0].get("offset") is not None]


def check_frames(hits: list[dict], lib: Path, function: str | None, want: int, inlined_at_least: int = 0) -> list[str]:
    """The hits' innermost function, and every frame in ``lib`` against ``addr2line -f -C -i`` for its pc:
    one frame per function it lists (the inlined ones included), each with its file:line and, inlined, its
    name (bfd names the innermost level of inlined code without a linkage name after the ELF symbol:
    that name is not compared). ``inlined_at_least``: the frames pttrace must have shown as inlined."""
    if len(hits) != want:
        return [f"{len(hits)} hits recorded, expected {want}"]
    errs = []
    shown_inlined = 0
    for hit in hits[:3]:
        frames = hit["frames"]
        real = [f for f in frames if not f.get("inlined")]
        if function is not None and not (real[-1].get("function") or "").startswith(function + "("):
            errs.append(f"innermost frame is {real[-1].get('function')!r}")
        groups = physical_frames(frames, lib)
        if not groups:
            errs.append("no frame in the big library")
            continue
        if any(f.get("library") and os.path.realpath(f["library"]) == os.path.realpath(lib)
               and f.get("offset") is None for f in frames):
            errs.append("a frame in the big library has no offset to check")
        theirs = addr2line(lib, sorted({pc for pc, _ in groups}))
        for pc, group in groups:
            chain = theirs.get(pc, [])
            want_lines = [_strip_disc(x) for x in chain[1::2]]
            mine = [f"{f.get('file')}:{f.get('line')}" for f in group]
            if mine != want_lines and not (mine[1:] == want_lines[1:] and mine[0] == gdb_lines(lib, [pc])[pc]):
                errs.append(f"{group[-1].get('function')} at {pc:#x}: recorded {mine}, addr2line says {want_lines}")
            skip = 1 if len(group) > 1 and chain[0] == chain[-2] else 0
            if [f.get("function") for f in group][skip:-1] != chain[0::2][skip:-1]:
                errs.append(f"inlined at {pc:#x}: recorded {[f.get('function') for f in group]}, addr2line says "
                            f"{chain[0::2]}")
            shown_inlined += len(group) - 1
    if shown_inlined < inlined_at_least:
        errs.append(f"{shown_inlined} inlined frames shown, expected at least {inlined_at_least}")
    return errs


def check_gdb(text: str) -> list[str]:
    tops = [ln for ln in text.splitlines() if ln.startswith("#0 ") and FUNCTION in ln and "@plt" not in ln]
    if len(tops) != 1 or SOURCE not in tops[0]:
        return [f"gdb stopped {len(tops)} time(s) in {FUNCTION} with its source line"]
    if "exited normally" not in text:
        return ["the target did not run to its end under gdb"]
    return []


# -- cases -----------------------------------------------------------------------------------------
def pttrace_env(lib: Path, cache: Path) -> dict:
    """pttrace's environment: its cache; a library under the size pttrace treats as heavy (a small one
    for trying this script) is named a CFI library, so that it takes the path the big one takes."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    if lib.stat().st_size < 100 * 2**20:
        env["PTTRACE_CFI_LIBS"] = lib.name
    return env


def load_average() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except (OSError, IndexError):
        return "?"


VARIANTS = ("pttrace-first", "pttrace-again", "gdb", "gdb-cached", "python")


def first_hit(lib: Path, rounds: int, tmp: Path, only: tuple[str, ...] = VARIANTS) -> tuple[dict, list[str]]:
    gdb = shutil.which("gdb") or "gdb"
    script = [str(VENV_PY), str(CALL), str(lib), str(UNIT)]
    # After the backtraces gdb lets the target run to its end, as pttrace and python alone do: a gdb that killed
    # it at the hit was spared the target's teardown (~0.5 s quiet, under ptrace) that python alone's time, taken
    # off both, holds, and its own share looked smaller by that much.
    plain = ["-nx", "-batch", "-ex", "set breakpoint pending on", "-ex", f"break {FUNCTION}", "-ex", "run",
             "-ex", "continue", "-ex", "bt", "-ex", "py-bt", "-ex", "continue"]
    # gdb's index cache (keyed by build-id) is kept beside the library between invocations: warming it costs
    # plain gdb's whole indexing run (~60-170 s), and the variant measures gdb with it warm.
    warm_cache, gdb_cache = tmp / "warm-cache", lib.parent / "gdb-index-cache"
    gdb_cache.mkdir(exist_ok=True)
    cached = ["-iex", f"set index-cache directory {gdb_cache}", "-iex", "set index-cache enabled on"]
    variants = [
        ("pttrace-first", "pttrace, first run (empty caches)"),
        ("pttrace-again", "pttrace, re-run (its caches warm)"),
        ("gdb", "plain gdb as typed (break, run, continue past @plt, bt, py-bt, continue to the end)"),
        ("gdb-cached", "gdb with its index cache warm"),
        ("python", "python alone (no debugger: the floor)"),
    ]
    variants = [(k, label) for k, label in variants if k in only]

    def pttrace_argv(rundir: Path) -> list[str]:
        return [str(PTTRACE), "run", "--batch", "-q", "-b", FUNCTION, "--session-dir", str(rundir / "sessions"),
                *script[1:]]

    print("warming the caches of the re-run variants (unmeasured)", flush=True)
    prime = tmp / "prime"
    (prime / "sessions").mkdir(parents=True)
    subprocess.run(pttrace_argv(prime), env=pttrace_env(lib, warm_cache), capture_output=True, check=True)
    if "gdb-cached" in only:
        subprocess.run([gdb, *cached, *plain, "--args", *script], capture_output=True, check=True)
    runs: dict[str, list] = {}
    failures: list[str] = []
    loads: list[str] = []  # the 1-minute load average after each run: this machine is shared
    for rnd in range(rounds):
        for key, label in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
            rundir = tmp / f"{key}-{rnd}"
            (rundir / "sessions").mkdir(parents=True)
            if key.startswith("pttrace"):
                home = warm_cache if key == "pttrace-again" else rundir / "empty-cache"
                res = run_measured(pttrace_argv(rundir), rundir / "out.txt", env=pttrace_env(lib, home))
                errs = check_frames(recorded_hits(rundir / "sessions"), lib, FUNCTION, 1)
            elif key == "python":
                res = run_measured(script, rundir / "out.txt")
                errs = [] if res.rc == 0 else [f"exit {res.rc}"]
            else:
                argv = [gdb, *(cached if key == "gdb-cached" else []), *plain, "--args", *script]
                res = run_measured(argv, rundir / "out.txt")
                errs = check_gdb(res.stdout.read_text(errors="replace"))
            runs.setdefault(key, []).append(res)
            loads.append(load_average())
            failures += [f"{label}, round {rnd + 1}: {e}" for e in errs]
            cpu = f"cpu {res.cpu:6.2f} s  " if res.cpu is not None else ""
            print(f"  round {rnd + 1}/{rounds}  {key:14s} {res.wall:6.2f} s  {cpu}{res.tool_kb / 1024:6.0f} MB  "
                  f"load {loads[-1]}{'  CHECK FAILED: ' + '; '.join(errs[:3]) if errs else ''}", flush=True)
    return {"variants": variants, "runs": runs, "loads": loads}, failures


def code_addresses(lib: Path, count: int) -> list[int]:
    out = subprocess.run(["nm", "-S", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in "tTwW" and int(parts[1], 16) > 4:
            funcs.append((int(parts[0], 16), int(parts[1], 16)))
    rng = random.Random(18)
    picked = rng.sample(funcs, min(count, len(funcs)))
    return sorted(start + rng.randrange(size) for start, size in picked)


LOOKUP = ("import sys, json; from tracer import symbols; "
          "addrs = [int(a, 16) for a in open(sys.argv[2]).read().split()]; "
          "res = symbols.lines_for_addresses(sys.argv[1], addrs); "
          "json.dump({hex(a): (r.addr2line_lines() if r else None) for a, r in res.items()}, open(sys.argv[3], 'w'))")


PEAK_KB: dict[str, list[int]] = {}


def timed(argv: list[str], env: dict | None = None,
          label: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of a command; with ``label``, its peak RSS (GNU time) is kept in PEAK_KB[label]."""
    out = Path(tempfile.mkstemp(prefix="pt-time-")[1])
    wrap = ["/usr/bin/time", "-f", "%M", "-o", str(out)] if label and os.path.exists("/usr/bin/time") else []
    t0 = time.perf_counter()
    proc = subprocess.run([*wrap, *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if wrap:
        text = out.read_text().strip().splitlines()
        if text and text[-1].isdigit():
            PEAK_KB.setdefault(label, []).append(int(text[-1]))
    out.unlink()
    return wall, proc


def library_cache_bytes(cache: Path, lib: Path) -> int:
    """What pttrace's cache holds on disk for this one library (its index, DWARF tables, CFI copy), in bytes
    (blocks allocated: a section being inflated is a sparse file of the section's size)."""
    notes = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    if not m:
        return 0
    return sum(p.stat().st_blocks * 512 for p in (cache / "pttrace").rglob("*")
               if p.is_file() and m.group(1) in p.name)


def where(lib: Path, rounds: int, tmp: Path) -> tuple[dict, list[str]]:
    nm = subprocess.run(["nm", "-C", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    address = next(int(ln.split()[0], 16) for ln in nm.splitlines() if ln.endswith(f" {FUNCTION}(int)"))
    addrs = code_addresses(lib, 1000)
    addr_file = tmp / "addresses.txt"
    addr_file.write_text("\n".join(hex(a) for a in addrs))
    warm = tmp / "where-warm"
    failures: list[str] = []
    res: dict = {}
    # Warm pttrace's cache for the 1,000 (unmeasured), then check its answers against addr2line's.
    subprocess.run([str(VENV_PY), "-c", LOOKUP, str(lib), str(addr_file), str(tmp / "ours.json")], check=True,
                   cwd=ROOT, env=dict(os.environ, XDG_CACHE_HOME=str(warm)))
    ours = json.loads((tmp / "ours.json").read_text())
    theirs = addr2line(lib, addrs)
    bad = [a for a in addrs if [_strip_disc(x) for x in (ours[hex(a)] or ["??", "??:0"])]
           != [_strip_disc(x) for x in theirs[a]]]
    if bad:
        # addr2line -i in one batch reuses names learnt for earlier addresses: ask it alone.
        bad = [a for a in bad if [_strip_disc(x) for x in (ours[hex(a)] or ["??", "??:0"])]
               != [_strip_disc(x) for x in addr2line(lib, [a])[a]]]
    second = gdb_lines(lib, bad) if bad else {}
    file_only = [a for a in bad if ours[hex(a)] and _strip_disc(ours[hex(a)][1]) == second[a]]
    bad = [a for a in bad if a not in file_only]
    if bad:
        failures.append(f"{len(bad)} of {len(addrs)} addresses differ from addr2line, e.g. {hex(bad[0])}: "
                        f"{ours[hex(bad[0])]} vs {addr2line(lib, [bad[0]])[bad[0]]}")
    res["differ_gdb_agrees"] = [hex(a) for a in file_only]
    for rnd in range(rounds):
        cold = tmp / f"where-cold-{rnd}"
        t, proc = timed([str(PTTRACE), "where", FUNCTION, "--lib", str(lib)],
                        env=dict(os.environ, XDG_CACHE_HOME=str(cold)), label="where-cold")
        if proc.returncode != 0 or SOURCE not in proc.stdout:
            failures.append(f"pttrace where: exit {proc.returncode}, no {SOURCE} in its answer")
        res.setdefault("where-cold", []).append(t)
        t, _ = timed(["addr2line", "-f", "-C", "-i", "-e", str(lib), hex(address)], label="a2l-one")
        res.setdefault("a2l-one", []).append(t)
        t, proc = timed([str(VENV_PY), "-c", LOOKUP, str(lib), str(addr_file), str(tmp / "ours.json")],
                        env=dict(os.environ, XDG_CACHE_HOME=str(warm)), label="warm-1000")
        res.setdefault("warm-1000", []).append(t)
        t, _ = timed(["addr2line", "-f", "-C", "-i", "-a", "-e", str(lib), *(hex(a) for a in addrs)],
                     label="a2l-1000")
        res.setdefault("a2l-1000", []).append(t)
        print(f"  round {rnd + 1}/{rounds}  where cold {res['where-cold'][-1]:.2f} s, addr2line one "
              f"{res['a2l-one'][-1]:.2f} s; 1,000 warm {res['warm-1000'][-1]:.2f} s, addr2line "
              f"{res['a2l-1000'][-1]:.2f} s", flush=True)
    res["cache_bytes"] = library_cache_bytes(warm, lib)
    res["cold_cache_bytes"] = library_cache_bytes(tmp / "where-cold-0", lib)
    return res, failures


def hot(lib: Path, release: Path, rounds: int, tmp: Path) -> tuple[dict, list[str]]:
    failures: list[str] = []
    per_hit: dict[str, list[float]] = {}
    caches = {"debug": tmp / "hot-cache-debug", "release": tmp / "hot-cache-release"}
    for rnd in range(rounds):
        for kind, path in (("debug", lib), ("release", release)):
            loops = []
            for n in HOT_N:
                rundir = tmp / f"hot-{kind}-{n}-{rnd}"
                (rundir / "sessions").mkdir(parents=True)
                argv = [str(PTTRACE), "run", "--batch", "-q", "-b", HOT_FUNCTION, "--session-dir",
                        str(rundir / "sessions"), str(CALL), str(path), str(UNIT), str(n)]
                # gdb 13 does not find big7::tick_7 by name in a library without DWARF (pending for ever),
                # so the release build is given the path the debug build takes: CFI copy, index breakpoint.
                env = dict(pttrace_env(path, caches[kind]), PTTRACE_CFI_LIBS=path.name)
                res = run_measured(argv, rundir / "out.txt", env=env)
                m = re.search(r"bigdebug::run: \S+ in ([0-9.]+) s", res.stdout.read_text(errors="replace"))
                if not m:
                    failures.append(f"hot {kind} n={n}: the target printed no loop time")
                    continue
                loops.append(float(m.group(1)))
                if n == HOT_N[0] and kind == "debug":
                    failures += [f"hot {kind}: {e}" for e in check_frames(recorded_hits(rundir / "sessions"), path,
                                                                           HOT_FUNCTION, n)]
            if len(loops) == 2:
                per_hit.setdefault(kind, []).append((loops[1] - loops[0]) / (HOT_N[1] - HOT_N[0]))
                print(f"  round {rnd + 1}/{rounds}  hot {kind:8s} {per_hit[kind][-1] * 1e3:6.2f} ms/hit", flush=True)
    return per_hit, failures


def mangled(lib: Path, *parts: str) -> str:
    """The one mangled name whose demangled form holds every one of ``parts`` (``--break`` takes no spaces)."""
    names = subprocess.run(["nm", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    plain = [ln.split()[-1] for ln in names.splitlines() if len(ln.split()) == 3 and f"kernel_{UNIT}_0" in ln]
    demangled = subprocess.run(["c++filt"], input="\n".join(plain), capture_output=True, text=True,
                               check=True).stdout.splitlines()
    found = {m for m, d in zip(plain, demangled) if all(p in d for p in parts)}
    if len(found) != 1:
        raise SystemExit(f"{lib.name}: {len(found)} functions hold {parts}")
    return found.pop()


def inlined(lib: Path, tmp: Path) -> tuple[dict, list[str]]:
    """Breakpoints in functions called from inlined code: kernel_U_0's std::for_each -> std::function's
    operator() (inlined) calls the lambda's _M_invoke, whose first instruction is itself 5 inlined
    functions deep; std::sort -> __sort -> __final_insertion_sort (inlined) call __insertion_sort.
    Every frame of the big library is checked against addr2line, the inlined ones included."""
    specs = [mangled(lib, "_M_invoke", f"kernel_{UNIT}_0(int)::{{lambda(big{UNIT}::Record{UNIT} const&)#2}}"),
             mangled(lib, "__insertion_sort<", f"kernel_{UNIT}_0(int)::{{lambda")]
    rundir = tmp / "inlined"
    (rundir / "sessions").mkdir(parents=True)
    argv = [str(PTTRACE), "run", "--batch", "-q", *(f"-b{s}" for s in specs), "--session-dir",
            str(rundir / "sessions"), str(CALL), str(lib), str(UNIT)]
    res = run_measured(argv, rundir / "out.txt", env=pttrace_env(lib, tmp / "inlined-cache"))
    hits = recorded_hits(rundir / "sessions")
    errs = check_frames([h for h in hits if h["breakpoint"] == specs[0]], lib, None, 3, inlined_at_least=3 * 7)
    errs += check_frames([h for h in hits if h["breakpoint"] == specs[1]], lib, None, 1, inlined_at_least=3)
    groups = [g for h in hits for _, g in physical_frames(h["frames"], lib)]
    facts = {"wall": res.wall, "hits": len(hits), "frames": sum(len(g) for g in groups),
             "inlined": sum(len(g) - 1 for g in groups), "deepest": max((len(g) - 1 for g in groups), default=0)}
    print(f"  inlined: {facts['hits']} hits, {facts['frames']} frames in the library, {facts['inlined']} of them "
          f"inlined, {res.wall:.2f} s{'  CHECK FAILED: ' + '; '.join(errs[:3]) if errs else ''}", flush=True)
    return facts, [f"inlined frames: {e}" for e in errs]


# -- report ----------------------------------------------------------------------------------------
def own_shares(runs: dict) -> list[str]:
    """Issue 29's re-run row: the debugger's own share, (re-run - python alone) / (gdb with its index cache
    warm - python alone), by wall time and by CPU time (user + system of every process of the run, the
    target's included; steadier than wall on a shared machine), each the median of the rounds' shares
    (a round's three runs follow each other, so they share that moment's load)."""
    keys = ("pttrace-again", "gdb-cached", "python")
    if not all(runs.get(k) for k in keys):
        return []
    out = ["| re-run's own share (target <= 0.2x) | median | rounds |", "|---|---:|---|"]
    for what in ("wall", "cpu"):
        shares = []
        for again, cached, alone in zip(*(runs[k] for k in keys)):
            a, c, p = (getattr(r, what) for r in (again, cached, alone))
            if a is not None and c is not None and p is not None and c > p:
                shares.append((a - p) / (c - p))
        med = _median(shares)
        per = ", ".join(f"{x:.2f}x" for x in shares)
        values = "; ".join(f"{k} " + " / ".join(f"{getattr(r, what):.2f}" if getattr(r, what) is not None else "?"
                                                 for r in runs[k]) for k in keys)
        out.append(f"| by {what} time: (re-run - python) / (gdb index-cache warm - python) | "
                   f"{_fmt(med, 'x')}, {verdict(med, 0.2)} | {per} ({values} s) |")
    return out + [""]


def _load_value(text: str) -> float:
    """A load average as a number, for min/max (as text, "10.51" sorted before "9.68")."""
    try:
        return float(text)
    except ValueError:
        return 0.0


def verdict(ratio: float | None, limit: float) -> str:
    if ratio is None:
        return "n/a"
    return f"{'met' if ratio <= limit else 'MISSED'} (target <= {limit}x)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=3)
    ap.add_argument("--only", default="first,where,inline,hot")
    ap.add_argument("--compressed", action="store_true", help="the variant with compressed debug sections")
    ap.add_argument("--units", type=int, help="a library of this many units (default: the generator's)")
    ap.add_argument("--lib", type=Path, help="measure this library (units numbered as the generator's) instead")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="the first-hit variants to run (plain gdb costs ~90 s and 3 GB a round)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if set(args.variants.split(",")) != set(VARIANTS):
        args.no_write = True  # a partial table must not replace the section
    if args.units and args.units <= UNIT:
        set_unit(args.units - 1)
    only = set(args.only.split(","))
    lib = args.lib.resolve() if args.lib else library(args.compressed, args.units)
    plain_lib = lib if args.lib else library(False, args.units)
    facts_file = plain_lib.parent / "build.json"
    build = json.loads(facts_file.read_text()) if facts_file.exists() else {
        "units": "?", "debug_bytes": 0, "sections": {".debug_info": 0, ".debug_line": 0}, "total_s": 0,
        "compile_s": "?", "link_s": "?"}
    facts = machine_facts()
    failures: list[str] = []
    lines = [
        f"Measured by `bench/bench_bigdebug.py{' --compressed' if args.compressed else ''}` ({args.rounds} rounds, "
        f"variants alternating; medians) on `{lib.name}`: {lib.stat().st_size / 1e9:.2f} GB, "
        f"{build['debug_bytes'] / 1e9:.2f} GB of DWARF before compression "
        f"({build['sections']['.debug_info'] / 1e9:.2f} GB "
        f".debug_info, {build['sections']['.debug_line'] / 1e6:.0f} MB .debug_line), {build['units']} units, built by "
        f"`bench/gen_big_debug.py` (its last invocation: {build['total_s'] / 60:.0f} min, "
        f"compile {build['compile_s']} s, link {build['link_s']} s) with `nice -n 19` on this shared machine. "
        f"{facts['gdb']}; {facts['nproc']} cores; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="pttrace-bigdebug-") as td:
        tmp = Path(td)
        if "first" in only:
            print("first hit", flush=True)
            got, errs = first_hit(lib, args.rounds, tmp, tuple(args.variants.split(",")))
            failures += errs
            runs = got["runs"]

            def med(key: str, what: str = "wall") -> float | None:
                return _median([getattr(r, what) for r in runs.get(key, [])])

            def ratio(a: float | None, b: float | None) -> float | None:
                return None if a is None or not b else a / b

            ref, ref_kb, cached = med("gdb"), med("gdb", "tool_kb"), med("gdb-cached")
            lines += [f"First hit of `--break {FUNCTION}` (the whole run, to the target's end; load average "
                      f"after each run {min(got['loads'], key=_load_value)}-{max(got['loads'], key=_load_value)}):",
                      "",
                      "| variant | wall | vs plain gdb | vs gdb, index cache warm | peak RSS (debugger) "
                      "| vs plain gdb |",
                      "|---|---:|---:|---:|---:|---:|"]
            for key, label in got["variants"]:
                wall, kb = med(key), med(key, "tool_kb")
                if key == "python":
                    lines.append(f"| {label} | {_fmt(wall, ' s')} | {_fmt(ratio(wall, ref), 'x')} | "
                                 f"{_fmt(ratio(wall, cached), 'x')} | - | - |")
                    continue
                lines.append(f"| {label} | {_fmt(wall, ' s')} | {_fmt(ratio(wall, ref), 'x')} | "
                             f"{_fmt(ratio(wall, cached), 'x')} | "
                             f"{_mb(kb)} | {_fmt(ratio(kb, ref_kb), 'x')} |")
            first, again = ratio(med("pttrace-first"), ref), ratio(med("pttrace-again"), cached)
            peaks = [med(k, "tool_kb") for k in ("pttrace-first", "pttrace-again") if k in runs]
            peak = ratio(max(peaks), ref_kb) if peaks else None
            lines += ["", f"- first run: {_fmt(first, 'x')} plain gdb, {verdict(first, 0.5)}",
                      f"- re-run: {_fmt(again, 'x')} gdb with its index cache warm",
                      f"- peak memory: {_fmt(peak, 'x')} plain gdb, {verdict(peak, 0.3)}", ""]
            lines += own_shares(runs)
        if "where" in only:
            print("where", flush=True)
            res, errs = where(lib, args.rounds, tmp)
            failures += errs
            cold, one = _median(res["where-cold"]), _median(res["a2l-one"])
            warm, many = _median(res["warm-1000"]), _median(res["a2l-1000"])
            lines += ["| lookup | pttrace | addr2line -f -C -i | ratio |", "|---|---:|---:|---:|",
                      f"| `pttrace where {FUNCTION} --lib BIG`, caches empty | {cold:.2f} s | "
                      f"{one:.2f} s (its address) | "
                      f"{cold / one:.2f}x, {verdict(cold / one, 1.0)} |",
                      f"| 1,000 addresses, pttrace's cache warm (a fresh process) | {warm:.2f} s | "
                      f"{many:.2f} s (one call) | "
                      f"{warm / many:.2f}x, {verdict(warm / many, 0.1)} |",
                      "", f"Every one of the 1,000 answers (function, file:line, inlined chain) equals addr2line's"
                      + (f", except {len(res['differ_gdb_agrees'])} where addr2line's file is wrong and pttrace's "
                         f"equals gdb's `info line` ({', '.join(res['differ_gdb_agrees'][:3])}...)"
                         if res['differ_gdb_agrees'] else "")
                      + ". ",
                      "", f"Peak RSS: `pttrace where`, caches empty, {_mb(_median(PEAK_KB.get('where-cold', [])))} "
                      f"(addr2line {_mb(_median(PEAK_KB.get('a2l-one', [])))}); the 1,000 lookups "
                      f"{_mb(_median(PEAK_KB.get('warm-1000', [])))} (addr2line "
                      f"{_mb(_median(PEAK_KB.get('a2l-1000', [])))}). pttrace's cache for this library after the "
                      f"cold `where`: {res['cold_cache_bytes'] / 1e6:.1f} MB; after the 1,000 lookups "
                      f"{res['cache_bytes'] / 1e6:.1f} MB.", ""]
        if "inline" in only:
            print("inlined frames", flush=True)
            facts_in, errs = inlined(lib, tmp)
            failures += errs
            lines += [f"Inlined frames (a run of its own, caches empty, {facts_in['wall']:.1f} s): breakpoints on "
                      f"kernel_{UNIT}_0's lambda (`std::_Function_handler<...>::_M_invoke`, called from "
                      "`std::function::operator()` inlined in `std::for_each` inlined in the kernel, its entry "
                      "itself in 5 levels of inlined code) and on `std::__insertion_sort` (called from "
                      "`__final_insertion_sort` < `__sort` < `std::sort`, inlined in the kernel): "
                      f"{facts_in['hits']} hits, {facts_in['frames']} frames in the big library, "
                      f"{facts_in['inlined']} of them inlined frames (up to {facts_in['deepest']} at one pc); "
                      + ("every one has the name and file:line `addr2line -f -C -i` gives, in its order."
                         if not errs else "CHECK FAILED (below)."), ""]
        if "hot" in only:
            print("hot", flush=True)
            per_hit, errs = hot(lib, release_of(plain_lib), args.rounds, tmp)
            failures += errs
            debug, release = _median(per_hit.get("debug", [])), _median(per_hit.get("release", []))
            ratio = debug / release if debug and release else None
            lines += [f"Hot breakpoint `--break {HOT_FUNCTION}` (the loop's own time in the target, "
                      f"{HOT_N[1]} - {HOT_N[0]} hits): {_fmt(debug * 1e3 if debug else None, ' ms')} a hit on "
                      "the debug "
                      f"build, {_fmt(release * 1e3 if release else None, ' ms')} on its release build "
                      f"(`objcopy --strip-debug`): {_fmt(ratio, 'x')}, {verdict(ratio, 2.0)}.", ""]
    if failures:
        lines += ["Checks that FAILED:", *[f"- {f}" for f in failures], ""]
    body = "\n".join(lines)
    print("\n" + body)
    if not args.no_write:
        write_section(RESULTS, SECTION + (" (compressed sections)" if args.compressed else ""), body)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
