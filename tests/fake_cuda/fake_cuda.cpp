// A fake libcuda.so.1 for host tests: initialisation, entry-point lookup,
// error strings, devices, primary contexts and the kaio_fake_* test hooks.
// Memory, streams and events live in fake_memory.cpp; modules and launches
// in fake_module.cpp. README.md lists the behaviour and the env knobs.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fake_state.hpp"

namespace kaio::fake {
namespace {

constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;
constexpr unsigned long long kKnownProcAddressFlags = 0x3;
constexpr int kMaxDevices = 64;
constexpr int kL2Bytes = 1 << 20;

bool parse_ll(std::string_view text, long long &out) {
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

long long env_number(const char *name, long long fallback, long long lo, long long hi) {
  const char *text = std::getenv(name);
  long long v = 0;
  return text && parse_ll(text, v) && v >= lo && v <= hi ? v : fallback;
}

// "90" or "9.0" -> 9.0, "75" or "7.5" -> 7.5, "100" -> 10.0.
void read_compute_capability(Config &c) {
  const char *text = std::getenv("KAIO_FAKE_CC");
  if (!text) return;
  std::string_view s(text);
  long long major = 0, minor = 0;
  size_t dot = s.find('.');
  if (dot != std::string_view::npos) {
    if (!parse_ll(s.substr(0, dot), major) || !parse_ll(s.substr(dot + 1), minor)) return;
  } else {
    long long n = 0;
    if (!parse_ll(s, n)) return;
    major = n / 10;
    minor = n % 10;
  }
  if (major < 1 || major > 99 || minor < 0 || minor > 9) return;
  c.cc_major = static_cast<int>(major);
  c.cc_minor = static_cast<int>(minor);
}

bool name_listed(std::string_view list, std::string_view base, std::string_view versioned) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == "*" || item == base || item == versioned) return true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return false;
}

bool reported_missing(std::string_view base, std::string_view versioned) {
  const char *list = std::getenv("KAIO_FAKE_MISSING");
  return list && name_listed(list, base, versioned);
}

struct Symbol {
  const char *name;
  int version;
  const char *versioned;
  void *fn;
};

const Symbol kSymbols[] = {
#define KAIO_FAKE_SYMBOL(name, version, symbol, required, ret, args) \
  {#name, version, symbol, reinterpret_cast<void *>(&kaio_fake_##name)},
    KAIO_DRIVER_FUNCTIONS(KAIO_FAKE_SYMBOL)
#undef KAIO_FAKE_SYMBOL
};

const Symbol *find_symbol(const char *name) {
  for (const Symbol &s : kSymbols)
    if (std::strcmp(s.name, name) == 0) return &s;
  return nullptr;
}

struct ErrorText {
  CUresult code;
  const char *name;
  const char *text;
};

// Strings as the real driver (r580) returns them.
constexpr ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText *find_error(CUresult code) {
  for (const ErrorText &e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

// Device attributes beyond those libkaio declares, by their cuda.h names.
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
constexpr int CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;

bool device_attribute(int attribute, const Config &c, int &value) {
  struct Fixed {
    int attribute;
    int value;
  };
  // H100-like limits, except for the deliberately small SM count and L2.
  static constexpr Fixed kFixed[] = {
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 0x7fffffff},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, kDefaultSharedBytes},
      {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, kSmCount},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, kL2Bytes},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, kThreadsPerSm},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, kSharedPerSm},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, kOptInSharedBytes},
  };
  const Fixed dynamic[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c.cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c.cc_minor},
  };
  auto lookup = [&](const Fixed *first, const Fixed *last) {
    auto it = std::find_if(first, last, [&](const Fixed &f) { return f.attribute == attribute; });
    if (it == last) return false;
    value = it->value;
    return true;
  };
  return lookup(std::begin(kFixed), std::end(kFixed)) ||
         lookup(std::begin(dynamic), std::end(dynamic));
}

