"""Calibrate torch's memory layouts in a probe process: run by the target's own interpreter, it makes
tensors whose sizes, strides, dtypes, devices and autograd state it knows, reads its own memory
(``ctypes.string_at``) and finds where each field sits, then prints one JSON line.

Why a probe and not the headers alone: class layouts depend on the compiler, on ``#ifdef``s and on
fields that move between releases (``PyObjectSlot`` shrank to one word in 2.13; ``grad_fn_`` became an
``intrusive_ptr``); a tensor of known shape says where the shape is, whatever the build. Every offset
must be the only one that fits every tensor made here, or it is reported as not found, with why.

Standalone: imports only the standard library and torch (it runs in the target's interpreter, where
pttrace may not be installed). Never run inside the traced process.
"""
import ctypes
import json
import struct
import sys

SCAN = 256  # bytes of a TensorImpl searched (sizeof is ~176 in 2.13; the heap continues past it)
U64 = (1 << 64) - 1


def mem(addr, n):
    return ctypes.string_at(addr, n)


def words(addr, n=SCAN):
    return [w & U64 for w in struct.unpack("<%dq" % (n // 8), mem(addr, n))]


def readable(address):
    """Whether 64 bytes at ``address`` lie in one readable mapping of this process (a probe that
    dereferenced a non-pointer would crash)."""
    with open("/proc/self/maps") as fh:
        for line in fh:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= address and address + 64 <= hi:
                return perms.startswith("r")
    return False


def only(found, what, out):
    """The one offset in ``found``; else note why in out["problems"] and give None."""
    found = sorted(set(found))
    if len(found) == 1:
        return found[0]
    out["problems"].append("%s: %s" % (what, "not found" if not found else "ambiguous at %s" % found))
    return None


def impl(t):
    """The tensor's TensorImpl address."""
    return t._cdata


def sizes_and_strides(torch, a, b, out):
    """(offset of sizes_and_strides_, its inline capacity): the element count word, then inline sizes,
    then inline strides; more dimensions than fit are on the heap."""
    cands = []
    for o in range(0, SCAN - 11 * 8, 8):
        ok = True
        for t in (a, b):
            w = words(impl(t))[o // 8:]
            n = t.dim()
            if w[0] != n or w[1:1 + n] != list(t.shape) or w[6:6 + n] != list(t.stride()):
                ok = False
        if ok:
            cands.append(o)
    sas = only(cands, "sizes_and_strides_", out)
    inline = None
    if sas is not None:
        # The inline capacity: strides start after it (header: C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE).
        inline = 5
        big = torch.empty(2, 3, 1, 2, 1, 3, 2).transpose(0, 6)
        w = words(impl(big))[sas // 8:]
        ptr, n = w[1], big.dim()
        heap = [x & U64 for x in struct.unpack("<%dq" % (2 * n), mem(ptr, 16 * n))] if w[0] == n else []
        if heap != list(big.shape) + list(big.stride()):
            out["problems"].append("sizes_and_strides_: more than 5 dimensions not found on the heap")
            inline = None
    return sas, inline


def offset_and_numel(base, sas, out):
    """(storage_offset_, numel_): words that are these numbers in every view of ``base``."""
    views = [base[3:9].view(2, 3), base[11:30].view(1, 19), base[7:15].view(2, 2, 2)]
    so = [o for o in range(0, SCAN, 8) if all(words(impl(v))[o // 8] == v.storage_offset() for v in views)]
    nu = [o for o in range(0, SCAN, 8) if all(words(impl(v))[o // 8] == v.numel() for v in views)]
    storage_offset = only(so, "storage_offset_", out)
    numel = only([o for o in nu if sas is None or o > sas], "numel_", out)
    return storage_offset, numel


def dtypes(torch, out):
    """(offset of data_type_, {TypeMeta index: the dtype}): a 16-bit index, stable for a dtype and distinct
    between dtypes."""
    found = []
    for name in sorted(dir(torch)):
        d = getattr(torch, name, None)
        if isinstance(d, torch.dtype) and d not in found:
            found.append(d)
    made = {}
    for d in found:
        try:
            if d.is_complex or d.is_floating_point or d == torch.bool or "int" in str(d) or "bits" in str(d) \
                    or "float" in str(d):
                made[d] = (torch.empty(2, dtype=d), torch.empty(3, 1, dtype=d))
        except Exception:
            pass
        if d not in made and str(d).startswith("torch.q"):
            try:
                q = lambda: torch.quantize_per_tensor(torch.zeros(2), 0.5, 0, d)  # noqa: E731
                made[d] = (q(), q())
            except Exception:
                pass
    half = lambda t, o: struct.unpack("<H", mem(impl(t) + o, 2))[0]  # noqa: E731
    dt = []
    for o in range(0, SCAN - 2, 2):
        vals = {}
        for d, (x, y) in made.items():
            if half(x, o) != half(y, o):
                break
            vals[d] = half(x, o)
        else:
            if len(set(vals.values())) == len(made) and max(vals.values()) < 256:
                dt.append(o)
    data_type = only(dt, "data_type_", out)
    table = {}
    if data_type is not None:
        for d, (x, _) in made.items():
            table[str(half(x, data_type))] = {"name": str(d).replace("torch.", ""), "itemsize": x.element_size(),
                                              "is_complex": d.is_complex, "is_floating_point": d.is_floating_point}
    return data_type, table


def device(torch, meta, out):
    """(offset of device_opt_, the meta device's type): optional<Device> = {int8 type, int8 index, bool
    engaged}; CPU is type 0, index -1. ``meta``: two tensors on the meta device."""
    cpu = [torch.empty(2), torch.empty(3, 3)]
    dev = []
    for o in range(0, SCAN - 3):
        c = [mem(impl(t) + o, 3) for t in cpu]
        m = [mem(impl(t) + o, 3) for t in meta]
        if all(x == b"\x00\xff\x01" for x in c) and len(set(m)) == 1 and m[0][0] != 0 and m[0][1:] == b"\xff\x01":
            dev.append(o)
    offset = only(dev, "device_opt_", out)
    meta_type = mem(impl(meta[0]) + offset, 1)[0] if offset is not None else None
    return offset, meta_type


def storage(torch, a, b, out):
    """(storage_, StorageImpl's data pointer, its size in bytes)."""
    st = [o for o in range(0, SCAN, 8) if all(words(impl(t))[o // 8] == t.untyped_storage()._cdata for t in (a, b))]
    offset = only(st, "storage_", out)
    # A tensor over a Python buffer: its allocation's context is not its data, as a CPU allocation's is.
    buf = bytearray(64)
    fb = torch.frombuffer(buf, dtype=torch.float32)
    sd = [o for o in range(0, 128, 8) if all(words(t.untyped_storage()._cdata, 128)[o // 8]
                                             == t.untyped_storage().data_ptr() for t in (a, b, fb))]
    data = only(sd, "StorageImpl data pointer", out)
    # Its size in bytes (a SymInt: a plain int here), for the check that a tensor stays inside its storage.
    sized = [torch.empty(37, dtype=torch.uint8), torch.empty(3, 5), torch.empty(1000, dtype=torch.float64)]
    sn = [o for o in range(0, 128, 8) if all(words(t.untyped_storage()._cdata, 128)[o // 8]
                                             == t.untyped_storage().nbytes() for t in sized)]
    nbytes = only(sn, "StorageImpl size in bytes", out)
    return offset, data, nbytes


def autograd(torch, storage_offset, out):
    """autograd_meta_ (null without autograd state, set with it), whether the word after it is null (the
    ExtraMeta pointer), and AutogradMeta's grad_fn_, requires_grad_, is_view_, and where a grad_fn object
    keeps its Node pointer."""
    plain = [torch.empty(2), torch.empty(3)]
    rg = [torch.empty(2, requires_grad=True), torch.ones(3, requires_grad=True) * 2]
    am = [o for o in range(0, SCAN, 8) if all(words(impl(t))[o // 8] == 0 for t in plain)
          and all(words(impl(t))[o // 8] > 4096 for t in rg) and (storage_offset is None or o < storage_offset + 64)]
    am = [o for o in am if all(words(impl(t))[o // 8] != t.untyped_storage()._cdata for t in rg)]
    found = {"autograd_meta": only(am[:1] if len(am) > 1 and am[0] + 8 in am else am, "autograd_meta_", out),
             "extra_null": None, "grad_fn": None, "requires_grad": None, "is_view": None, "node_cdata": None}
    autograd_meta = found["autograd_meta"]
    if autograd_meta is None:
        return found
    # the word after it (ExtraMeta, says the header) is null for these tensors
    found["extra_null"] = all(words(impl(t))[autograd_meta // 8 + 1] == 0 for t in plain + rg)
    meta_of = lambda t: words(impl(t))[autograd_meta // 8]  # noqa: E731
    # grad_fn_: the Node the Python grad_fn object holds (THPCppFunction: header, then its pointer).
    x = torch.ones(3, requires_grad=True)
    ys = [x.sigmoid(), x * 3]
    gf, nc = [], []
    for y in ys:
        node_object = y.grad_fn  # held: a grad_fn object may be made afresh at each access
        py = words(id(node_object), 48)
        mw = words(meta_of(y), 160)
        for p in range(16, 48, 8):
            for m in range(0, 160, 8):
                if py[p // 8] == mw[m // 8] and py[p // 8] > 4096:
                    gf.append(m)
                    nc.append(p)
                    break
            else:
                continue
            break  # a shared_ptr's element pointer comes before its control block: the first match
    found["grad_fn"] = only([o for o in gf if gf.count(o) == len(ys)], "AutogradMeta grad_fn_", out)
    found["node_cdata"] = only([o for o in nc if nc.count(o) == len(ys)], "grad_fn object's Node pointer", out)
    # requires_grad_ and is_view_: the bytes that are 0/1 as torch says in every tensor with a meta.
    leaf = torch.zeros(4, requires_grad=True)
    off = torch.zeros(4)
    off.requires_grad_(True)
    off.requires_grad_(False)
    lview = torch.zeros(4).view(2, 2).requires_grad_()
    cases = [leaf, off, lview, leaf.view(2, 2), leaf[1:], leaf * 2, off.view(4)]
    cases = [t for t in cases if meta_of(t)]

    def bools(expect):
        hits = []
        for o in range(0, 200):
            if all(mem(meta_of(t) + o, 1)[0] == int(expect(t)) for t in cases):
                hits.append(o)
        return hits

    found["requires_grad"] = only(bools(lambda t: t.requires_grad and t.grad_fn is None), "requires_grad_", out)
    found["is_view"] = only(bools(lambda t: t._is_view()), "is_view_", out)
    return found


def python_type(torch, base_type, out):
    """(tp_name, tp_base): where PyTypeObject keeps them, so that a PyObject* can be told to be a tensor
    (its type ``base_type``, torch._C.TensorBase, or one derived from it) or not."""
    class Sub(torch.Tensor):
        pass

    sub = torch.empty(2).as_subclass(Sub)
    tp_base = only([o for o in range(24, 512, 8) if words(id(Sub), 512)[o // 8] == id(torch.Tensor)
                    and words(id(torch.Tensor), 512)[o // 8] == id(base_type)], "PyTypeObject tp_base", out)
    tp_name = None
    for o in range(8, 64, 8):
        ptr = words(id(base_type), 64)[o // 8]
        if readable(ptr) and ctypes.string_at(ptr, 64).split(b"\0")[0] == \
                (base_type.__module__ + "." + base_type.__name__).encode():
            tp_name = o
            break
    if tp_name is None:
        out["problems"].append("PyTypeObject tp_name: not found")
    del sub
    return tp_name, tp_base


def undefined_tensor(torch, key_set, device_opt, out):
    """The undefined tensor: a singleton with an empty key set and no device (its key set, its device's
    engaged flag)."""
    try:
        import glob
        import os

        c10 = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so*"))
        sym = ctypes.c_char.in_dll(ctypes.CDLL(c10[0]), "_ZN3c1019UndefinedTensorImpl10_singletonE")
        u = ctypes.addressof(sym)
        return {"key_set": words(u)[key_set // 8] if key_set is not None else None,
                "device_engaged": mem(u + device_opt + 2, 1)[0] if device_opt is not None else None}
    except Exception as exc:  # noqa: BLE001 - any failure is a problem reported, not a crash
        out["problems"].append("UndefinedTensorImpl: %s" % exc)
        return None


def layout_bits(torch):
    """Layouts other than strided are told by key-set bits a dense CPU tensor lacks."""
    dense = torch._C._dispatch_keys(torch.empty(2)).raw_repr()
    found = {}
    makers = {"sparse_coo": lambda: torch.zeros(2, 2).to_sparse(), "sparse_csr": lambda: torch.zeros(2, 2).to_sparse_csr(),
              "_mkldnn": lambda: torch.zeros(2, 2).to_mkldnn()}
    for name, make in makers.items():
        try:
            bits = torch._C._dispatch_keys(make()).raw_repr() & ~dense
        except Exception:  # noqa: BLE001 - a build without it (no MKL-DNN): that layout is not decoded
            continue
        if bits:
            found[name] = bits
    return found


def compressed_layouts(torch, out):
    """(offset of SparseCsrTensorImpl's layout_, {its value: layout}): compressed sparse tensors share one
    key; that byte tells csr, csc, bsr and bsc apart."""
    compressed, offset = {}, None
    try:
        kinds = {"sparse_csr": lambda: torch.eye(4).to_sparse_csr(), "sparse_csc": lambda: torch.eye(4).to_sparse_csc(),
                 "sparse_bsr": lambda: torch.eye(4).to_sparse_bsr((2, 2)),
                 "sparse_bsc": lambda: torch.eye(4).to_sparse_bsc((2, 2))}
        made = {k: (f(), f()) for k, f in kinds.items()}
        co = []
        for o in range(0, SCAN):
            seen = {k: (mem(impl(x) + o, 1)[0], mem(impl(y) + o, 1)[0]) for k, (x, y) in made.items()}
            if all(a == b for a, b in seen.values()) and len({a for a, _ in seen.values()}) == len(kinds):
                co.append(o)
        offset = only(co, "SparseCsrTensorImpl layout_", out)
        if offset is not None:
            compressed = {str(mem(impl(x) + offset, 1)[0]): k for k, (x, _) in made.items()}
    except Exception as exc:  # noqa: BLE001 - a build without compressed sparse tensors
        out["problems"].append("compressed sparse layouts: %s" % exc)
    return offset, compressed


def main():
    import torch

    out = {"torch_version": torch.__version__, "pointer_size": ctypes.sizeof(ctypes.c_void_p), "problems": []}
    a = torch.empty(2, 3, 5)
    b = torch.empty(7, 1, 4, 9).permute(3, 0, 2, 1)
    base = torch.empty(40)
    sas, inline = sizes_and_strides(torch, a, b, out)
    storage_offset, numel = offset_and_numel(base, sas, out)
    data_type, table = dtypes(torch, out)
    meta = [torch.empty(2, device="meta"), torch.empty(3, 3, device="meta")]
    device_opt, meta_type = device(torch, meta, out)
    # The key set: the word equal to what torch reports for the tensor.
    kt = [torch.empty(2), torch.empty(2, requires_grad=True), meta[0]]
    ks = [o for o in range(0, SCAN, 8)
          if all(words(impl(t))[o // 8] == torch._C._dispatch_keys(t).raw_repr() for t in kt)]
    key_set = only(ks, "key_set_", out)
    storage_ptr, storage_data, storage_nbytes = storage(torch, a, b, out)
    ag = autograd(torch, storage_ptr, out)
    # THPVariable: the TensorImpl pointer after the PyObject header.
    tv = [o for o in range(16, 64, 8) if all(words(id(t), 64)[o // 8] == impl(t) for t in (a, b, base))]
    thp = only(tv, "THPVariable's tensor", out)
    base_type = type(a).__mro__[-2]  # the C type below object: torch._C.TensorBase
    tp_name, tp_base = python_type(torch, base_type, out)
    undefined = undefined_tensor(torch, key_set, device_opt, out)
    bits = layout_bits(torch)
    compressed_offset, compressed = compressed_layouts(torch, out)
    out.update({
        "tensor": {"sizes_and_strides": sas, "inline_dims": inline, "storage_offset": storage_offset,
                   "numel": numel, "data_type": data_type, "device_opt": device_opt, "key_set": key_set,
                   "storage": storage_ptr, "autograd_meta": ag["autograd_meta"]},
        "storage_data": storage_data,
        "storage_nbytes": storage_nbytes,
        "extra_meta_null": ag["extra_null"],
        "autograd": {"grad_fn": ag["grad_fn"], "requires_grad": ag["requires_grad"], "is_view": ag["is_view"]},
        "node_object_cdata": ag["node_cdata"],
        "thp_variable_cdata": thp,
        "py_type": {"tp_name": tp_name, "tp_base": tp_base,
                    "tensor_base": base_type.__module__ + "." + base_type.__name__},
        "dtypes": table,
        "meta_device_type": meta_type,
        "undefined": undefined,
        "layout_bits": bits,
        "compressed_layout": compressed_offset,
        "compressed_layouts": compressed,
    })
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
