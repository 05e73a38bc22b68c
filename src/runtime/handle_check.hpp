// The one check every entry point makes of a handle argument, with one
// message shape: which argument, what was wrong, and how to get a good one.
#pragma once

#include "core/error.hpp"
#include "runtime/handle.hpp"

namespace kaio {

// T names itself and how to make one: T::kName, T::kHowToMake.
template <class T>
kaio_status check_handle(const char *caller, const char *arg, const T *handle) {
  if (is_live(handle)) return KAIO_OK;
  return fail(KAIO_ERROR_INVALID_HANDLE, "%s: argument '%s' is %s%s; %s.", caller, arg,
              handle ? "not a live " : "NULL", handle ? T::kName : "", T::kHowToMake);
}

}  // namespace kaio
