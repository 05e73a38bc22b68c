// User kernel entry points: load PTX, look up kernels, launch them.
#include <kaio/kaio.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "kernels/user_module.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

using kaio::api_name;
using kaio::fail;

namespace {

// Zero y and z dimensions mean 1, so a zero-initialised config needs only x.
kaio_launch_config normalized(const kaio_launch_config &c) {
  kaio_launch_config n = c;
  for (int i = 1; i < 3; ++i) {
    if (n.grid[i] == 0) n.grid[i] = 1;
    if (n.block[i] == 0) n.block[i] = 1;
  }
  return n;
}

kaio_status check_config(const kaio_launch_config *c) {
  if (!c) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'config' is NULL.", api_name());
  if (c->grid[0] == 0 || c->block[0] == 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: config grid (%u, %u, %u) and block (%u, %u, %u) need x >= 1.", api_name(),
                c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2]);
  if (c->reserved != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: config.reserved is %u; it must be 0.", api_name(),
                c->reserved);
  uint64_t threads = uint64_t{c->block[0]} * std::max(c->block[1], 1u) * std::max(c->block[2], 1u);
  if (threads > 1024)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: config block (%u, %u, %u) has %" PRIu64 " threads; the limit is 1024.",
                api_name(), c->block[0], c->block[1], c->block[2], threads);
  return KAIO_OK;
}

// The driver's answer past a limit is a bare CUDA_ERROR_INVALID_VALUE.
kaio_status check_device_limits(const kaio_device *device, const kaio_launch_config &c) {
  const kaio::DimOverLimit over = kaio::dim_over_limit(device, c.grid, c.block);
  if (!over.what) return KAIO_OK;
  const char axis = "xyz"[over.axis];
  const bool grid = over.what[0] == 'g';
  return fail(KAIO_ERROR_INVALID_DIMENSION,
              "%s: argument 'config' has %s[%d] (%c) = %u but device %d allows at most %u "
              "there; %s.",
              api_name(), over.what, over.axis, axis, over.value, device->ordinal, over.limit,
              grid ? (over.axis == 0 ? "split the launch into several"
                                     : "fold that dimension into grid x, which allows far more "
                                       "blocks, or split the launch")
                   : "reshape the block within the device's per-dimension limits");
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_module_load_ptx(kaio_module **out, kaio_device *device,
                                          const char *ptx) {
  constexpr const char *fn = "kaio_module_load_ptx";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (!ptx || !*ptx)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument 'ptx' is %s; pass NUL-terminated PTX text.", fn,
                  ptx ? "empty" : "NULL");
    return kaio::module_load(device, ptx, out);
  });
}

KAIO_API void kaio_module_destroy(kaio_module *module) {
  kaio::firewall_void("kaio_module_destroy", [&] {
    if (kaio_module *object = kaio::retire_handle(module)) kaio::module_release(object);
  });
}

KAIO_API kaio_status kaio_module_get_kernel(kaio_kernel **out, kaio_module *module,
                                            const char *name) {
  constexpr const char *fn = "kaio_module_get_kernel";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("module", module));
    if (!name || !*name)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'name' is %s.", fn,
                  name ? "empty" : "NULL");
    return kaio::kernel_get(module, name, out);
  });
}

KAIO_API void kaio_kernel_destroy(kaio_kernel *handle) {
  kaio::firewall_void("kaio_kernel_destroy", [&] {
    kaio_kernel *kernel = kaio::retire_handle(handle);
    if (!kernel) return;
    kaio_module *module = kernel->module;
    delete kernel;
    kaio::module_release(module);
  });
}

KAIO_API kaio_status kaio_kernel_get_attributes(const kaio_kernel *kernel,
                                                kaio_kernel_attributes *attrs) {
  constexpr const char *fn = "kaio_kernel_get_attributes";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("kernel", kernel));
    if (!attrs) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'attrs' is NULL.", fn);
    if (attrs->struct_size < sizeof(kaio_kernel_attributes))
      return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                  "%s: attrs->struct_size is %u but must be at least %zu; set it to "
                  "sizeof(kaio_kernel_attributes).",
                  fn, attrs->struct_size, sizeof(kaio_kernel_attributes));
    return kaio::kernel_attributes(*kernel, attrs);
  });
}

KAIO_API kaio_status kaio_kernel_launch(const kaio_kernel *kernel, kaio_stream *stream,
                                        const kaio_launch_config *config, const void *args,
                                        size_t args_size) {
  constexpr const char *fn = "kaio_kernel_launch";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("kernel", kernel));
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    kaio_device *device = kernel->module->device;
    if (stream->device != device)
      return fail(KAIO_ERROR_WRONG_DEVICE,
                  "%s: 'kernel' was loaded on device %d but 'stream' is on device %d; load the "
                  "module on the stream's device.",
                  fn, device->ordinal, stream->device->ordinal);
    KAIO_TRY(check_config(config));
    const kaio_launch_config cfg = normalized(*config);
    config = &cfg;
    KAIO_TRY(check_device_limits(device, cfg));
    if (!args && args_size != 0)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'args' is NULL but args_size is %zu.",
                  fn, args_size);
    // A C struct of the parameters may carry tail padding (up to its 8-byte
    // alignment); accept it, but hand the driver the exact parameter size,
    // which it insists on.
    size_t size = args_size;
    if (kernel->param_bytes >= 0) {
      int64_t exact = kernel->param_bytes, padded = (exact + 7) / 8 * 8;
      int64_t given = static_cast<int64_t>(args_size);
      if (given < exact || given > padded)
        return fail(KAIO_ERROR_INVALID_ARGUMENT,
                    "%s: argument 'args_size' is %zu but kernel '%s' takes %" PRId64
                    " bytes of parameters (%" PRId64 " with tail padding); pack every parameter "
                    "at its natural alignment.",
                    fn, args_size, kernel->name.c_str(), exact, padded);
      size = static_cast<size_t>(exact);
    }
    const uint64_t block_shared = uint64_t{kernel->static_shared_bytes} + config->shared_bytes;
    if (block_shared > static_cast<uint64_t>(device->info.max_shared_per_block))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: config.shared_bytes is %u and kernel '%s' declares %u bytes of static "
                  ".shared, %" PRIu64 " in all, but device %d allows at most %d per block; "
                  "ask for at most %" PRId64 " dynamic bytes.",
                  fn, config->shared_bytes, kernel->name.c_str(), kernel->static_shared_bytes,
                  block_shared, device->ordinal, device->info.max_shared_per_block,
                  std::max<int64_t>(0, int64_t{device->info.max_shared_per_block} -
                                           kernel->static_shared_bytes));
    return kaio::kernel_launch(*kernel, stream, *config, args, size);
  });
}

}  // extern "C"
