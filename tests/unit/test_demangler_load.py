"""cxxfilt is loaded without ``ldconfig``: its import picks libc and libstdc++ through
``ctypes.util.find_library``, which spawns ``/sbin/ldconfig -p`` per name (0.06-0.15 s at the end of a first
hit); ``tracer.symbols.demangle.load_cxxfilt`` names the sonames instead. Each case runs in a fresh
interpreter, since cxxfilt picks its libraries once, at its first import."""
from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import ctypes.util, json, sys
spawned = []
sys.addaudithook(lambda event, args: spawned.append(list(map(str, args[1]))) if event == "subprocess.Popen" else None)
real = ctypes.util.find_library
from tracer.symbols import demangle as d
if sys.argv[1] == "unknown-soname":
    d._SONAMES = {"c": "libno-such-c.so.99", "stdc++": "libno-such-stdc++.so.99"}
out = d.demangle("_ZN5torch3cpu10initModuleEP7_object")
cxxfilt = d.load_cxxfilt()
print(json.dumps({"out": out, "spawned": spawned, "restored": ctypes.util.find_library is real,
                  "demangler": repr(cxxfilt.default_demangler), "bad": d.demangle("_Znotmangled")}))
"""


def probe(case: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, case], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cxxfilt_loads_without_running_ldconfig():
    got = probe("sonames")
    assert got["out"] == "torch::cpu::initModule(_object*)"
    assert got["spawned"] == []
    assert "libstdc++.so.6" in got["demangler"] and "libc.so.6" in got["demangler"]
    assert got["restored"], "ctypes.util.find_library is left patched after cxxfilt's import"
    assert got["bad"] == "_Znotmangled"  # an invalid name is returned as it is


def test_a_library_dlopen_cannot_find_goes_to_find_library():
    got = probe("unknown-soname")
    assert got["out"] == "torch::cpu::initModule(_object*)"
    assert any("ldconfig" in " ".join(cmd) for cmd in got["spawned"]), got["spawned"]
    assert got["restored"]


RACE = r"""
import json, threading, time
from tracer.symbols import demangle as d
real = d._loadable
def slow(name):  # cxxfilt's import, in sys.modules already, is held inside its find_library calls
    time.sleep(0.3)
    return real(name)
d._loadable = slow
out, errors = [], []
def name():
    try:
        out.append(d.demangle("_ZN5torch3cpu10initModuleEP7_object"))
    except Exception as exc:
        errors.append(repr(exc))
first = threading.Thread(target=name)
first.start()
time.sleep(0.1)  # the first thread's import has begun
d.demangle.cache_clear()
name()
first.join()
print(json.dumps({"out": out, "errors": errors}))
"""


def test_a_second_thread_waits_for_the_import_another_began():
    """Two threads demangling at once (the TUI's workers): the second gets cxxfilt once its import has run,
    not the half-imported module the first left in sys.modules (an AttributeError on its demangle)."""
    proc = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["errors"] == [] and got["out"] == ["torch::cpu::initModule(_object*)"] * 2, got
