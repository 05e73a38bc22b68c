#include "kernels/user_module.hpp"

#include <cinttypes>
#include <memory>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "kernels/jit.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

// Sum of the kernel's parameter sizes at their offsets, as the driver lays
// them out; -1 when the driver predates cuFuncGetParamInfo (CUDA 12.4).
int64_t packed_param_bytes(const driver::Api *api, cu::CUfunction f) {
  if (!api->cuFuncGetParamInfo) return -1;
  int64_t end = 0;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (api->cuFuncGetParamInfo(f, i, &offset, &size) != cu::CUDA_SUCCESS) break;
    end = static_cast<int64_t>(offset + size);
  }
  return end;
}

}  // namespace

kaio_status module_load(kaio_device *device, const char *ptx, kaio_module **out) {
  auto m = std::make_unique<kaio_module>();
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  KAIO_TRY(jit_load(device, ptx, "argument 'ptx'", &m->native));
  m->device = device;
  if (kaio_status s = publish_handle(out, m.get())) {
    device->api->cuModuleUnload(m->native);
    return s;
  }
  m.release();
  device_retain(device);
  return KAIO_OK;
}

void module_release(kaio_module *module) {
  if (module->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  kaio_device *device = module->device;
  {
    // run by whichever call lets go last (or by none): name the release
    ApiCall release("kaio_module_destroy");
    ContextScope scope(device);
    if (scope.status() == KAIO_OK) device->api->cuModuleUnload(module->native);
  }
  delete module;
  device_release(device);
}

kaio_status module_function(const kaio_device *device, cu::CUmodule module, const char *name,
                            cu::CUfunction *out) {
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = device->api->cuModuleGetFunction(out, module, name))
    return fail_driver(r, "cuModuleGetFunction");
  return KAIO_OK;
}

kaio_status kernel_get(kaio_module *module, const char *name, kaio_kernel **out) {
  auto k = std::make_unique<kaio_kernel>();
  k->name = name;
  kaio_device *device = module->device;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  cu::CUresult r = device->api->cuModuleGetFunction(&k->native, module->native, name);
  if (r == cu::CUDA_ERROR_NOT_FOUND)
    return fail_with_driver_code(
        KAIO_ERROR_KERNEL_NOT_FOUND, r,
        "%s: argument 'name' is \"%s\" but the module has no .entry of that name; check the "
        "spelling and that the entry is .visible.",
        api_name(), name);
  if (r) return fail_driver(r, "cuModuleGetFunction");
  k->param_bytes = packed_param_bytes(device->api, k->native);
  KAIO_TRY(static_shared_bytes(device, k->native, &k->static_shared_bytes));
  k->module = module;
  KAIO_TRY(publish_handle(out, k.get()));
  k.release();
  module->refs.fetch_add(1, std::memory_order_relaxed);
  return KAIO_OK;
}

kaio_status kernel_attributes(const kaio_kernel &kernel, kaio_kernel_attributes *attrs) {
  const kaio_device *device = kernel.module->device;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  struct Attr {
    int attribute;
    int32_t *value;
  } table[] = {
      {cu::CU_FUNC_ATTRIBUTE_NUM_REGS, &attrs->registers},
      {cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &attrs->static_shared_bytes},
      {cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &attrs->local_bytes},
      {cu::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &attrs->const_bytes},
      {cu::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &attrs->max_threads_per_block},
  };
  for (const Attr &a : table) {
    int v = 0;
    if (cu::CUresult r = device->api->cuFuncGetAttribute(&v, a.attribute, kernel.native))
      return fail_driver(r, "cuFuncGetAttribute");
    *a.value = v;
  }
  attrs->param_bytes = static_cast<int32_t>(kernel.param_bytes);
  return KAIO_OK;
}

kaio_status kernel_launch(const kaio_kernel &kernel, kaio_stream *stream,
                          const kaio_launch_config &config, const void *args, size_t size) {
  const kaio_device *device = kernel.module->device;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  KAIO_TRY(fit_dynamic_shared(device, kernel.native, kernel.static_shared_bytes,
                              config.shared_bytes));
  void *extra[] = {cu::CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<void *>(args),
                   cu::CU_LAUNCH_PARAM_BUFFER_SIZE, &size, cu::CU_LAUNCH_PARAM_END};
  cu::CUresult r = device->api->cuLaunchKernel(
      kernel.native, config.grid[0], config.grid[1], config.grid[2], config.block[0],
      config.block[1], config.block[2], config.shared_bytes, stream->native, nullptr,
      size ? extra : nullptr);
  if (r) return fail_driver(r, "cuLaunchKernel");
  return KAIO_OK;
}

}  // namespace kaio
