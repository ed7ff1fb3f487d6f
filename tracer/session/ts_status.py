"""What a session says of TorchScript as it is read: its graphs, and a warning for every reason some hit
through the interpreter has no scripted function, line and graph node (never silent)."""
from __future__ import annotations

from typing import Any

from tracer.session.torchscript import GRAPH, STATUS, TsGraph, TsRecordError, is_interpreter_loop

OLD_SESSION = ("hits passed through TorchScript's interpreter: this session's pttrace did not read which scripted "
               "function, source line and graph node it was running; record again with this pttrace to read them")


class TsGathered:
    def __init__(self) -> None:
        self.graphs: dict[int, TsGraph] = {}
        self.not_ready: str | None = None  # why the agent started without the interpreter's layout
        self.ready_at: int | None = None  # the first hit it had it for, when it came later

    def take(self, kind: str, rec: Any) -> str | None:
        """One ``torchscript`` or ``graph`` record; why it is not one, if it is not."""
        try:
            if type(rec) is not dict:
                raise TsRecordError("not an object")
            if kind == GRAPH:
                graph = TsGraph.from_dict(rec.get("graph"))
                self.graphs.setdefault(graph.id, graph)
            elif rec.get("ready") is True:
                seq = rec.get("seq")
                self.ready_at = seq if type(seq) is int else self.ready_at
            else:
                why = rec.get("why")
                self.not_ready = why if type(why) is str else "no layout was given"
        except TsRecordError as exc:
            return f"malformed {kind} record ({exc})"
        return None

    def warnings(self, table) -> list[str]:
        """Why some hits through the interpreter have no TorchScript levels, or levels that say why not."""
        unread = 0
        whys: dict[str, int] = {}
        for frames in table.frame_lists():
            loops = [f for f in frames if f.kind == "native" and is_interpreter_loop(f.function)]
            if not loops:
                continue
            marked = [f for f in loops if f.torchscript is not None]
            if not marked:
                unread += 1
            for f in marked:
                for level in f.torchscript or ():
                    if level.why:
                        whys[level.why] = whys.get(level.why, 0) + 1
        out = []
        if unread:
            if self.not_ready is None:
                out.append(OLD_SESSION)
            else:
                since = f" (it was ready from hit {self.ready_at} on)" if self.ready_at is not None else ""
                out.append(f"some hits passed through TorchScript's interpreter before pttrace could read it: "
                           f"{self.not_ready}{since}; their interpreter frames show no scripted function, line or "
                           "graph node: record again once it is cached")
        for why in whys:
            out.append(f"TorchScript's interpreter was not read whole at some hits: {why}")
        return out
