// Checks the fake CUDA driver the way libkaio uses it: dlopen, then every
// entry point through cuGetProcAddress_v2. Pointed at a real libcuda.so.1
// instead, it skips the fake-only checks (hooks, knobs, fake values) and runs
// the rest, which is how the fake's semantics were compared with a real driver.
//
// usage: selftest [driver.so]
//        (default: $LIBKAIO_CUDA_DRIVER, else ./libkaio_fake_cuda.so)
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "driver/driver_api.hpp"

namespace {

using namespace kaio::cu;
using kaio::driver::Api;

using GetProcAddress = CUresult (*)(const char *, void **, int, unsigned long long, int *);

struct Hooks {
  unsigned long long (*launch_count)();
  int (*last_launch)(char *, size_t, unsigned *, unsigned *, unsigned *);
  int (*last_launch_param)(size_t, void *, size_t);
  int (*last_launch_programmatic)();
  unsigned long long (*live_allocations)();
  unsigned long long (*live_modules)();
  unsigned long long (*live_streams)();
  unsigned long long (*live_events)();
  int (*primary_ctx_refs)(int);
  size_t (*context_depth)();
};

constexpr CUresult kContextIsDestroyed = 709;
constexpr CUresult kOk = CUDA_SUCCESS;
constexpr int kSymbolNotFound = 1;
constexpr int kVersionNotSufficient = 2;
constexpr int kPointerDeviceOrdinal = 9;
constexpr int kFuncPtxVersion = 5;
constexpr int kFuncBinaryVersion = 6;
constexpr int kFuncCarveout = 9;

Api api;
GetProcAddress get_proc = nullptr;
Hooks hooks;
bool fake = false;
CUcontext ctx = nullptr;
int passed = 0, failed = 0;

void check(bool ok, const char *what, int line) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL selftest.cpp:%d: %s\n", line, what);
}

void check_eq(long long actual, long long expected, const char *what, int line) {
  if (actual == expected) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL selftest.cpp:%d: %s is %lld, expected %lld\n", line, what, actual, expected);
}

#define CHECK(cond) check((cond), #cond, __LINE__)
#define CHECK_EQ(actual, expected) \
  check_eq(static_cast<long long>(actual), static_cast<long long>(expected), #actual, __LINE__)

// Sets an environment knob for one scope; the selftest clears them all first.
class Knob {
 public:
  Knob(const char *name, const char *value) : name_(name) { setenv(name, value, 1); }
  ~Knob() { unsetenv(name_); }
  Knob(const Knob &) = delete;
  Knob &operator=(const Knob &) = delete;

 private:
  const char *name_;
};

void clear_knobs() {
  for (const char *k : {"KAIO_FAKE_DEVICES", "KAIO_FAKE_CC", "KAIO_FAKE_INIT_ERROR",
                        "KAIO_FAKE_DRIVER_VERSION", "KAIO_FAKE_MISSING", "KAIO_FAKE_TOTAL_MEM"})
    unsetenv(k);
}

void *lookup(const char *name, int version, int *status) {
  void *fn = nullptr;
  *status = -1;
  return get_proc(name, &fn, version, 0, status) == kOk ? fn : nullptr;
}

const char kNoTargetPtx[] = ".version 8.0\n.address_size 64\n.visible .entry k()\n{ ret; }\n";

const char kGoodPtx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    "// .entry commented_out(.param .u32 x)\n"
    ".visible .entry k(.param .u32 a, .param .u64 b, .param .align 16 .b8 c[32],\n"
    "    .param .u8 d, .param .f64 e)\n{ ret; }\n"
    ".visible .entry k2(.param .u8 a, .param .u64 .ptr .global .align 16 p,\n"
    "    .param .align 4 .b8 s[6], .param .u16 h, .param .u32 arr[3], .param .b8 z)\n{ ret; }\n"
    ".visible .entry maxk() .maxntid 128, 1, 1\n{ ret; }\n"
    ".visible .entry reqk() .reqntid 128\n{ ret; }\n"
    ".entry nop\n{ ret; }\n"
    ".visible .entry twelve(.param .u64 x, .param .u32 y)\n{ ret; }\n";

struct Jit {
  CUresult result;
  std::string log;
  size_t reported;  // what the driver wrote back into the size option
};

Jit load(const char *ptx, CUmodule *module, size_t cap = 512) {
  std::vector<char> log(cap + 1, 'X');
  log[cap] = '\0';
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(cap))};
  CUresult r = api.cuModuleLoadDataEx(module, ptx, 2, options, values);
  return {r, log.data(), static_cast<size_t>(reinterpret_cast<uintptr_t>(values[1]))};
}

std::string ptx_with(const char *version, const char *target, const char *extra = "") {
  return std::string(".version ") + version + "\n.target " + target + "\n.address_size 64\n" +
         extra + ".visible .entry k()\n{ ret; }\n";
}

CUfunction function(CUmodule m, const char *name) {
  CUfunction f = nullptr;
  CHECK_EQ(api.cuModuleGetFunction(&f, m, name), kOk);
  return f;
}

// ---- sections ---------------------------------------------------------------

