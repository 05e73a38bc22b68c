// GGUF k-quant entry points: quantize, dequantize and dequant-matmul, as
// prepared ops and one-shot calls.
#include <kaio/kaio.h>

#include <memory>

#include "core/error.hpp"
#include "core/firewall.hpp"
#include "ops/op_handle.hpp"
#include "ops/kquant_plan.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

using kaio::fail;
using kaio::KquantPlan;

namespace {

using Kind = KquantPlan::Kind;

void fill(KquantPlan *p, Kind kind, kaio_quant_format format, kaio_quant_mode mode,
          kaio_dtype dtype, kaio_dtype out_dtype, int64_t rows, int64_t cols, int64_t k) {
  p->kind = kind;
  p->format = format;
  p->mode = mode;
  p->dtype = dtype;
  p->out_dtype = out_dtype;
  p->rows = rows;
  p->cols = cols;
  p->k = k;
}

kaio_status create(const char *fn, kaio_op **out, kaio_device *device, Kind kind,
                   kaio_quant_format format, kaio_quant_mode mode, kaio_dtype dtype,
                   kaio_dtype out_dtype, int64_t rows, int64_t cols, int64_t k) {
  if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
  *out = nullptr;
  KAIO_TRY(kaio::resolve_handle("device", device));
  auto op = std::make_unique<kaio_op>();
  KquantPlan *plan =
      op->body.emplace<std::unique_ptr<KquantPlan, kaio::KquantPlanDeleter>>(new KquantPlan).get();
  fill(plan, kind, format, mode, dtype, out_dtype, rows, cols, k);
  KAIO_TRY(kaio::plan_kquant(fn, device, plan));
  return kaio::publish_op(fn, out, device, std::move(op));
}

kaio_status require_views(const char *fn, const char *n0, const kaio_tensor *v0, const char *n1,
                          const kaio_tensor *v1, const char *n2 = nullptr,
                          const kaio_tensor *v2 = nullptr) {
  const struct {
    const char *name;
    const kaio_tensor *view;
  } args[] = {{n0, v0}, {n1, v1}, {n2, v2}};
  for (const auto &arg : args)
    if (arg.name && !arg.view)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                  fn, arg.name);
  return KAIO_OK;
}

// One-shot: plans on the stack (never allocates: no workspace), then runs.
kaio_status one_shot(const char *fn, kaio_stream *stream, KquantPlan *plan,
                     const kaio_tensor *tensors, size_t count) {
  KAIO_TRY(kaio::resolve_handle("stream", stream));
  KAIO_TRY(kaio::plan_kquant(fn, stream->device, plan));
  return kaio::run_kquant(fn, stream->device, *plan, stream, tensors, count);
}

}  // namespace

extern "C" {

KAIO_API int64_t kaio_quant_block_elems(kaio_quant_format format) {
  return kaio::kquant_block_elems(format);
}

KAIO_API int64_t kaio_quant_block_bytes(kaio_quant_format format) {
  return kaio::kquant_block_bytes(format);
}

KAIO_API int64_t kaio_quant_row_bytes(kaio_quant_format format, int64_t cols) {
  const int64_t be = kaio::kquant_block_elems(format);
  int64_t bytes = 0;
  if (be == 0 || cols < 1 || cols % be != 0 ||
      __builtin_mul_overflow(cols / be, kaio::kquant_block_bytes(format), &bytes))
    return 0;  // no such row, or more bytes than int64 holds
  return bytes;
}

KAIO_API kaio_status kaio_op_create_quantize(kaio_op **out, kaio_device *device,
                                             kaio_quant_format format, kaio_quant_mode mode,
                                             kaio_dtype in_dtype, int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_quantize";
  return kaio::firewall(fn, [&] {
    return create(fn, out, device, Kind::quantize, format, mode, in_dtype, KAIO_DTYPE_U8, rows,
                  cols, 0);
  });
}

KAIO_API kaio_status kaio_quantize(kaio_stream *stream, const kaio_tensor *x,
                                   const kaio_tensor *q, kaio_quant_format format,
                                   kaio_quant_mode mode) {
  constexpr const char *fn = "kaio_quantize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, "x", x, "q", q));
    KquantPlan plan;
    fill(&plan, Kind::quantize, format, mode, x->dtype, KAIO_DTYPE_U8, x->rows, x->cols, 0);
    const kaio_tensor t[] = {*x, *q};
    return one_shot(fn, stream, &plan, t, 2);
  });
}

KAIO_API kaio_status kaio_op_create_dequantize(kaio_op **out, kaio_device *device,
                                               kaio_quant_format format, kaio_dtype out_dtype,
                                               int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_dequantize";
  return kaio::firewall(fn, [&] {
    return create(fn, out, device, Kind::dequantize, format, KAIO_QUANT_MODE_GGML, out_dtype,
                  out_dtype, rows, cols, 0);
  });
}

KAIO_API kaio_status kaio_dequantize(kaio_stream *stream, const kaio_tensor *q,
                                     const kaio_tensor *y, kaio_quant_format format) {
  constexpr const char *fn = "kaio_dequantize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, "q", q, "y", y));
    KquantPlan plan;
    fill(&plan, Kind::dequantize, format, KAIO_QUANT_MODE_GGML, y->dtype, y->dtype, y->rows,
         y->cols, 0);
    const kaio_tensor t[] = {*q, *y};
    return one_shot(fn, stream, &plan, t, 2);
  });
}

KAIO_API kaio_status kaio_op_create_quant_matmul(kaio_op **out, kaio_device *device,
                                                 kaio_quant_format format, kaio_dtype a_dtype,
                                                 kaio_dtype out_dtype, int64_t m, int64_t n,
                                                 int64_t k) {
  constexpr const char *fn = "kaio_op_create_quant_matmul";
  return kaio::firewall(fn, [&] {
    return create(fn, out, device, Kind::matmul, format, KAIO_QUANT_MODE_GGML, a_dtype,
                  out_dtype, m, n, k);
  });
}

KAIO_API kaio_status kaio_quant_matmul(kaio_stream *stream, const kaio_tensor *a,
                                       const kaio_tensor *w, const kaio_tensor *c,
                                       kaio_quant_format format) {
  constexpr const char *fn = "kaio_quant_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, "A", a, "W", w, "C", c));
    if (a->rows > 8)
      return fail(KAIO_ERROR_UNSUPPORTED,
                  "%s: A has %lld rows; this call never allocates, so M > 8 needs "
                  "kaio_op_create_quant_matmul, whose op owns the dequantized-weight workspace.",
                  fn, static_cast<long long>(a->rows));
    KquantPlan plan;
    fill(&plan, Kind::matmul, format, KAIO_QUANT_MODE_GGML, a->dtype, c->dtype, a->rows, c->cols,
         a->cols);
    const kaio_tensor t[] = {*a, *w, *c};
    return one_shot(fn, stream, &plan, t, 3);
  });
}

}  // extern "C"
