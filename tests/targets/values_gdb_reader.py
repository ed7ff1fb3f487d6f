"""Sourced into gdb (``-x``) by tests/integration/test_values_gdb.py: at each address breakpoint, read the
function's arguments with tracer.values from the registers the x86-64 ABI puts them in, and append
one JSON line per hit to $VALUES_OUT. $VALUES_BREAKS is JSON: [[address, name, [[type, where], ...]], ...]
where ``where`` is a register name, ``"stack+N"`` (the address rsp+N), ``"slot+N"`` (the 8 bytes there)
or a list of two registers."""
import json
import os
import sys

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.environ["VALUES_REPO"])
from tracer.values import TorchLayout, describe  # noqa: E402

LAYOUT = TorchLayout.from_json(open(os.environ["VALUES_LAYOUT"]).read())
OUT = open(os.environ["VALUES_OUT"], "a")


def read_memory(address, length):
    return bytes(gdb.selected_inferior().read_memory(address, length))


def register(name):
    return int(gdb.selected_frame().read_register(name)) & 0xFFFFFFFFFFFFFFFF


class At(gdb.Breakpoint):
    def __init__(self, address, name, params):
        super().__init__(f"*{address:#x}", internal=True)
        self.name, self.params = name, params

    def stop(self):
        args = []
        for cpp, where in self.params:
            if isinstance(where, list):
                value = tuple(register(r) for r in where)
            elif where.startswith("stack+"):  # an object passed in memory: its address
                value = register("rsp") + int(where[6:])
            elif where.startswith("slot+"):  # a small value that found no register left: the slot's bytes
                value = read_memory(register("rsp") + int(where[5:]), 8)
            else:
                value = register(where)
            args.append(describe(read_memory, LAYOUT, cpp, value).to_dict())
        OUT.write(json.dumps({"function": self.name, "args": args}) + "\n")
        OUT.flush()
        return False


for address, name, params in json.loads(os.environ["VALUES_BREAKS"]):
    At(address, name, params)
