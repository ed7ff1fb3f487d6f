"""What each hop carried, against the target's own prints at the same moment: every ``sigmoid`` call is
one line (``# CASE name``) that first writes what torch says of its tensors and of the thread's local
key sets there (``t.shape``, ``t.stride()``, ``torch._C._dispatch_keys(t)``, the TLS include and exclude
sets), then calls. ``python hop_values.py ORACLE.json [pttrace_demo.so]``."""
import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ORACLE = []


def O(name, *tensors):  # noqa: N802 - short: it sits on each case's line
    ORACLE.append({
        "case": name,
        "tensors": [{"sizes": list(t.shape), "strides": list(t.stride()), "storage_offset": t.storage_offset(),
                     "dtype": str(t.dtype).replace("torch.", ""), "device": str(t.device),
                     "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
                     "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
                     "is_view": t._is_view(), "key_set": torch._C._dispatch_keys(t).raw_repr(),
                     "data_ptr": t.data_ptr(), "numel": t.numel()} for t in tensors],
        "included": torch._C._dispatch_tls_local_include_set().raw_repr(),
        "excluded": torch._C._dispatch_tls_local_exclude_set().raw_repr(),
    })


class Mode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
O("plain", x); y = torch.sigmoid(x)  # CASE plain
with torch.no_grad():
    O("no_grad", x); torch.sigmoid(x)  # CASE no_grad
with torch.inference_mode():
    i = torch.ones(3, 2)
    O("inference", i); torch.sigmoid(i)  # CASE inference
with Mode():
    O("mode", x); torch.sigmoid(x)  # CASE mode
v = x.detach().t()
O("view", v); torch.sigmoid(v)  # CASE view
s = torch.arange(24.0).reshape(4, 6)[1:, ::2]
O("strided", s); torch.sigmoid(s)  # CASE strided
c = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
O("channels_last", c); torch.sigmoid(c)  # CASE channels_last
for dt in (torch.float64, torch.float16, torch.bfloat16, torch.complex64):
    d = torch.ones(2, 2, dtype=dt)
    O("dtype", d); torch.sigmoid(d)  # CASE dtype
z = torch.tensor(0.25)
O("zero_dim", z); torch.sigmoid(z)  # CASE zero_dim
e = torch.empty(0, 3)
O("empty", e); torch.sigmoid(e)  # CASE empty
w = torch.zeros(3)
O("inplace", w); w.sigmoid_()  # CASE inplace
out = torch.empty(2, 3)
src = torch.ones(2, 3)
O("out", src, out); torch.sigmoid(src, out=out)  # CASE out
y.sum().backward()
if len(sys.argv) > 2:
    torch.ops.load_library(sys.argv[2])
    a, b = torch.arange(4, dtype=torch.float32), torch.ones(4)
    O("ext", a, b); torch.ops.pttrace_demo.scale_add(a, b, 2.5)  # CASE ext
with open(sys.argv[1], "w") as fh:
    json.dump(ORACLE, fh)