void test_resolution(void *lib) {
  int status = 0;
  // The KAIO_FAKE_PROC_ADDRESS_ONLY build of the fake exports no versioned names.
  bool versioned_exports = !fake || dlsym(lib, "cuInit") != nullptr;
#define KAIO_CHECK_SYMBOL(name, version, symbol, required, ret, args)               \
  api.name = reinterpret_cast<decltype(api.name)>(lookup(#name, version, &status)); \
  check(api.name &&status == 0, "cuGetProcAddress_v2 resolves " #name, __LINE__);   \
  if (versioned_exports) check(dlsym(lib, symbol) != nullptr, "dlsym finds " symbol, __LINE__);
  KAIO_DRIVER_FUNCTIONS(KAIO_CHECK_SYMBOL)
#undef KAIO_CHECK_SYMBOL

  void *fn = &status;
  CHECK_EQ(get_proc("cuNoSuchFunction", &fn, 12000, 0, &status), kOk);
  CHECK(fn == nullptr);
  CHECK_EQ(status, kSymbolNotFound);
  fn = &status;
  CHECK_EQ(get_proc("cuFuncGetParamInfo", &fn, 12000, 0, &status), kOk);
  CHECK(fn == nullptr);
  CHECK_EQ(status, kVersionNotSufficient);
  CHECK_EQ(get_proc("cuInit", &fn, 99000, 0, &status), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(get_proc("cuInit", &fn, 12000, 8, &status), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(get_proc("cuInit", &fn, 12000, 0, nullptr), kOk);
  if (!fake) return;
  CHECK_EQ(get_proc(nullptr, &fn, 12000, 0, &status), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(get_proc("cuInit", nullptr, 12000, 0, &status), CUDA_ERROR_INVALID_VALUE);
  {
    Knob missing("KAIO_FAKE_MISSING", "cuStreamGetCtx, cuFuncGetParamInfo");
    CHECK(lookup("cuStreamGetCtx", 9020, &status) == nullptr);
    CHECK_EQ(status, kSymbolNotFound);
    CHECK(lookup("cuFuncGetParamInfo", 12040, &status) == nullptr);
    CHECK(lookup("cuMemAlloc", 3020, &status) == reinterpret_cast<void *>(api.cuMemAlloc));
  }
  {
    Knob missing("KAIO_FAKE_MISSING", "cuMemAlloc_v2");  // versioned names work too
    CHECK(lookup("cuMemAlloc", 3020, &status) == nullptr);
  }
  {
    Knob missing("KAIO_FAKE_MISSING", "*");
    CHECK(lookup("cuInit", 2000, &status) == nullptr);
  }
  CHECK(lookup("cuStreamGetCtx", 9020, &status) != nullptr);
  {
    Knob old("KAIO_FAKE_DRIVER_VERSION", "12000");
    int version = 0;
    CHECK_EQ(api.cuDriverGetVersion(&version), kOk);
    CHECK_EQ(version, 12000);
    CHECK_EQ(get_proc("cuFuncGetParamInfo", &fn, 12040, 0, &status), CUDA_ERROR_INVALID_VALUE);
  }
}

void test_before_init() {
  int count = -1, version = 0;
  CHECK_EQ(api.cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  CHECK_EQ(api.cuDriverGetVersion(&version), kOk);
  CHECK(version >= 11000);
  if (fake) CHECK_EQ(version, 13000);
  CHECK_EQ(api.cuDriverGetVersion(nullptr), CUDA_ERROR_INVALID_VALUE);
  const char *s = nullptr;
  CHECK_EQ(api.cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), kOk);
  CHECK(s && std::strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0);
  CHECK_EQ(api.cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s), kOk);
  CHECK(s && std::strcmp(s, "invalid argument") == 0);
  CHECK_EQ(api.cuGetErrorName(CUDA_ERROR_INVALID_PTX, &s), kOk);
  CHECK(s && std::strcmp(s, "CUDA_ERROR_INVALID_PTX") == 0);
  CHECK_EQ(api.cuGetErrorString(CUDA_ERROR_NOT_FOUND, &s), kOk);
  CHECK(s && std::strcmp(s, "named symbol not found") == 0);
  CHECK_EQ(api.cuGetErrorName(12345, &s), CUDA_ERROR_INVALID_VALUE);
  CHECK(s == nullptr);
  CHECK_EQ(api.cuInit(1), CUDA_ERROR_INVALID_VALUE);
  if (!fake) return;
  CHECK_EQ(api.cuGetErrorName(1, nullptr), CUDA_ERROR_INVALID_VALUE);
  Knob fail("KAIO_FAKE_INIT_ERROR", "100");
  CHECK_EQ(api.cuInit(0), CUDA_ERROR_NO_DEVICE);
  CHECK_EQ(api.cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  CHECK_EQ(api.cuCtxPopCurrent(nullptr), CUDA_ERROR_NOT_INITIALIZED);
  CHECK_EQ(api.cuMemFree(0), CUDA_ERROR_NOT_INITIALIZED);
}

void test_devices() {
  CHECK_EQ(api.cuInit(0), kOk);
  int count = 0;
  CHECK_EQ(api.cuDeviceGetCount(&count), kOk);
  CHECK(count >= 1);
  if (fake) CHECK_EQ(count, 2);
  CUdevice dev = -1;
  CHECK_EQ(api.cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
  CHECK_EQ(api.cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
  CHECK_EQ(api.cuDeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuDeviceGet(&dev, 0), kOk);
  CHECK_EQ(dev, 0);
  char name[64];
  CHECK_EQ(api.cuDeviceGetName(name, 4, 0), kOk);
  CHECK_EQ(std::strlen(name), 3);
  CHECK_EQ(api.cuDeviceGetName(name, sizeof name, count), CUDA_ERROR_INVALID_DEVICE);
  int v = 0;
  CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0), kOk);
  CHECK_EQ(v, 1024);
  CHECK_EQ(api.cuDeviceGetAttribute(&v, 9999, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, count),
           CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  CHECK_EQ(api.cuDeviceTotalMem(&total, 0), kOk);
  CHECK(total > 0);
  CHECK_EQ(api.cuDeviceTotalMem(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuDeviceTotalMem(&total, count), CUDA_ERROR_INVALID_DEVICE);
  if (!fake) return;
  CHECK_EQ(api.cuDeviceGetName(name, sizeof name, 1), kOk);
  CHECK(std::strcmp(name, "kaio fake device 1") == 0);
  CHECK_EQ(api.cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
  struct {
    int attribute, expected;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 4},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 1 << 20},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
  };
  for (const auto &a : attrs) {
    CHECK_EQ(api.cuDeviceGetAttribute(&v, a.attribute, 1), kOk);
    CHECK_EQ(v, a.expected);
  }
  CHECK_EQ(total, 1ull << 30);
}

void test_contexts() {
  CUcontext c = nullptr;
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(99), CUDA_ERROR_INVALID_DEVICE);
  CHECK_EQ(api.cuDevicePrimaryCtxRetain(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuDevicePrimaryCtxRetain(&c, 99), CUDA_ERROR_INVALID_DEVICE);
  CHECK_EQ(api.cuDevicePrimaryCtxRetain(&ctx, 0), kOk);
  CHECK(ctx != nullptr);
  CHECK_EQ(api.cuCtxPushCurrent(nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT);
  CUdeviceptr p = 0;
  CHECK_EQ(api.cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuCtxPushCurrent(ctx), kOk);
  CHECK_EQ(api.cuCtxPushCurrent(ctx), kOk);
  CHECK_EQ(api.cuCtxPopCurrent(nullptr), kOk);
  // The stack is per thread.
  CUresult other_thread = kOk;
  std::thread([&] { other_thread = api.cuMemAlloc(&p, 16); }).join();
  CHECK_EQ(other_thread, CUDA_ERROR_INVALID_CONTEXT);
  if (!fake) return;
  CHECK_EQ(api.cuCtxPushCurrent(reinterpret_cast<CUcontext>(&c)), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(hooks.primary_ctx_refs(0), 1);
  CHECK_EQ(hooks.primary_ctx_refs(1), 0);
  CHECK_EQ(hooks.context_depth(), 1);
}

void test_memory() {
  unsigned long long live = fake ? hooks.live_allocations() : 0;
  CUdeviceptr p = 0;
  CHECK_EQ(api.cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemAlloc(&p, 1ull << 50), CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(api.cuMemAlloc(&p, 1000), kOk);
  if (fake) {
    CHECK_EQ(p % 256, 0);
    CHECK_EQ(hooks.live_allocations(), live + 1);
  }

  CUdeviceptr start = 0;
  size_t size = 0;
  CUcontext owner = nullptr;
  int ordinal = -1, local = 0;
  CHECK_EQ(api.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 10), kOk);
  CHECK(start == p);
  CHECK_EQ(api.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 999), kOk);
  CHECK_EQ(size, 1000);
  CHECK_EQ(api.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 1000),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p), kOk);
  CHECK(owner == ctx);
  CHECK_EQ(api.cuPointerGetAttribute(&ordinal, kPointerDeviceOrdinal, p + 5), kOk);
  CHECK_EQ(ordinal, 0);
  auto host_address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(&local));
  CHECK_EQ(api.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, host_address),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuPointerGetAttribute(&owner, 9999, p), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuPointerGetAttribute(nullptr, CU_POINTER_ATTRIBUTE_CONTEXT, p),
           CUDA_ERROR_INVALID_VALUE);

  unsigned char in[1000], out[1000];
  for (int i = 0; i < 1000; ++i) in[i] = static_cast<unsigned char>(i * 7);
  CHECK_EQ(api.cuMemcpyHtoD(p + 990, in, 20), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemcpyHtoD(p, nullptr, 10), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemcpyHtoD(0, in, 0), kOk);
  CHECK_EQ(api.cuMemcpyDtoH(out, p + 1000, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemcpyHtoD(host_address, in, 4), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemsetD8Async(p, 1, 1001, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemsetD8Async(p, 1, 0, nullptr), kOk);
  CHECK_EQ(api.cuMemcpyHtoD(p, in, 1000), kOk);
  CHECK_EQ(api.cuMemsetD8Async(p + 100, 0xab, 50, nullptr), kOk);
  CHECK_EQ(api.cuMemcpyDtoDAsync(p + 500, p, 100, CU_STREAM_LEGACY), kOk);
  CHECK_EQ(api.cuMemcpyDtoHAsync(out, p, 1000, CU_STREAM_PER_THREAD), kOk);
  CHECK_EQ(api.cuStreamSynchronize(CU_STREAM_PER_THREAD), kOk);
  unsigned char expected[1000];
  std::memcpy(expected, in, 1000);
  std::memset(expected + 100, 0xab, 50);
  std::memcpy(expected + 500, expected, 100);
  CHECK(std::memcmp(out, expected, 1000) == 0);
  CHECK_EQ(api.cuMemcpyDtoDAsync(p + 1, p, 10, nullptr), kOk);  // overlapping
  CHECK_EQ(api.cuMemcpyHtoDAsync(p, in, 8, CU_STREAM_LEGACY), kOk);

  CHECK_EQ(api.cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuMemFree(0), kOk);
  CHECK_EQ(api.cuMemFree(p), kOk);
  CHECK_EQ(api.cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  if (fake) CHECK_EQ(hooks.live_allocations(), live);
}

void test_streams_and_events() {
  unsigned long long streams = fake ? hooks.live_streams() : 0;
  unsigned long long events = fake ? hooks.live_events() : 0;
  CUstream s = nullptr;
  CHECK_EQ(api.cuStreamCreate(&s, 2), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuStreamCreate(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), kOk);
  CUcontext c = nullptr;
  for (CUstream each :
       {s, static_cast<CUstream>(nullptr), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD}) {
    c = nullptr;
    CHECK_EQ(api.cuStreamGetCtx(each, &c), kOk);
    CHECK(c == ctx);
  }
  CHECK_EQ(api.cuStreamGetCtx(s, nullptr), CUDA_ERROR_INVALID_VALUE);
  for (CUstream special : {static_cast<CUstream>(nullptr), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD})
    CHECK_EQ(api.cuStreamDestroy(special), CUDA_ERROR_INVALID_HANDLE);

  for (unsigned flags : {0u, 1u, 2u, 3u, 6u}) {
    CUevent e = nullptr;
    CHECK_EQ(api.cuEventCreate(&e, flags), kOk);
    CHECK_EQ(api.cuEventDestroy(e), kOk);
  }
  CUevent e0 = nullptr, e1 = nullptr, untimed = nullptr;
  CHECK_EQ(api.cuEventCreate(&e0, 4), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuEventCreate(&e0, 8), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuEventCreate(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuEventCreate(&e0, 0), kOk);
  CHECK_EQ(api.cuEventCreate(&e1, 0), kOk);
  CHECK_EQ(api.cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), kOk);
  float ms = -1;
  CHECK_EQ(api.cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);  // not recorded
  CHECK_EQ(api.cuEventSynchronize(e0), kOk);
  CHECK_EQ(api.cuEventRecord(e0, nullptr), kOk);
  CHECK_EQ(api.cuEventSynchronize(e0), kOk);
  CHECK_EQ(api.cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(api.cuEventRecord(e1, s), kOk);
  CHECK_EQ(api.cuEventSynchronize(e1), kOk);
  CHECK_EQ(api.cuEventElapsedTime(&ms, e0, e1), kOk);
  CHECK(ms >= 0);
  if (fake) CHECK(ms == 0.25f);
  CHECK_EQ(api.cuEventRecord(untimed, CU_STREAM_PER_THREAD), kOk);
  CHECK_EQ(api.cuEventSynchronize(untimed), kOk);
  CHECK_EQ(api.cuEventElapsedTime(&ms, e0, untimed), CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(api.cuStreamWaitEvent(s, e0, 0), kOk);
  CHECK_EQ(api.cuStreamWaitEvent(nullptr, e0, 0), kOk);
  CHECK_EQ(api.cuStreamWaitEvent(s, e0, 2), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuStreamWaitEvent(s, nullptr, 0), CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(api.cuStreamSynchronize(s), kOk);

  // Handles carry their context; only the NULL stream and creation need a current one.
  CUdeviceptr p = 0;
  CHECK_EQ(api.cuMemAlloc(&p, 64), kOk);
  CHECK_EQ(api.cuCtxPopCurrent(&c), kOk);
  CHECK_EQ(api.cuStreamSynchronize(s), kOk);
  CHECK_EQ(api.cuStreamSynchronize(nullptr), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuStreamGetCtx(s, &c), kOk);
  CHECK_EQ(api.cuStreamGetCtx(nullptr, &c), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuEventRecord(e0, s), kOk);
  CHECK_EQ(api.cuEventRecord(e0, nullptr), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuStreamWaitEvent(s, e1, 0), kOk);
  CHECK_EQ(api.cuMemcpyHtoDAsync(p, &ms, sizeof ms, s), kOk);
  CHECK_EQ(api.cuMemcpyHtoD(p, &ms, sizeof ms), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuMemsetD8Async(p, 0, 8, nullptr), CUDA_ERROR_INVALID_CONTEXT);
  CUstream s2 = nullptr;
  CUevent e2 = nullptr;
  CHECK_EQ(api.cuStreamCreate(&s2, 0), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuEventCreate(&e2, 0), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuStreamSynchronize(s), kOk);
  CHECK_EQ(api.cuStreamDestroy(s), kOk);
  CHECK_EQ(api.cuEventDestroy(e0), kOk);
  CHECK_EQ(api.cuEventDestroy(e1), kOk);
  CHECK_EQ(api.cuEventDestroy(untimed), kOk);
  CHECK_EQ(api.cuMemFree(p), kOk);
  CHECK_EQ(api.cuCtxPushCurrent(ctx), kOk);
  if (!fake) return;
  CHECK_EQ(api.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);  // destroyed
  CHECK_EQ(api.cuEventRecord(e0, nullptr), CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(api.cuStreamDestroy(reinterpret_cast<CUstream>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(hooks.live_streams(), streams);
  CHECK_EQ(hooks.live_events(), events);
}

void check_params(CUfunction f, std::vector<std::pair<size_t, size_t>> expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    size_t offset = 99, size = 99;
    CHECK_EQ(api.cuFuncGetParamInfo(f, i, &offset, &size), kOk);
    CHECK_EQ(offset, expected[i].first);
    CHECK_EQ(size, expected[i].second);
  }
  size_t offset = 0;
  CHECK_EQ(api.cuFuncGetParamInfo(f, expected.size(), &offset, nullptr), CUDA_ERROR_INVALID_VALUE);
}

void test_jit_errors() {
  CUmodule m = nullptr;
  Jit j = load(kNoTargetPtx, &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_PTX);
  CHECK(!j.log.empty());
  CHECK_EQ(j.reported, j.log.size());
  if (fake)
    CHECK(j.log == "ptxas fatal   : fake JIT rejected the module: missing .target directive");
  j = load(kNoTargetPtx, &m, 16);
  CHECK_EQ(j.log.size(), 15);
  CHECK_EQ(j.reported, 16);
  j = load(".target sm_80\n.entry k()\n{ ret; }\n", &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_IMAGE);
  CHECK_EQ(load("", &m).result, CUDA_ERROR_INVALID_IMAGE);
  j = load(ptx_with("9.9", "sm_80").c_str(), &m);
  CHECK_EQ(j.result, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  CHECK(j.log.find("Unsupported .version 9.9; current version is '9.0'") != std::string::npos);
  j = load(ptx_with("8.8", "sm_120").c_str(), &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_PTX);
  CHECK(j.log.find("SM version specified by .target is higher") != std::string::npos);
  std::string twice = ptx_with("8.0", "sm_80") + ".visible .entry k()\n{ ret; }\n";
  CHECK_EQ(load(twice.c_str(), &m).result, CUDA_ERROR_INVALID_PTX);
  CHECK_EQ(api.cuModuleLoadDataEx(&m, nullptr, 0, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuModuleLoadDataEx(nullptr, kGoodPtx, 0, nullptr, nullptr),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuModuleLoadDataEx(&m, kGoodPtx, 2, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  if (!fake) return;
  j = load(ptx_with("8.0", "sm_80", "// KAIO_FAKE_JIT_ERROR\n").c_str(), &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_PTX);
  CHECK(j.log.find("line 4 contains KAIO_FAKE_JIT_ERROR") != std::string::npos);
  // one log line per error, then ptxas's fatal summary
  j = load(ptx_with("8.0", "sm_80", "// KAIO_FAKE_JIT_ERROR\n\n// KAIO_FAKE_JIT_ERROR\n").c_str(), &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_PTX);
  CHECK(j.log.find("ptxas application ptx input, line 4; error   : ") == 0);
  CHECK(j.log.find("\nptxas application ptx input, line 6; error   : ") != std::string::npos);
  CHECK(j.log.ends_with("\nptxas fatal   : Ptx assembly aborted due to errors"));
  j = load(ptx_with("8.0", "sm_80", ".entry bad(.param .pred p)\n{ ret; }\n").c_str(), &m);
  CHECK_EQ(j.result, CUDA_ERROR_INVALID_PTX);
  CHECK(j.log.find("unsupported .param type '.pred'") != std::string::npos);
  const char joined[] =
      ".entry j(.param .u8 a, .param .u64 .ptr.global.align 16 p, .param .b16 h)\n{ ret; }\n";
  CHECK_EQ(load(ptx_with("8.0", "sm_80", joined).c_str(), &m).result, kOk);
  check_params(function(m, "j"), {{0, 1}, {8, 8}, {16, 2}});
  CHECK_EQ(api.cuModuleUnload(m), kOk);
  CHECK_EQ(load(ptx_with("8.0", "sm_89a").c_str(), &m).result, CUDA_ERROR_INVALID_PTX);
  CHECK_EQ(load(ptx_with("8.0", "sm_90a").c_str(), &m).result, kOk);
  CHECK_EQ(api.cuModuleUnload(m), kOk);
}

CUmodule test_modules() {
  unsigned long long modules = fake ? hooks.live_modules() : 0;
  CUmodule m = nullptr;
  Jit j = load(kGoodPtx, &m);
  CHECK_EQ(j.result, kOk);
  CHECK(j.log.empty());
  CHECK_EQ(j.reported, 0);
  CUfunction f = nullptr;
  CHECK_EQ(api.cuModuleGetFunction(&f, m, "nosuch"), CUDA_ERROR_NOT_FOUND);
  CHECK_EQ(api.cuModuleGetFunction(&f, m, "commented_out"), CUDA_ERROR_NOT_FOUND);
  CHECK_EQ(api.cuModuleGetFunction(&f, m, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuModuleGetFunction(nullptr, m, "k"), CUDA_ERROR_INVALID_VALUE);
  CUfunction k = function(m, "k");
  CHECK(function(m, "k") == k);
  check_params(k, {{0, 4}, {8, 8}, {16, 32}, {48, 1}, {56, 8}});
  check_params(function(m, "k2"), {{0, 1}, {8, 8}, {16, 6}, {22, 2}, {24, 12}, {36, 1}});
  check_params(function(m, "twelve"), {{0, 8}, {8, 4}});
  check_params(function(m, "nop"), {});
  size_t size = 0;
  CHECK_EQ(api.cuFuncGetParamInfo(k, 0, nullptr, &size), CUDA_ERROR_INVALID_VALUE);

  int v = -1, major = 0, minor = 0;
  CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k), kOk);
  CHECK_EQ(v, 1024);
  CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function(m, "maxk")),
           kOk);
  CHECK_EQ(v, 128);
  CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function(m, "reqk")),
           kOk);
  CHECK_EQ(v, 1024);
  for (int zero : {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
                   CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES}) {
    CHECK_EQ(api.cuFuncGetAttribute(&v, zero, k), kOk);
    CHECK_EQ(v, 0);
  }
  CHECK_EQ(api.cuFuncGetAttribute(&v, kFuncPtxVersion, k), kOk);
  CHECK_EQ(v, 80);
  api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  CHECK_EQ(api.cuFuncGetAttribute(&v, kFuncBinaryVersion, k), kOk);
  CHECK_EQ(v, major * 10 + minor);
  CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k), kOk);
  CHECK_EQ(v, 49152);
  CHECK_EQ(api.cuFuncGetAttribute(&v, kFuncCarveout, k), kOk);
  CHECK_EQ(v, -1);
  CHECK_EQ(api.cuFuncGetAttribute(&v, 99, k), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncGetAttribute(nullptr, CU_FUNC_ATTRIBUTE_NUM_REGS, k),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k), kOk);
  if (fake) CHECK_EQ(v, 32);
  CUfunction k2 = function(m, "k2");
  CHECK_EQ(api.cuFuncSetAttribute(k2, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncSetAttribute(k2, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncSetAttribute(k2, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232448),
           kOk);
  CHECK_EQ(api.cuFuncSetAttribute(k2, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 64),
           CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncSetAttribute(k2, kFuncCarveout, 50), kOk);
  CHECK_EQ(api.cuFuncSetAttribute(k2, kFuncCarveout, 101), CUDA_ERROR_INVALID_VALUE);

  if (fake) {
    CUmodule doomed = nullptr;
    CHECK_EQ(load(kGoodPtx, &doomed).result, kOk);
    CHECK_EQ(hooks.live_modules(), modules + 2);
    CUfunction stale = function(doomed, "k");
    CHECK_EQ(api.cuModuleUnload(doomed), kOk);
    CHECK_EQ(api.cuModuleUnload(doomed), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(api.cuModuleGetFunction(&f, doomed, "k"), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, stale),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(api.cuLaunchKernel(stale, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(hooks.live_modules(), modules + 1);
  }
  return m;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned shared = 0, void **params = nullptr, void **extra = nullptr,
                CUstream s = nullptr) {
  return api.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}

void test_launch_limits(CUmodule m) {
  CUfunction nop = function(m, "nop");
  unsigned long long launches = fake ? hooks.launch_count() : 0;
  CHECK_EQ(launch(nop, 3, 2, 1, 32, 4, 1, 128), kOk);
  if (fake) {
    CHECK_EQ(hooks.launch_count(), launches + 1);
    char name[8];
    unsigned grid[3], block[3], shared = 0;
    CHECK_EQ(hooks.last_launch(name, sizeof name, grid, block, &shared), 0);
    CHECK(std::strcmp(name, "nop") == 0);
    CHECK(grid[0] == 3 && grid[1] == 2 && grid[2] == 1);
    CHECK(block[0] == 32 && block[1] == 4 && block[2] == 1);
    CHECK_EQ(shared, 128);
  }
  CHECK_EQ(launch(nop, 1, 1, 1, 1025, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 65), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 1, 1, 64, 32, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 0, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 65536, 1, 1, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 1, 65536, 1, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 0x80000000u, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 2, 65535, 1, 1, 1, 1), kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 49152), kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 49153), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(api.cuFuncSetAttribute(nop, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000),
           kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 60000), kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 60001), CUDA_ERROR_INVALID_VALUE);
  CUfunction maxk = function(m, "maxk"), reqk = function(m, "reqk");
  CHECK_EQ(launch(maxk, 1, 1, 1, 128, 1, 1), kOk);
  CHECK_EQ(launch(maxk, 1, 1, 1, 64, 2, 1), kOk);
  CHECK_EQ(launch(maxk, 1, 1, 1, 129, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(maxk, 1, 1, 1, 64, 3, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(reqk, 1, 1, 1, 128, 1, 1), kOk);
  CHECK_EQ(launch(reqk, 1, 1, 1, 64, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(reqk, 1, 1, 1, 64, 2, 1), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nullptr, 1, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_HANDLE);
  if (fake) CHECK_EQ(hooks.launch_count(), launches + 7);
  CHECK_EQ(api.cuStreamSynchronize(nullptr), kOk);
}

struct alignas(16) Blob {
  unsigned char bytes[32];
};

// Static .shared and the dynamic limit: the driver reports the static bytes
// (the entry's own and the module-scope variables it uses), defaults the
// dynamic limit to what they leave of 48 KiB, and caps static + dynamic at
// the opt-in limit. Each kernel reads back what another thread stored, so
// ptxas keeps the arrays.
const char kStaticSharedPtx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".shared .align 16 .b8 g[1024];\n"
    ".visible .entry own(.param .u64 out)\n{\n"
    "  .reg .b32 %r<5>;\n  .reg .b64 %rd<3>;\n"
    "  .shared .align 16 .b8 s[16384];\n"
    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, s;\n  shl.b32 %r3, %r1, 2;\n"
    "  add.u32 %r4, %r2, %r3;\n  st.shared.u32 [%r4+12288], %r1;\n  bar.sync 0;\n"
    "  ld.shared.u32 %r1, [%r2+16380];\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd2, %rd1;\n"
    "  st.global.u32 [%rd2], %r1;\n  ret;\n}\n"
    ".visible .entry uses_g(.param .u64 out)\n{\n"
    "  .reg .b32 %r<5>;\n  .reg .b64 %rd<3>;\n"
    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, g;\n  shl.b32 %r3, %r1, 2;\n"
    "  add.u32 %r4, %r2, %r3;\n  st.shared.u32 [%r4], %r1;\n  bar.sync 0;\n"
    "  ld.shared.u32 %r1, [%r2+1020];\n"
    "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd2, %rd1;\n"
    "  st.global.u32 [%rd2], %r1;\n  ret;\n}\n"
    ".visible .entry neither()\n{ ret; }\n";

void test_static_shared() {
  CUmodule m = nullptr;
  CHECK_EQ(load(kStaticSharedPtx, &m).result, kOk);
  if (!m) return;
  CUdeviceptr out = 0;
  CHECK_EQ(api.cuMemAlloc(&out, 4), kOk);
  void *params[] = {&out};
  struct Case {
    const char *name;
    int static_bytes;
  };
  for (const Case c : {Case{"own", 16384}, Case{"uses_g", 1024}, Case{"neither", 0}}) {
    CUfunction f = function(m, c.name);
    int v = -1;
    CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), kOk);
    CHECK_EQ(v, c.static_bytes);
    CHECK_EQ(api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f), kOk);
    const int left = 49152 - c.static_bytes;
    CHECK_EQ(v, left);
    void **p = c.static_bytes ? params : nullptr;
    CHECK_EQ(launch(f, 1, 1, 1, 256, 1, 1, left, p), kOk);
    CHECK_EQ(launch(f, 1, 1, 1, 256, 1, 1, left + 1, p), CUDA_ERROR_INVALID_VALUE);
    const int most = 232448 - c.static_bytes;
    CHECK_EQ(api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most + 1),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most), kOk);
    CHECK_EQ(launch(f, 1, 1, 1, 256, 1, 1, most, p), kOk);
  }
  CHECK_EQ(api.cuStreamSynchronize(nullptr), kOk);
  uint32_t got = 0;
  CHECK_EQ(api.cuMemcpyDtoH(&got, out, 4), kOk);
  if (!fake) CHECK_EQ(got, 255);  // uses_g's last launch: thread 255 stored g[1020]
  CHECK_EQ(api.cuMemFree(out), kOk);
  CHECK_EQ(api.cuModuleUnload(m), kOk);
}

// cuLaunchKernelEx with programmatic stream serialization (libkaio's launch
// of a kernel that executes griddepcontrol.wait): the config's checks, then
// the launch's, as cuLaunchKernel's.
void test_launch_ex(CUmodule m) {
  if (!api.cuLaunchKernelEx) return;  // test_resolution failed already
  CUfunction nop = function(m, "nop"), k = function(m, "k");
  CUstream s = nullptr;
  CHECK_EQ(api.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), kOk);
  CUlaunchAttribute attrs[2] = {};
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[1].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig c{3, 2, 1, 32, 4, 1, 128, s, attrs + 1, 1};
  auto ex = [&](CUfunction f, void **params = nullptr) {
    return api.cuLaunchKernelEx(&c, f, params, nullptr);
  };
  unsigned long long launches = fake ? hooks.launch_count() : 0;
  CHECK_EQ(api.cuLaunchKernelEx(nullptr, nop, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(ex(nop), kOk);
  CHECK_EQ(ex(nop), kOk);  // after a kernel that never lets it in early: still runs
  if (fake) {
    CHECK_EQ(hooks.launch_count(), launches + 2);
    char name[8];
    unsigned grid[3], block[3], shared = 0;
    CHECK_EQ(hooks.last_launch(name, sizeof name, grid, block, &shared), 0);
    CHECK(std::strcmp(name, "nop") == 0 && grid[0] == 3 && grid[1] == 2 && block[1] == 4);
    CHECK_EQ(shared, 128);
    CHECK_EQ(hooks.last_launch_programmatic(), 1);
  }
  attrs[1].value.programmaticStreamSerializationAllowed = 0;
  CHECK_EQ(ex(nop), kOk);
  if (fake) CHECK_EQ(hooks.last_launch_programmatic(), 0);
  attrs[1].value.programmaticStreamSerializationAllowed = 1;
  c.attrs = attrs;  // an IGNORE entry, then the attribute
  c.numAttrs = 2;
  CHECK_EQ(ex(nop), kOk);
  if (fake) CHECK_EQ(hooks.last_launch_programmatic(), 1);
  c.numAttrs = 0;  // attrs may be anything then, NULL included
  CHECK_EQ(ex(nop), kOk);
  c.attrs = nullptr;
  CHECK_EQ(ex(nop), kOk);
  if (fake) CHECK_EQ(hooks.last_launch_programmatic(), 0);
  c.numAttrs = 1;
  CHECK_EQ(ex(nop), CUDA_ERROR_INVALID_VALUE);
  c.attrs = attrs;
  attrs[0].id = 1000;  // no such attribute
  CHECK_EQ(ex(nop), CUDA_ERROR_INVALID_VALUE);
  attrs[0].id = 3;  // SYNCHRONIZATION_POLICY: a stream attribute, not a launch's
  CHECK_EQ(ex(nop), CUDA_ERROR_INVALID_VALUE);
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
  c.attrs = attrs + 1;
  c.blockDimX = 1025;  // the launch's own checks follow
  CHECK_EQ(ex(nop), CUDA_ERROR_INVALID_VALUE);
  c.blockDimX = 32;
  c.sharedMemBytes = 232449;  // past any opt-in limit
  CHECK_EQ(ex(nop), CUDA_ERROR_INVALID_VALUE);
  c.sharedMemBytes = 0;
  CHECK_EQ(ex(k), CUDA_ERROR_INVALID_VALUE);  // k has parameters: NULL kernelParams
  if (fake) CHECK_EQ(hooks.launch_count(), launches + 6);
  CHECK_EQ(api.cuStreamSynchronize(s), kOk);
  CHECK_EQ(api.cuStreamDestroy(s), kOk);
}

// cuOccupancyMaxActiveClusters on kernels whose cluster size
// .reqnctapercluster fixes (libkaio asks it once of each split kernel, for
// its wave counts): with one CTA an SM, at least one cluster and at most the
// SMs over the cluster size; NULL arguments refused.
const char kClusterPtx[] =
    ".version 7.8\n.target sm_90\n.address_size 64\n"
    ".visible .entry pair() .maxntid 128, 1, 1 .reqnctapercluster 2, 1, 1\n{ ret; }\n"
    ".visible .entry quad() .maxntid 128, 1, 1 .reqnctapercluster 1, 1, 4\n{ ret; }\n";

void test_occupancy_clusters() {
  if (!api.cuOccupancyMaxActiveClusters) return;  // test_resolution failed already
  CUmodule m = nullptr;
  CHECK_EQ(load(kClusterPtx, &m).result, kOk);
  if (!m) return;
  CUdevice dev = 0;
  int sms = 0;
  CHECK_EQ(api.cuDeviceGet(&dev, 0), kOk);
  CHECK_EQ(api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), kOk);
  const int most = 200 * 1024;  // one CTA an SM
  struct Case {
    const char *name;
    unsigned x, z;
  };
  for (const Case k : {Case{"pair", 2, 1}, Case{"quad", 1, 4}}) {
    CUfunction f = function(m, k.name);
    CHECK_EQ(api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most), kOk);
    CUlaunchConfig c{k.x, 1, k.z, 128, 1, 1, static_cast<unsigned>(most), nullptr, nullptr, 0};
    int clusters = -1;
    CHECK_EQ(api.cuOccupancyMaxActiveClusters(&clusters, f, &c), kOk);
    CHECK(clusters >= 1 && clusters * static_cast<int>(k.x * k.z) <= sms);
    if (fake) CHECK_EQ(clusters, sms / static_cast<int>(k.x * k.z));
    CHECK_EQ(api.cuOccupancyMaxActiveClusters(nullptr, f, &c), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(api.cuOccupancyMaxActiveClusters(&clusters, f, nullptr), CUDA_ERROR_INVALID_VALUE);
    std::printf("fake_cuda selftest: %s: %d clusters of %u at once on %d SMs\n", k.name, clusters,
                k.x * k.z, sms);
  }
  CHECK_EQ(api.cuModuleUnload(m), kOk);
}

void test_launch_params(CUmodule m) {
  CUfunction k = function(m, "k"), twelve = function(m, "twelve"), nop = function(m, "nop");
  uint32_t a = 0xa1a2a3a4;
  uint64_t b = 0x0102030405060708ull;
  Blob c;
  for (int i = 0; i < 32; ++i) c.bytes[i] = static_cast<unsigned char>(100 + i);
  uint8_t d = 0x5d;
  double e = 2.5;
  void *params[] = {&a, &b, &c, &d, &e};
  CHECK_EQ(launch(k, 1, 1, 1, 1, 1, 1, 0, params), kOk);
  CHECK_EQ(launch(k, 1, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_VALUE);
  if (fake) {
    uint32_t a2 = 0;
    uint64_t b2 = 0;
    Blob c2{};
    uint8_t d2 = 0;
    double e2 = 0;
    CHECK_EQ(hooks.last_launch_param(0, &a2, sizeof a2), 0);
    CHECK_EQ(hooks.last_launch_param(1, &b2, sizeof b2), 0);
    CHECK_EQ(hooks.last_launch_param(2, &c2, sizeof c2), 0);
    CHECK_EQ(hooks.last_launch_param(3, &d2, sizeof d2), 0);
    CHECK_EQ(hooks.last_launch_param(4, &e2, sizeof e2), 0);
    CHECK(a2 == a && b2 == b && std::memcmp(&c, &c2, sizeof c) == 0 && d2 == d && e2 == e);
    CHECK_EQ(hooks.last_launch_param(1, &a2, sizeof a2), -3);
    CHECK_EQ(hooks.last_launch_param(5, &a2, sizeof a2), -2);
    void *holes[] = {&a, nullptr, &c, &d, &e};
    CHECK_EQ(launch(k, 1, 1, 1, 1, 1, 1, 0, holes), CUDA_ERROR_INVALID_VALUE);
  }

  struct {
    uint64_t x;
    uint32_t y;
  } packed = {0x1111222233334444ull, 0x55667788u};
  size_t bytes = 12;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                   CU_LAUNCH_PARAM_END};
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, extra), kOk);
  if (fake) {
    uint32_t y = 0;
    CHECK_EQ(hooks.last_launch_param(1, &y, sizeof y), 0);
    CHECK_EQ(y, 0x55667788u);
  }
  bytes = 16;  // sizeof(packed): tail padding the kernel does not have
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, extra), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  bytes = 8;
  if (fake) CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, extra), CUDA_ERROR_INVALID_VALUE);
  bytes = 12;
  void *both[] = {&packed.x, &packed.y};
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, both, extra), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, both), kOk);
  void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_END};
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, no_size), CUDA_ERROR_INVALID_VALUE);
  void *bad_key[] = {reinterpret_cast<void *>(7), &packed, CU_LAUNCH_PARAM_END};
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, bad_key), CUDA_ERROR_INVALID_VALUE);
  void *empty[] = {CU_LAUNCH_PARAM_END};
  CHECK_EQ(launch(twelve, 1, 1, 1, 1, 1, 1, 0, nullptr, empty), CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 0, nullptr, empty), kOk);

  // A created stream supplies the context; the NULL stream needs a current one.
  CUstream s = nullptr;
  CUcontext c0 = nullptr;
  CHECK_EQ(api.cuStreamCreate(&s, 0), kOk);
  CHECK_EQ(api.cuCtxPopCurrent(&c0), kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, s), kOk);
  CHECK_EQ(launch(nop, 1, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuStreamSynchronize(s), kOk);
  CHECK_EQ(api.cuStreamDestroy(s), kOk);
  CHECK_EQ(api.cuCtxPushCurrent(ctx), kOk);
  CHECK_EQ(api.cuStreamSynchronize(nullptr), kOk);
}

