"""Where a hot breakpoint's time goes, and what candidate agent changes would save (bench/profile_hit.py
does the work inside gdb; this script runs it, alternating, and makes the tables).

    .venv/bin/python bench/profile_patches.py [-n 5] [--write]

Runs 2,000 hits of ``at::_ops::add_Tensor::call`` (bench/hot_add.py) under gdb for each of:
  floors   the agent's stop() replaced by one that records nothing: returns False at once / after
           gdb.newest_frame() / after unwinding the whole stack with older()
  agent    the real agent (tracer/gdb/agent.py), as it is and with candidate changes applied from
           outside (PROFILE_PATCH: unwinders, json, suffix; see bench/profile_hit.py)
and one ``sections`` run that splits a hit into unwinding / the agent's own work / JSON / write.
Per-hit cost is the loop's wall time measured inside the target divided by the hits (it includes
gdb's stop and resume); ``stop()`` CPU is the CPU time of the breakpoint's stop() alone (steadier on
a shared machine). Every agent variant must record exactly the same hits as the agent as it is.
With --write the tables go to bench/RESULTS.md, section "Hot breakpoint: where a hit's time goes".
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "Hot breakpoint: where a hit's time goes"
N = 2000

RUNS = [
    ("floor-bare", "floor-bare", "", "gdb stops, calls a Python stop() that returns False"),
    ("floor-newest", "floor-newest", "", "... that also asks for gdb.newest_frame()"),
    ("floor-walk", "floor-walk", "", "... that also unwinds the whole stack with older() (23 frames)"),
    ("agent", "plain", "", "the agent as it is: full call path recorded"),
    ("unwinders", "plain", "unwinders", "agent + skip gdb's per-frame search for Python unwinders"),
    ("json", "plain", "json", "agent + encode each cached native frame's JSON once"),
    ("suffix", "plain", "suffix", "agent + reuse the frames below the outermost PyEval_EvalCode"),
    ("all three", "plain", "unwinders,json,suffix", "agent + the three changes above"),
]


def _hits(path: Path) -> list:
    out = []
    with open(path) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("type") == "hit":
                rec.pop("time", None)
                if isinstance(rec.get("thread"), dict):
                    rec["thread"].pop("lwp", None)  # the target's thread id changes from run to run
                out.append(rec)
    return out


def _run(mode: str, patch: str, tmp: Path, keep: Path | None) -> tuple[float, float, str]:
    env = dict(os.environ, PROFILE_MODE=mode, PROFILE_PATCH=patch, PROFILE_OUT=str(tmp / "report.txt"))
    if keep is not None:
        env["PROFILE_KEEP"] = str(keep)
    env.pop("DEBUGINFOD_URLS", None)
    out = tmp / "hot.json"
    if out.exists():
        out.unlink()
    subprocess.run(["gdb", "-nx", "-batch", "-x", str(ROOT / "bench" / "profile_hit.py"), "--args",
                    str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "bench" / "hot_add.py"), str(N),
                    "--out", str(out)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    data = json.loads(out.read_text())
    report = (tmp / "report.txt").read_text()
    m = re.search(r"CPU mean ([\d.]+) ms", report)
    return data["seconds"] / data["n"] * 1000, float(m.group(1)) if m else float("nan"), report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write the tables to bench/RESULTS.md")
    args = ap.parse_args()
    per_hit: dict = {key: [] for key, *_ in RUNS}
    stop_cpu: dict = {key: [] for key, *_ in RUNS}
    tmp = Path(tempfile.mkdtemp(prefix="pttrace-patches-"))
    load0 = os.getloadavg()[0]
    try:
        for rnd in range(args.rounds):
            for key, mode, patch, _ in RUNS:
                keep = tmp / f"{key}-{rnd}" if mode == "plain" else None
                ms, cpu, _ = _run(mode, patch, tmp, keep)
                per_hit[key].append(ms)
                stop_cpu[key].append(cpu)
                print(f"round {rnd + 1} {key:14s} per hit {ms:.3f} ms, stop() CPU {cpu:.3f} ms", flush=True)
        _, _, sections = _run("sections", "", tmp, None)
        ref = _hits(next((tmp / "agent-0").glob("*.jsonl")))
        lines = []
        lines.append(f"Measured by `bench/profile_patches.py` ({args.rounds} rounds, alternating; medians), "
                     f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, load average {load0:.1f} at the "
                     f"start and {os.getloadavg()[0]:.1f} at the end. {N:,} hits of `at::_ops::add_Tensor::call` "
                     "(bench/hot_add.py), libraries' symbols as plain gdb reads them. Per hit: the loop's wall time "
                     "inside the target / hits (gdb's stop and resume included); stop() CPU: the CPU time of the "
                     "breakpoint's `stop()` alone. The candidate changes are applied from outside the agent by "
                     "bench/profile_hit.py; each must record the same 2,000 hits as the agent as it is.")
        lines.append("")
        lines.append("| what the breakpoint does | per hit | stop() CPU | same hits as the agent |")
        lines.append("|---|---|---|---|")
        bad = 0
        for key, mode, _, label in RUNS:
            same = "-"
            if mode == "plain":
                ok = all(_hits(next((tmp / f"{key}-{r}").glob("*.jsonl"))) == ref for r in range(args.rounds))
                bad += not ok
                same = "yes" if ok else "**NO**"
            lines.append(f"| {label} | {statistics.median(per_hit[key]):.3f} ms | "
                         f"{statistics.median(stop_cpu[key]):.3f} ms | {same} |")
        lines.append("")
        lines.append("One hit of the agent as it is, split (`PROFILE_MODE=sections`; the split walks the stack twice, "
                     "so its parts add up to more than a plain hit):")
        lines.append("")
        lines.append("```")
        lines += [ln for ln in sections.strip().splitlines()]
        lines.append("```")
        text = "\n".join(lines) + "\n"
        print()
        print(text)
        if args.write:
            sys.path.insert(0, str(ROOT / "bench"))
            from bench_run import RESULTS, write_section

            old = RESULTS.read_text() if RESULTS.exists() else ""
            m = re.search(r"^## " + re.escape(SECTION) + r"\n(.*?)(?=^## |\Z)", old, re.S | re.M)
            notes = ""
            if m and "\n#### " in m.group(1):
                notes = m.group(1)[m.group(1).index("\n#### "):]  # hand-written conclusions are kept
            write_section(RESULTS, SECTION, text + notes)
            print(f"written to {RESULTS} (section \"{SECTION}\")")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
