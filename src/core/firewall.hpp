// The exception firewall every extern "C" entry point runs its body in: no
// C++ exception crosses the ABI, whatever the body or the standard library
// throws. It also records the entry point's name (api_name()) for the body's
// error messages.
#pragma once

#include <exception>
#include <new>

#include "core/call_context.hpp"
#include "core/error.hpp"

namespace kaio {

template <class Body>
kaio_status firewall(const char *name, Body &&body) noexcept {
  ApiCall call(name);
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(KAIO_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory.", name);
  } catch (const std::exception &e) {
    return fail(KAIO_ERROR_INTERNAL, "%s: internal error: %s. Please report this.", name, e.what());
  } catch (...) {
    return fail(KAIO_ERROR_INTERNAL, "%s: internal error (unknown exception). Please report this.",
                name);
  }
}

// For void functions (destroy) that must not throw either.
template <class Body>
void firewall_void(const char *name, Body &&body) noexcept {
  ApiCall call(name);
  try {
    body();
  } catch (...) {
  }
}

}  // namespace kaio