// A function only launches in its own module's context.
void test_foreign_context(CUmodule m) {
  CUcontext other = nullptr, popped = nullptr;
  CHECK_EQ(api.cuDevicePrimaryCtxRetain(&other, 1), kOk);
  CHECK_EQ(api.cuCtxPushCurrent(other), kOk);
  CHECK_EQ(launch(function(m, "nop"), 1, 1, 1, 1, 1, 1), CUDA_ERROR_INVALID_CONTEXT);
  CUdeviceptr p = 0;
  int ordinal = -1;
  CHECK_EQ(api.cuMemAlloc(&p, 8), kOk);
  CHECK_EQ(api.cuPointerGetAttribute(&ordinal, kPointerDeviceOrdinal, p), kOk);
  CHECK_EQ(ordinal, 1);
  CHECK_EQ(api.cuMemFree(p), kOk);
  CHECK_EQ(api.cuCtxPopCurrent(&popped), kOk);
  CHECK(popped == other);
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(1), kOk);
}

void test_threads() {
  std::vector<std::thread> threads;
  std::vector<int> errors(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &errors] {
      if (api.cuCtxPushCurrent(ctx) != kOk) ++errors[t];
      for (int i = 0; i < 100; ++i) {
        CUdeviceptr p = 0;
        uint64_t in = 1000u * t + i, out = 0;
        if (api.cuMemAlloc(&p, sizeof in) != kOk) {
          ++errors[t];
          continue;
        }
        if (api.cuMemcpyHtoD(p, &in, sizeof in) || api.cuMemcpyDtoH(&out, p, sizeof out) ||
            out != in || api.cuMemFree(p))
          ++errors[t];
      }
      if (api.cuCtxPopCurrent(nullptr) != kOk) ++errors[t];
    });
  }
  for (auto &th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK_EQ(errors[t], 0);
}

