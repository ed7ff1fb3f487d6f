// Declarations of the demo kernels: their DW_AT_decl_file is this header, while their code (the
// line table) is in pttrace_demo.cpp, which lets the tests tell the two line answers apart.
#pragma once

#include <ATen/core/Tensor.h>

namespace pttrace_demo {

at::Tensor scale_add_cpu(const at::Tensor& a, const at::Tensor& b, double alpha);

at::Tensor scale_add_twice(const at::Tensor& a, const at::Tensor& b, double alpha);

}  // namespace pttrace_demo
