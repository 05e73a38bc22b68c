#include "runtime/handle_registry.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>

namespace kaio {
namespace {

// Handles step by 16 bytes through the range, so even a handle that is 16
// bytes wide of a live one is unknown. 4 GiB gives 2^28 handles before the
// counter wraps; after a wrap, addresses still live are skipped, so a stale
// handle is recognised for at least 2^28 further creations.
constexpr uintptr_t kStep = 16;

struct Entry {
  void *object;
  HandleTag tag;
  HandleUse use;
};

struct Registry {
  uintptr_t base = 0;
  uintptr_t slots = 0;
  uintptr_t next = 0;
  std::mutex mutex;
  std::unordered_map<uintptr_t, Entry> live;

  Registry() {
    // PROT_NONE and MAP_NORESERVE: address space only, no memory; halve
    // under an address-space limit (ulimit -v, valgrind).
    for (size_t bytes = size_t{1} << 32; bytes >= (size_t{1} << 16); bytes /= 2) {
      void *p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) continue;
      base = reinterpret_cast<uintptr_t>(p);
      slots = bytes / kStep;
      return;
    }
  }
};

// Never destroyed: handles may be destroyed from static destructors.
Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

}  // namespace

void *handle_issue(HandleTag tag, void *object, HandleUse use) {
  Registry &r = registry();
  if (r.slots == 0) return nullptr;
  std::lock_guard lock(r.mutex);
  if (r.live.size() >= r.slots) return nullptr;
  uintptr_t address = 0;
  do {
    address = r.base + (r.next++ % r.slots) * kStep;
  } while (r.live.count(address));
  try {
    r.live.emplace(address, Entry{object, tag, use});
  } catch (const std::bad_alloc &) {
    return nullptr;
  }
  return reinterpret_cast<void *>(address);
}

void *handle_find(HandleTag tag, const void *handle) {
  if (!handle_in_range(handle)) return nullptr;
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<uintptr_t>(handle));
  return it != r.live.end() && it->second.tag == tag ? it->second.object : nullptr;
}

void *handle_retire(HandleTag tag, const void *handle, HandleUse use) {
  if (!handle_in_range(handle)) return nullptr;
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<uintptr_t>(handle));
  if (it == r.live.end() || it->second.tag != tag || it->second.use != use) return nullptr;
  void *object = it->second.object;
  r.live.erase(it);
  return object;
}

bool handle_in_range(const void *p) {
  const Registry &r = registry();
  const auto a = reinterpret_cast<uintptr_t>(p);
  return r.slots != 0 && a >= r.base && a < r.base + r.slots * kStep && (a - r.base) % kStep == 0;
}

size_t handle_live_count() {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  return r.live.size();
}

}  // namespace kaio