// The knobs are read at each cuInit (MISSING and DRIVER_VERSION on every call).
void test_knobs() {
  int count = 0, v = 0;
  size_t total = 0;
  {
    Knob devices("KAIO_FAKE_DEVICES", "3"), cc("KAIO_FAKE_CC", "75"),
        mem("KAIO_FAKE_TOTAL_MEM", "4096");
    CHECK_EQ(api.cuInit(0), kOk);
    CHECK_EQ(api.cuDeviceGetCount(&count), kOk);
    CHECK_EQ(count, 3);
    CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 2), kOk);
    CHECK_EQ(v, 7);
    CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 2), kOk);
    CHECK_EQ(v, 5);
    CHECK_EQ(api.cuDeviceTotalMem(&total, 0), kOk);
    CHECK_EQ(total, 4096);
    CUdeviceptr p = 0, q = 0;
    CHECK_EQ(api.cuMemAlloc(&p, 4096), kOk);
    CHECK_EQ(api.cuMemAlloc(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(api.cuMemFree(p), kOk);
    CHECK_EQ(api.cuMemAlloc(&q, 1), kOk);
    CHECK_EQ(api.cuMemFree(q), kOk);
    CUmodule m = nullptr;
    CHECK_EQ(load(ptx_with("8.0", "sm_80").c_str(), &m).result, CUDA_ERROR_INVALID_PTX);
    CHECK_EQ(load(ptx_with("8.0", "sm_75").c_str(), &m).result, kOk);
    CHECK_EQ(api.cuModuleUnload(m), kOk);
  }
  {
    Knob cc("KAIO_FAKE_CC", "8.6"), version("KAIO_FAKE_DRIVER_VERSION", "12000");
    CHECK_EQ(api.cuInit(0), kOk);
    CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), kOk);
    CHECK_EQ(v, 6);
    CUmodule m = nullptr;
    Jit j = load(ptx_with("8.1", "sm_80").c_str(), &m);
    CHECK_EQ(j.result, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    CHECK(j.log.find("current version is '8.0'") != std::string::npos);
  }
  {
    Knob devices("KAIO_FAKE_DEVICES", "0"), garbage("KAIO_FAKE_CC", "banana");
    CHECK_EQ(api.cuInit(0), kOk);
    CHECK_EQ(api.cuDeviceGetCount(&count), kOk);
    CHECK_EQ(count, 0);
  }
  CHECK_EQ(api.cuInit(0), kOk);
  CHECK_EQ(api.cuDeviceGetCount(&count), kOk);
  CHECK_EQ(count, 2);
  CHECK_EQ(api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), kOk);
  CHECK_EQ(v, 9);
}

