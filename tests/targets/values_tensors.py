"""Tensors of every kind pttrace's value reader must read, each described by torch itself: one JSON line
per tensor (what ``t.shape``, ``t.stride()``, ``t.storage_offset()``, ``t.dtype``,
``torch._C._dispatch_keys(t)``, ``t.data_ptr()``, ``id(t)`` say), then "ready", then the process stops
itself with SIGSTOP so a reader of /proc/PID/mem sees the tensors as printed."""
import json
import os
import signal
import sys

import torch


def tensors():
    out = {}
    base = torch.arange(24.0)
    out["float32 2x3"] = torch.arange(6.0).view(2, 3)
    out["transposed"] = torch.arange(12.0).view(3, 4).t()
    out["offset view"] = base.view(4, 6)[1:, 2:]
    out["channels_last"] = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    out["0-dim"] = torch.tensor(3.5)
    out["empty"] = torch.empty(0, 3)
    out["7 dims"] = torch.empty(2, 1, 3, 1, 2, 1, 2).transpose(0, 6)
    out["9 elements"] = torch.ones(9)
    out["expanded"] = torch.tensor([1.0, 2.0]).expand(3, 2)
    out["meta"] = torch.empty(4, 5, device="meta")
    out["sparse"] = torch.eye(3).to_sparse()
    out["sparse csr"] = torch.eye(4).to_sparse_csr()
    out["sparse csc"] = torch.eye(4).to_sparse_csc()
    out["sparse bsr"] = torch.eye(4).to_sparse_bsr((2, 2))
    out["sparse bsc"] = torch.eye(4).to_sparse_bsc((2, 2))
    try:
        out["mkldnn"] = torch.ones(2, 3).to_mkldnn()
    except RuntimeError:  # a build without MKL-DNN
        pass
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    out["leaf requires_grad"] = x
    out["parameter"] = torch.nn.Parameter(torch.ones(2))

    class Mine(torch.Tensor):
        pass

    out["subclass"] = torch.zeros(2).as_subclass(Mine)
    out["sigmoid"] = x.sigmoid()
    out["mul"] = x * 2
    out["view of requires_grad"] = x.view(3, 1)
    out["select of requires_grad"] = x[1]
    off = torch.zeros(2)
    off.requires_grad_(True)
    off.requires_grad_(False)
    out["requires_grad turned off"] = off
    with torch.no_grad():
        out["no_grad mul"] = x * 2
    with torch.inference_mode():
        out["inference"] = torch.ones(2, 2) + 1
        out["inference view"] = out["inference"][0]
    for d in dtypes():
        try:
            if str(d).startswith("torch.q"):
                t = torch.quantize_per_tensor(torch.tensor([0.0, 1.5, -2.0]), 0.5, 3 if d != torch.qint32 else 0, d)
            elif d == torch.bool:
                t = torch.tensor([True, False, True])
            elif d.is_complex:
                t = torch.tensor([1 + 2j, -0.5j, 3.0], dtype=d)
            elif d.is_floating_point:
                t = torch.tensor([0.5, -2.0, 3.0]).to(d) if "e8m0" not in str(d) else torch.tensor([0.5, 4.0]).to(d)
            else:
                t = torch.tensor([1, 0, 7]).to(d)
        except Exception:  # noqa: BLE001 - a dtype torch cannot make from values: made empty
            try:
                t = torch.empty(3, dtype=d)
            except Exception:  # noqa: BLE001
                continue
        out[f"dtype {str(d)[6:]}"] = t
    return out


def dtypes():
    seen = []
    for name in sorted(dir(torch)):
        d = getattr(torch, name, None)
        if isinstance(d, torch.dtype) and d not in seen:
            seen.append(d)
    return seen


def symbolic():
    """A fake tensor with symbolic sizes (dynamo's kind): its TensorImpl keeps them in SymbolicShapeMeta."""
    import warnings

    warnings.filterwarnings("ignore")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    return FakeTensorMode(shape_env=ShapeEnv()).from_tensor(
        torch.ones(3, 4), symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2))


def facts(name, t):
    def attempt(f):
        try:
            return f()
        except Exception:  # noqa: BLE001 - torch refuses (a sparse tensor's strides): no fact
            return None

    values = None
    if t.device.type == "cpu" and t.layout == torch.strided and 0 < t.numel() <= 8:
        if t.dtype in (torch.quint4x2, torch.quint2x4):  # packed sub-byte integers: not decoded
            values = None
        elif t.is_quantized:
            values = t.int_repr().flatten().tolist()
        elif t.dtype == torch.float4_e2m1fn_x2 or str(t.dtype)[6:] in ("bits1x8", "bits2x4", "bits4x2", "bits8",
                                                                      "bits16") or "int" in str(t.dtype)[6:8]:
            values = None
        else:
            values = attempt(lambda: [v if not isinstance(v, complex) else [v.real, v.imag]
                                      for v in t.to(torch.complex128 if t.is_complex() else torch.float64)
                                      .flatten().tolist()])
    return {"name": name, "id": id(t), "impl": t._cdata, "sizes": list(t.shape),
            "strides": attempt(lambda: list(t.stride())) if t.layout == torch.strided else None,
            "storage_offset": attempt(t.storage_offset), "dtype": str(t.dtype)[6:], "device": str(t.device),
            "layout": str(t.layout)[6:], "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
            "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None, "is_view": t._is_view(),
            "data_ptr": attempt(t.data_ptr), "key_set": torch._C._dispatch_keys(t).raw_repr(),
            "numel": t.numel(), "values": values}


def main():
    made = tensors()
    for name, t in made.items():
        print(json.dumps(facts(name, t), allow_nan=True), flush=True)
    if "symbolic" in sys.argv[1:]:
        made["symbolic"] = fake = symbolic()
        print(json.dumps({"symbolic": str(fake.shape), "impl": fake._cdata}), flush=True)
    print("ready", flush=True)
    if "stop" in sys.argv[1:]:
        os.kill(os.getpid(), signal.SIGSTOP)
    sys.stdin.read()  # hold the tensors until told to end
    return made


if __name__ == "__main__":
    main()
