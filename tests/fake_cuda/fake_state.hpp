// State shared by the fake driver's translation units. One mutex guards it
// all: the fake is for correctness tests, not throughput.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "driver/driver_api.hpp"
#include "ptx_parser.hpp"

// A handle is the address of one of these objects. The fake only
// dereferences a handle after finding it in State, so stale or forged handles
// produce error codes instead of crashes.
namespace kaio::cu {
struct CUctx_st {
  int device = 0;
  int refs = 0;  // primary-context retain count; 0 means reset (inactive)
};
struct CUstream_st {
  CUcontext ctx = nullptr;
};
struct CUevent_st {
  CUcontext ctx = nullptr;
  bool timing = true;
  bool recorded = false;
};
struct CUfunc_st {
  CUmodule module = nullptr;
  const kaio::fake::ptx::Entry *entry = nullptr;  // owned by the module
  int max_dynamic_shared = 48 * 1024;
  int carveout = -1;
};
struct CUmod_st {
  CUcontext ctx = nullptr;
  kaio::fake::ptx::Module ptx;
  std::vector<std::unique_ptr<CUfunc_st>> functions;
};
}  // namespace kaio::cu

namespace kaio::fake {

using namespace kaio::cu;

// Codes and enumerators the fake needs beyond those libkaio declares.
constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
constexpr int CU_FUNC_ATTRIBUTE_PTX_VERSION = 5;
constexpr int CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6;
constexpr int CU_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7;
constexpr int CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9;
constexpr int kOptInSharedBytes = 232448;
constexpr int kDefaultSharedBytes = 48 * 1024;
constexpr int kSmCount = 4;  // deliberately few: grids of a few CTAs span several waves
constexpr int kSharedPerSm = kOptInSharedBytes + 1024;  // each CTA reserves 1 KiB of it (sm_90)
constexpr int kThreadsPerSm = 2048;

struct Config {
  int devices = 2;
  int cc_major = 9;
  int cc_minor = 0;
  CUresult init_error = CUDA_SUCCESS;
  int driver_version = 13000;
  unsigned long long total_mem = 1ull << 30;

  int sm() const { return cc_major * 10 + cc_minor; }
};

// Reads the KAIO_FAKE_* environment; malformed values fall back to defaults.
Config read_config();

// How a piece of memory was made; the pointer attributes differ by kind as
// they do on the real driver (src/runtime/foreign_memory.cpp lists them).
enum class MemoryKind {
  device,       // cuMemAlloc: owned by its context
  pinned_host,  // cuMemHostAlloc: freed by cuMemFreeHost only
  pool,         // cuMemAllocAsync: no context, the device's default pool
  mapping,      // cuMemMap of a cuMemCreate handle into a reserved range
};

struct Allocation {
  size_t size = 0;
  CUcontext ctx = nullptr;  // null for pool memory and mappings
  int device = 0;
  MemoryKind kind = MemoryKind::device;
  // Mappings only: the reserved range around them, and the access that
  // cuMemSetAccess granted to their device (none until then).
  CUdeviceptr reserved_start = 0;
  size_t reserved_size = 0;
  unsigned long long access = 0;
};

// cuMemAddressReserve: backed by host memory at once, so a mapping's bytes
// are the reservation's bytes at that address.
struct Reservation {
  size_t size = 0;
};

// cuMemCreate: physical memory of one device. The fake gives each mapping
// its own bytes, so two mappings of one handle do not alias.
struct PhysicalAllocation {
  size_t size = 0;
  int device = 0;
};

struct Launch {
  std::string kernel;
  unsigned grid[3] = {};
  unsigned block[3] = {};
  unsigned shared = 0;
  bool programmatic = false;  // cuLaunchKernelEx with programmatic stream serialization
  std::vector<ptx::Param> layout;
  std::vector<unsigned char> params;
};

template <class T>
using Registry = std::unordered_map<T *, std::unique_ptr<T>>;

template <class T>
T *find(const Registry<T> &registry, T *handle) {
  auto it = registry.find(handle);
  return it == registry.end() ? nullptr : it->second.get();
}

struct State {
  std::mutex mutex;
  bool initialized = false;
  Config config;
  // Indexed by ordinal and never shrunk, so a context handle stays valid
  // across cuInit calls that change KAIO_FAKE_DEVICES.
  std::vector<std::unique_ptr<CUctx_st>> contexts;
  std::vector<unsigned long long> used_bytes;  // per device
  std::map<CUdeviceptr, Allocation> allocations;
  std::map<CUdeviceptr, Reservation> reservations;
  std::map<unsigned long long, PhysicalAllocation> physical;
  unsigned long long next_physical = 1;
  Registry<CUstream_st> streams;
  Registry<CUevent_st> events;
  Registry<CUmod_st> modules;
  std::unordered_set<CUfunction> functions;
  unsigned long long launches = 0;
  std::unique_ptr<Launch> last_launch;
  // kaio_fake_fail_launch: the next launch of a kernel whose name contains
  // fail_kernel returns fail_result (once).
  std::string fail_kernel;
  CUresult fail_result = CUDA_SUCCESS;
  // cuMemsetD8/D8Async calls that set bytes, and the last one's range.
  unsigned long long memsets = 0;
  CUdeviceptr last_memset_dst = 0;
  size_t last_memset_bytes = 0;
};

State &state();
[[nodiscard]] inline std::unique_lock<std::mutex> lock_state() {
  return std::unique_lock<std::mutex>(state().mutex);
}

// This thread's context stack (cuCtxPushCurrent / cuCtxPopCurrent).
std::vector<CUcontext> &context_stack();

// The helpers below expect the caller to hold the state lock.
CUresult check_init();
bool valid_device(int ordinal);
// The current context, which must exist and be active.
CUresult current_context(CUcontext *ctx);
// CUDA_ERROR_CONTEXT_IS_DESTROYED once the primary context was released.
CUresult check_active(CUcontext ctx);
bool is_special_stream(CUstream stream);
// The context a stream-ordered call runs in: the stream's own for a created
// stream (no current context needed, as with the real driver), else the
// current one.
CUresult stream_context(CUstream stream, CUcontext *ctx);
// The allocation (start, info) holding all of [ptr, ptr + bytes), bytes >= 1;
// a range may run across adjacent mappings of one reservation.
const std::map<CUdeviceptr, Allocation>::value_type *find_range(CUdeviceptr ptr, size_t bytes);

}  // namespace kaio::fake

// Each entry point is defined as kaio_fake_<base name> and exported under the
// versioned name the real libcuda uses (cuMemAlloc_v2, ...), with signatures
// taken from driver_api.hpp so the fake cannot drift from what libkaio calls.
// Build with -DKAIO_FAKE_PROC_ADDRESS_ONLY to hide them, leaving only
// cuGetProcAddress_v2: then KAIO_FAKE_MISSING also defeats libkaio's dlsym
// fallback, as a genuinely older driver would.
#ifdef KAIO_FAKE_PROC_ADDRESS_ONLY
#define KAIO_FAKE_ENTRY_VISIBILITY __attribute__((visibility("hidden")))
#else
#define KAIO_FAKE_ENTRY_VISIBILITY __attribute__((visibility("default")))
#endif
#define KAIO_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace kaio::fake {
#define KAIO_FAKE_DECLARE(name, version, symbol, required, ret, args) \
  extern "C" KAIO_FAKE_ENTRY_VISIBILITY ret kaio_fake_##name args __asm__(symbol);
KAIO_DRIVER_FUNCTIONS(KAIO_FAKE_DECLARE)
#undef KAIO_FAKE_DECLARE
}  // namespace kaio::fake
