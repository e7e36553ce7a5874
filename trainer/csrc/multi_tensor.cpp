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
#include <cmath>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
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

// One Adam or AdamW update; the layout of `trainer::multi_tensor::AdamUpdate`.
struct TntAdamUpdate {
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  // The update's number, from 1 (bias correction).
  double step;
  // 0: Adam, weight decay as L2 in the gradient; 1: AdamW, decoupled weight decay.
  int decoupled;
};

// Adam (Kingma & Ba) and AdamW (Loshchilov & Hutter), PyTorch's formula without amsgrad:
//   g += weight_decay * p (Adam)   or   p *= 1 - lr * weight_decay (AdamW)
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)
int tnt_adam_step(void* const* params, void* const* grads, void* const* exp_avgs,
                  void* const* exp_avg_sqs, size_t n, const TntAdamUpdate* u, char** error) {
  return guarded(error, [&] {
    at::NoGradGuard no_grad;
    auto p = tensor_list(params, n);
    auto g = tensor_list(grads, n);
    auto m = tensor_list(exp_avgs, n);
    auto v = tensor_list(exp_avg_sqs, n);
    if (u->weight_decay != 0.0) {
      if (u->decoupled != 0) {
        at::_foreach_mul_(p, 1.0 - u->lr * u->weight_decay);
      } else {
        g = at::_foreach_add(g, p, u->weight_decay);
      }
    }
    at::_foreach_lerp_(m, g, 1.0 - u->beta1);
    at::_foreach_mul_(v, u->beta2);
    at::_foreach_addcmul_(v, g, g, 1.0 - u->beta2);
    double bc1 = 1.0 - std::pow(u->beta1, u->step);
    double bc2 = 1.0 - std::pow(u->beta2, u->step);
    auto denom = at::_foreach_div(v, bc2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, u->eps);
    at::_foreach_addcdiv_(p, m, denom, -u->lr / bc1);
  });
}

}  // extern "C"
