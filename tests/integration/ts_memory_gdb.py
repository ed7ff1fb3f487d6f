"""Run inside ``gdb -nx`` by test_torchscript_memory.py: at each hit on one of $PTT_BREAK's functions (JSON:
name to offset in libtorch_cpu.so), read the TorchScript interpreter's frames with
tracer.scripted.interp_frames (memory only) and print one JSON line that names the breakpoint."""
import json
import os
import sys

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.environ["PTT_ROOT"])
from tracer.scripted.interp_frames import frames_offset, read_levels, tls_state  # noqa: E402
from tracer.scripted.interp_layout import InterpreterLayout  # noqa: E402
from tracer.values.memory import BadValue, Memory  # noqa: E402

LAYOUT = InterpreterLayout(**json.loads(open(os.environ["PTT_LAYOUT"]).read()))
MEM = Memory(lambda a, n: gdb.selected_inferior().read_memory(a, n))


def load_base() -> int:
    for line in open(f"/proc/{gdb.selected_inferior().pid}/maps"):
        if line.rstrip().endswith("/libtorch_cpu.so"):
            return int(line.split("-")[0], 16)
    raise RuntimeError("libtorch_cpu.so is not mapped")


class Hit(gdb.Breakpoint):
    def __init__(self, name: str, address: int):
        super().__init__(f"*{address:#x}")
        self.name = name

    def stop(self):
        out: dict = {"break": self.name}
        try:
            fs = int(gdb.parse_and_eval("$fs_base")) & (2**64 - 1)
            state = tls_state(MEM, LAYOUT, load_base(), fs)
            out["state"] = bool(state)
            if state:
                levels = read_levels(MEM, LAYOUT, state, frames_offset(MEM, LAYOUT, state))
                out["levels"] = [{"function": lv.function, "node": lv.node, "why": lv.why,
                                  "places": [[p.function, p.file, p.line] for p in lv.places]} for lv in levels]
        except BadValue as exc:
            out["error"] = str(exc)
        print("PTT-HIT " + json.dumps(out), flush=True)
        return False


# $PTT_BREAK: {function: offset in libtorch_cpu.so}. No library's symbols are read (address breakpoints need
# none): the library's load base once it is mapped, then its breakpoints.
gdb.execute("set auto-solib-add off")
gdb.execute("catch load libtorch_cpu")
gdb.execute("run")
for name, offset in json.loads(os.environ["PTT_BREAK"]).items():
    Hit(name, load_base() + offset)
gdb.execute("delete 1")  # the catchpoint: its one stop is done
gdb.execute("continue")
