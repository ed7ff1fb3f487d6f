"""DispatchKeySet decoding: the numbering comes from the target's torch, and agrees with torch itself.

``torch_facts`` derives the bit layout (backend-component bits below the functionality bits; a
runtime key like AutogradCPU = its functionality bit + its backend bit) by asking the interpreter's
own ``torch._C.DispatchKeySet``; these tests check the decoding against ``torch._C._dispatch_keys``
of real tensors and against torch's own printing of random key sets.
"""
from __future__ import annotations

import json
import random
import sys

import pytest

from tests.unit.export_support import json_hits
from tracer.dispatch import ops
from tracer.session import storage
from tracer.session.model import Frame, Hit, SessionInfo, Thread

TABLE = {  # a hand-made numbering: 2 backends (A, B), per-backend Dense and Autograd, one plain key
    "backend_bits": 2,
    "keys": [["A", 0b0101], ["B", 0b0110], ["Plain", 0b1000], ["AutogradA", 0b10001], ["AutogradB", 0b10010]],
    "bits": {"0": "ABit", "1": "BBit", "2": "Dense", "3": "Plain", "4": "AutogradFunctionality"},
}


def test_decode_by_masks():
    assert storage.decode_keyset(0b0101, TABLE) == ["A"]
    assert storage.decode_keyset(0b10111, TABLE) == ["A", "B", "AutogradA", "AutogradB"]
    assert storage.decode_keyset(0b1000, TABLE) == ["Plain"]
    assert storage.decode_keyset(0, TABLE) == []


def test_decode_names_leftover_and_unknown_bits_instead_of_guessing():
    assert storage.decode_keyset(0b0100, TABLE) == ["Dense (alone)"]  # a functionality bit without a backend
    assert storage.decode_keyset(1 << 40 | 0b0101, TABLE) == ["A", "bit 40 (unknown)"]


def write(path, table=None, keyset=0x1000010001):
    w = storage.SessionWriter(path)
    w.header(SessionInfo(id="s", mode="run", argv=["python", "x.py"]))
    if table is not None:
        w.dispatch_keys(table)
    frames = [Frame(kind="native", function="at::_ops::sigmoid::call(at::Tensor const&)", layer="dispatcher"),
              Frame(kind="native", function="torch::autograd::VariableType::(anonymous namespace)::sigmoid("
                                             "c10::DispatchKeySet, at::Tensor const&)", layer="autograd",
                    keyset=keyset)]
    w.write({"type": "hit", **Hit(1, "op:sigmoid", Thread(1, "python", 1), 1.0, frames).to_dict()})
    w.end("completed", 0)
    w.close()


def test_session_decodes_keysets_on_load_and_exports(tmp_path):
    from tracer.export import json as json_export

    p = tmp_path / "s.jsonl"
    write(p, {"torch_version": "test", **TABLE}, keyset=0b10111)
    s = storage.load(p)
    assert not s.info.warnings  # the new record is understood, not reported as damaged
    f = s.hits[0].frames[-1]
    assert f.keyset == 0b10111 and list(f.keys) == ["A", "B", "AutogradA", "AutogradB"]
    assert s.hits[0].frames[0].keys is None  # no key set recorded: nothing decoded
    out = json_hits(json.loads(json_export.render(s)))
    assert out[0]["frames"][-1]["keys"] == ["A", "B", "AutogradA", "AutogradB"]
    assert "keys" not in out[0]["frames"][0]


def test_session_without_numbering_keeps_raw_bits(tmp_path):
    p = tmp_path / "s.jsonl"
    write(p, None)
    s = storage.load(p)
    f = s.hits[0].frames[-1]
    assert f.keyset == 0x1000010001 and f.keys is None
    assert "no key numbering" in ops.keyset_text(f)


