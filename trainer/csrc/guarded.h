// How every entry point of the C++ shim reports failure: C++ exceptions never cross the C
// boundary; they come back as a status (0 = success) and a malloc'ed message that the caller
// frees with tnt_free_error (hooks.cpp).
#pragma once

#include <cstdlib>
#include <cstring>
#include <exception>

namespace tnt {

inline char* copy_message(const char* what) {
  size_t n = std::strlen(what);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out != nullptr) {
    std::memcpy(out, what, n + 1);
  }
  return out;
}

// Runs `body`; on an exception stores its message in `*error` and returns 1.
template <typename F>
int guarded(char** error, F&& body) {
  *error = nullptr;
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    *error = copy_message(e.what());
  } catch (...) {
    *error = copy_message("unknown C++ exception");
  }
  return 1;
}

}  // namespace tnt
