"""``--op NAME --follow-ops``, pttrace's side: the operators the agent met inside a followed operator
(``need_ops``), resolved to their functions as ``--op`` resolves an operator, as breakpoints that record
only inside a followed operator (the agent's side: tracer/gdb/agent/follow.py)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # imported when an operator is first followed (dispatch/ops.py is big)
    from tracer.dispatch.ops import TorchFacts


class Follower:
    def __init__(self, spec: dict, already: list[dict], warn: Callable[[str], None]):
        self.python = spec["python"]
        self.libraries = list(spec["libraries"])
        self.pythonpath = spec.get("pythonpath")
        self.warn = warn
        self._facts: TorchFacts | None = None
        self.seen = {(b["library"], int(b["offset"])) for b in already}  # broken on already: once is enough
        self.followed: list[str] = []  # "ROOT>op", in the order they were met
        self.seconds = 0.0  # spent resolving
        labels = dict(spec.get("roots") or {}).values()
        roots = ", ".join(dict.fromkeys(str(r).removeprefix("op:") for r in labels)) or "the operator"
        # What the follow cannot see is said in the session, not only in the README.
        warn(f"--follow-ops {roots}: operators entered only through a boxed call (TorchScript, torch.ops by "
             "handle) or only through redispatch are not seen as children; to record one of them, add "
             "--op NAME for it")

    def items(self, requests: tuple[dict, ...]) -> list[dict]:
        """Address breakpoints (flagged ``follow``) for each {root: "op:conv2d", op: at::_ops struct}."""
        from tracer.dispatch import op_follow, ops

        t0 = time.perf_counter()
        if self._facts is None:
            self._facts = ops.torch_facts(self.python, self.libraries, pythonpath=self.pythonpath)
        out: list[dict] = []
        for req in requests:
            root, struct = str(req.get("root") or ""), str(req.get("op") or "")
            spec = f"{root.removeprefix(ops.LABEL_PREFIX)}>{struct}"
            ref = op_follow.ref_of_struct(struct, self._facts)
            if ref is None:
                self.warn(f"--follow-ops: at::_ops::{struct} (called inside {root.removeprefix(ops.LABEL_PREFIX)}) "
                          "is no operator this torch lists; only its entry is recorded")
                continue
            res = ops.resolve_op(spec, self.libraries, self._facts, backward=False, refs=[ref])
            for f, item in zip(res.functions, res.address_breakpoints()):
                key = (f.library, f.address)
                if key in self.seen:
                    continue
                self.seen.add(key)
                out.append(dict(item, follow=True))
            self.followed.append(spec)
        self.seconds += time.perf_counter() - t0
        return out