CUctx_st *primary_context(int ordinal) {
  State &s = state();
  if (s.contexts.size() <= static_cast<size_t>(ordinal)) s.contexts.resize(ordinal + 1);
  auto &slot = s.contexts[ordinal];
  if (!slot) {
    slot = std::make_unique<CUctx_st>();
    slot->device = ordinal;
  }
  return slot.get();
}

bool is_context(CUcontext ctx) {
  const auto &all = state().contexts;
  return ctx && std::any_of(all.begin(), all.end(), [&](const auto &c) { return c.get() == ctx; });
}

}  // namespace

// Never destroyed: libkaio (or a test) may call into the fake from its own
// exit-time destructors, after this library's statics would be gone.
State &state() {
  static State *s = new State;
  return *s;
}

std::vector<CUcontext> &context_stack() {
  thread_local std::vector<CUcontext> stack;
  return stack;
}

Config read_config() {
  Config c;
  c.devices = static_cast<int>(env_number("KAIO_FAKE_DEVICES", c.devices, 0, kMaxDevices));
  read_compute_capability(c);
  c.init_error =
      static_cast<CUresult>(env_number("KAIO_FAKE_INIT_ERROR", CUDA_SUCCESS, 0, 0x7fffffff));
  c.driver_version =
      static_cast<int>(env_number("KAIO_FAKE_DRIVER_VERSION", c.driver_version, 1000, 999999));
  c.total_mem = static_cast<unsigned long long>(
      env_number("KAIO_FAKE_TOTAL_MEM", static_cast<long long>(c.total_mem), 1, INT64_MAX));
  return c;
}

