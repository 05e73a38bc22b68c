#include "runtime/device.hpp"

#include <cstring>
#include <mutex>
#include <vector>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "driver/driver_loader.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/handle_registry.hpp"

namespace kaio {
namespace {

// One live kaio_device per ordinal. Guarded by g_registry_mutex, which also
// serialises the last release against a concurrent open of the same ordinal.
std::mutex g_registry_mutex;
std::vector<kaio_device *> g_registry;

kaio_status query_info(kaio_device *d) {
  const driver::Api *api = d->api;
  kaio_device_info &info = d->info;
  info.struct_size = sizeof info;
  info.ordinal = d->ordinal;
  struct Attr {
    int attribute;
    int32_t *value;
  } attrs[] = {
      {cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major},
      {cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor},
      {cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count},
      {cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info.max_shared_per_block},
  };
  for (const Attr &a : attrs) {
    int v = 0;
    if (cu::CUresult r = api->cuDeviceGetAttribute(&v, a.attribute, d->cu_device))
      return fail_driver(r, "cuDeviceGetAttribute");
    *a.value = v;
  }
  for (int axis = 0; axis < 3; ++axis) {
    int grid = 0, block = 0;
    if (cu::CUresult r = api->cuDeviceGetAttribute(
            &grid, cu::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + axis, d->cu_device))
      return fail_driver(r, "cuDeviceGetAttribute(MAX_GRID_DIM)");
    if (cu::CUresult r = api->cuDeviceGetAttribute(
            &block, cu::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + axis, d->cu_device))
      return fail_driver(r, "cuDeviceGetAttribute(MAX_BLOCK_DIM)");
    d->max_grid[axis] = static_cast<uint32_t>(grid);
    d->max_block[axis] = static_cast<uint32_t>(block);
  }
  int l2 = 0;
  if (cu::CUresult r = api->cuDeviceGetAttribute(&l2, cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                                                 d->cu_device))
    return fail_driver(r, "cuDeviceGetAttribute");
  info.l2_cache_bytes = static_cast<uint64_t>(l2);
  size_t total = 0;
  if (cu::CUresult r = api->cuDeviceTotalMem(&total, d->cu_device))
    return fail_driver(r, "cuDeviceTotalMem");
  info.total_memory = total;
  if (cu::CUresult r = api->cuDeviceGetName(info.name, sizeof info.name, d->cu_device))
    return fail_driver(r, "cuDeviceGetName");
  info.name[sizeof info.name - 1] = '\0';
  return KAIO_OK;
}

}  // namespace

kaio_status device_count(const driver::Api *api, int *count) {
  *count = 0;
  if (cu::CUresult r = api->cuDeviceGetCount(count)) return fail_driver(r, "cuDeviceGetCount");
  return KAIO_OK;
}

kaio_status device_open(int32_t ordinal, DeviceSetup setup, kaio_device **out) {
  const driver::Api *api = nullptr;
  KAIO_TRY(driver::load(&api));
  int count = 0;
  KAIO_TRY(device_count(api, &count));
  if (count == 0)
    return fail(KAIO_ERROR_NO_DEVICE, "%s: the driver reports no CUDA device. Check nvidia-smi.",
                api_name());
  if (ordinal < 0 || ordinal >= count)
    return fail(KAIO_ERROR_NO_DEVICE,
                "%s: argument 'ordinal' is %d but %d device(s) are visible; use 0..%d.", api_name(),
                ordinal, count, count - 1);

  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (g_registry.size() < static_cast<size_t>(count)) g_registry.resize(count, nullptr);
  if (kaio_device *existing = g_registry[ordinal]) {
    existing->refs.fetch_add(1, std::memory_order_relaxed);
    *out = existing;
    return KAIO_OK;
  }

  auto d = std::make_unique<kaio_device>();
  d->api = api;
  d->ordinal = ordinal;
  if (cu::CUresult r = api->cuDeviceGet(&d->cu_device, ordinal))
    return fail_driver(r, "cuDeviceGet");
  if (cu::CUresult r = api->cuDevicePrimaryCtxRetain(&d->context, d->cu_device))
    return fail_driver(r, "cuDevicePrimaryCtxRetain");
  KAIO_TRY(query_info(d.get()));  // on failure ~kaio_device releases the context
  KAIO_TRY(setup(d.get()));
  d->borrowed_handle =
      static_cast<kaio_device *>(handle_issue(HandleTag::device, d.get(), HandleUse::borrowed));
  if (!d->borrowed_handle)
    return fail(KAIO_ERROR_OUT_OF_HOST_MEMORY, "%s: cannot issue a handle for device %d.",
                api_name(), ordinal);
  g_registry[ordinal] = d.get();
  *out = d.release();
  return KAIO_OK;
}

void device_retain(kaio_device *device) { device->refs.fetch_add(1, std::memory_order_relaxed); }

void device_release(kaio_device *device) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (device->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (static_cast<size_t>(device->ordinal) < g_registry.size() &&
      g_registry[device->ordinal] == device)
    g_registry[device->ordinal] = nullptr;
  delete device;
}

DimOverLimit dim_over_limit(const kaio_device *device, const uint32_t grid[3],
                            const uint32_t block[3]) {
  for (int axis = 0; axis < 3; ++axis) {
    if (grid[axis] > device->max_grid[axis])
      return {"grid", axis, grid[axis], device->max_grid[axis]};
    if (block[axis] > device->max_block[axis])
      return {"block", axis, block[axis], device->max_block[axis]};
  }
  return {};
}

kaio_status require_arch(const kaio_device *device, int major, int minor, const char *what) {
  const kaio_device_info &i = device->info;
  if (i.cc_major > major || (i.cc_major == major && i.cc_minor >= minor)) return KAIO_OK;
  return fail(KAIO_ERROR_UNSUPPORTED_ARCH,
              "%s: %s needs compute capability %d.%d or newer, but device %d (%s) is %d.%d.",
              api_name(), what, major, minor, device->ordinal, i.name, i.cc_major, i.cc_minor);
}

}  // namespace kaio

kaio_device::kaio_device() = default;

kaio_device::~kaio_device() {
  if (borrowed_handle)
    kaio::handle_retire(kaio::HandleTag::device, borrowed_handle, kaio::HandleUse::borrowed);
  op_flag.reset();  // frees its pinned memory while the context lives
  if (modules) {
    kaio::ContextScope scope(this);
    modules.reset();  // unloads under the device's context
  }
  if (context) api->cuDevicePrimaryCtxRelease(cu_device);
}
