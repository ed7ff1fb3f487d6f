"""What a session holds of TorchScript: the levels an interpreter frame was running (``Frame.torchscript``,
read from the interpreter's memory by tracer/gdb/agent/torchscript.py) and each scripted function's graph
(a ``graph`` record, once per graph). Validated here, at the edge, like every record.

A level is one interpreter frame (a scripted function on the interpreter's stack): its function, the graph
node at its pc and the places that node came from, outermost first: the calls inlining replaced (each in
its caller) and the node's own line last.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GRAPH = "graph"  # record type
STATUS = "torchscript"  # record type: {ready, why?, seq?}: whether the agent had the interpreter's layout


class TsRecordError(ValueError):
    pass


def _str(what: str, value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise TsRecordError(f"{what} is not a string")
    return value


def _int(what: str, value: Any) -> int | None:
    if value is not None and (type(value) is not int or not 0 <= value < 1 << 63):
        raise TsRecordError(f"{what} is not a count")
    return value


def _list(what: str, value: Any) -> list:
    if value is None:
        return []
    if type(value) is not list:
        raise TsRecordError(f"{what} is not a list")
    return value


def _obj(what: str, value: Any) -> dict:
    if type(value) is not dict:
        raise TsRecordError(f"{what} is not an object")
    return value


@dataclass(frozen=True)
class TsPlace:
    """One source place of a TorchScript level: function, file and line."""

    function: str | None
    file: str | None
    line: int | None
    text: str | None = None  # the line as its file read when it was recorded

    @property
    def location(self) -> str:
        return f"{self.file or '?'}:{self.line if self.line is not None else '?'}"

    def to_dict(self) -> dict:
        d: dict = {"function": self.function, "file": self.file, "line": self.line}
        if self.text is not None:
            d["text"] = self.text
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "TsPlace":
        d = _obj("a TorchScript place", data)
        return cls(_str("its function", d.get("function")), _str("its file", d.get("file")),
                   _int("its line", d.get("line")), _str("its text", d.get("text")))


@dataclass(frozen=True)
class TsLevel:
    """One level of a TorchScript call path: the scripted function, its graph node and places."""

    function: str | None = None
    node: str | None = None  # "aten::relu"; None when its kind is not a builtin symbol (node_kind then)
    places: tuple[TsPlace, ...] = ()
    why: str | None = None  # what was not read, and why
    node_kind: int | None = None
    graph: int | None = None  # the id of its function's graph record

    def to_dict(self) -> dict:
        d: dict = {"function": self.function, "node": self.node, "places": [p.to_dict() for p in self.places]}
        for key in ("why", "node_kind", "graph"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "TsLevel":
        d = _obj("a TorchScript level", data)
        return cls(_str("its function", d.get("function")), _str("its node", d.get("node")),
                   tuple(TsPlace.from_dict(p) for p in _list("its places", d.get("places"))),
                   _str("its why", d.get("why")), _int("its node kind", d.get("node_kind")),
                   _int("its graph", d.get("graph")))

    def key(self) -> tuple:
        return (self.function, self.node, tuple((p.function, p.file, p.line) for p in self.places), self.why)


def levels_from(value: Any) -> tuple[TsLevel, ...]:
    return tuple(TsLevel.from_dict(v) for v in _list("a frame's torchscript", value))


@dataclass(frozen=True)
class TsNode:
    """One node of a graph as ``graph->dump()`` prints it, less what is not read (types, attributes)."""

    kind: str  # "aten::mul", or "kind N" when not a builtin symbol
    outputs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    depth: int = 0  # 0: the graph's block; 1: a block of a prim::If/prim::Loop node above it, ...
    line: int | None = None
    file: str | None = None
    block: str | None = None  # set on a block's first row: "block0(%i.1, %y.11)" opens before it

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind, "outputs": list(self.outputs)}
        for key in ("inputs", "depth", "line", "file", "block"):
            if getattr(self, key):
                d[key] = list(getattr(self, key)) if key == "inputs" else getattr(self, key)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "TsNode":
        d = _obj("a graph node", data)
        names = [_str("a value name", v) or "" for v in _list("its outputs", d.get("outputs"))]
        inputs = [_str("a value name", v) or "" for v in _list("its inputs", d.get("inputs"))]
        return cls(_str("its kind", d.get("kind")) or "?", tuple(names), tuple(inputs),
                   _int("its depth", d.get("depth")) or 0, _int("its line", d.get("line")),
                   _str("its file", d.get("file")), _str("its block", d.get("block")))


@dataclass
class TsGraph:
    """A scripted function's graph, once per graph (``id``: what levels name it by)."""

    id: int
    function: str | None
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    nodes: list[TsNode] = field(default_factory=list)
    why: str | None = None  # what was not read of it
    truncated: bool = False

    def to_dict(self) -> dict:
        d: dict = {"id": self.id, "function": self.function, "inputs": list(self.inputs),
                   "outputs": list(self.outputs), "nodes": [n.to_dict() for n in self.nodes]}
        if self.why:
            d["why"] = self.why
        if self.truncated:
            d["truncated"] = True
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "TsGraph":
        d = _obj("a graph", data)
        gid = _int("its id", d.get("id"))
        if gid is None:
            raise TsRecordError("a graph has no id")
        return cls(gid, _str("its function", d.get("function")),
                   tuple(_str("an input", v) or "" for v in _list("its inputs", d.get("inputs"))),
                   tuple(_str("an output", v) or "" for v in _list("its outputs", d.get("outputs"))),
                   [TsNode.from_dict(n) for n in _list("its nodes", d.get("nodes"))],
                   _str("its why", d.get("why")), bool(d.get("truncated")))

    def dump(self) -> list[str]:
        """The lines ``graph->dump()`` would print, without the types and attributes pttrace does not read."""
        lines = [f"graph({', '.join(self.inputs)}):"]
        for n in self.nodes:
            pad = "  " + "    " * n.depth
            if n.block:
                lines.append("    " * n.depth + n.block + ":")
            if n.kind == "return":
                lines.append(f"{pad}-> ({', '.join(n.inputs)})")
                continue
            lhs = ", ".join(n.outputs)
            where = f"  # {n.file.rsplit('/', 1)[-1]}:{n.line}" if n.line is not None and n.file else ""
            lines.append(f"{pad}{lhs + ' = ' if lhs else ''}{n.kind}({', '.join(n.inputs)}){where}")
        lines.append(f"  return ({', '.join(self.outputs)})")
        if self.truncated:
            lines.append("  … (more nodes not read)")
        return lines


def is_interpreter_loop(function: str | None) -> bool:
    """TorchScript's interpreter loop (``InterpreterStateImpl::runTemplate``/``runImpl``): the native frame
    the scripted levels are shown at."""
    return function is not None and "torch::jit::InterpreterStateImpl::run" in function
