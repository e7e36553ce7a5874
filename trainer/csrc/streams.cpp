// Device streams, events and autocast for the trainer's GPU gradient path, through libtorch's
// device-generic c10 API (c10::Stream, c10::Event, the registered device guard), so this file
// needs no CUDA headers and links no CUDA library itself: on a machine or a libtorch without
// CUDA every call fails with libtorch's own message instead of crashing.
//
// Every entry point catches C++ exceptions and returns them as a heap string (free it with
// tnt_free_error, defined in hooks.cpp); nothing throws across the C boundary.
#include <memory>

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include "guarded.h"

using tnt::guarded;

namespace {

c10::impl::VirtualGuardImpl cuda_guard() {
  return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA);
}

c10::Device cuda_device(int index) {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

c10::ScalarType scalar_type(int code) {
  // The codes of tch's Kind for the two autocast types we offer.
  switch (code) {
    case 5:
      return c10::ScalarType::Half;
    case 15:
      return c10::ScalarType::BFloat16;
    default:
      TORCH_CHECK(false, "unsupported autocast dtype code ", code);
  }
}

c10::DeviceType device_type(int code) { return code == 0 ? c10::DeviceType::CPU : c10::DeviceType::CUDA; }

}  // namespace

extern "C" {

// Makes CUDA device `index` this thread's current device. Every thread that touches a
// rank's GPU calls it first: c10's event and stream calls restore the thread's previous
// device afterwards, and on a thread that never chose one that is device 0, whose context
// would then be created in every rank of the host.
int tnt_set_device(int index, char** error) {
  return guarded(error, [&] { cuda_guard().setDevice(cuda_device(index)); });
}

// A stream from libtorch's pool for CUDA device `index` (a side stream, not the default one).
int tnt_stream_from_pool(int index, void** out, char** error) {
  return guarded(error, [&] {
    auto s = cuda_guard().getStreamFromGlobalPool(cuda_device(index), /*isHighPriority=*/false);
    *out = new c10::Stream(s);
  });
}

// The stream that work on CUDA device `index` goes to now, on this thread.
int tnt_stream_current(int index, void** out, char** error) {
  return guarded(error, [&] { *out = new c10::Stream(cuda_guard().getStream(cuda_device(index))); });
}

void tnt_stream_free(void* stream) { delete static_cast<c10::Stream*>(stream); }

// Makes `stream` its device's current stream on this thread; `*previous` receives the one it
// replaces (restore it with another call).
int tnt_stream_exchange(void* stream, void** previous, char** error) {
  return guarded(error, [&] {
    auto* s = static_cast<c10::Stream*>(stream);
    *previous = new c10::Stream(cuda_guard().exchangeStream(*s));
  });
}

// Blocks until everything queued on `stream` has completed.
int tnt_stream_synchronize(void* stream, char** error) {
  return guarded(error, [&] { static_cast<c10::Stream*>(stream)->synchronize(); });
}

// An event of CUDA device `index` (created lazily by its first record).
int tnt_event_new(void** out, char** error) {
  return guarded(error, [&] { *out = new c10::Event(c10::DeviceType::CUDA); });
}

void tnt_event_free(void* event) { delete static_cast<c10::Event*>(event); }

// The event completes when everything queued on `stream` so far has completed.
int tnt_event_record(void* event, void* stream, char** error) {
  return guarded(error, [&] {
    static_cast<c10::Event*>(event)->record(*static_cast<c10::Stream*>(stream));
  });
}

// Work queued on `stream` after this call waits for the event (the host does not wait).
int tnt_event_block(void* event, void* stream, char** error) {
  return guarded(error, [&] {
    static_cast<c10::Event*>(event)->block(*static_cast<c10::Stream*>(stream));
  });
}

// `*done` = 1 when the event has completed (or was never recorded).
int tnt_event_query(void* event, int* done, char** error) {
  return guarded(error, [&] { *done = static_cast<c10::Event*>(event)->query() ? 1 : 0; });
}

// Tells the caching allocator that `tensor`'s memory is in use on `stream`, so freeing it on
// another stream does not hand the memory out before that use has finished.
int tnt_record_tensor_stream(void* tensor, void* stream, char** error) {
  return guarded(error, [&] {
    auto* t = static_cast<at::Tensor*>(tensor);
    TORCH_CHECK(t != nullptr && t->defined(), "undefined tensor");
    cuda_guard().recordDataPtrOnStream(t->storage().data_ptr(), *static_cast<c10::Stream*>(stream));
  });
}

// Bytes that libtorch's caching allocator has handed out on CUDA device `index` now.
int tnt_cuda_allocated_bytes(int index, int64_t* out, char** error) {
  return guarded(error, [&] {
    auto* allocator = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    auto stats = allocator->getDeviceStats(static_cast<c10::DeviceIndex>(index));
    *out = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
  });
}

// dst.copy_(src, non_blocking=true): on the current stream, without waiting for it when one
// side is page-locked host memory; a plain copy between CPU tensors. Converts the dtype.
int tnt_copy_async(void* dst, void* src, char** error) {
  return guarded(error, [&] {
    auto* d = static_cast<at::Tensor*>(dst);
    auto* s = static_cast<at::Tensor*>(src);
    TORCH_CHECK(d != nullptr && d->defined() && s != nullptr && s->defined(), "undefined tensor");
    at::NoGradGuard no_grad;
    d->copy_(*s, /*non_blocking=*/true);
  });
}

// Enters autocast for device type `device` (0 CPU, 1 CUDA) with `dtype` (tch Kind code);
// `*state` receives what tnt_autocast_exit restores.
int tnt_autocast_enter(int device, int dtype, int* prev_enabled, int* prev_dtype, char** error) {
  return guarded(error, [&] {
    auto type = device_type(device);
    *prev_enabled = at::autocast::is_autocast_enabled(type) ? 1 : 0;
    *prev_dtype = static_cast<int>(at::autocast::get_autocast_dtype(type));
    at::autocast::set_autocast_dtype(type, scalar_type(dtype));
    at::autocast::set_autocast_enabled(type, true);
    at::autocast::increment_nesting();
  });
}

int tnt_autocast_exit(int device, int prev_enabled, int prev_dtype, char** error) {
  return guarded(error, [&] {
    auto type = device_type(device);
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(type, prev_enabled != 0);
    at::autocast::set_autocast_dtype(type, static_cast<c10::ScalarType>(prev_dtype));
  });
}

}  // extern "C"
