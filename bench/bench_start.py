"""pttrace's start-up: from `pttrace run` (its Popen) to the moment it sends gdb `-exec-run`, the part of a first hit
that is pttrace's own before the target starts (issue 29: aim <= 0.25 s), A/B against other checkouts.

    .venv/bin/python bench/bench_start.py -n 15                        # this checkout
    .venv/bin/python bench/bench_start.py -n 15 --base /tmp/base       # alternating with another checkout

Each run is `pttrace run --break wrapper_CPU_sigmoid --batch --max-hits 1 scripts/hello-world.py`, run by this
venv's interpreter from the checkout's directory (as bench_run.py's --base). A wrapper records the time at which
pttrace would send `-exec-run`, with pttrace's CPU and its gdb's CPU until then; it then kills gdb (no target is
ever started) and exits. Printed: medians [min-max] of the wall time, pttrace's CPU, gdb's CPU, and the load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_PY = ROOT / ".venv" / "bin" / "python"

# Run as `python -c WRAPPER ARGS...` from a checkout: its MiConnection's command() is wrapped once tracer.gdb.mi is
# imported (a meta-path hook: importing it here first would change what pttrace imports before gdb's start).
WRAPPER = r'''
import os, sys, time, resource, json, importlib.abc, importlib.machinery
T0, OUT = float(os.environ["BENCH_START_T0"]), os.environ["BENCH_START_OUT"]
sys.path.insert(0, os.getcwd())

def patch(mod):
    command = mod.MiConnection.command
    def wrapped(self, text, *args, **kwargs):
        if text.startswith("-exec-run"):
            wall = time.time() - T0
            ru = resource.getrusage(resource.RUSAGE_SELF)
            with open(f"/proc/{self.proc.pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            gdb = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
            with open(OUT, "w") as fh:
                json.dump({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "gdb_cpu": gdb,
                           "load": os.getloadavg()[0]}, fh)
            os.killpg(self.proc.pid, 9)
            os._exit(0)
        return command(self, text, *args, **kwargs)
    mod.MiConnection.command = wrapped

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "tracer.gdb.mi":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())
from tracer.cli import main
sys.argv = ["pttrace", *sys.argv[1:]]
sys.exit(main())
'''


def one_run(checkout: Path, workdir: Path) -> dict | None:
    out = workdir / "start.json"
    out.unlink(missing_ok=True)
    # TMPDIR: the agent's directory of each run is left behind by the wrapper's exit; it goes with ``workdir``.
    env = dict(os.environ, BENCH_START_OUT=str(out), TMPDIR=str(workdir))
    argv = [str(VENV_PY), "-c", WRAPPER, "run", "--break", "wrapper_CPU_sigmoid", "--batch", "-q", "--max-hits", "1",
            "--session-dir", str(workdir / "sessions"), "--", "scripts/hello-world.py"]
    env["BENCH_START_T0"] = repr(time.time())  # last, just before the Popen
    proc = subprocess.run(argv, cwd=checkout, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        print(f"  {checkout}: no -exec-run (exit {proc.returncode}): {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="rounds (default 10)")
    ap.add_argument("--base", type=Path, action="append", default=[], metavar="DIR",
                    help="another checkout to alternate with (repeat for more)")
    args = ap.parse_args()
    checkouts = [ROOT, *(b.resolve() for b in args.base)]
    results: dict[Path, list[dict]] = {c: [] for c in checkouts}
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        for c in checkouts:  # untimed: caches (gdb's version, the symbol index's answers, the layouts) and pages
            one_run(c, Path(tmp))
        for i in range(args.n):
            for c in checkouts:
                r = one_run(c, Path(tmp))
                if r is not None:
                    results[c].append(r)
                    print(f"  round {i + 1}/{args.n}  {c.name:12s}  -exec-run at {r['wall']:.3f} s  pttrace CPU "
                          f"{r['cpu']:.3f} s  gdb CPU {r['gdb_cpu']:.2f} s  load {r['load']:.1f}", flush=True)
    print("\n| checkout | to -exec-run (wall) | pttrace's CPU | gdb's CPU | load |\n|---|---|---|---|---|")
    for c, rs in results.items():
        if not rs:
            continue
        cells = []
        for k, fmt in (("wall", ".3f"), ("cpu", ".3f"), ("gdb_cpu", ".2f"), ("load", ".1f")):
            v = [r[k] for r in rs]
            cells.append(f"{statistics.median(v):{fmt}} [{min(v):{fmt}}-{max(v):{fmt}}]")
        print(f"| {c.name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
