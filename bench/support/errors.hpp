// How the bench programs fail: a kaio call's status becomes an exception,
// and the exception becomes the exit status (0 success, 1 any failure,
// 2 no usable GPU) that scripts tell a GPU-less machine from a bug by.
#pragma once

#include <kaio/kaio.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace kaio_bench {

// No driver, no device, or one too old: exit status 2, not a failure.
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Keeps the status so that a caller can tell a device fault, after which the
// context is unusable, from an error that fails only one case.
struct KaioError : std::runtime_error {
  KaioError(const std::string &message, kaio_status s) : std::runtime_error(message), status(s) {}
  kaio_status status;
};

// Throws KaioError naming `call` (the source text) when status is not KAIO_OK.
void check(kaio_status status, const char *call);
#define CHECK(call) ::kaio_bench::check((call), #call)

// Runs a bench and returns its exit status: body()'s own, 2 after NoDevice,
// 1 after any other exception, each reported on stderr as "program: ...".
int exit_status_of(const char *program, const std::function<int()> &body);

}  // namespace kaio_bench
