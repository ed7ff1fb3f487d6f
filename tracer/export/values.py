"""What a hop carried, as text every view shares (``show``, the markdown, the TUI): one line an argument,
and the dispatcher's decision at the hop.

``self: float32[2, 3] strides (3, 1) cpu requires_grad  keys CPU, AutogradCPU``;
``alpha: 1``; ``dispatchKeySet: CPU (0x10001)``; ``out: not read: its return type is not known``.
Values come as recorded (``records``: ``args``); nothing here reads the target.
"""
from __future__ import annotations

from tracer.session.model import FrameValues, Hit

MAX_TEXT = 120


def _keys(keys) -> str:
    return ", ".join(keys) if keys else "(empty)"


def _shape(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def tensor_text(t: dict) -> str:
    """``float32[2, 3] strides (3, 1) cpu requires_grad grad_fn SigmoidBackward0 view``."""
    if not isinstance(t, dict):
        return "?"
    if t.get("undefined"):
        return "undefined tensor"
    if "sizes" not in t and t.get("unreadable"):
        impl = t.get("impl")
        return f"tensor (not read: {t['unreadable']})" + (f" at {impl:#x}" if isinstance(impl, int) else "")
    parts = [f"{t.get('dtype') or '?'}{_shape(t.get('sizes') or [])}"]
    strides = t.get("strides")
    if isinstance(strides, list):
        parts.append("strides (" + ", ".join(str(s) for s in strides) + ")")
    if t.get("storage_offset"):
        parts.append(f"offset {t['storage_offset']}")
    if t.get("device"):
        parts.append(str(t["device"]))
    if t.get("layout") not in (None, "strided"):
        parts.append(str(t["layout"]))
    if t.get("requires_grad"):
        parts.append("requires_grad")
    if t.get("grad_fn"):
        parts.append(f"grad_fn {t['grad_fn']}")
    if t.get("is_view"):
        parts.append("view")
    if "values" in t:
        parts.append("= " + _short(str(t["values"])))
    if t.get("keys") is not None:
        parts.append(f"keys {_keys(t['keys'])}")
    elif isinstance(t.get("key_set"), int):
        parts.append(f"key set {t['key_set']:#x}")
    if t.get("unreadable"):
        parts.append(f"(partly read: {t['unreadable']})")
    return " ".join(parts)


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def value_text(arg: dict) -> str:
    """The value part of one argument."""
    if arg.get("unreadable") and not any(k in arg for k in ("tensor", "tensors", "value")):
        return f"not read: {arg['unreadable']}"
    if "tensor" in arg:
        return tensor_text(arg["tensor"])
    if "tensors" in arg:
        shown = "; ".join(tensor_text(t) for t in arg["tensors"])
        more = f" (of {arg['length']})" if arg.get("length") else ""
        return f"{len(arg['tensors'])} tensors{more}: [{shown}]"
    if arg.get("none"):
        return "None"
    if "keyset" in arg:
        keys = arg.get("keys")
        return (f"{_keys(keys)} ({arg['keyset']:#x})" if keys is not None else f"{arg['keyset']:#x}")
    if "value" in arg:
        v = arg["value"]
        text = _shape(v) if isinstance(v, list) else repr(v) if isinstance(v, str) else str(v)
        if arg.get("length"):
            text += f" (first {len(v) if isinstance(v, list) else '?'} of {arg['length']})"
        return _short(text)
    for key in ("scalar_type", "layout", "memory_format", "qscheme", "device_type"):
        if key in arg:
            return f"{key.replace('_', ' ')} {arg[key]}"
    if "device" in arg:
        return f"device {arg['device']}"
    if arg.get("address") == 0:
        return "NULL"
    if isinstance(arg.get("address"), int):
        return f"at {arg['address']:#x}"
    return "?"


def arg_text(arg: dict, index: int) -> str:
    """One line: ``self: float32[2, 3] ...`` (``#1 unnamed at::Tensor const&: ...`` where no source names
    it: no DWARF, no operator header, no declaration in torch's headers)."""
    name = arg.get("name") or f"#{index} unnamed {arg.get('type') or '?'}"
    return f"{name}: {value_text(arg)}"


def decision_lines(fv: FrameValues, tensors: bool = False) -> list[str]:
    """The dispatcher's decision at the hop, a line each part, or nothing when it does not dispatch.
    ``tensors``: each tensor argument's key set too (the argument lines show them already)."""
    d = fv.decision
    out = []
    if d is None:
        if fv.tls_note:
            out.append(f"thread's key sets not read: {fv.tls_note}")
        return out
    for name, ks in d.tensors if tensors else ():
        out.append(f"tensor {name}: {d.text(ks)}")
    if d.included is not None:
        out.append(f"thread includes {d.text(d.included)}; excludes {d.text(d.excluded)}")
    elif fv.tls is not None:
        out.append(f"thread's TLS words {fv.tls[0]:#x} {fv.tls[1]:#x} (as stored)")
    elif fv.tls_note:
        out.append(f"thread's key sets not read: {fv.tls_note}")
    if d.computed is not None:
        verb = "computed (tensors | included) - excluded" if d.how == "computed" else "handed to this hop"
        out.append(f"dispatch set {verb}: {d.text(d.computed)}")
        if d.key:
            over = f" (passing over the fallthrough {', '.join(d.passed_over)})" if d.passed_over else ""
            label = "dispatches on" if d.op else "highest key"
            out.append(f"{label} {d.key}{over}" + (f": {d.op}'s {d.kernel} (the table the target's torch reports)"
                                                    if d.kernel else ""))
    if d.note:
        out.append(d.note)
    return out


def frame_values(hit: Hit, frame) -> FrameValues | None:
    """What ``frame`` (one of the hit's own) carried at this hit, if it was read."""
    for fv in hit.values or ():
        if fv.frame is frame:
            return fv
    return None


_VALUE_KEYS = ("value", "keyset", "none", "unreadable", "scalar_type", "layout", "memory_format", "qscheme",
               "device_type", "device")


def shape_text(arg: dict) -> str:
    """An argument's shape, for telling hits of one path apart: ``float32[2, 3]``, a scalar's value."""
    t = arg.get("tensor")
    if isinstance(t, dict):
        return f"{t.get('dtype') or '?'}{_shape(t.get('sizes') or [])}" if "sizes" in t else (
            "undefined" if t.get("undefined") else "tensor")
    if "tensors" in arg:
        return "[" + ", ".join(shape_text({"tensor": x}) for x in arg["tensors"]) + "]"
    if not any(k in arg for k in _VALUE_KEYS):
        return str(arg.get("type") or "?")  # an object known by its address only: hits differ there, not in shape
    return value_text(arg)


def shapes(hits) -> list[str]:
    """The distinct argument shapes of ``hits`` (what their innermost frames carried), in first-hit order."""
    seen: dict[str, None] = {}
    for hit in hits:
        for fv in hit.values or ():
            if fv.frame is hit.frames[-1]:
                text = ", ".join(f"{a.get('name') or '#' + str(i)}: {shape_text(a)}" for i, a in enumerate(fv.args))
                seen.setdefault(text or "(no arguments)", None)
    return list(seen)
