"""The dispatcher's decision at a hop, from what the hop carried: each tensor argument's key set, the
thread's local included and excluded sets, the set the dispatcher computes from them, and the key it
dispatches on.

The formula is the one ``c10::impl::computeDispatchKeySet`` documents (DispatchKeyExtractor.h): the union
of the tensor arguments' key sets, plus the thread's included set, minus its excluded set; an operator's
entry (``at::_ops::X::call``) computes it, a ``redispatch`` or an adapter is handed it (its
``DispatchKeySet`` argument, already masked by the hop above). The key is the set's highest-priority key:
its highest functionality bit, with its highest backend bit for a per-backend functionality, passing over
the keys the operator's table registers as fallthroughs (``BackendSelect`` and ``ADInplaceOrView`` for
most operators). That table, and the kernel the key selects in it, are the ones the target's torch reports
(``torch._C._dispatch_dump_table``, read when the run ends: the session's ``dispatch_tables``), not read
from the process's ``OperatorEntry``; without it the key is the set's highest. The next hop shows which
key was handled.

Key sets are in the target torch's numbering (``storage.decode_keyset``'s table, ``dispatch_keys``);
torch stores the thread's sets XORed with its defaults (zeroed TLS means the defaults), which the table
gives as ``tls_defaults`` (measured in the target's torch, on a fresh thread).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_U64 = 0xFFFFFFFFFFFFFFFF
_ENTRY = re.compile(r"^at::_ops::\w+::call\(")
# The operator a hop belongs to, by the name generated code gives it: at::_ops::<struct>::call/redispatch,
# VariableType::<token>, and the kernel a boxing adapter wraps (…::(anonymous namespace)::<token>>).
_STRUCT = re.compile(r"^at::_ops::(\w+)::(?:call|redispatch)\(|"
                     r"^(?:torch::autograd::VariableType|torch::ADInplaceOrView|torch::TraceType)::"
                     r"(?:\(anonymous namespace\)::)?(\w+)\(|"
                     r"&(?:torch::autograd::VariableType|torch::ADInplaceOrView|torch::TraceType|at)::"
                     r"(?:\(anonymous namespace\)::)?(?:wrapper_[A-Za-z0-9]+_)?(\w+)>")


@dataclass
class Decision:
    tensors: list[tuple[str, int]] = field(default_factory=list)  # (argument, its key set) of each tensor
    included: int | None = None  # the thread's local included set (decoded from TLS)
    excluded: int | None = None
    computed: int | None = None  # what the dispatcher dispatches on at this hop
    how: str = ""  # "computed" at an operator's entry, "handed" the hop's key-set argument
    key: str | None = None  # the key it dispatches on: the set's highest key that does not fall through
    op: str | None = None  # the operator whose table was read (``aten::sigmoid``)
    kernel: str | None = None  # what that key selects in the table the target's torch reports
    passed_over: list[str] = field(default_factory=list)  # higher keys of the set that fall through
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


def decide(function: str | None, args, tls: tuple[int, int] | None, table: dict | None,
           op_tables: dict | None = None) -> Decision | None:
    """The decision at a hop with these arguments and TLS words; None where the hop is not one that
    dispatches (neither an operator's entry nor handed a key set). ``op_tables``: {struct: {op, rows}},
    the operators' dispatch tables as the target's torch reports them (which keys fall through)."""
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
        rows = _rows(function, op_tables or {}, d)
        d.key, d.passed_over = dispatched_key(d.computed, table, rows)
        if d.key is not None and rows is not None:
            row = rows.get(d.key)
            d.kernel = (f"{row['kind'] or 'kernel'} registered at {row['registered_at']}" if row else
                        "no kernel for this key in the table")
    return d


def _rows(function: str | None, op_tables: dict, d: Decision) -> dict[str, dict] | None:
    """The rows of the table of the operator ``function`` belongs to, by key; None if it is not known."""
    m = _STRUCT.search(function or "")
    if not m:
        return None
    token = next(g for g in m.groups() if g)
    for struct in (token, token.replace("_out", "", 1)):
        item = op_tables.get(struct)
        if item is not None:
            d.op = item["op"]
            return {r["key"]: r for r in item["rows"]}
    return None


def dispatched_key(bits: int, table: dict, rows: dict[str, dict] | None) -> tuple[str | None, list[str]]:
    """The key the dispatcher picks in a set: its highest key whose entry in the operator's table (``rows``)
    is not a fallthrough; without the table, the set's highest key. And the fallthrough keys above it."""
    passed = []
    for name in ranked_keys(bits, table):
        row = rows.get(name) if rows is not None else None
        if row is not None and row.get("fallthrough"):
            passed.append(name)
            continue
        return name, passed
    return None, passed


def key_masks(table: dict):
    """The (name, mask) items of a ``dispatch_keys`` table that read as such (a session is untrusted input)."""
    for item in table.get("keys") or []:
        try:
            name, mask = str(item[0]), int(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        yield name, mask


def ranked_keys(bits: int, table: dict) -> list[str]:
    """The runtime keys of a raw set, highest priority first (functionality bit, then backend bit)."""
    found = []
    for name, mask in key_masks(table):
        if mask and bits & mask == mask:
            top = mask.bit_length() - 1
            found.append(((top, (mask & ~(1 << top)).bit_length()), name))
    return [name for _, name in sorted(found, reverse=True)]


