#include "errors.hpp"

#include <cstdio>
#include <exception>

namespace kaio_bench {

void check(kaio_status status, const char *call) {
  if (status == KAIO_OK) return;
  // The name first: kaio_last_error()'s text lasts only until the next kaio call.
  std::string message = std::string(call) + " failed: " + kaio_status_name(status) + ": ";
  message += kaio_last_error();
  throw KaioError(message, status);
}

int exit_status_of(const char *program, const std::function<int()> &body) {
  try {
    return body();
  } catch (const NoDevice &e) {
    std::fprintf(stderr, "%s: no usable CUDA device: %s\n", program, e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace kaio_bench
