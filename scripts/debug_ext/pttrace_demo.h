// Declarations of the demo kernels: their DW_AT_decl_file is this header, while their code (the
// line table) is in pttrace_demo.cpp, which lets the tests tell the two line answers apart.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace pttrace_demo {

at::Tensor scale_add_cpu(const at::Tensor& a, const at::Tensor& b, double alpha);

at::Tensor scale_add_twice(const at::Tensor& a, const at::Tensor& b, double alpha);

void boxed_scale_stack(torch::jit::Stack& stack);

void boxed_scale_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

}  // namespace pttrace_demo