void test_release(CUmodule m) {
  CHECK_EQ(api.cuModuleUnload(m), kOk);
  CUdeviceptr leaked = 0;
  CHECK_EQ(api.cuMemAlloc(&leaked, 32), kOk);
  CUcontext popped = nullptr;
  CHECK_EQ(api.cuCtxPopCurrent(&popped), kOk);
  CHECK(popped == ctx);
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(0), kOk);
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(api.cuCtxPushCurrent(ctx), kOk);
  CUdeviceptr p = 0;
  CHECK_EQ(api.cuMemAlloc(&p, 16), kContextIsDestroyed);
  CHECK_EQ(api.cuCtxPopCurrent(nullptr), kOk);
  if (!fake) return;
  CHECK_EQ(api.cuMemFree(leaked), kContextIsDestroyed);
  CHECK_EQ(hooks.live_allocations(), 1);
  CHECK_EQ(api.cuDevicePrimaryCtxRetain(&popped, 0), kOk);
  CHECK_EQ(api.cuMemFree(leaked), kOk);
  CHECK_EQ(api.cuDevicePrimaryCtxRelease(0), kOk);
  CHECK_EQ(hooks.live_allocations(), 0);
  CHECK_EQ(hooks.live_modules(), 0);
  CHECK_EQ(hooks.live_streams(), 0);
  CHECK_EQ(hooks.live_events(), 0);
  CHECK_EQ(hooks.context_depth(), 0);
}

