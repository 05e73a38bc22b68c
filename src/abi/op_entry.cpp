#include "abi/op_entry.hpp"

#include "core/call_context.hpp"

namespace kaio {

kaio_status gather_views(const NamedView *views, size_t count, kaio_tensor *out, const char *hint) {
  for (size_t i = 0; i < count; ++i) {
    if (views[i].view) {
      out[i] = *views[i].view;
    } else if (views[i].optional) {
      std::memset(&out[i], 0, sizeof out[i]);
    } else {
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor%s.",
                  api_name(), views[i].name, hint);
    }
  }
  return KAIO_OK;
}

}  // namespace kaio
