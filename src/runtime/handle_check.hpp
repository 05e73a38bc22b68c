// How every entry point turns the handles it was given into objects, with one
// message shape: which argument, what was wrong, and how to get a good one.
#pragma once

#include <memory>
#include <type_traits>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "runtime/handle_registry.hpp"

namespace kaio {

// Replaces the handle in place by its object, or fails with
// KAIO_ERROR_INVALID_HANDLE, naming api_name() and the argument `arg`. T
// names itself and how to make one: T::kName, T::kHowToMake.
template <class T>
kaio_status resolve_handle(const char *arg, T *&handle) {
  using Object = std::remove_const_t<T>;
  if (void *object = handle ? handle_find(Object::kTag, handle) : nullptr) {
    handle = static_cast<T *>(object);
    return KAIO_OK;
  }
  return fail(KAIO_ERROR_INVALID_HANDLE, "%s: argument '%s' is %s%s; %s.", api_name(), arg,
              handle ? "not a live " : "NULL", handle ? Object::kName : "", Object::kHowToMake);
}

// For the queries that answer 0 or NULL to a bad handle.
template <class T>
T *find_handle(const T *handle) {
  return static_cast<T *>(handle_find(T::kTag, handle));
}

// Ends the caller's handle and returns its object; nullptr (and nothing
// ended) for NULL, a destroyed, foreign or borrowed handle.
template <class T>
T *retire_handle(const T *handle) {
  return static_cast<T *>(handle_retire(T::kTag, handle, HandleUse::owned));
}

// Gives the caller a handle to object, or fails leaving object to the caller.
template <class T>
kaio_status publish_handle(T **out, T *object) {
  void *handle = handle_issue(T::kTag, object, HandleUse::owned);
  if (!handle)
    return fail(KAIO_ERROR_OUT_OF_HOST_MEMORY,
                "%s: cannot issue a handle: out of host memory, or all 2^28 handle addresses "
                "are live; destroy handles you no longer use.",
                api_name());
  *out = static_cast<T *>(handle);
  return KAIO_OK;
}

// As above for an object a runtime function made: on failure it is destroyed.
template <class T, class Delete>
kaio_status publish_handle(T **out, std::unique_ptr<T, Delete> object) {
  KAIO_TRY(publish_handle(out, object.get()));
  object.release();
  return KAIO_OK;
}

}  // namespace kaio