bool load_hooks(void *lib) {
  auto sym = [lib](const char *name) { return dlsym(lib, name); };
  hooks.launch_count =
      reinterpret_cast<decltype(hooks.launch_count)>(sym("kaio_fake_launch_count"));
  hooks.last_launch = reinterpret_cast<decltype(hooks.last_launch)>(sym("kaio_fake_last_launch"));
  hooks.last_launch_param =
      reinterpret_cast<decltype(hooks.last_launch_param)>(sym("kaio_fake_last_launch_param"));
  hooks.last_launch_programmatic = reinterpret_cast<decltype(hooks.last_launch_programmatic)>(
      sym("kaio_fake_last_launch_programmatic"));
  hooks.live_allocations =
      reinterpret_cast<decltype(hooks.live_allocations)>(sym("kaio_fake_live_allocations"));
  hooks.live_modules =
      reinterpret_cast<decltype(hooks.live_modules)>(sym("kaio_fake_live_modules"));
  hooks.live_streams =
      reinterpret_cast<decltype(hooks.live_streams)>(sym("kaio_fake_live_streams"));
  hooks.live_events = reinterpret_cast<decltype(hooks.live_events)>(sym("kaio_fake_live_events"));
  hooks.primary_ctx_refs =
      reinterpret_cast<decltype(hooks.primary_ctx_refs)>(sym("kaio_fake_primary_ctx_refs"));
  hooks.context_depth =
      reinterpret_cast<decltype(hooks.context_depth)>(sym("kaio_fake_context_depth"));
  return hooks.launch_count && hooks.last_launch && hooks.last_launch_param &&
         hooks.last_launch_programmatic &&
         hooks.live_allocations && hooks.live_modules && hooks.live_streams && hooks.live_events &&
         hooks.primary_ctx_refs && hooks.context_depth;
}

}  // namespace

