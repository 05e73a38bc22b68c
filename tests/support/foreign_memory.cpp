#include "support/foreign_memory.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <type_traits>
#include <string>

#include "fake_cuda/foreign_memory_abi.hpp"

namespace kt {

using namespace kaio::cu;

struct ForeignMemory::Api : ForeignMemoryApi {
  CUresult (*retain)(CUcontext *, int) = nullptr;
  CUresult (*release)(int) = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*pop)(CUcontext *) = nullptr;
  CUresult (*alloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*free)(CUdeviceptr) = nullptr;
  CUresult (*host_alloc)(void **, size_t, unsigned) = nullptr;
  CUresult (*host_device_ptr)(CUdeviceptr *, void *, unsigned) = nullptr;
  CUresult (*host_free)(void *) = nullptr;
};

namespace {

// The primary context of `ordinal`, current for one scope.
class Current {
 public:
  Current(const ForeignMemory::Api &api, int ordinal) : api_(api), ordinal_(ordinal) {
    CUcontext ctx = nullptr;
    ok_ = api_.retain(&ctx, ordinal) == CUDA_SUCCESS && api_.push(ctx) == CUDA_SUCCESS;
  }
  ~Current() {
    CUcontext popped = nullptr;
    if (ok_) api_.pop(&popped);
    api_.release(ordinal_);
  }
  bool ok() const { return ok_; }

 private:
  const ForeignMemory::Api &api_;
  int ordinal_;
  bool ok_ = false;
};

CUmemAllocationProp device_prop(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal};
  return prop;
}

struct Freer : ForeignAllocation {
  std::function<void()> free;
  ~Freer() override {
    if (free) free();
  }
};

}  // namespace

std::unique_ptr<ForeignMemory> ForeignMemory::open(std::string *why) {
  const char *env = std::getenv("LIBKAIO_CUDA_DRIVER");
  const char *path = env && *env ? env : "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = std::string("cannot open ") + path;
    return nullptr;
  }
  auto api = std::make_shared<Api>();
  bool ok = true;
  auto get = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) {
      ok = false;
      *why = std::string(path) + " has no " + name;
    }
  };
#define KT_GET(name) get(api->name, #name);
  KAIO_FOREIGN_MEMORY_FUNCTIONS(KT_GET)
#undef KT_GET
  get(api->retain, "cuDevicePrimaryCtxRetain");
  get(api->release, "cuDevicePrimaryCtxRelease_v2");
  get(api->push, "cuCtxPushCurrent_v2");
  get(api->pop, "cuCtxPopCurrent_v2");
  get(api->alloc, "cuMemAlloc_v2");
  get(api->free, "cuMemFree_v2");
  get(api->host_alloc, "cuMemHostAlloc");
  get(api->host_device_ptr, "cuMemHostGetDevicePointer_v2");
  get(api->host_free, "cuMemFreeHost");
  if (!ok) return nullptr;
  return std::make_unique<ForeignMemory>(api);
}

Foreign ForeignMemory::plain(int ordinal, uint64_t bytes) {
  auto a = std::make_unique<Freer>();
  Current current(*api_, ordinal);
  CUdeviceptr p = 0;
  if (!current.ok() || api_->alloc(&p, bytes) != CUDA_SUCCESS) return nullptr;
  a->ptr = p;
  a->bytes = bytes;
  a->free = [api = api_, ordinal, p = a->ptr] {
    Current c(*api, ordinal);
    api->free(p);
  };
  return a;
}

Foreign ForeignMemory::pool(int ordinal, uint64_t bytes, kaio_stream *stream) {
  auto a = std::make_unique<Freer>();
  auto s = static_cast<CUstream>(kaio_stream_native(stream));
  Current current(*api_, ordinal);
  CUdeviceptr p = 0;
  if (!current.ok() || api_->cuMemAllocAsync(&p, bytes, s) != CUDA_SUCCESS) return nullptr;
  a->ptr = p;
  a->bytes = bytes;
  a->free = [api = api_, ordinal, p = a->ptr, s] {
    Current c(*api, ordinal);
    api->cuMemFreeAsync(p, s);
  };
  return a;
}

uint64_t ForeignMemory::granularity(int ordinal) {
  CUmemAllocationProp prop = device_prop(ordinal);
  size_t g = 0;
  if (api_->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) return 0;
  return g;
}

Foreign ForeignMemory::vmm(int ordinal, int mapped, int reserved, VmmAccess access) {
  uint64_t g = granularity(ordinal);
  if (g == 0) return nullptr;
  auto a = std::make_unique<Freer>();
  CUdeviceptr base = 0;
  if (api_->cuMemAddressReserve(&base, reserved * g, 0, 0, 0)) return nullptr;
  std::vector<CUmemGenericAllocationHandle> handles;
  CUmemAllocationProp prop = device_prop(ordinal);
  bool ok = true;
  for (int i = 0; i < mapped && ok; ++i) {
    CUmemGenericAllocationHandle h = 0;
    ok = api_->cuMemCreate(&h, g, &prop, 0) == CUDA_SUCCESS;
    if (ok) handles.push_back(h);
    ok = ok && api_->cuMemMap(base + i * g, g, 0, h, 0) == CUDA_SUCCESS;
  }
  int flags = access == VmmAccess::none   ? CU_MEM_ACCESS_FLAGS_PROT_NONE
              : access == VmmAccess::read ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                          : static_cast<int>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemAccessDesc desc{{CU_MEM_LOCATION_TYPE_DEVICE, ordinal}, flags};
  if (ok && flags) ok = api_->cuMemSetAccess(base, mapped * g, &desc, 1) == CUDA_SUCCESS;
  a->ptr = base;
  a->bytes = mapped * g;
  a->free = [api = api_, base, mapped, reserved, g, handles] {
    for (int i = 0; i < static_cast<int>(handles.size()); ++i) api->cuMemUnmap(base + i * g, g);
    for (auto h : handles) api->cuMemRelease(h);
    api->cuMemAddressFree(base, reserved * g);
  };
  if (!ok) return nullptr;
  return a;
}

Foreign ForeignMemory::pinned_host(int ordinal, uint64_t bytes) {
  auto a = std::make_unique<Freer>();
  Current current(*api_, ordinal);
  void *host = nullptr;
  CUdeviceptr p = 0;
  if (!current.ok() || api_->host_alloc(&host, bytes, 0x2 /* DEVICEMAP */)) return nullptr;
  a->free = [api = api_, ordinal, host] {
    Current c(*api, ordinal);
    api->host_free(host);
  };
  if (api_->host_device_ptr(&p, host, 0)) return nullptr;
  a->ptr = p;
  a->bytes = bytes;
  return a;
}

}  // namespace kt
