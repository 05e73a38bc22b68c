#include "driver/driver_loader.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/call_context.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"

namespace kaio::driver {
namespace {

// cuGetProcAddress_v2 (CUDA 12.0+): resolves a base name at a pinned ABI
// version, so we get the signature we declared, not whatever is newest.
using GetProcAddress = CUresult (*)(const char *symbol, void **pfn, int cuda_version,
                                    unsigned long long flags, int *symbol_status);

constexpr const char *kDefaultDriver = "libcuda.so.1";
constexpr const char *kDriverEnv = "LIBKAIO_CUDA_DRIVER";

struct LoadResult {
  Api api;
  kaio_status status = KAIO_ERROR_INTERNAL;
  std::string message;
  int32_t driver_code = 0;
};

LoadResult g_result;
std::once_flag g_once;
const Api *g_loaded = nullptr;

void *resolve(void *lib, GetProcAddress get_proc, const char *base, int version,
              const char *versioned) {
  if (get_proc) {
    void *fn = nullptr;
    int symbol_status = -1;
    if (get_proc(base, &fn, version, 0, &symbol_status) == cu::CUDA_SUCCESS &&
        symbol_status == cu::CU_GET_PROC_ADDRESS_SUCCESS && fn)
      return fn;
  }
  // Pre-12.0 drivers: the explicitly versioned export has the same ABI.
  return dlsym(lib, versioned);
}

void load_once() {
  LoadResult &r = g_result;
  const char *env = read_env(kDriverEnv);  // ignored by setuid programs
  const char *path = env && *env ? env : kDefaultDriver;

  dlerror();
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    r.status = KAIO_ERROR_DRIVER_NOT_FOUND;
    r.message = std::string("cannot open the CUDA driver '") + path + "': " +
                (why ? why : "unknown dlopen error") +
                ". Install the NVIDIA driver, or set " + kDriverEnv +
                " to the path of libcuda.so.1.";
    return;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));

  std::string missing;
#define KAIO_RESOLVE(name, version, symbol, required, ret, args)                           \
  r.api.name = reinterpret_cast<decltype(r.api.name)>(                                     \
      resolve(lib, get_proc, #name, version, symbol));                                     \
  if (!r.api.name && (required)) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  KAIO_DRIVER_FUNCTIONS(KAIO_RESOLVE)
#undef KAIO_RESOLVE

  int version = 0;
  if (r.api.cuDriverGetVersion) r.api.cuDriverGetVersion(&version);
  r.api.driver_version = version;
  if (!missing.empty()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%d.%d", version / 1000, (version % 1000) / 10);
    r.status = KAIO_ERROR_DRIVER_TOO_OLD;
    r.message = std::string("the CUDA driver '") + path + "' (version " + buf +
                ") lacks entry points libkaio needs: " + missing +
                ". Update the NVIDIA driver (libkaio needs CUDA 11.0 / r450 or newer).";
    return;
  }

  CUresult init = r.api.cuInit(0);
  if (init != cu::CUDA_SUCCESS) {
    const char *name = nullptr;
    r.api.cuGetErrorName(init, &name);
    r.status = status_from_driver(init);
    if (r.status == KAIO_ERROR_DRIVER) r.status = KAIO_ERROR_NO_DEVICE;
    r.driver_code = init;
    r.message = std::string("cuInit failed: ") + (name ? name : "unknown error") + " (" +
                std::to_string(init) +
                "). Check that an NVIDIA GPU is visible (nvidia-smi) and that the driver "
                "matches the kernel module.";
    return;
  }
  r.status = KAIO_OK;
  g_loaded = &r.api;
}

}  // namespace

kaio_status load(const Api **out) {
  *out = nullptr;
  try {
    std::call_once(g_once, load_once);
  } catch (...) {
    return fail(KAIO_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory while loading the driver",
                api_name());
  }
  if (g_result.status != KAIO_OK) {
    return fail_with_driver_code(g_result.status, g_result.driver_code, "%s: %s", api_name(),
                                 g_result.message.c_str());
  }
  *out = &g_result.api;
  return KAIO_OK;
}

const Api *loaded() { return g_loaded; }

}  // namespace kaio::driver
