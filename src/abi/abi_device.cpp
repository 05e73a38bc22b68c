// Device entry points.
#include <kaio/kaio.h>

#include <cstring>

#include "core/error.hpp"
#include "core/firewall.hpp"
#include "driver/driver_loader.hpp"
#include "kernels/device_setup.hpp"
#include "runtime/device.hpp"
#include "runtime/handle_check.hpp"

using kaio::fail;

extern "C" {

KAIO_API kaio_status kaio_device_count(int32_t *out_count) {
  constexpr const char *fn = "kaio_device_count";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out_count)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out_count' is NULL.", fn);
    *out_count = 0;
    const kaio::driver::Api *api = nullptr;
    KAIO_TRY(kaio::driver::load(&api));
    int count = 0;
    KAIO_TRY(kaio::device_count(api, &count));
    *out_count = count;
    return KAIO_OK;
  });
}

KAIO_API kaio_status kaio_device_open(kaio_device **out, int32_t ordinal) {
  constexpr const char *fn = "kaio_device_open";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    kaio_device *device = nullptr;
    KAIO_TRY(kaio::device_open(ordinal, kaio::setup_device_kernels, &device));
    // each open is its own handle to the shared device
    kaio_status s = kaio::publish_handle(out, device);
    if (s != KAIO_OK) kaio::device_release(device);
    return s;
  });
}

KAIO_API void kaio_device_destroy(kaio_device *device) {
  kaio::firewall_void("kaio_device_destroy", [&] {
    if (kaio_device *object = kaio::retire_handle(device)) kaio::device_release(object);
  });
}

KAIO_API kaio_status kaio_device_get_info(const kaio_device *device, kaio_device_info *info) {
  constexpr const char *fn = "kaio_device_get_info";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (!info) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'info' is NULL.", fn);
    if (info->struct_size < sizeof(kaio_device_info))
      return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                  "%s: info->struct_size is %u but must be at least %zu; set it to "
                  "sizeof(kaio_device_info).",
                  fn, info->struct_size, sizeof(kaio_device_info));
    uint32_t size = info->struct_size;
    std::memcpy(info, &device->info, sizeof(kaio_device_info));
    info->struct_size = size;
    return KAIO_OK;
  });
}

KAIO_API void *kaio_device_native_context(const kaio_device *device) {
  const kaio_device *object = kaio::find_handle(device);
  return object ? static_cast<void *>(object->context) : nullptr;
}

}  // extern "C"
