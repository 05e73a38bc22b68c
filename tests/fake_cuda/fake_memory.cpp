// Device memory (real host memory standing in for it), pointer attributes,
// streams and events. Work "on a stream" happens at once, so streams and
// events only carry their context and flags.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fake_state.hpp"

namespace kaio::fake {
namespace {

constexpr size_t kAllocationAlignment = 256;
constexpr unsigned CU_EVENT_BLOCKING_SYNC = 0x1;
constexpr unsigned CU_EVENT_INTERPROCESS = 0x4;
constexpr float kElapsedMs = 0.25f;

using AllocationEntry = std::map<CUdeviceptr, Allocation>::value_type;

void *host(CUdeviceptr ptr) { return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr)); }

CUresult copy_to_device(CUdeviceptr dst, const void *src, size_t bytes) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (!src || !find_range(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(host(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult copy_from_device(void *dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (!dst || !find_range(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, host(src), bytes);
  return CUDA_SUCCESS;
}

bool valid_event_flags(unsigned flags) {
  constexpr unsigned known =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (flags & ~known) return false;
  return !(flags & CU_EVENT_INTERPROCESS) || (flags & CU_EVENT_DISABLE_TIMING);
}

CUresult lookup_event(CUevent handle, CUevent_st **out) {
  if (CUresult r = check_init()) return r;
  CUevent_st *e = find(state().events, handle);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  *out = e;
  return check_active(e->ctx);
}


// The value type of each attribute the fake answers.
size_t attribute_size(int attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      return 4;
    default:
      return 8;
  }
}

// One handle per device's default pool; only compared, never dereferenced.
void *default_pool(int device) {
  static char pools[64];
  return &pools[device % 64];
}

CUresult pointer_attribute(const AllocationEntry &entry, int attribute, void *data) {
  const auto &[start, a] = entry;
  bool mapping = a.kind == MemoryKind::mapping;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext *>(data) = a.ctx;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned *>(data) =
          a.kind == MemoryKind::pinned_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int *>(data) = a.device;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:  // a mapping reports its whole reservation
      *static_cast<CUdeviceptr *>(data) = mapping ? a.reserved_start : start;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t *>(data) = mapping ? a.reserved_size : a.size;
      break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *static_cast<unsigned long long *>(data) =
          mapping ? a.access : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<void **>(data) = a.kind == MemoryKind::pool ? default_pool(a.device) : nullptr;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      *static_cast<CUdeviceptr *>(data) = start;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      *static_cast<size_t *>(data) = a.size;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

const AllocationEntry *find_range(CUdeviceptr ptr, size_t bytes) {
  auto &allocations = state().allocations;
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return nullptr;
  --it;
  const AllocationEntry *first = &*it;
  CUdeviceptr offset = ptr - it->first;
  if (offset >= it->second.size) return nullptr;
  size_t left = it->second.size - offset;  // bytes of this piece from ptr on
  while (bytes > left) {                    // continue into an adjacent mapping
    const Allocation &a = it->second;
    CUdeviceptr end = it->first + a.size;
    if (a.kind != MemoryKind::mapping || ++it == allocations.end() || it->first != end ||
        it->second.kind != MemoryKind::mapping || it->second.reserved_start != a.reserved_start)
      return nullptr;
    left += it->second.size;
  }
  return first;
}

bool is_special_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

CUresult stream_context(CUstream stream, CUcontext *ctx) {
  if (CUresult r = check_init()) return r;
  if (is_special_stream(stream)) return current_context(ctx);
  CUstream_st *s = find(state().streams, stream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *ctx = s->ctx;
  return check_active(*ctx);
}

// ---- memory -----------------------------------------------------------------

CUresult kaio_fake_cuMemAlloc(CUdeviceptr *ptr, size_t bytes) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  if (!ptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  unsigned long long &used = s.used_bytes.at(ctx->device);
  if (bytes > s.config.total_mem - used || bytes > SIZE_MAX - kAllocationAlignment)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t rounded = (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  void *block = std::aligned_alloc(kAllocationAlignment, rounded);
  if (!block) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr address = reinterpret_cast<uintptr_t>(block);
  s.allocations[address] = Allocation{bytes, ctx, ctx->device};
  used += bytes;
  *ptr = address;
  return CUDA_SUCCESS;
}

// Like the real driver, freeing 0 succeeds and needs no current context.
CUresult kaio_fake_cuMemFree(CUdeviceptr ptr) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (ptr == 0) return CUDA_SUCCESS;
  State &s = state();
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end() || it->second.kind != MemoryKind::device)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_active(it->second.ctx)) return r;
  s.used_bytes.at(it->second.ctx->device) -= it->second.size;
  std::free(host(ptr));
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

// Pinned host memory: host memory, tracked with the allocations (so leaks
// show in kaio_fake_live_allocations) and mapped at the same address.
CUresult kaio_fake_cuMemHostAlloc(void **out, size_t bytes, unsigned flags) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  if (!out || bytes == 0 || (flags & ~0x7u)) return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  void *block = std::aligned_alloc(kAllocationAlignment, rounded);
  if (!block) return CUDA_ERROR_OUT_OF_MEMORY;
  state().allocations[reinterpret_cast<uintptr_t>(block)] =
      Allocation{bytes, ctx, ctx->device, MemoryKind::pinned_host};
  *out = block;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuMemHostGetDevicePointer(CUdeviceptr *out, void *p, unsigned flags) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  auto &allocations = state().allocations;
  auto it = allocations.find(reinterpret_cast<uintptr_t>(p));
  if (!out || flags || it == allocations.end() || it->second.kind != MemoryKind::pinned_host)
    return CUDA_ERROR_INVALID_VALUE;
  *out = it->first;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuMemFreeHost(void *p) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  auto &allocations = state().allocations;
  auto it = allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations.end() || it->second.kind != MemoryKind::pinned_host)
    return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  return copy_to_device(dst, src, bytes);
}

CUresult kaio_fake_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  return copy_from_device(dst, src, bytes);
}

CUresult kaio_fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                                     CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  return copy_to_device(dst, src, bytes);
}

CUresult kaio_fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  return copy_from_device(dst, src, bytes);
}

