// Every public handle starts with a type tag, so a NULL, freed or wrong-type
// pointer coming through a binding's untyped path is reported as
// KAIO_ERROR_INVALID_HANDLE instead of being dereferenced as something else.
#pragma once

#include <cstdint>

namespace kaio {

enum class HandleTag : uint32_t {
  dead = 0xDEADDEADu,
  device = 0x4B444556u,  // "KDEV"
  stream = 0x4B53544Du,
  event = 0x4B45564Eu,
  buffer = 0x4B425546u,
  module = 0x4B4D4F44u,
  kernel = 0x4B4B524Eu,
  op = 0x4B4F5020u,
  lang_kernel = 0x4B4C414Eu,  // "KLAN"
};

template <class T>
bool is_live(const T *handle) {
  return handle != nullptr && handle->tag == T::kTag;
}

}  // namespace kaio
