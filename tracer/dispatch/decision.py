"""The dispatcher's decision at a hop, from what the hop carried: each tensor argument's key set, the
thread's local included and excluded sets, the set the dispatcher computes from them, and the key it
dispatches on.

The formula is the one ``c10::impl::computeDispatchKeySet`` documents (DispatchKeyExtractor.h): the union
of the tensor arguments' key sets, plus the thread's included set, minus its excluded set; an operator's
entry (``at::_ops::X::call``) computes it, a ``redispatch`` or an adapter is handed it (its
``DispatchKeySet`` argument, already masked by the hop above). The key is the set's highest-priority key:
its highest functionality bit, with its highest backend bit for a per-backend functionality. The
operator's own mask of fallthrough keys (kept in its ``OperatorEntry``, not read) is not applied: a key
registered as a fallthrough (``ADInplaceOrView`` for most functional operators, ``BackendSelect`` for
most) is passed over by the dispatcher, and the next hop shows which key was handled.

Key sets are in the target torch's numbering (``storage.decode_keyset``'s table, ``dispatch_keys``);
torch stores the thread's sets XORed with its defaults (zeroed TLS means the defaults), which the table
gives as ``tls_defaults`` (measured in the target's torch, on a fresh thread).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_U64 = 0xFFFFFFFFFFFFFFFF
_ENTRY = re.compile(r"^at::_ops::\w+::call\(")


@dataclass
class Decision:
    tensors: list[tuple[str, int]] = field(default_factory=list)  # (argument, its key set) of each tensor
    included: int | None = None  # the thread's local included set (decoded from TLS)
    excluded: int | None = None
    computed: int | None = None  # what the dispatcher dispatches on at this hop
    how: str = ""  # "computed" at an operator's entry, "handed" the hop's key-set argument
    key: str | None = None  # the computed set's highest-priority key
    note: str | None = None  # why part of it is missing
    names: dict[int, tuple[str, ...]] = field(default_factory=dict)  # raw set -> its keys, where decoded

    def text(self, bits: int | None) -> str:
        """``CPU, AutogradCPU (0x1000010001)``, or the raw bits where the numbering is not known."""
        if bits is None:
            return "?"
        keys = self.names.get(bits)
        return f"{', '.join(keys) or '(empty)'} ({bits:#x})" if keys is not None else f"{bits:#x}"


def tensor_keysets(args) -> list[tuple[str, int]]:
    """(argument name or #i, raw key set) of every tensor an argument holds, in order."""
    out = []
    for i, arg in enumerate(args):
        label = arg.get("name") or f"#{i}"
        tensors = [arg["tensor"]] if isinstance(arg.get("tensor"), dict) else [
            t for t in arg.get("tensors") or [] if isinstance(t, dict)]
        for j, t in enumerate(tensors):
            ks = t.get("key_set")
            if isinstance(ks, int) and not t.get("undefined"):
                out.append((label if "tensor" in arg else f"{label}[{j}]", ks))
    return out


def decide(function: str | None, args, tls: tuple[int, int] | None, table: dict | None) -> Decision | None:
    """The decision at a hop with these arguments and TLS words; None where the hop is not one that
    dispatches (neither an operator's entry nor handed a key set)."""
    handed = next((a.get("keyset") for a in args if isinstance(a.get("keyset"), int)), None)
    entry = bool(function and _ENTRY.match(function))
    if handed is None and not entry:
        return None
    d = Decision(tensor_keysets(args))
    defaults = (table or {}).get("tls_defaults")
    if tls is not None and isinstance(defaults, list) and len(defaults) == 2:
        d.included, d.excluded = (tls[0] ^ defaults[0]) & _U64, (tls[1] ^ defaults[1]) & _U64
    elif tls is not None:
        d.note = "the target torch's default TLS sets are not in this session: the TLS words are shown as stored"
    if handed is not None:
        d.computed, d.how = handed, "handed"
    elif d.included is not None and d.excluded is not None:
        union = 0
        for _, ks in d.tensors:
            union |= ks
        d.computed, d.how = (union | d.included) & ~d.excluded & _U64, "computed"
        if not d.tensors:
            d.note = "no tensor argument's key set was read"
    if d.computed is not None and table:
        d.key = highest_key(d.computed, table)
    return d


def highest_key(bits: int, table: dict) -> str | None:
    """The highest-priority key of a raw set: its highest functionality bit (the table's runtime keys
    whose masks the set holds), then the highest backend bit among those."""
    best, best_rank = None, (-1, -1)
    for item in table.get("keys") or []:
        try:
            name, mask = str(item[0]), int(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        if not mask or bits & mask != mask:
            continue
        top = mask.bit_length() - 1
        rest = mask & ~(1 << top)
        rank = (top, rest.bit_length())
        if rank > best_rank:
            best, best_rank = name, rank
    return best
