// The handles users hold are not the addresses of libkaio's objects. Each is
// a fresh address in a reserved, inaccessible range, issued once and mapped
// to its object here. A destroyed, doubly destroyed or stale handle finds no
// entry, whatever the allocator later does with the object's memory, and a
// stray dereference of a handle faults instead of reading another object.
#pragma once

#include <cstddef>

#include "runtime/handle.hpp"

namespace kaio {

// Owned handles are the caller's references (ended by a _destroy). A device
// also has one borrowed handle, given out by getters such as
// kaio_buffer_device; it is valid while the device object lives and cannot
// be destroyed by the user.
enum class HandleUse : unsigned char { owned, borrowed };

// Maps a new handle to object; nullptr when no handle address (or host
// memory for the entry) is free.
void *handle_issue(HandleTag tag, void *object, HandleUse use);
// The object a live handle of this tag stands for, or nullptr.
void *handle_find(HandleTag tag, const void *handle);
// Ends a live handle of this tag and use, returning its object, or nullptr.
void *handle_retire(HandleTag tag, const void *handle, HandleUse use);
// Live handles of all tags, for tests.
size_t handle_live_count();

}  // namespace kaio