int main(int argc, char **argv) {
  const char *env = std::getenv("LIBKAIO_CUDA_DRIVER");
  const char *path = argc > 1 ? argv[1] : env && *env ? env : "./libkaio_fake_cuda.so";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("fake_cuda selftest: cannot open %s: %s\n", path, dlerror());
    return 2;
  }
  clear_knobs();
  fake = dlsym(lib, "kaio_fake_launch_count") != nullptr;
  if (fake && !load_hooks(lib)) {
    std::printf("fake_cuda selftest: %s lacks some kaio_fake_* hooks\n", path);
    return 2;
  }
  get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    std::printf("fake_cuda selftest: %s has no cuGetProcAddress_v2\n", path);
    return 2;
  }
  test_resolution(lib);
  if (failed == 0) {
    test_before_init();
    test_devices();
    test_contexts();
    test_memory();
    test_streams_and_events();
    test_jit_errors();
    CUmodule m = test_modules();
    test_launch_limits(m);
    test_launch_params(m);
    test_launch_ex(m);
    test_static_shared();
    test_occupancy_clusters();
    test_threads();
    if (fake) {
      test_foreign_context(m);
      test_knobs();
    }
    test_release(m);
  }
  std::printf("fake_cuda selftest: %d passed, %d failed%s\n", passed, failed,
              fake ? "" : " (real driver: fake-only checks skipped)");
  return failed == 0 ? 0 : 1;
}
