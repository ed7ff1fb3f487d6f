"""The graph a TorchScript function's code runs (``CodeImpl::graph_``), read from the target's memory node by
node as ``graph->dump()`` would print it: each node's kind, output and input value names and source line,
its sub-blocks (a ``prim::If``'s branches, a ``prim::Loop``'s body) indented under it with their parameters
and returns. Not read: value types and node attributes (a ``prim::Constant``'s value), which ``dump()``
also prints. Offsets from the layout (interp_layout.py). Standard library only (runs inside the gdb agent).

Nodes of a block form a ring through ``next_in_graph[0]`` starting and ending at the block's return node
(``output_``), the parameter node (``input_``) among them; the block's parameters are that node's outputs,
its results the return's inputs.
"""
from __future__ import annotations

from tracer.scripted import interp_frames as IF
from tracer.values.memory import BadValue, Memory

MAX_NODES = 4000  # one graph; more is cut and said
MAX_DEPTH = 32
MAX_VALUES = 4096  # inputs or outputs of one node


class _Walk:
    def __init__(self, mem: Memory, layout) -> None:
        self.mem, self.layout, self.o = mem, layout, layout.offsets
        self.nodes: list[dict] = []
        self.truncated = False

    def value_names(self, vector: int) -> list[str]:
        begin, n = IF.read_vector(self.mem, vector, 8, MAX_VALUES)
        return [self.value_name(self.mem.pointer(begin + 8 * k, "a value")) for k in range(n)]

    def value_name(self, value: int) -> str:
        """``%name`` as ``Value::debugName`` gives it: its unique name, else its number."""
        name = IF.read_string(self.mem, value + self.o["value_name"])
        return "%" + (name or str(self.mem.u64(value + self.o["value_unique"])))

    def place(self, node: int) -> tuple[str | None, int | None]:
        o = self.o
        if not self.mem.u8(node + o["node_range"] + o["range_size"]):
            return None, None
        try:
            p = IF.read_place(self.mem, o, node + o["node_range"], None)
        except BadValue:
            return None, None
        return p.file, p.line

    def block(self, block: int, depth: int, header: str | None) -> None:
        o, mem = self.o, self.mem
        ret = mem.pointer(block + o["block_output"], "a block's return node")
        param = mem.pointer(block + o["block_input"], "a block's parameter node")
        node = mem.pointer(ret + o["node_next"], "a node")
        first = True
        while node != ret:
            if node == param:  # the ring holds the parameter node too: dump() prints it as the header
                node = mem.pointer(node + o["node_next"], "a node")
                continue
            if len(self.nodes) >= MAX_NODES:
                self.truncated = True
                return
            kind = mem.u32(node + o["node_kind"])
            row: dict = {"kind": self.layout.symbol(kind) or f"kind {kind}",
                         "outputs": self.value_names(node + o["node_outputs"]),
                         "inputs": self.value_names(node + o["node_inputs"])}
            file, line = self.place(node)
            for key, value in (("depth", depth), ("file", file), ("line", line), ("block", header if first else None)):
                if value:
                    row[key] = value
            self.nodes.append(row)
            first = False
            if depth < MAX_DEPTH:
                begin, n = IF.read_vector(mem, node + o["node_blocks"], 8, 64)
                for k in range(n):
                    sub = mem.pointer(begin + 8 * k, "a sub-block")
                    params = self.value_names(mem.pointer(sub + o["block_input"], "a block's parameter node")
                                              + o["node_outputs"])
                    self.block(sub, depth + 1, f"block{k}({', '.join(params)})")
            node = mem.pointer(node + o["node_next"], "a node")
        if depth:
            row = {"kind": "return", "outputs": [], "inputs": self.value_names(ret + o["node_inputs"]), "depth": depth}
            if first and header:
                row["block"] = header
            self.nodes.append(row)


def read_graph(mem: Memory, layout, code: int, graph_id: int, function: str | None) -> dict:
    """The graph record's body (``session.torchscript.TsGraph.to_dict``); what could not be read is in its
    ``why`` (the nodes read before are kept)."""
    o = layout.offsets
    out: dict = {"id": graph_id, "function": function, "inputs": [], "outputs": [], "nodes": []}
    walk = _Walk(mem, layout)
    try:
        graph = mem.pointer(code + o["code_graph"], "the code's graph")
        block = mem.pointer(graph + o["graph_block"], "the graph's block")
        out["inputs"] = walk.value_names(mem.pointer(block + o["block_input"], "the graph's parameter node")
                                         + o["node_outputs"])
        walk.block(block, 0, None)
        out["outputs"] = walk.value_names(mem.pointer(block + o["block_output"], "the graph's return node")
                                          + o["node_inputs"])
    except BadValue as exc:
        out["why"] = str(exc)
    out["nodes"] = walk.nodes
    if walk.truncated:
        out["truncated"] = True
    return out
