// Launching a kernel-language kernel: view and scalar checks, the choice of
// entry (vector or scalar, warp or block per row) and the grid, all from
// the views; no allocation or driver call but the launch.
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstring>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "lang/checker.hpp"
#include "lang/lower.hpp"
#include "ops/lang_kernel.hpp"
#include "ops/launch.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

using lang::DType;
using lang::Param;
using lang::Type;

constexpr int64_t kWarpMaxCols = 1024;

kaio_dtype abi_dtype(DType d) { return static_cast<kaio_dtype>(d); }
static_assert(static_cast<int>(DType::f32) == KAIO_DTYPE_F32 &&
              static_cast<int>(DType::bf16) == KAIO_DTYPE_BF16 &&
              static_cast<int>(DType::u32) == KAIO_DTYPE_U32);

struct TensorArgs {
  uint64_t ptr;
  uint32_t rows, cols;
  uint64_t stride;
};

kaio_status scalar_bits(const Param &p, size_t index, double v, uint32_t *out) {
  if (p.scalar == Type::f32) {
    float f = static_cast<float>(v);
    std::memcpy(out, &f, 4);
    return KAIO_OK;
  }
  const bool is_i32 = p.scalar == Type::i32;
  const double lo = is_i32 ? -2147483648.0 : 0.0, hi = is_i32 ? 2147483647.0 : 4294967295.0;
  if (!(v >= lo && v <= hi) || std::floor(v) != v)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: scalars[%zu] ('%s', %s) is %g; pass an integer in [%.0f, %.0f].", api_name(),
                index, p.name.c_str(), is_i32 ? "i32" : "u32", v, lo, hi);
  *out = is_i32 ? static_cast<uint32_t>(static_cast<int32_t>(v)) : static_cast<uint32_t>(v);
  return KAIO_OK;
}

bool vector_ok(const CheckedView &v, int width) {
  const uint64_t bytes = kaio_dtype_size(v.dtype) * static_cast<uint64_t>(width);
  return v.cols % width == 0 && v.row_stride % width == 0 && v.address % bytes == 0;
}

}  // namespace

