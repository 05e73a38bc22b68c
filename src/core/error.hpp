// The per-thread last error and the helpers that fill it. Internal code
// reports failure by returning a kaio_status it got from fail(), so every
// failing path leaves a message behind. Failed driver calls are reported by
// driver/driver_error.hpp, above this layer.
#pragma once

#include <kaio/kaio.h>

#include <cstddef>
#include <cstdint>

namespace kaio {

// The longest last-error message kept; a longer one is cut, saying how many
// bytes were cut. Room for a whole JIT log (kJitLogBytes) and its preamble.
constexpr size_t kMaxErrorMessage = 80 * 1024;

// Records status and a printf-style message as this thread's last error and
// returns status, so call sites read `return fail(KAIO_ERROR_..., "...")`.
kaio_status fail(kaio_status status, const char *format, ...) __attribute__((format(printf, 2, 3)));

// As fail(), keeping the raw CUresult for kaio_last_error_driver_code().
kaio_status fail_with_driver_code(kaio_status status, int32_t driver_code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

// Forgets the last error; used by calls that report through out-structs.
void clear_last_error();

}  // namespace kaio

// Propagates a failed status: the callee has already recorded its message.
#define KAIO_TRY(expr)                          \
  do {                                          \
    kaio_status kaio_try_status_ = (expr);      \
    if (kaio_try_status_ != KAIO_OK) return kaio_try_status_; \
  } while (0)