CUresult kaio_fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                     CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  if (bytes == 0) return CUDA_SUCCESS;
  if (!find_range(dst, bytes) || !find_range(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(host(dst), host(src), bytes);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
                                   CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  if (count == 0) return CUDA_SUCCESS;
  if (!find_range(dst, count)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(host(dst), value, count);
  State &s = state();
  ++s.memsets;
  s.last_memset_dst = dst;
  s.last_memset_bytes = count;
  return CUDA_SUCCESS;
}

// Works without a current context, as unified addressing does on the real driver.
CUresult kaio_fake_cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  const AllocationEntry *entry = data ? find_range(ptr, 1) : nullptr;
  if (!entry) return CUDA_ERROR_INVALID_VALUE;
  return pointer_attribute(*entry, attribute, data);
}

// Unlike the singular call, unknown memory is no error: every value reads
// as zero (the documented behaviour, which libkaio relies on).
CUresult kaio_fake_cuPointerGetAttributes(unsigned count, int *attributes, void **data,
                                          CUdeviceptr ptr) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (count == 0 || !attributes || !data) return CUDA_ERROR_INVALID_VALUE;
  const AllocationEntry *entry = find_range(ptr, 1);
  static const AllocationEntry unknown{0, Allocation{}};
  for (unsigned i = 0; i < count; ++i) {
    if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = pointer_attribute(entry ? *entry : unknown, attributes[i], data[i])) return r;
    if (!entry) std::memset(data[i], 0, attribute_size(attributes[i]));
  }
  return CUDA_SUCCESS;
}

// ---- streams ----------------------------------------------------------------

CUresult kaio_fake_cuStreamCreate(CUstream *stream, unsigned flags) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  if (!stream || (flags & ~CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto s = std::make_unique<CUstream_st>();
  s->ctx = ctx;
  *stream = s.get();
  state().streams.emplace(s.get(), std::move(s));
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuStreamDestroy(CUstream stream) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  CUstream_st *s = is_special_stream(stream) ? nullptr : find(state().streams, stream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = check_active(s->ctx)) return r;
  state().streams.erase(stream);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuStreamSynchronize(CUstream stream) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  return stream_context(stream, &ctx);
}

CUresult kaio_fake_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  CUevent_st *e = nullptr;
  if (CUresult r = lookup_event(event, &e)) return r;
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult kaio_fake_cuStreamGetCtx(CUstream stream, CUcontext *ctx) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  return stream_context(stream, ctx);
}

// ---- events -----------------------------------------------------------------

CUresult kaio_fake_cuEventCreate(CUevent *event, unsigned flags) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  if (!event || !valid_event_flags(flags)) return CUDA_ERROR_INVALID_VALUE;
  auto e = std::make_unique<CUevent_st>();
  e->ctx = ctx;
  e->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  *event = e.get();
  state().events.emplace(e.get(), std::move(e));
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuEventDestroy(CUevent event) {
  auto lock = lock_state();
  CUevent_st *e = nullptr;
  if (CUresult r = lookup_event(event, &e)) return r;
  state().events.erase(event);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuEventRecord(CUevent event, CUstream stream) {
  auto lock = lock_state();
  CUevent_st *e = nullptr;
  if (CUresult r = lookup_event(event, &e)) return r;
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  if (ctx != e->ctx) return CUDA_ERROR_INVALID_HANDLE;
  e->recorded = true;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuEventSynchronize(CUevent event) {
  auto lock = lock_state();
  CUevent_st *e = nullptr;
  return lookup_event(event, &e);
}

// As on the real driver, an event that was never recorded or has timing
// disabled is CUDA_ERROR_INVALID_HANDLE; recorded work is always complete
// here, so CUDA_ERROR_NOT_READY never occurs.
CUresult kaio_fake_cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  auto lock = lock_state();
  CUevent_st *a = nullptr, *b = nullptr;
  if (CUresult r = lookup_event(start, &a)) return r;
  if (CUresult r = lookup_event(end, &b)) return r;
  if (!ms || !a->timing || !b->timing || !a->recorded || !b->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  *ms = kElapsedMs;
  return CUDA_SUCCESS;
}

}  // namespace kaio::fake
