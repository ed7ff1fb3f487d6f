"""The dispatch table of an operator, as the target's torch reports it (``torch._C._dispatch_dump_table``,
run in the target's interpreter), and which of the functions ``--op`` resolved implement each entry."""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Sequence

from tracer import probes
from tracer.dispatch.classify import short_name, target_of
from tracer.dispatch.ops import OpFunction, child_env

_TABLE_SCRIPT = r"""
import json, sys
import torch
out = {}
for name in sys.argv[1:]:
    if name.startswith("--load="):  # a library of one's own (TORCH_LIBRARY): loaded first
        torch.ops.load_library(name[len("--load="):])
        continue
    try:
        out[name] = {"table": torch._C._dispatch_dump_table(name if "::" in name else "aten::" + name)}
    except Exception as exc:
        out[name] = {"error": str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__}
sys.stdout.write("\n" + json.dumps(out) + "\n")
"""
_TABLE_LINE = re.compile(r"^(\w+): (fallthrough )?registered at (.+?)(?: \[([^\]]+)\])?$")


def start_dispatch_tables(python: str, ops: list[str], load: Sequence[str] = (),
                          pythonpath: str | None = None) -> subprocess.Popen:
    """Start ``torch._C._dispatch_dump_table`` for each op in the target interpreter (in the background),
    after loading the operator libraries ``load``."""
    return probes.popen([python, "-c", _TABLE_SCRIPT, *(f"--load={x}" for x in load), *ops],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(pythonpath))


def finish_dispatch_tables(proc: subprocess.Popen, timeout: float = 120) -> dict[str, dict]:
    """{op: {"rows": [{key, kind, registered_at, fallthrough}]} or {"error": text}}."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"*": {"error": f"the interpreter did not answer within {timeout:.0f} s"}}
    finally:
        probes.done(proc)
    try:
        data = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (err or "").strip().splitlines()
        return {"*": {"error": last[-1] if last else f"the interpreter exited with {proc.returncode}"}}
    result = {}
    for op, item in data.items():
        if "table" in item:
            result[op] = {"rows": parse_dispatch_table(item["table"])}
        else:
            result[op] = {"error": item.get("error")}
    return result


def parse_dispatch_table(text: str) -> list[dict]:
    rows = []
    for line in text.splitlines():
        m = _TABLE_LINE.match(line.strip())
        if not m:
            continue
        rows.append({"key": m.group(1), "fallthrough": bool(m.group(2)), "registered_at": m.group(3),
                     "kind": m.group(4) or ""})
    return rows


# Roles of the function a table entry registers, and of what that function goes on to call.
_REGISTERED_ROLES = ("autograd", "ADInplaceOrView", "functionalization", "tracer", "kernel wrapper", "adapter")
_CALLED_ROLES = ("structured kernel", "native function")
# The generated file that registers each kind of kernel, when it is not Register<Key>_N.cpp.
_REGISTERING_FILES = {"Autograd": "VariableType", "Tracer": "TraceType", "ADInplaceOrView": "ADInplaceOrViewType",
                      "Functionalize": "RegisterFunctionalization"}


def generated_registration(registered_at: str) -> bool:
    """Whether a table entry was registered by torchgen's generated code (whose functions --op finds)."""
    return os.path.basename(registered_at.split(":")[0]).startswith(
        ("Register", "VariableType", "TraceType", "ADInplaceOrViewType"))


def hand_registered(rows: list[dict]) -> list[dict]:
    """The entries whose kernel a C++ file registered by hand (functorch's batch rules, the legacy batching
    rules, a backend's own kernels): no generated name says which function they run, so --op breaks on none
    of them. Fallbacks, fallthroughs and Python kernels are not such kernels."""
    return [r for r in rows if not r["fallthrough"] and "fallback" not in r["kind"]
            and not generated_registration(r["registered_at"]) and not r["registered_at"].split(":")[0].endswith(".py")]


def hand_registered_warning(tables: dict[str, dict]) -> str | None:
    """One sentence for the session: the --op operators' hand-registered kernels, which no hit can be in."""
    parts = []
    for item in tables.values():
        rows = hand_registered(item.get("rows") or [])
        if rows:
            where = ", ".join(f"{r['key']} ({os.path.basename(r['registered_at'])})" for r in rows)
            parts.append(f"{item.get('op')}: {where}")
    if not parts:
        return None
    return ("--op does not break on kernels registered by hand, so a call dispatched to one has no hit of its own "
            "(its frame shows in the stacks of the hits below it): " + "; ".join(parts) + ". `pttrace ops NAME` "
            "lists them; --break on the function to stop in one.")


def functions_for_key(key: str, registered_at: str, functions: list[OpFunction], op: str) -> list[OpFunction]:
    """The resolved functions that implement table entry ``key`` of ``op``: by the file that registered the
    entry when it is a generated one (an alias key's kernel registers for CPU too), else by key name."""
    out = []
    base = os.path.basename(registered_at.split(":")[0])
    generated = generated_registration(registered_at)
    for f in functions:
        if f.op != op or f.role not in _REGISTERED_ROLES + _CALLED_ROLES:
            continue
        keys = f.keys or ((f.dispatch_key,) if f.dispatch_key else ())
        if generated:
            if any(base.startswith((_REGISTERING_FILES.get(k, f"Register{k}") + "_",
                                    _REGISTERING_FILES.get(k, f"Register{k}") + ".")) for k in keys):
                out.append(f)
        elif key in keys or ("Autograd" in keys and key.startswith("Autograd")):
            out.append(f)
    return out


@dataclass
class TableEntry:
    """What one dispatch-table entry runs, in the libraries: the function registered for it (or the adapters
    it exists only inlined into), and the at::native functions that goes on to call."""

    registered: list[OpFunction]
    adapters: list[OpFunction]
    calls: list[OpFunction]

    @property
    def inlined(self) -> list[str]:
        """The registered kernels that have no function of their own (their body is in the adapters)."""
        names = []
        for f in self.adapters:
            target = target_of(f.function)
            shown = (short_name(target) if target else None) or f.short
            if shown not in names:
                names.append(shown)
        return names

    def to_dict(self) -> dict:
        return {"functions": [f.function for f in self.registered + self.adapters + self.calls],
                "registered": [f.function for f in self.registered], "adapters": [f.function for f in self.adapters],
                "inlined": self.inlined, "calls": [f.function for f in self.calls]}


def table_entry(keys: list[str], registered_at: str, functions: list[OpFunction], op: str) -> TableEntry:
    found: list[OpFunction] = []
    for k in keys:
        for f in functions_for_key(k, registered_at, functions, op):
            if f not in found:
                found.append(f)
    return TableEntry([f for f in found if f.role in _REGISTERED_ROLES and f.role != "adapter"],
                      [f for f in found if f.role == "adapter"], [f for f in found if f.role in _CALLED_ROLES])
