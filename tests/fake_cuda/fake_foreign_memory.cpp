// Memory that libkaio never allocates but is handed by its users: the
// stream-ordered pool (cuMemAllocAsync: candle, JAX, PyTorch's async
// backend) and virtual memory management (cuMemCreate + cuMemMap: PyTorch's
// expandable segments). Exported under the driver's names for the tests;
// their pointer attributes live with the others in fake_memory.cpp.
#include <cstdint>
#include <cstdlib>

#include "fake_state.hpp"
#include "foreign_memory_abi.hpp"

namespace kaio::fake {
namespace {

constexpr size_t kGranularity = 2u << 20;  // what an H100 reports

bool reserve_bytes(int device, size_t bytes) {
  State &s = state();
  unsigned long long &used = s.used_bytes.at(device);
  if (bytes > s.config.total_mem - used) return false;
  used += bytes;
  return true;
}

void *host(CUdeviceptr ptr) { return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr)); }

// The reservation holding all of [ptr, ptr + size).
std::map<CUdeviceptr, Reservation>::iterator find_reservation(CUdeviceptr ptr, size_t size) {
  auto &reservations = state().reservations;
  auto it = reservations.upper_bound(ptr);
  if (it == reservations.begin()) return reservations.end();
  --it;
  if (ptr - it->first >= it->second.size || size > it->second.size - (ptr - it->first))
    return reservations.end();
  return it;
}

bool overlaps_mapping(CUdeviceptr ptr, size_t size) {
  auto &allocations = state().allocations;
  auto it = allocations.lower_bound(ptr);
  if (it != allocations.end() && it->first < ptr + size) return true;
  return it != allocations.begin() && std::prev(it)->first + std::prev(it)->second.size > ptr;
}

}  // namespace
}  // namespace kaio::fake

using namespace kaio::fake;

KAIO_FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t bytes, CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  if (!ptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > SIZE_MAX - 256 || !reserve_bytes(ctx->device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  void *block = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!block) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<uintptr_t>(block);
  state().allocations[*ptr] = Allocation{bytes, nullptr, ctx->device, MemoryKind::pool};
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  auto &allocations = state().allocations;
  auto it = allocations.find(ptr);
  if (it == allocations.end() || it->second.kind != MemoryKind::pool)
    return CUDA_ERROR_INVALID_VALUE;
  state().used_bytes.at(it->second.device) -= it->second.size;
  std::free(host(ptr));
  allocations.erase(it);
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                        const CUmemAllocationProp *prop, int) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!granularity || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !valid_device(prop->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t,
                                              CUdeviceptr addr, unsigned long long flags) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!ptr || size == 0 || size % kGranularity || addr || flags) return CUDA_ERROR_INVALID_VALUE;
  void *block = std::aligned_alloc(kGranularity, size);
  if (!block) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<uintptr_t>(block);
  state().reservations[*ptr] = Reservation{size};
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  auto &reservations = state().reservations;
  auto it = reservations.find(ptr);
  if (it == reservations.end() || it->second.size != size || overlaps_mapping(ptr, size))
    return CUDA_ERROR_INVALID_VALUE;
  std::free(host(ptr));
  reservations.erase(it);
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                      const CUmemAllocationProp *prop, unsigned long long flags) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!handle || !prop || flags || size == 0 || size % kGranularity ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(prop->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  if (!reserve_bytes(prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  State &s = state();
  *handle = s.next_physical++;
  s.physical[*handle] = PhysicalAllocation{size, prop->location.id};
  return CUDA_SUCCESS;
}

// As on the real driver, the memory itself goes once it is also unmapped;
// the fake counts it free at once.
KAIO_FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  State &s = state();
  auto it = s.physical.find(handle);
  if (it == s.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  s.used_bytes.at(it->second.device) -= it->second.size;
  s.physical.erase(it);
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                   CUmemGenericAllocationHandle handle,
                                   unsigned long long flags) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  State &s = state();
  auto physical = s.physical.find(handle);
  auto reservation = find_reservation(ptr, size);
  if (physical == s.physical.end() || reservation == s.reservations.end() || flags ||
      size == 0 || size % kGranularity || ptr % kGranularity || offset % kGranularity ||
      offset > physical->second.size || size > physical->second.size - offset ||
      overlaps_mapping(ptr, size))
    return CUDA_ERROR_INVALID_VALUE;
  Allocation a{size, nullptr, physical->second.device, MemoryKind::mapping};
  a.reserved_start = reservation->first;
  a.reserved_size = reservation->second.size;
  s.allocations[ptr] = a;
  return CUDA_SUCCESS;
}

// The range must be whole mappings.
KAIO_FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  auto &allocations = state().allocations;
  for (CUdeviceptr at = ptr; at < ptr + size;) {
    auto it = allocations.find(at);
    if (it == allocations.end() || it->second.kind != MemoryKind::mapping) return CUDA_ERROR_INVALID_VALUE;
    at += it->second.size;
  }
  for (CUdeviceptr at = ptr; at < ptr + size;) {
    auto it = allocations.find(at);
    at += it->second.size;
    allocations.erase(it);
  }
  return CUDA_SUCCESS;
}

// Access is kept per mapping for the device the memory lives on; grants to
// other devices are accepted and not recorded.
KAIO_FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                         size_t count) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!desc || count == 0 || size == 0 || !find_range(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  auto &allocations = state().allocations;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(desc[i].location.id))
      return CUDA_ERROR_INVALID_DEVICE;
    for (auto it = allocations.find(ptr); it != allocations.end() && it->first < ptr + size; ++it)
      if (it->second.device == desc[i].location.id)
        it->second.access = static_cast<unsigned long long>(desc[i].flags);
  }
  return CUDA_SUCCESS;
}
