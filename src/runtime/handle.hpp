// Handle tags. The ABI layer turns each handle a user passes into its object
// through the registry (runtime/handle_registry.hpp); the objects also carry
// their tag, which internal checks (is_live) compare.
#pragma once

#include <cstdint>

namespace kaio {

enum class HandleTag : uint32_t {
  device = 0x4B444556u,  // "KDEV"
  stream = 0x4B53544Du,
  event = 0x4B45564Eu,
  buffer = 0x4B425546u,
  module = 0x4B4D4F44u,
  kernel = 0x4B4B524Eu,
  op = 0x4B4F5020u,
  lang_kernel = 0x4B4C414Eu,  // "KLAN"
};

// Whether p lies in the registry's handle range: true of every handle ever
// issued, false of every object.
bool handle_in_range(const void *p);

// For objects inside the library, never for a user's handle: an unresolved
// handle is refused without being dereferenced.
template <class T>
bool is_live(const T *object) {
  return object != nullptr && !handle_in_range(object) && object->tag == T::kTag;
}

}  // namespace kaio