# -- against the real torch --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch_and_table(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import os

    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        facts = ops.torch_facts(sys.executable)
        again = ops.torch_facts(sys.executable)  # from the cache
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
    assert facts is not None and facts.key_table
    assert again.key_table == facts.key_table
    assert list((cache / "pttrace" / "ops").glob("facts-*.json"))
    return torch, facts.key_table


def torch_names(torch, raw):
    text = repr(torch._C.DispatchKeySet.from_raw_repr(raw))
    inner = text[text.find("(") + 1: text.rfind(")")]
    return [n.strip() for n in inner.split(",") if n.strip()]


def test_numbering_matches_this_torch(torch_and_table):
    torch, table = torch_and_table
    assert table["torch_version"] == torch.__version__
    masks = dict((name, mask) for name, mask in table["keys"])
    # DispatchKeySet.h in 2.13: 16 backend bits, then functionality bits (Dense is the first).
    assert table["backend_bits"] == 16
    assert masks["CPU"] == torch._C.DispatchKeySet(torch._C.DispatchKey.CPU).raw_repr() == 0x10001
    assert masks["AutogradCPU"] == 0x1000000001
    assert table["bits"]["0"] == "CPUBit" and table["bits"]["16"] == "Dense"
    assert table["bits"]["36"] == "AutogradFunctionality"


@pytest.mark.filterwarnings("ignore::UserWarning")  # quantized tensors are deprecated
def test_decoding_agrees_with_dispatch_keys_of_real_tensors(torch_and_table):
    torch, table = torch_and_table
    tensors = [
        torch.randn(3, requires_grad=True),
        torch.randn(3),
        torch.empty(2, device="meta"),
        torch.randn(2, 2).to_sparse(),
        torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8),
        torch.randn(3, dtype=torch.complex64).conj(),
        torch.randn(3)._neg_view(),
    ]
    for t in tensors:
        raw = torch._C._dispatch_keys(t).raw_repr()
        assert storage.decode_keyset(raw, table) == torch_names(torch, raw), t
    # A CPU tensor that requires grad: CPU (Dense) and AutogradCPU, as the VariableType hop sees them.
    raw = torch._C._dispatch_keys(tensors[0]).raw_repr()
    decoded = storage.decode_keyset(raw, table)
    assert "CPU" in decoded and "AutogradCPU" in decoded
    # The key sets recorded at the VariableType::sigmoid and redispatch hops of hello-world.py.
    assert storage.decode_keyset(0x1000010001, table) == ["CPU", "AutogradCPU"]
    assert storage.decode_keyset(0x10001, table) == ["CPU"]


def test_decoding_agrees_with_torch_on_random_key_sets(torch_and_table):
    torch, table = torch_and_table
    rng = random.Random(13)
    masks = [mask for _, mask in table["keys"]]
    for _ in range(500):
        raw = 0
        for mask in rng.sample(masks, rng.randint(1, 6)):
            raw |= mask
        assert storage.decode_keyset(raw, table) == torch_names(torch, raw), hex(raw)


def test_the_facts_of_the_same_build_are_kept_across_installs(tmp_path):
    """The facts' cache key follows torch's libraries by content (build-id), not by path or time: a new venv of the
    same wheel reuses them (its first run asked torch again: ~1.3-1.6 s), another build does not."""
    import os
    import shutil

    libc, libm = "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6"  # two builds with build-ids
    installs = []
    for name, source in (("a", libc), ("b", libc), ("c", libm)):
        lib = tmp_path / name / "torch" / "lib" / "libc10.so"
        lib.parent.mkdir(parents=True)
        shutil.copyfile(source, lib)
        installs.append(str(lib))
    os.utime(installs[1], ns=(1, 1))
    keys = [ops._facts_key(sys.executable, [lib]) for lib in installs]
    assert keys[0] == keys[1]  # the same bytes elsewhere, another time
    assert keys[2] != keys[0]  # another build
    assert ops._facts_key("/bin/sh", [installs[0]]) != keys[0]  # another interpreter
