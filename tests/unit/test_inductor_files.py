"""Reading inductor's files (tracer/scripted/inductor.py) from texts as torch 2.13 writes them for
tests/targets/compile_fn.py."""
from tracer.scripted import inductor as I

FX = '''class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f32[8]"):
        # File: /w/tests/targets/compile_fn.py:11 in g, code: return torch.sigmoid(x) * 2.0 + torch.tanh(x)
        sigmoid: "f32[8]" = torch.ops.aten.sigmoid.default(arg0_1)
        mul: "f32[8]" = torch.ops.aten.mul.Tensor(sigmoid, 2.0);  sigmoid = None
        tanh: "f32[8]" = torch.ops.aten.tanh.default(arg0_1);  arg0_1 = None
        add: "f32[8]" = torch.ops.aten.add.Tensor(mul, tanh);  mul = tanh = None
        return (add,)
'''


def test_graph_nodes_take_the_file_line_above_them():
    nodes = I.graph_nodes(FX)
    assert list(nodes) == ["sigmoid", "mul", "tanh", "add"]
    assert nodes["tanh"] == I.FxNode("tanh", "aten.tanh.default", "/w/tests/targets/compile_fn.py", 11, "g",
                                     "return torch.sigmoid(x) * 2.0 + torch.tanh(x)")


def test_the_ops_a_kernel_name_lists():
    assert I.ops_in_name("cpp_fused_add_mul_sigmoid_tanh_0") == ["add", "mul", "sigmoid", "tanh"]
    # an op name with underscores is kept whole when known
    assert I.ops_in_name("cpp_fused__softmax_native_layer_norm_3",
                         frozenset({"_softmax", "native_layer_norm"})) == ["_softmax", "native_layer_norm"]
    assert I.ops_in_name("kernel") == []


def test_the_kernel_a_call_line_names():
    assert I.kernel_name_at("cpp_fused_add_mul_sigmoid_tanh_0(arg0_1, buf0)") == "cpp_fused_add_mul_sigmoid_tanh_0"
    assert I.kernel_name_at(None) is None


def test_a_library_beside_inductors_cpp_is_generated(tmp_path):
    so = tmp_path / "ab" / "cxyz.main.so"
    so.parent.mkdir()
    so.write_bytes(b"\x7fELF")
    assert not I.is_generated(str(so))
    (tmp_path / "ab" / "cxyz.main.cpp").write_text('#include <torch/csrc/inductor/cpp_prefix.h>\nextern "C" void kernel()')
    I.is_generated.cache_clear()
    assert I.is_generated(str(so))
    assert I.is_generated("/tmp/torchinductor_me/yo/c.main.so") and not I.is_generated("/usr/lib/libm.so")
