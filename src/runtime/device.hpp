// A device: one CUDA ordinal on its primary context, shared by every
// kaio_device_open of that ordinal in the process, so its module cache loads
// each module once.
#pragma once

#include <kaio/kaio.h>

#include <atomic>
#include <memory>

#include "driver/driver_api.hpp"
#include "driver/driver_error.hpp"
#include "runtime/handle.hpp"

namespace kaio {
class ErrorFlag;
class ModuleCache;
}

struct kaio_device {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::device;
  static constexpr const char *kName = "kaio_device";
  static constexpr const char *kHowToMake = "open one with kaio_device_open";
  kaio::HandleTag tag = kTag;
  std::atomic<int64_t> refs{1};
  const kaio::driver::Api *api = nullptr;
  int32_t ordinal = -1;
  kaio::cu::CUdevice cu_device = 0;
  kaio::cu::CUcontext context = nullptr;
  kaio_device_info info{};
  // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_* and _MAX_BLOCK_DIM_*, x y z
  uint32_t max_grid[3] = {0, 0, 0};
  uint32_t max_block[3] = {0, 0, 0};
  // Made by device_open's setup (kernels/device_setup.hpp): the runtime
  // sits below the kernels, so it only holds the cache and its deleter.
  std::unique_ptr<kaio::ModuleCache, void (*)(kaio::ModuleCache *)> modules{nullptr, nullptr};
  // the built-in ops' device-side error flag (ops/op_flag.hpp), made on
  // first use; it does not retain the device that owns it
  std::shared_ptr<kaio::ErrorFlag> op_flag;
  // what kaio_buffer_device and kaio_stream_device hand out; lives with the object
  kaio_device *borrowed_handle = nullptr;

  kaio_device();
  ~kaio_device();
};

namespace kaio {

// Gives a device that was just opened what the layers above the runtime keep
// per device (its module cache); runs once per shared device.
using DeviceSetup = kaio_status (*)(kaio_device *device);

// The devices the driver sees (0 on an error, which names api_name()).
kaio_status device_count(const driver::Api *api, int *count);

// Returns the shared device for ordinal with one more reference. Errors
// name api_name().
kaio_status device_open(int32_t ordinal, DeviceSetup setup, kaio_device **out);
void device_retain(kaio_device *device);
// Drops a reference; the last one releases the primary context.
void device_release(kaio_device *device);

// The first launch dimension past the device's limit, if any (what is NULL
// when all fit): what is "grid" or "block", axis 0..2 for x, y, z.
struct DimOverLimit {
  const char *what = nullptr;
  int axis = 0;
  uint32_t value = 0, limit = 0;
};
DimOverLimit dim_over_limit(const kaio_device *device, const uint32_t grid[3],
                            const uint32_t block[3]);

// Fails with KAIO_ERROR_UNSUPPORTED_ARCH unless the device has compute
// capability major.minor or newer; `what` names the feature needing it.
kaio_status require_arch(const kaio_device *device, int major, int minor, const char *what);

}  // namespace kaio
