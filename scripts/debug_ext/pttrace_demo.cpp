// A tiny operator library for pttrace's tests and demo, compiled with -g -O0 so that every frame
// of its kernels (and of the boxing templates from torch's headers) has DWARF file:line.
//
//   pttrace_demo::scale_add(a, b, alpha) = a + alpha * b     CPU kernel: scale_add_cpu
//   pttrace_demo::scale_add_twice(a, b, alpha)                CompositeImplicitAutograd: calls scale_add twice
#include <ATen/ATen.h>
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

}  // namespace pttrace_demo

TORCH_LIBRARY(pttrace_demo, m) {
  m.def("scale_add(Tensor a, Tensor b, float alpha) -> Tensor");
  m.def("scale_add_twice(Tensor a, Tensor b, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(pttrace_demo, CPU, m) {
  m.impl("scale_add", &pttrace_demo::scale_add_cpu);
}

TORCH_LIBRARY_IMPL(pttrace_demo, CompositeImplicitAutograd, m) {
  m.impl("scale_add_twice", &pttrace_demo::scale_add_twice);
}
