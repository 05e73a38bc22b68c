// What the driver reports for each kind of memory (read off an H100 with
// driver 580; tests/gpu_runtime_test.cpp checks it on every GPU run):
//   plain cuMemAlloc   CONTEXT = the allocating context, RANGE = the allocation
//   pool (AllocAsync)  CONTEXT = NULL, MEMPOOL_HANDLE set, RANGE = the allocation
//   VMM (cuMemMap)     CONTEXT = NULL, RANGE = the whole reserved VA range,
//                      mapped or not; MAPPING_BASE/SIZE = the one mapping;
//                      ACCESS_FLAGS = what cuMemSetAccess granted (0 at first);
//                      an unmapped address inside the range is unknown memory
//   pinned host        MEMORY_TYPE = HOST
// So the owner is checked by device ordinal (and by context only where there
// is one), and VMM memory is walked mapping by mapping to its end.
#include "runtime/foreign_memory.hpp"

#include <cinttypes>

#include "core/call_context.hpp"
#include "core/error.hpp"

namespace kaio {
namespace {

struct PointerFacts {
  cu::CUcontext context = nullptr;
  unsigned memory_type = 0;  // 0: not memory the driver knows
  int ordinal = -1;
  cu::CUdeviceptr range_start = 0;
  size_t range_size = 0;
  unsigned long long access = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  void *pool = nullptr;
  cu::CUdeviceptr mapping_base = 0;
  size_t mapping_size = 0;
  bool has_mapping = false;  // the driver answered the VMM attributes
};

// One driver call for all attributes. cuPointerGetAttributes answers
// unknown pointers with zeroed values, not an error; a driver that predates
// one of the newer attributes rejects the whole list, so fall back to the
// five every supported driver has.
bool query(const driver::Api *api, cu::CUdeviceptr ptr, PointerFacts *f) {
  int attributes[] = {cu::CU_POINTER_ATTRIBUTE_CONTEXT,        cu::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                      cu::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, cu::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                      cu::CU_POINTER_ATTRIBUTE_RANGE_SIZE,     cu::CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
                      cu::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, cu::CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
                      cu::CU_POINTER_ATTRIBUTE_MAPPING_SIZE};
  void *data[] = {&f->context,    &f->memory_type, &f->ordinal,      &f->range_start, &f->range_size,
                  &f->access,     &f->pool,        &f->mapping_base, &f->mapping_size};
  constexpr unsigned kAll = sizeof attributes / sizeof attributes[0], kBasic = 5;
  if (api->cuPointerGetAttributes(kAll, attributes, data, ptr) == cu::CUDA_SUCCESS) {
    f->has_mapping = true;
  } else {
    *f = PointerFacts{};
    if (api->cuPointerGetAttributes(kBasic, attributes, data, ptr) != cu::CUDA_SUCCESS) return false;
  }
  return f->memory_type != 0 && f->range_size != 0;
}

kaio_status unknown(uint64_t ptr, uint64_t at) {
  const char *fn = api_name();
  if (at == ptr)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'device_ptr' (0x%" PRIx64 ") is not device memory the driver knows; "
                "pass a pointer from cuMemAlloc, cuMemAllocAsync, cuMemMap or a framework "
                "allocator.",
                fn, ptr);
  return fail(KAIO_ERROR_OUT_OF_BOUNDS,
              "%s: the range at argument 'device_ptr' (0x%" PRIx64 ") is mapped only up to 0x%" PRIx64
              "; wrap at most %" PRIu64 " bytes, or map the rest first.",
              fn, ptr, at, at - ptr);
}

// The checks every piece of the range must pass.
kaio_status check_owner(const kaio_device *device, uint64_t ptr, const PointerFacts &f) {
  const char *fn = api_name();
  if (f.memory_type == cu::CU_MEMORYTYPE_HOST)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'device_ptr' (0x%" PRIx64 ") is pinned host memory; copy the data "
                "into device memory and wrap that.",
                fn, ptr);
  if (f.ordinal != device->ordinal)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: argument 'device_ptr' (0x%" PRIx64 ") is memory of device %d, not of device "
                "%d; wrap it with a kaio_device opened on ordinal %d.",
                fn, ptr, f.ordinal, device->ordinal, f.ordinal);
  if (f.context && f.context != device->context)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: argument 'device_ptr' (0x%" PRIx64 ") was allocated in a context of device "
                "%d other than its primary context, which libkaio uses; allocate it in the "
                "primary context (as the runtime API, PyTorch and candle do).",
                fn, ptr, device->ordinal);
  if (f.access != cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'device_ptr' (0x%" PRIx64 ") is mapped without read-write access "
                "for device %d (access flags %llu); grant it with cuMemSetAccess first.",
                fn, ptr, device->ordinal, f.access);
  return KAIO_OK;
}

}  // namespace

kaio_status check_foreign_memory(const kaio_device *device, uint64_t ptr, uint64_t size) {
  const char *fn = api_name();
  const driver::Api *api = device->api;
  PointerFacts f;
  if (!query(api, ptr, &f)) return unknown(ptr, ptr);
  KAIO_TRY(check_owner(device, ptr, f));
  uint64_t end = 0, range_end = f.range_start + f.range_size;
  if (__builtin_add_overflow(ptr, size, &end))
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: arguments 'device_ptr' + 'size_bytes' (0x%" PRIx64 " + %" PRIu64
                ") exceed 2^64; the allocation ends at 0x%" PRIx64 ", so wrap at most %" PRIu64
                " bytes.",
                fn, ptr, size, range_end, range_end - ptr);
  if (end > range_end)
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: arguments 'device_ptr' + 'size_bytes' (0x%" PRIx64 " + %" PRIu64
                ") run past the end of the allocation [0x%" PRIx64 ", 0x%" PRIx64
                "); wrap at most %" PRIu64 " bytes.",
                fn, ptr, size, static_cast<uint64_t>(f.range_start), range_end, range_end - ptr);
  bool vmm = !f.context && !f.pool && f.memory_type != cu::CU_MEMORYTYPE_HOST;
  if (!vmm) return KAIO_OK;
  // A reserved range may be mapped in pieces, or not at all past some point.
  if (!f.has_mapping) {  // an old driver: check the last byte at least
    PointerFacts last;
    if (!query(api, end - 1, &last)) return unknown(ptr, end - 1);
    return check_owner(device, ptr, last);
  }
  uint64_t covered = f.mapping_base + f.mapping_size;
  while (covered < end) {
    PointerFacts next;
    if (!query(api, covered, &next) || next.mapping_base != covered || next.mapping_size == 0)
      return unknown(ptr, covered);
    KAIO_TRY(check_owner(device, ptr, next));
    covered += next.mapping_size;
  }
  return KAIO_OK;
}

}  // namespace kaio
