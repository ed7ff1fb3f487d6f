"""The library loads the target stops at: the rules gdb applies as each library loads (the agent's
libstops.py), worked out from the symbol policy and the names looked for in later libraries.

A stop per dynamic-linker event (``stop-on-solib-events``) cost hello-world.py's ``import torch`` 78 MI
stops and continues; with these rules gdb stops only at the loads pttrace must act on before the
library's code runs (bench/RESULTS.md, "Speed round 3"). Each rule mirrors a decision of
``LibraryPolicy.decide_new`` or ``LaterLibraries.breakpoints``; a library that no rule stops for is
decided at the next stop, as gdb's ``=library-loaded`` announced it.
"""
from __future__ import annotations

import json
import logging

from tracer.recorder import resolve
from tracer.recorder.agent_link import AgentLink
from tracer.recorder.later_libraries import LaterLibraries, scans_file
from tracer.recorder.libraries import READ_AT_ONCE, LibraryPolicy

log = logging.getLogger("pttrace.recorder")


def rules(policy: LibraryPolicy, later: LaterLibraries) -> dict | None:
    """The agent's ``Rules`` as JSON; None when no load needs pttrace (gdb then never stops at one)."""
    searching = later.active
    if not policy.deferring and not searching:
        return None
    out: dict = {}
    specs: list[str] = []
    if policy.deferring:
        if not policy.lazy or policy.needed is None:
            return {"always": True}  # every library's symbols as it loads (wants_symbols)
        out["paths"] = sorted(policy.break_libraries())  # their key sets' DWARF, read at once (_read_now)
        out["bases"] = sorted(policy.needed | set(policy.settings.cfi_libs))
        out["prefixes"] = list(READ_AT_ONCE)
        out["big"] = resolve.HEAVY_SYMBOL_TABLE  # may be heavy: an unwind-table copy (is_heavy)
        specs += policy.gdb_specs  # a small library that may define one gets its symbols (may_define)
    if searching:
        specs += later.specs
        if later.library_ops or (later.compiled is not None and later.compiled.ops):
            out["any_name"] = True  # registrations and generated kernels: only pttrace can tell
    names = []
    for spec in specs:
        needles = resolve.name_needles(spec)
        if needles is None:
            out["any_name"] = True
        elif needles not in names:
            names.append(needles)
    out["names"] = names
    out["debug_dirs"] = list(policy.settings.debug_dirs)
    out["scans"] = scans_file()
    return out


class LibraryStops:
    """Keeps the agent's rules in step with the policy (``sync`` after anything that may change them)."""

    def __init__(self, agent: AgentLink, policy: LibraryPolicy, later: LaterLibraries):
        self.agent = agent
        self.policy = policy
        self.later = later
        self._sent: str | None = None

    def sync(self) -> None:
        current = rules(self.policy, self.later)
        if current is None and self._sent is None:
            return
        text = json.dumps(current if current is not None else {"always": False, "names": []}, sort_keys=True)
        if text != self._sent:
            log.debug("library loads stopped at: %s", text)
            self.agent.library_stops(text)
            self._sent = text
