"""Sourced into gdb by bench/bench_values.py: one address breakpoint whose stop() does what
$VALUES_MODE says, then lets the target go on. ``floor``: nothing; ``values``: read the hit's three
arguments (self, other, alpha) with tracer.values; ``walk``: name every native frame, as a recorder's
stack walk does; ``walk+values``: both. The time spent reading values is summed into $VALUES_OUT."""
import json
import os
import sys
import time

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.environ["VALUES_REPO"])
from tracer.values import TorchLayout, describe  # noqa: E402

LAYOUT = TorchLayout.from_json(open(os.environ["VALUES_LAYOUT"]).read())
MODE = os.environ["VALUES_MODE"]
PARAMS = (("at::Tensor const&", "rsi"), ("at::Tensor const&", "rdx"), ("c10::Scalar const&", "rcx"))
STATS = {"hits": 0, "values_seconds": 0.0, "bad": 0}
INFERIOR = gdb.selected_inferior()


def read_memory(address, length):
    return INFERIOR.read_memory(address, length).tobytes()


class Hot(gdb.Breakpoint):
    def stop(self):
        STATS["hits"] += 1
        if "walk" in MODE:
            frame = gdb.newest_frame()
            while frame is not None:
                frame.name()
                frame = frame.older()
        if "values" in MODE:
            t0 = time.perf_counter()
            frame = gdb.selected_frame()
            for cpp, reg in PARAMS:
                value = describe(read_memory, LAYOUT, cpp, int(frame.read_register(reg)) & 0xFFFFFFFFFFFFFFFF)
                if value.kind == "unreadable":
                    STATS["bad"] += 1
                    STATS.setdefault("why", value.why)
            STATS["values_seconds"] += time.perf_counter() - t0
        return False


def save(_event):
    with open(os.environ["VALUES_OUT"], "w") as fh:
        json.dump(STATS, fh)


Hot(f"*{int(os.environ['VALUES_ADDRESS']):#x}", internal=True)
gdb.events.exited.connect(save)
