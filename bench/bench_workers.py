"""A DataLoader with two worker processes, pttrace vs plain gdb following forks, side by side.

    .venv/bin/python bench/bench_workers.py            # 3 rounds, 200 items
    .venv/bin/python bench/bench_workers.py -n 1 --items 50

bench/workers_target.py loads N items through ``DataLoader(num_workers=2)``; each ``__getitem__`` runs
``torch.tensor`` in a worker process. Every variant breaks on ``THPVariable_tensor`` and must record
all N hits with their call path:

  python    the target alone (no debugger): the floor
  pttrace   ``pttrace run --batch --break THPVariable_tensor`` (follows the workers by default)
  gdb       plain gdb following forks: ``set detach-on-fork off``, ``follow-fork-mode parent``,
            ``schedule-multiple on``, ``break THPVariable_tensor`` with ``commands; silent; bt; continue``,
            and a few lines of gdb Python that continue the other processes when one exits (gdb's batch
            mode ends at the first exit otherwise)

Wall time and peak memory (pttrace + its gdb, or the gdb; the traced processes apart) are medians over
the rounds; ratios are pttrace / gdb. A variant that records fewer than N hits is a failure (exit 1).
Nothing is written to RESULTS.md: the output is the report.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run import PTTRACE, ROOT, VENV_PY, RunResult, run_measured  # noqa: E402

TARGET = "bench/workers_target.py"
BREAK = "THPVariable_tensor"

GDB_SCRIPT = """\
set pagination off
set confirm off
set breakpoint pending on
set print thread-events off
set detach-on-fork off
set follow-fork-mode parent
set schedule-multiple on
break {bp}
commands
silent
bt
continue
end
run
python
import gdb
errors = 0
while errors < 20:
    live = [i for i in gdb.inferiors() if i.pid]
    if not live:
        break
    try:
        if not gdb.selected_inferior().pid:
            gdb.execute(f"inferior {{live[0].num}}", to_string=True)
        gdb.execute("continue")
    except gdb.error:  # a process that exited meanwhile: look again at those left
        errors += 1
end
"""


def check_pttrace(session_dir: Path, n: int) -> list[str]:
    files = sorted(session_dir.glob("*.jsonl"))
    if len(files) != 1:
        return [f"{len(files)} session files"]
    sys.path.insert(0, str(ROOT))
    from tracer.session import storage

    s = storage.load(files[0])
    workers = {p.pid for p in s.processes if (p.role or "").startswith("DataLoader worker")}
    in_workers = [h for h in s.hits if h.thread.pid in workers]
    errors = []
    if len(in_workers) != n:
        errors.append(f"{len(in_workers)} hits in workers, want {n}")
    if len(workers) != 2:
        errors.append(f"{len(workers)} workers named")
    if in_workers and not any(f.function == "Items.__getitem__" for f in in_workers[0].frames):
        errors.append("no Items.__getitem__ frame in the call path")
    return errors


def check_gdb(out: Path, n: int) -> list[str]:
    text = out.read_text(errors="replace")
    hits = sum(1 for line in text.splitlines() if line.startswith("#0") and BREAK in line)
    errors = [] if hits == n else [f"{hits} backtraces, want {n}"]
    if f"BATCHES {n}" not in text:
        errors.append("the target did not finish")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=3)
    ap.add_argument("--items", type=int, default=200)
    args = ap.parse_args()
    n = args.items
    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    script = tmp / "workers.gdb"
    script.write_text(GDB_SCRIPT.format(bp=BREAK))
    py = str(VENV_PY)
    results: dict[str, list[RunResult]] = {"python": [], "pttrace": [], "gdb": []}
    failed = False
    for rnd in range(args.rounds):
        for key in results:
            rundir = tmp / f"{key}-{rnd}"
            rundir.mkdir()
            if key == "python":
                argv = [py, TARGET, str(n)]
            elif key == "pttrace":
                argv = [str(PTTRACE), "run", "--batch", "--quiet", "--session-dir", str(rundir / "s"),
                        "--break", BREAK, TARGET, str(n)]
            else:
                argv = ["gdb", "-nx", "-batch", "-x", str(script), "--args", py, TARGET, str(n)]
            res = run_measured(argv, rundir / "out.txt")
            if key == "pttrace":
                res.errors = check_pttrace(rundir / "s", n)
            elif key == "gdb":
                res.errors = check_gdb(rundir / "out.txt", n)
            if res.rc != 0:
                res.errors.append(f"exit code {res.rc}")
            if res.errors:
                failed = True
                print(f"FAILED {key} round {rnd + 1}: {'; '.join(res.errors)} ({rundir})", file=sys.stderr)
            results[key].append(res)
            print(f"round {rnd + 1} {key:8} {res.wall:6.2f} s  tool {res.tool_kb / 1024:6.0f} MB", flush=True)
    med = {k: (statistics.median(r.wall for r in v), statistics.median(r.tool_kb for r in v),
               statistics.median(r.target_kb for r in v)) for k, v in results.items()}
    print()
    print(f"DataLoader, 2 workers, {n} items, --break {BREAK}: medians of {args.rounds} round(s)")
    print(f"{'variant':10} {'wall s':>8} {'debugger MB':>12} {'target MB':>10}")
    for key, (wall, tool, target) in med.items():
        if key == "python":  # no debugger: the process measured is the target itself
            tool, target = 0, tool
        print(f"{key:10} {wall:8.2f} {tool / 1024 if tool else float('nan'):12.0f} {target / 1024:10.0f}")
    wall_ratio = med["pttrace"][0] / med["gdb"][0]
    mem_ratio = med["pttrace"][1] / med["gdb"][1] if med["gdb"][1] else float("nan")
    over = (med["pttrace"][0] - med["python"][0]) / max(med["gdb"][0] - med["python"][0], 1e-9)
    print(f"pttrace / gdb: wall {wall_ratio:.2f}x, memory {mem_ratio:.2f}x, time over the bare run {over:.2f}x")
    print(json.dumps({"items": n, "rounds": args.rounds, "wall_ratio": round(wall_ratio, 3),
                      "memory_ratio": round(mem_ratio, 3), "overhead_ratio": round(over, 3)}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
