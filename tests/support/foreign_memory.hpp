// Memory made the way libkaio's users make it, straight through the driver
// libkaio loaded (the fake one in host tests, libcuda.so.1 on a GPU): plain
// cuMemAlloc, the stream-ordered pool, virtual memory in one or several
// mappings, and pinned host memory. Each allocation frees itself.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kt {

struct ForeignAllocation {
  virtual ~ForeignAllocation() = default;
  uint64_t ptr = 0;     // where the usable bytes start
  uint64_t bytes = 0;   // how many are usable from ptr
};
using Foreign = std::unique_ptr<ForeignAllocation>;

enum class VmmAccess { none, read, read_write };

class ForeignMemory {
 public:
  // Null (and `why` set) when the driver lacks an entry point.
  static std::unique_ptr<ForeignMemory> open(std::string *why);

  Foreign plain(int ordinal, uint64_t bytes);
  Foreign pool(int ordinal, uint64_t bytes, kaio_stream *stream);
  // `mapped` granules, each from its own cuMemCreate, at the start of a
  // reservation of `reserved` granules; access granted to `ordinal`.
  Foreign vmm(int ordinal, int mapped, int reserved, VmmAccess access);
  Foreign pinned_host(int ordinal, uint64_t bytes);
  uint64_t granularity(int ordinal);

  struct Api;
  explicit ForeignMemory(std::shared_ptr<Api> api) : api_(std::move(api)) {}

 private:
  std::shared_ptr<Api> api_;
};

}  // namespace kt
