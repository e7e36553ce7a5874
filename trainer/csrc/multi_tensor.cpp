// Multi-tensor ("foreach") operations: one libtorch call for a whole list of tensors, which on
// a GPU is a handful of kernel launches where a loop over ResNet-50's 161 parameters launched
// one (or three) per tensor: at about 10 µs of host time per launch, the optimizer and the
// gradient staging spent milliseconds per step just launching. On the CPU libtorch runs the
// same arithmetic tensor by tensor.
//
// Every entry point catches C++ exceptions and returns them as a heap string (free it with
// tnt_free_error, defined in hooks.cpp); nothing throws across the C boundary.
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_mul.h>
#include <c10/util/Exception.h>

#include "guarded.h"

using tnt::guarded;

namespace {

std::vector<at::Tensor> tensor_list(void* const* handles, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto* t = static_cast<at::Tensor*>(handles[i]);
    TORCH_CHECK(t != nullptr && t->defined(), "undefined tensor at position ", i);
    out.push_back(*t);
  }
  return out;
}

}  // namespace

extern "C" {

// dst[i].copy_(src[i], non_blocking=true) for every i, converting dtypes; sizes must match.
int tnt_foreach_copy(void* const* dst, void* const* src, size_t n, char** error) {
  return guarded(error, [&] {
    at::NoGradGuard no_grad;
    at::_foreach_copy_(tensor_list(dst, n), tensor_list(src, n), /*non_blocking=*/true);
  });
}

// SGD with momentum and L2 weight decay, PyTorch's formula (dampening 0, not Nesterov):
//   d = g + weight_decay * p;  buf = momentum * buf + d;  p -= lr * buf   (momentum != 0)
//   p -= lr * d                                                           (momentum == 0)
// `momenta` is ignored when momentum is 0.
int tnt_sgd_step(void* const* params, void* const* grads, void* const* momenta, size_t n,
                 double lr, double momentum, double weight_decay, char** error) {
  return guarded(error, [&] {
    at::NoGradGuard no_grad;
    auto p = tensor_list(params, n);
    auto d = tensor_list(grads, n);
    if (weight_decay != 0.0) {
      d = at::_foreach_add(d, p, weight_decay);
    }
    if (momentum != 0.0) {
      auto buf = tensor_list(momenta, n);
      at::_foreach_mul_(buf, momentum);
      at::_foreach_add_(buf, d);
      at::_foreach_add_(p, buf, -lr);
    } else {
      at::_foreach_add_(p, d, -lr);
    }
  });
}

}  // extern "C"