kaio_status lang_launch(const kaio_lang_kernel &kernel, kaio_stream *stream,
                        const kaio_tensor *tensors, size_t tensor_count, const double *scalars,
                        size_t scalar_count) {
  const lang::Kernel &k = kernel.compiled->kernel;
  const kaio_device *device = kernel.device;
  KAIO_TRY(check_stream(stream));
  if (stream->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: the kernel was created on device %d but 'stream' is on device %d; create "
                "the kernel on the stream's device.",
                api_name(), device->ordinal, stream->device->ordinal);
  if (tensor_count != static_cast<size_t>(k.tensor_count) || (!tensors && tensor_count))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'tensor_count' is %zu%s but kernel '%s' declares %d tensor "
                "parameters; pass one view per tensor parameter, in declaration order.",
                api_name(), tensor_count, tensors ? "" : " with 'tensors' NULL", k.name.c_str(),
                k.tensor_count);
  if (scalar_count != static_cast<size_t>(k.scalar_count) || (!scalars && scalar_count))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'scalar_count' is %zu%s but kernel '%s' declares %d scalar "
                "parameters; pass one value per scalar parameter, in declaration order.",
                api_name(), scalar_count, scalars ? "" : " with 'scalars' NULL", k.name.c_str(),
                k.scalar_count);

  constexpr size_t kMax = lang::kMaxParams;
  CheckedView views[kMax];
  TensorArgs targs[kMax];
  uint32_t sargs[kMax];
  uint64_t err = kernel.error_flag->device_address();
  void *params[4 * kMax + 1];
  size_t np = 0, ti = 0, si = 0;
  int first_out = -1;
  char arg[96];
  for (size_t p = 0; p < k.params.size(); ++p) {
    const Param &par = k.params[p];
    if (!par.tensor) {
      KAIO_TRY(scalar_bits(par, si, scalars[si], &sargs[p]));
      ++si;
      params[np++] = &sargs[p];
      continue;
    }
    std::snprintf(arg, sizeof arg, "tensors[%zu] ('%s')", ti, par.name.c_str());
    CheckedView &v = views[p];
    KAIO_TRY(check_view(arg, &tensors[ti], device, &v));
    KAIO_TRY(check_dtype(arg, v, abi_dtype(par.dtype)));
    if (v.rows > INT32_MAX || v.cols > INT32_MAX)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: %s is %" PRId64 " x %" PRId64 "; kernel-language views take at most %d "
                  "rows and cols.",
                  api_name(), arg, v.rows, v.cols, INT32_MAX);
    targs[p] = {v.address, static_cast<uint32_t>(v.rows), static_cast<uint32_t>(v.cols),
                static_cast<uint64_t>(v.row_stride)};
    params[np++] = &targs[p].ptr;
    params[np++] = &targs[p].rows;
    params[np++] = &targs[p].cols;
    params[np++] = &targs[p].stride;
    ++ti;
  }
  params[np++] = &err;
  first_out = k.outputs[0];
  const CheckedView &out = views[first_out];
  if (out.rows * out.cols > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: output '%s' has %" PRId64 " x %" PRId64 " elements; a kernel computes at most "
                "%d. Split the work over several views.",
                api_name(), k.params[first_out].name.c_str(), out.rows, out.cols, INT32_MAX);
  for (size_t p = 0; p < k.params.size(); ++p) {
    const Param &par = k.params[p];
    if (!par.tensor || static_cast<int>(p) == first_out || !(par.output || par.read_plain)) continue;
    if (views[p].rows != out.rows || views[p].cols != out.cols)
      return fail(KAIO_ERROR_SHAPE_MISMATCH,
                  "%s: tensor '%s' is %" PRId64 " x %" PRId64 " but %s, so it must have output "
                  "'%s''s shape %" PRId64 " x %" PRId64 ".",
                  api_name(), par.name.c_str(), views[p].rows, views[p].cols,
                  par.output ? "it is an output" : "it is read at each element's (row, col)",
                  k.params[first_out].name.c_str(), out.rows, out.cols);
  }
  for (size_t o = 0; o < k.params.size(); ++o) {
    if (!k.params[o].output) continue;
    for (size_t p = 0; p < k.params.size(); ++p) {
      const Param &par = k.params[p];
      if (p == o || !par.tensor) continue;
      // an input read only at (row, col) may be the output itself: each
      // element is read before it is written, by the thread that writes it
      const bool same_ok = !par.output && !par.read_indexed;
      KAIO_TRY(check_no_partial_overlap(par.name.c_str(), views[p],
                                        k.params[o].name.c_str(), views[o], same_ok));
    }
  }

  const int width = kernel.compiled->vector_width;
  bool vec = width > 1;
  for (size_t p = 0; p < k.params.size() && vec; ++p) {
    const Param &par = k.params[p];
    if (par.tensor && (par.output || par.read_plain)) vec = vector_ok(views[p], width);
  }
  unsigned grid = 1, entry = 0;
  if (k.row_kernel) {
    const bool warp = out.cols <= kWarpMaxCols;
    const int64_t lanes = warp ? 32 : lang::kBlockThreads;
    const bool cached = vec && out.cols <= lanes * lang::kRowSlotElems;
    entry = (warp ? 0 : 1) + (cached ? 2 : 0);
    grid = static_cast<unsigned>(warp ? (out.rows + lang::kWarpRowsPerBlock - 1) / lang::kWarpRowsPerBlock
                                      : out.rows);
  } else {
    entry = vec ? 1 : 0;
    const int64_t units = out.rows * out.cols / (vec ? width : 1);
    const int64_t per_block = int64_t{lang::kBlockThreads} * 2;
    grid = static_cast<unsigned>(std::clamp<int64_t>((units + per_block - 1) / per_block, 1, INT32_MAX));
  }
  Launch launch;
  launch.function = kernel.entries[entry];
  launch.grid = grid;
  launch.block = lang::kBlockThreads;
  KAIO_TRY(launch_builtin(device, launch, stream, params));
  // after the launch, so a concurrent sync that misses this note has not
  // waited for this launch either (see ErrorFlagRegistry::ticket)
  stream->error_flags->note(kernel.error_flag);
  return KAIO_OK;
}

}  // namespace kaio
