#include "ops/launch.hpp"

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"

namespace kaio {

kaio_status launch_builtin(const kaio_device *device, const Launch &launch,
                           kaio_stream *stream, void **params) {
  // Planning refuses dims whose grid would not fit; this catches a plan that
  // missed one before the driver answers a bare CUDA_ERROR_INVALID_VALUE.
  const uint32_t grid[3] = {launch.grid, launch.grid_y, launch.grid_z},
                 block[3] = {launch.block, 1, 1};
  const DimOverLimit over = dim_over_limit(device, grid, block);
  if (over.what)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the op's dimensions need a launch %s of %u in %c but device %d allows at "
                "most %u; split the call into smaller ones (and please report this: planning "
                "should have refused these dimensions).",
                api_name(), over.what, over.value, "xyz"[over.axis], device->ordinal, over.limit);
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  if (launch.grid_dep_wait && device->api->cuLaunchKernelEx) {
    cu::CUlaunchAttribute overlap{};
    overlap.id = cu::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    overlap.value.programmaticStreamSerializationAllowed = 1;
    const cu::CUlaunchConfig config{launch.grid,  launch.grid_y, launch.grid_z,
                                    launch.block, 1,             1,
                                    launch.shared_bytes, stream->native, &overlap, 1};
    cu::CUresult r = device->api->cuLaunchKernelEx(&config, launch.function, params, nullptr);
    if (r) return fail_driver(r, "cuLaunchKernelEx");
    return KAIO_OK;
  }
  cu::CUresult r = device->api->cuLaunchKernel(launch.function, launch.grid, launch.grid_y,
                                               launch.grid_z, launch.block, 1, 1,
                                               launch.shared_bytes, stream->native, params,
                                               nullptr);
  if (r) return fail_driver(r, "cuLaunchKernel");
  return KAIO_OK;
}

}  // namespace kaio
