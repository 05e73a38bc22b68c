// GGUF k-quant entry points: quantize, dequantize and dequant-matmul, as
// prepared ops and one-shot calls.
#include <kaio/kaio.h>

#include "abi/op_entry.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"

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

kaio_status create(kaio_op **out, kaio_device *device, Kind kind,
                   kaio_quant_format format, kaio_quant_mode mode, kaio_dtype dtype,
                   kaio_dtype out_dtype, int64_t rows, int64_t cols, int64_t k) {
  KquantPlan plan;
  fill(&plan, kind, format, mode, dtype, out_dtype, rows, cols, k);
  return kaio::create_op(out, device, plan);
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
    return create(out, device, Kind::quantize, format, mode, in_dtype, KAIO_DTYPE_U8, rows,
                  cols, 0);
  });
}

KAIO_API kaio_status kaio_quantize(kaio_stream *stream, const kaio_tensor *x,
                                   const kaio_tensor *q, kaio_quant_format format,
                                   kaio_quant_mode mode) {
  constexpr const char *fn = "kaio_quantize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    // The k-quant calls refuse NULL views before looking at the stream;
    // one_shot's own check, after it, then passes.
    const kaio::NamedView views[] = {{"x", x}, {"q", q}};
    KAIO_TRY(kaio::require_views(views));
    KquantPlan plan;
    fill(&plan, Kind::quantize, format, mode, x->dtype, KAIO_DTYPE_U8, x->rows, x->cols, 0);
    return kaio::one_shot(stream, views, plan);
  });
}

KAIO_API kaio_status kaio_op_create_dequantize(kaio_op **out, kaio_device *device,
                                               kaio_quant_format format, kaio_dtype out_dtype,
                                               int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_dequantize";
  return kaio::firewall(fn, [&] {
    return create(out, device, Kind::dequantize, format, KAIO_QUANT_MODE_GGML, out_dtype,
                  out_dtype, rows, cols, 0);
  });
}

KAIO_API kaio_status kaio_dequantize(kaio_stream *stream, const kaio_tensor *q,
                                     const kaio_tensor *y, kaio_quant_format format) {
  constexpr const char *fn = "kaio_dequantize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"q", q}, {"y", y}};
    KAIO_TRY(kaio::require_views(views));
    KquantPlan plan;
    fill(&plan, Kind::dequantize, format, KAIO_QUANT_MODE_GGML, y->dtype, y->dtype, y->rows,
         y->cols, 0);
    return kaio::one_shot(stream, views, plan);
  });
}

KAIO_API kaio_status kaio_op_create_quant_matmul(kaio_op **out, kaio_device *device,
                                                 kaio_quant_format format, kaio_dtype a_dtype,
                                                 kaio_dtype out_dtype, int64_t m, int64_t n,
                                                 int64_t k) {
  constexpr const char *fn = "kaio_op_create_quant_matmul";
  return kaio::firewall(fn, [&] {
    return create(out, device, Kind::matmul, format, KAIO_QUANT_MODE_GGML, a_dtype,
                  out_dtype, m, n, k);
  });
}

KAIO_API kaio_status kaio_quant_matmul(kaio_stream *stream, const kaio_tensor *a,
                                       const kaio_tensor *w, const kaio_tensor *c,
                                       kaio_quant_format format) {
  constexpr const char *fn = "kaio_quant_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"A", a}, {"W", w}, {"C", c}};
    KAIO_TRY(kaio::require_views(views));
    if (a->rows > 8)
      return fail(KAIO_ERROR_UNSUPPORTED,
                  "%s: A has %lld rows; this call never allocates, so M > 8 needs "
                  "kaio_op_create_quant_matmul, whose op owns the dequantized-weight workspace.",
                  fn, static_cast<long long>(a->rows));
    KquantPlan plan;
    fill(&plan, Kind::matmul, format, KAIO_QUANT_MODE_GGML, a->dtype, c->dtype, a->rows, c->cols,
         a->cols);
    return kaio::one_shot(stream, views, plan);
  });
}

}  // extern "C"
