// What the quantized ops share: plan and launch dispatch, and the alignment
// check of their 16-byte vector loads.
#include "ops/quant.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "runtime/stream.hpp"

namespace kaio {

kaio_status check_aligned_view(const char *caller, const char *arg, const kaio_tensor *t,
                               const kaio_device *device, unsigned align, int64_t stride_elems,
                               const char *why, CheckedView *out) {
  KAIO_TRY(check_view(caller, arg, t, device, out));
  if (out->address % align != 0 || out->row_stride % stride_elems != 0)
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte offset %" PRIu64 " of a 256-byte-aligned "
                "allocation with row_stride %" PRId64 "; %s needs a %u-byte aligned start and a "
                "row_stride that is a multiple of %" PRId64 " elements. Pad the rows or copy "
                "into an aligned buffer.",
                caller, arg, static_cast<uint64_t>(out->address % 256), out->row_stride, why,
                align, stride_elems);
  return KAIO_OK;
}

std::string quant_subject(const QuantPlan &p) {
  char s[160];
  const char *kind = p.kind == QuantKind::int8 ? "int8" : p.kind == QuantKind::int4 ? "int4"
                     : p.kind == QuantKind::qkv_int4 ? "qkv int4" : "qkv int8";
  int n = std::snprintf(s, sizeof s, "%s M=%" PRId64 " N=%" PRId64, kind, p.m, p.n[0]);
  for (int i = 1; i < p.nproj; ++i)
    n += std::snprintf(s + n, sizeof s - n, ",%" PRId64, p.n[i]);
  std::snprintf(s + n, sizeof s - n, " K=%" PRId64 " %s", p.k,
                kaio_dtype_name(p.kind == QuantKind::int8       ? KAIO_DTYPE_I8
                                : p.kind == QuantKind::qkv_int8 ? KAIO_DTYPE_F16
                                                                : p.in_dtype));
  return s;
}

kaio_status QuantPlan::plan(const char *caller, kaio_device *device) {
  this->device = device;
  if (kind == QuantKind::int8) return plan_int8(caller, device, this);
  if (kind == QuantKind::qkv_int8) return plan_qkv_int8(caller, device, this);
  return plan_int4(caller, device, this, prepared);
}

kaio_status QuantPlan::run(const char *caller, kaio_stream *stream, const kaio_tensor *tensors,
                           size_t count) const {
  KAIO_TRY(check_op_stream(caller, device, stream));
  size_t expected = kQkvTensors;
  const char *order =
      "{x, qweight_q, qzeros_q, scales_q, qweight_k, qzeros_k, scales_k, qweight_v, qzeros_v, "
      "scales_v, out_q, out_k, out_v}";
  switch (kind) {
    case QuantKind::int8:
      expected = kInt8Tensors;
      order = "{A, B, sa, sb, C}";
      break;
    case QuantKind::int4:
      expected = kInt4Tensors;
      order = "{A, qweight, qzeros, scales, C}";
      break;
    case QuantKind::qkv_int8:
      expected = kQkv8Tensors;
      order = "{x, w_q, scale_q, w_k, scale_k, w_v, scale_v, out_q, out_k, out_v}";
      break;
    case QuantKind::qkv_int4: break;
  }
  KAIO_TRY(check_launch(caller, device, stream, tensors, count, expected, order));
  if (kind == QuantKind::int8) return run_int8(caller, device, *this, stream, tensors);
  if (kind == QuantKind::qkv_int8) return run_qkv_int8(caller, device, *this, stream, tensors);
  return run_int4(caller, device, *this, stream, tensors);
}

}  // namespace kaio
