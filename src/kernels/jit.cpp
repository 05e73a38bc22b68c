#include "kernels/jit.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"

namespace kaio {

kaio_status jit_load(const kaio_device *device, const char *ptx,
                     const char *what, cu::CUmodule *out) {
  // A log of many errors runs long; keep all of it (kaio_last_error does).
  std::vector<char> buffer(kJitLogBytes, '\0');
  char *log = buffer.data();
  int options[] = {cu::CU_JIT_ERROR_LOG_BUFFER, cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(buffer.size()))};
  cu::CUresult r = device->api->cuModuleLoadDataEx(out, ptx, 2, options, values);
  if (r == cu::CUDA_SUCCESS) return KAIO_OK;
  *out = nullptr;
  buffer.back() = '\0';
  kaio_status status = status_from_driver(r);
  const char *name = nullptr;
  device->api->cuGetErrorName(r, &name);
  const char *hint =
      r == cu::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
          ? " The PTX .version is newer than this driver supports: update the driver or lower "
            ".version."
          : "";
  return fail_with_driver_code(
      status == KAIO_ERROR_DRIVER ? KAIO_ERROR_PTX_JIT_FAILED : status, r,
      "%s: JIT compilation of %s for device %d (sm_%d%d) failed: %s (%d).%s JIT log: %s%s",
      api_name(), what, device->ordinal, device->info.cc_major, device->info.cc_minor,
      name ? name : "unknown", r, hint, log[0] ? log : "(empty)",
      std::strlen(log) == buffer.size() - 1 ? " [log truncated by the driver's buffer]" : "");
}

kaio_status static_shared_bytes(const kaio_device *device, cu::CUfunction f, uint32_t *out) {
  int bytes = 0;
  if (cu::CUresult r =
          device->api->cuFuncGetAttribute(&bytes, cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f))
    return fail_driver(r, "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
  *out = bytes > 0 ? static_cast<uint32_t>(bytes) : 0;
  return KAIO_OK;
}

kaio_status fit_dynamic_shared(const kaio_device *device, cu::CUfunction f,
                               uint32_t static_bytes, uint32_t dynamic) {
  constexpr uint64_t kDefaultLimit = 48 * 1024;
  if (uint64_t{static_bytes} + dynamic <= kDefaultLimit) return KAIO_OK;
  if (cu::CUresult r = device->api->cuFuncSetAttribute(
          f, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(dynamic)))
    return fail_driver(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  return KAIO_OK;
}

}  // namespace kaio
