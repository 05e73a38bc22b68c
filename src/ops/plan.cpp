#include "ops/plan.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/plan_log.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

bool is_float_dtype(kaio_dtype dtype) {
  return dtype == KAIO_DTYPE_F32 || dtype == KAIO_DTYPE_F16 || dtype == KAIO_DTYPE_BF16;
}

kaio_status check_op_stream(const kaio_device *device, const kaio_stream *stream) {
  KAIO_TRY(check_stream(stream));
  if (stream->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: the op belongs to device %d but 'stream' is on device %d; create the op on "
                "the stream's device.",
                api_name(), device->ordinal, stream->device->ordinal);
  return KAIO_OK;
}

kaio_status check_launch(const kaio_device *device, kaio_stream *stream, const kaio_tensor *tensors,
                         size_t count, size_t expected, const char *order) {
  KAIO_TRY(check_op_stream(device, stream));
  if (!tensors)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'tensors' is NULL; pass %s.", api_name(),
                order);
  if (count != expected)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'count' is %zu but this op takes %zu tensors: %s.", api_name(), count,
                expected, order);
  return KAIO_OK;
}

kaio_status plan_float_op(kaio_device *device, kaio_dtype dtype, int64_t rows, int64_t cols,
                          const std::function<kaio_status()> &resolve) {
  const auto unlogged = [&]() -> kaio_status {
    if (!is_float_dtype(dtype))
      return fail(KAIO_ERROR_INVALID_DTYPE,
                  "%s: argument 'dtype' is %s (%d); this op takes KAIO_DTYPE_F32, KAIO_DTYPE_F16 "
                  "or KAIO_DTYPE_BF16.",
                  api_name(), kaio_dtype_name(dtype), dtype);
    if (rows < 1 || cols < 1)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: the shape is %" PRId64 " x %" PRId64 "; rows and cols must be >= 1.",
                  api_name(), rows, cols);
    KAIO_TRY(require_arch(device, 8, 0, "built-in ops (bf16 conversions, PTX sm_80)"));
    return resolve();
  };
  return log_plan(unlogged, [&] {
    char s[160];
    std::snprintf(s, sizeof s, "%" PRId64 " x %" PRId64 " %s", rows, cols,
                  kaio_dtype_name(dtype));
    return std::string(s);
  });
}

}  // namespace kaio
