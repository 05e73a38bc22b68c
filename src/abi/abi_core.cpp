// Global entry points: status names, versions, dtypes and the driver probe.
// All are callable from any thread, before anything else.
#include <kaio/kaio.h>

#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/firewall.hpp"
#include "driver/driver_loader.hpp"
#include "runtime/device.hpp"

extern "C" {

KAIO_API const char *kaio_status_name(kaio_status status) {
  switch (status) {
#define KAIO_NAME(s) \
  case s: return #s;
    KAIO_NAME(KAIO_OK)
    KAIO_NAME(KAIO_ERROR_INVALID_ARGUMENT)
    KAIO_NAME(KAIO_ERROR_INVALID_HANDLE)
    KAIO_NAME(KAIO_ERROR_INVALID_DTYPE)
    KAIO_NAME(KAIO_ERROR_SHAPE_MISMATCH)
    KAIO_NAME(KAIO_ERROR_OUT_OF_BOUNDS)
    KAIO_NAME(KAIO_ERROR_MISALIGNED)
    KAIO_NAME(KAIO_ERROR_WRONG_DEVICE)
    KAIO_NAME(KAIO_ERROR_BUFFER_TOO_SMALL)
    KAIO_NAME(KAIO_ERROR_INVALID_DIMENSION)
    KAIO_NAME(KAIO_ERROR_UNSUPPORTED)
    KAIO_NAME(KAIO_ERROR_DRIVER_NOT_FOUND)
    KAIO_NAME(KAIO_ERROR_DRIVER_TOO_OLD)
    KAIO_NAME(KAIO_ERROR_NO_DEVICE)
    KAIO_NAME(KAIO_ERROR_UNSUPPORTED_ARCH)
    KAIO_NAME(KAIO_ERROR_OUT_OF_HOST_MEMORY)
    KAIO_NAME(KAIO_ERROR_OUT_OF_DEVICE_MEMORY)
    KAIO_NAME(KAIO_ERROR_PTX_JIT_FAILED)
    KAIO_NAME(KAIO_ERROR_KERNEL_NOT_FOUND)
    KAIO_NAME(KAIO_ERROR_KERNEL_SOURCE)
    KAIO_NAME(KAIO_ERROR_LAUNCH_FAILED)
    KAIO_NAME(KAIO_ERROR_DEVICE_FAULT)
    KAIO_NAME(KAIO_ERROR_KERNEL_BOUNDS)
    KAIO_NAME(KAIO_ERROR_DRIVER)
    KAIO_NAME(KAIO_ERROR_INTERNAL)
#undef KAIO_NAME
    default: return "KAIO_UNKNOWN_STATUS";
  }
}

KAIO_API uint32_t kaio_version_number(void) { return KAIO_VERSION_NUMBER; }

KAIO_API const char *kaio_version_string(void) { return KAIO_VERSION_STRING; }

KAIO_API size_t kaio_dtype_size(kaio_dtype dtype) {
  switch (dtype) {
    case KAIO_DTYPE_F32:
    case KAIO_DTYPE_I32:
    case KAIO_DTYPE_U32: return 4;
    case KAIO_DTYPE_F16:
    case KAIO_DTYPE_BF16: return 2;
    case KAIO_DTYPE_I8:
    case KAIO_DTYPE_U8: return 1;
    default: return 0;
  }
}

KAIO_API const char *kaio_dtype_name(kaio_dtype dtype) {
  switch (dtype) {
    case KAIO_DTYPE_F32: return "f32";
    case KAIO_DTYPE_F16: return "f16";
    case KAIO_DTYPE_BF16: return "bf16";
    case KAIO_DTYPE_I8: return "i8";
    case KAIO_DTYPE_U8: return "u8";
    case KAIO_DTYPE_I32: return "i32";
    case KAIO_DTYPE_U32: return "u32";
    default: return "invalid";
  }
}

KAIO_API kaio_status kaio_probe(kaio_probe_info *info) {
  constexpr const char *fn = "kaio_probe";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!info)
      return kaio::fail(KAIO_ERROR_INVALID_ARGUMENT,
                        "%s: argument 'info' is NULL; pass a kaio_probe_info with struct_size set.",
                        fn);
    if (info->struct_size < sizeof(kaio_probe_info))
      return kaio::fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                        "%s: info->struct_size is %u but must be at least %zu; set it to "
                        "sizeof(kaio_probe_info).",
                        fn, info->struct_size, sizeof(kaio_probe_info));
    info->driver_status = KAIO_OK;
    info->driver_version = 0;
    info->device_count = 0;
    info->message[0] = '\0';
    const kaio::driver::Api *api = nullptr;
    kaio_status s = kaio::driver::load(&api);
    if (s == KAIO_OK) {
      info->driver_version = api->driver_version;
      int count = 0;
      s = kaio::device_count(api, &count);
      info->device_count = count;
    }
    if (s != KAIO_OK) {
      info->driver_status = s;
      // The message is the reason alone, without this function's name.
      const char *why = kaio_last_error();
      if (std::strncmp(why, "kaio_probe: ", 12) == 0) why += 12;
      std::snprintf(info->message, sizeof info->message, "%s", why);
      kaio::clear_last_error();  // the probe itself succeeded
    }
    return KAIO_OK;
  });
}

}  // extern "C"
