// The paged KV cache's write op.
#include <cinttypes>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/kernel_family.hpp"
#include "ops/kv_cache.hpp"
#include "ops/op_flag.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr int64_t kVector = 16;  // bytes each thread moves per trip

kaio_status check_dim(const char *arg, int64_t value, int64_t max) {
  if (value >= 1 && value <= max) return KAIO_OK;
  return fail(KAIO_ERROR_INVALID_DIMENSION,
              "%s: %s is %" PRId64 "; it must be between 1 and %" PRId64 ".",
              api_name(), arg, value, max);
}

// 16-byte vectors: the view's start and row pitch must be multiples of 16.
kaio_status check_vector_aligned(const char *arg, const CheckedView &v) {
  const uint64_t esize = kaio_dtype_size(v.dtype);
  const uint64_t pitch = static_cast<uint64_t>(v.row_stride) * esize;
  if (v.address % kVector == 0 && pitch % kVector == 0) return KAIO_OK;
  return fail(KAIO_ERROR_MISALIGNED,
              "%s: view '%s' starts at device address 0x%" PRIx64 " with a row pitch of "
              "%" PRIu64 " bytes; both must be multiples of 16 bytes (rows move as 16-byte "
              "vectors). Align the buffer offset and use a row_stride that is a multiple of "
              "%" PRIu64 " elements.",
              api_name(), arg, static_cast<uint64_t>(v.address), pitch, kVector / esize);
}

}  // namespace

kaio_status KvCacheWritePlan::plan(kaio_device *device) {
  this->device = device;
  if (!is_float_dtype(dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument 'dtype' is %s (%d); the KV cache takes f32, f16 or bf16.",
                api_name(), kaio_dtype_name(dtype), dtype);
  // grid.x is the token; slots and rows are u32 in the kernel
  KAIO_TRY(check_dim("tokens (the rows of k)", tokens, INT32_MAX));
  KAIO_TRY(check_dim("width (the cols of k)", width, INT32_MAX));
  KAIO_TRY(check_dim("cache_rows (the rows of k_cache)", cache_rows, INT32_MAX));
  const int64_t esize = static_cast<int64_t>(kaio_dtype_size(dtype));
  if (width * esize % kVector != 0)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: width (the cols of k) is %" PRId64 " %s elements (%" PRId64 " bytes); a KV "
                "cache row (heads_kv * head_dim) must be a multiple of 16 bytes (%" PRId64
                " elements), as it is for every head_dim attention takes.",
                api_name(), width, kaio_dtype_name(dtype), width * esize, kVector / esize);
  KAIO_TRY(require_arch(device, 8, 0, "the KV cache write"));
  BuiltinFunction fn;
  // the kernel, or where it can run its sm_90 twin (a dependent launch)
  KAIO_TRY(resolve_twin(device, kernels::kv_cache_write(), kernels::kv_cache_write_pdl(), "", &fn));
  launch = launch_of(fn);
  launch.grid = static_cast<unsigned>(tokens);
  return device_op_flag(device, &flag);
}

kaio_status KvCacheWritePlan::run(kaio_stream *stream, const kaio_tensor *t, size_t count) const {
  KAIO_TRY(check_launch(device, stream, t, count, 5, "{k, v, slot_mapping, k_cache, v_cache}"));
  const bool has_v = t[1].buffer != nullptr;
  if (has_v != (t[4].buffer != nullptr))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: view '%s' has a NULL buffer but '%s' does not; pass both V views (a K and "
                "V cache) or neither (a K-only cache).",
                api_name(), has_v ? "v_cache" : "v", has_v ? "v" : "v_cache");
  struct Arg {
    const char *name;
    int64_t rows;
  };
  const Arg args[5] = {{"k", tokens}, {"v", tokens}, {"slot_mapping", 1}, {"k_cache", cache_rows},
                       {"v_cache", cache_rows}};
  CheckedView v[5];
  for (int i = 0; i < 5; ++i) {
    if ((i == 1 || i == 4) && !has_v) continue;
    KAIO_TRY(check_view(args[i].name, &t[i], device, &v[i]));
    if (i == 2) {
      KAIO_TRY(check_dtype(args[i].name, v[i], KAIO_DTYPE_I32));
      KAIO_TRY(check_shape(args[i].name, v[i], 1, tokens));
      continue;
    }
    KAIO_TRY(check_dtype(args[i].name, v[i], dtype));
    KAIO_TRY(check_shape(args[i].name, v[i], args[i].rows, width));
    KAIO_TRY(check_vector_aligned(args[i].name, v[i]));
  }
  // The caches are written: they must not overlap each other or an input.
  for (int c : {3, 4}) {
    if (c == 4 && !has_v) continue;
    for (int i = 0; i < 5; ++i) {
      if (i == c || ((i == 1 || i == 4) && !has_v)) continue;
      KAIO_TRY(check_no_partial_overlap(args[c].name, v[c], args[i].name, v[i], false));
    }
  }
  const uint64_t esize = kaio_dtype_size(dtype);
  unsigned long long pk = v[0].address, pv = has_v ? v[1].address : 0, ps = v[2].address,
                     pkc = v[3].address, pvc = has_v ? v[4].address : 0;
  unsigned chunks = static_cast<unsigned>(static_cast<uint64_t>(width) * esize / kVector);
  unsigned long long k_ld = v[0].row_stride * esize, v_ld = has_v ? v[1].row_stride * esize : 0,
                     kc_ld = v[3].row_stride * esize,
                     vc_ld = has_v ? v[4].row_stride * esize : 0;
  unsigned rows = static_cast<unsigned>(cache_rows), n = static_cast<unsigned>(tokens);
  unsigned long long pflag = flag->device_address();
  void *params[] = {&pk, &pv, &ps, &pkc, &pvc, &chunks, &k_ld, &v_ld, &kc_ld, &vc_ld,
                    &rows, &n, &pflag};
  KAIO_TRY(launch_builtin(device, launch, stream, params));
  note_op_flag(stream, flag);  // after the launch: see ErrorFlagRegistry::ticket
  return KAIO_OK;
}

}  // namespace kaio