CUresult check_init() { return state().initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

bool valid_device(int ordinal) { return ordinal >= 0 && ordinal < state().config.devices; }

CUresult check_active(CUcontext ctx) {
  return ctx->refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult current_context(CUcontext *ctx) {
  if (CUresult r = check_init()) return r;
  const auto &stack = context_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = stack.back();
  return check_active(*ctx);
}

// ---- initialisation, version, errors --------------------------------------

CUresult kaio_fake_cuInit(unsigned flags) {
  auto lock = lock_state();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Config c = read_config();
  if (c.init_error != CUDA_SUCCESS) return c.init_error;
  State &s = state();
  s.config = c;
  if (s.used_bytes.size() < static_cast<size_t>(c.devices)) s.used_bytes.resize(c.devices, 0);
  s.initialized = true;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = read_config().driver_version;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuGetErrorName(CUresult error, const char **name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText *e = find_error(error);
  *name = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult kaio_fake_cuGetErrorString(CUresult error, const char **text) {
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText *e = find_error(error);
  *text = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- devices ----------------------------------------------------------------

CUresult kaio_fake_cuDeviceGetCount(int *count) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = state().config.devices;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuDeviceGet(CUdevice *dev, int ordinal) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuDeviceGetName(char *name, int len, CUdevice dev) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "kaio fake device %d", dev);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuDeviceGetAttribute(int *value, int attrib, CUdevice dev) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return device_attribute(attrib, state().config, *value) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult kaio_fake_cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<size_t>(state().config.total_mem);
  return CUDA_SUCCESS;
}

// ---- primary contexts and the context stack -------------------------------

CUresult kaio_fake_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st *c = primary_context(dev);
  ++c->refs;
  *ctx = c;
  return CUDA_SUCCESS;
}

// The last release resets the context. Unlike the real driver the fake keeps
// the context's allocations, modules, streams and events: calls on them then
// fail with CUDA_ERROR_CONTEXT_IS_DESTROYED and the kaio_fake_live_* hooks
// still count them, so a test sees what was leaked.
CUresult kaio_fake_cuDevicePrimaryCtxRelease(CUdevice dev) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st *c = primary_context(dev);
  if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --c->refs;
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuCtxPushCurrent(CUcontext ctx) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!is_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  context_stack().push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuCtxPopCurrent(CUcontext *ctx) {
  auto lock = lock_state();
  if (CUresult r = check_init()) return r;
  auto &stack = context_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

}  // namespace kaio::fake

// ---- exports that are not in the driver table -----------------------------

using namespace kaio::fake;

// Like the real driver (r580): a symbol that is unknown, or asked for at a
// version older than the one that introduced it, returns CUDA_SUCCESS with
// *pfn = NULL and the reason in *symbolStatus; a version newer than the
// driver is CUDA_ERROR_INVALID_VALUE. KAIO_FAKE_MISSING names symbols to
// report as not found.
KAIO_FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                              unsigned long long flags, int *symbolStatus) {
  if (!symbol || !pfn || (flags & ~kKnownProcAddressFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (cudaVersion > read_config().driver_version) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  int status = CU_GET_PROC_ADDRESS_SUCCESS;
  const Symbol *s = find_symbol(symbol);
  if (!s || reported_missing(s->name, s->versioned))
    status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  else if (cudaVersion < s->version)
    status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  else
    *pfn = s->fn;
  if (symbolStatus) *symbolStatus = status;
  return CUDA_SUCCESS;
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_launch_count(void) {
  auto lock = lock_state();
  return state().launches;
}

KAIO_FAKE_EXPORT int kaio_fake_last_launch(char *kernel_name, size_t cap, unsigned grid[3],
                                           unsigned block[3], unsigned *shared_bytes) {
  auto lock = lock_state();
  const Launch *l = state().last_launch.get();
  if (!l) return -1;
  if (kernel_name && cap > 0) std::snprintf(kernel_name, cap, "%s", l->kernel.c_str());
  if (grid) std::copy(l->grid, l->grid + 3, grid);
  if (block) std::copy(l->block, l->block + 3, block);
  if (shared_bytes) *shared_bytes = l->shared;
  return 0;
}

KAIO_FAKE_EXPORT int kaio_fake_last_launch_programmatic(void) {
  auto lock = lock_state();
  const Launch *l = state().last_launch.get();
  return l ? l->programmatic : -1;
}

KAIO_FAKE_EXPORT int kaio_fake_last_launch_param(size_t index, void *out, size_t size) {
  auto lock = lock_state();
  const Launch *l = state().last_launch.get();
  if (!l) return -1;
  if (index >= l->layout.size()) return -2;
  const ptx::Param &p = l->layout[index];
  if (!out || size != p.size) return -3;
  std::memcpy(out, l->params.data() + p.offset, p.size);
  return 0;
}

KAIO_FAKE_EXPORT void kaio_fake_fail_launch(const char *kernel_substring, int result) {
  auto lock = lock_state();
  state().fail_kernel = kernel_substring ? kernel_substring : "";
  state().fail_result = static_cast<CUresult>(result);
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_memsets(unsigned long long *last_dst,
                                                      size_t *last_bytes) {
  auto lock = lock_state();
  const State &s = state();
  if (last_dst) *last_dst = s.last_memset_dst;
  if (last_bytes) *last_bytes = s.last_memset_bytes;
  return s.memsets;
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_live_allocations(void) {
  auto lock = lock_state();
  return state().allocations.size();
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_live_modules(void) {
  auto lock = lock_state();
  return state().modules.size();
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_live_streams(void) {
  auto lock = lock_state();
  return state().streams.size();
}

KAIO_FAKE_EXPORT unsigned long long kaio_fake_live_events(void) {
  auto lock = lock_state();
  return state().events.size();
}

KAIO_FAKE_EXPORT int kaio_fake_primary_ctx_refs(int ordinal) {
  auto lock = lock_state();
  const auto &all = state().contexts;
  if (ordinal < 0) return -1;
  if (static_cast<size_t>(ordinal) >= all.size() || !all[ordinal]) return 0;
  return all[ordinal]->refs;
}

KAIO_FAKE_EXPORT size_t kaio_fake_context_depth(void) { return context_stack().size(); }
