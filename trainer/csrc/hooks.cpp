// Autograd hooks that tch does not expose: a post-accumulate-grad hook per parameter (what
// Python's `Tensor.register_post_accumulate_grad_hook` installs) and an end-of-backward callback
// queued on the autograd engine (what DDP's reducer uses to finalize a step).
//
// Every entry point catches C++ exceptions and returns them as a heap string (free it with
// tnt_free_error); nothing throws across the C boundary. The callbacks are Rust functions that
// never unwind.
#include <memory>
#include <string>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "guarded.h"

using tnt::guarded;

extern "C" {
typedef void (*tnt_ready_fn)(void* state, size_t index);
typedef void (*tnt_done_fn)(void* state);
}

namespace {

struct ReadyHook : torch::autograd::PostAccumulateGradHook {
  ReadyHook(tnt_ready_fn fn, void* state, size_t index)
      : fn_(fn), state_(state), index_(index) {}
  void operator()(const torch::autograd::Variable& /*param*/) override {
    fn_(state_, index_);
  }
  tnt_ready_fn fn_;
  void* state_;
  size_t index_;
};

}  // namespace

extern "C" {

void tnt_free_error(char* error) { std::free(error); }

// `tensor` is the `torch::Tensor*` behind a tch::Tensor. Replaces any post-accumulate-grad
// hook the tensor had (libtorch keeps one per tensor).
int tnt_set_post_acc_grad_hook(void* tensor, tnt_ready_fn fn, void* state, size_t index,
                               char** error) {
  return guarded(error, [&] {
    auto* t = static_cast<at::Tensor*>(tensor);
    TORCH_CHECK(t != nullptr && t->defined(), "undefined tensor");
    TORCH_CHECK(t->requires_grad(), "parameter does not require grad");
    TORCH_CHECK(t->is_leaf(), "parameter is not a leaf tensor");
    torch::autograd::impl::set_post_acc_grad_hooks(
        *t, std::make_unique<ReadyHook>(fn, state, index));
  });
}

int tnt_clear_post_acc_grad_hook(void* tensor, char** error) {
  return guarded(error, [&] {
    auto* t = static_cast<at::Tensor*>(tensor);
    TORCH_CHECK(t != nullptr && t->defined(), "undefined tensor");
    torch::autograd::impl::set_post_acc_grad_hooks(*t, nullptr);
  });
}

// Only valid while the engine runs a backward pass (e.g. from inside a hook).
int tnt_queue_end_of_backward(tnt_done_fn fn, void* state, char** error) {
  return guarded(error, [&] {
    torch::autograd::Engine::get_default_engine().queue_callback([fn, state] { fn(state); });
  });
}

}  // extern "C"
