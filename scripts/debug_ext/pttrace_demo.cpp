// A tiny operator library for pttrace's tests and demo, compiled with -g -O0 so that every frame
// of its kernels (and of the boxing templates from torch's headers) has DWARF file:line.
//
//   pttrace_demo::scale_add(a, b, alpha) = a + alpha * b     CPU kernel: scale_add_cpu
//   pttrace_demo::scale_add_twice(a, b, alpha)                CompositeImplicitAutograd: calls scale_add twice
#include <ATen/ops/empty_like.h>  // not all of <ATen/ATen.h>: a -g build took 31 s of CPU with it, 13 s without
#include <torch/library.h>

#include "pttrace_demo.h"

namespace pttrace_demo {

namespace {

// Kept out of line (and out of the kernel) so that a breakpoint inside the loop has its own frame.
float scale_add_one(float x, float y, float alpha) {
  return x + alpha * y;
}

}  // namespace

at::Tensor scale_add_cpu(const at::Tensor& a, const at::Tensor& b, double alpha) {
  TORCH_CHECK(a.sizes() == b.sizes(), "scale_add: a and b must have the same shape");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              "scale_add: only float32 tensors");
  at::Tensor a_c = a.contiguous();
  at::Tensor b_c = b.contiguous();
  at::Tensor out = at::empty_like(a_c);
  const float* pa = a_c.data_ptr<float>();
  const float* pb = b_c.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const auto n = a_c.numel();
  for (int64_t i = 0; i < n; ++i) {
    po[i] = scale_add_one(pa[i], pb[i], static_cast<float>(alpha));
  }
  return out;
}

at::Tensor scale_add_twice(const at::Tensor& a, const at::Tensor& b, double alpha) {
  // Goes back through the dispatcher, so the recorded path shows the composite kernel above the
  // CPU kernel.
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pttrace_demo::scale_add", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  at::Tensor once = op.call(a, b, alpha);
  return op.call(once, b, alpha);
}

// pttrace_demo::boxed_scale(a, times, label) = a * times: a boxed CPU kernel (boxed_scale_cpu, below; kept
// after the kernels above, whose line numbers the tests know). Its arguments arrive as IValues on the
// dispatcher's stack (a std::vector<c10::IValue>), as every op's do under TorchScript's interpreter or a
// fallback. Stopped here, gdb's
// `call ((c10::IValue *)stack._M_impl._M_start)->dump()` prints the first argument, and `stack`
// is a reference, as in the JIT's own operators.
void boxed_scale_stack(torch::jit::Stack& stack) {
  const std::string label = stack[2].toStringRef();
  const int64_t times = stack[1].toInt();
  at::Tensor out = stack[0].toTensor().mul(static_cast<double>(times));
  torch::jit::drop(stack, 3);
  torch::jit::push(stack, std::move(out));
}

// The boxed signature itself, with the key set the dispatcher plumbs through: `stack` is a pointer
// here (`call ((c10::IValue *)stack->_M_impl._M_start)->dump()`).
void boxed_scale_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  boxed_scale_stack(*stack);
}

}  // namespace pttrace_demo

TORCH_LIBRARY(pttrace_demo, m) {
  m.def("scale_add(Tensor a, Tensor b, float alpha) -> Tensor");
  m.def("scale_add_twice(Tensor a, Tensor b, float alpha) -> Tensor");
  m.def("boxed_scale(Tensor a, int times, str label) -> Tensor");
}

TORCH_LIBRARY_IMPL(pttrace_demo, CPU, m) {
  m.impl("scale_add", &pttrace_demo::scale_add_cpu);
  m.impl("boxed_scale", torch::CppFunction::makeFromBoxedFunction<&pttrace_demo::boxed_scale_cpu>());
}

TORCH_LIBRARY_IMPL(pttrace_demo, CompositeImplicitAutograd, m) {
  m.impl("scale_add_twice", &pttrace_demo::scale_add_twice);
}
