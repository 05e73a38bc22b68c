#include "driver/driver_error.hpp"

#include "core/call_context.hpp"
#include "driver/driver_loader.hpp"

namespace kaio {

kaio_status status_from_driver(cu::CUresult r) {
  using namespace kaio::cu;
  switch (r) {
    case CUDA_SUCCESS: return KAIO_OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return KAIO_ERROR_OUT_OF_DEVICE_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: return KAIO_ERROR_NO_DEVICE;
    case CUDA_ERROR_STUB_LIBRARY: return KAIO_ERROR_DRIVER_NOT_FOUND;
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return KAIO_ERROR_PTX_JIT_FAILED;
    case CUDA_ERROR_NOT_FOUND: return KAIO_ERROR_KERNEL_NOT_FOUND;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_LAUNCH_TIMEOUT: return KAIO_ERROR_LAUNCH_FAILED;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE: return KAIO_ERROR_DEVICE_FAULT;
    default: return KAIO_ERROR_DRIVER;
  }
}

kaio_status fail_driver(cu::CUresult result, const char *what) {
  const char *name = "CUDA_ERROR_UNKNOWN";
  const char *text = "unknown error";
  if (const driver::Api *api = driver::loaded()) {
    const char *n = nullptr;
    const char *t = nullptr;
    if (api->cuGetErrorName(result, &n) == cu::CUDA_SUCCESS && n) name = n;
    if (api->cuGetErrorString(result, &t) == cu::CUDA_SUCCESS && t) text = t;
  }
  kaio_status status = status_from_driver(result);
  const char *hint = status == KAIO_ERROR_DEVICE_FAULT
                         ? " The context is now unusable: destroy every kaio object of this "
                           "device and restart the process."
                         : "";
  return fail_with_driver_code(status, result, "%s: %s failed: %s (%d: %s).%s", api_name(), what,
                               name, result, text, hint);
}

}  // namespace kaio
