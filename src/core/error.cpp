#include "core/error.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

namespace kaio {
namespace {

struct LastError {
  kaio_status status = KAIO_OK;
  int32_t driver_code = 0;
  std::string message;
};

// Constructed on first use per thread. If building the string itself throws
// (out of memory) the fallback text below is used, so the message is never
// missing and never NULL.
LastError &last_error() {
  thread_local LastError error;
  return error;
}

void record(kaio_status status, int32_t driver_code, const char *text) noexcept {
  LastError &e = last_error();
  e.status = status;
  e.driver_code = driver_code;
  try {
    e.message.assign(text);
  } catch (...) {
    e.message.clear();  // clear() never allocates; kaio_last_error then reports the fallback
  }
}

// Formats into the last error whole (a JIT log can run to tens of KiB), up
// to kMaxErrorMessage bytes; past that the tail is cut and the cut counted.
void record_formatted(kaio_status status, int32_t driver_code, const char *format,
                      va_list args) noexcept {
  char small[1024];
  va_list again;
  va_copy(again, args);
  int len = std::vsnprintf(small, sizeof small, format, args);
  if (len < 0) {
    va_end(again);
    record(status, driver_code, "kaio: error message could not be formatted");
    return;
  }
  if (static_cast<size_t>(len) < sizeof small) {
    va_end(again);
    record(status, driver_code, small);
    return;
  }
  try {
    const size_t full = static_cast<size_t>(len), kept = std::min(full, kMaxErrorMessage);
    std::string text(full + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, again);
    text.resize(kept);
    if (kept < full) text += "... (" + std::to_string(full - kept) + " bytes cut)";
    va_end(again);
    LastError &e = last_error();
    e.status = status;
    e.driver_code = driver_code;
    e.message = std::move(text);
  } catch (...) {
    va_end(again);
    record(status, driver_code, small);  // the first 1023 bytes, rather than nothing
  }
}

}  // namespace

kaio_status fail(kaio_status status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  record_formatted(status, 0, format, args);
  va_end(args);
  return status;
}

kaio_status fail_with_driver_code(kaio_status status, int32_t driver_code, const char *format,
                                  ...) {
  va_list args;
  va_start(args, format);
  record_formatted(status, driver_code, format, args);
  va_end(args);
  return status;
}

void clear_last_error() { record(KAIO_OK, 0, ""); }

}  // namespace kaio

// The read side of the last error is part of the ABI; it lives here, next
// to the thread-local it reads.
extern "C" {

KAIO_API const char *kaio_last_error(void) {
  try {
    kaio::LastError &e = kaio::last_error();
    if (e.status != KAIO_OK && e.message.empty()) return "kaio: error message unavailable (out of host memory)";
    return e.message.c_str();
  } catch (...) {
    return "kaio: error message unavailable (thread-local storage failed)";
  }
}

KAIO_API kaio_status kaio_last_error_status(void) {
  try {
    return kaio::last_error().status;
  } catch (...) {
    return KAIO_ERROR_INTERNAL;
  }
}

KAIO_API size_t kaio_last_error_copy(char *buf, size_t cap) {
  const char *msg = kaio_last_error();
  size_t len = std::strlen(msg);
  if (buf && cap > 0) {
    size_t n = len < cap - 1 ? len : cap - 1;
    std::memcpy(buf, msg, n);
    buf[n] = '\0';
  }
  return len;
}

KAIO_API int32_t kaio_last_error_driver_code(void) {
  try {
    return kaio::last_error().driver_code;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
