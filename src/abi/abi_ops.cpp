// Op entry points: prepared op handles and one-shot calls.
#include <kaio/kaio.h>

#include <memory>

#include "core/error.hpp"
#include "core/firewall.hpp"
#include "ops/op_handle.hpp"
#include "runtime/buffer.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/tensor_view.hpp"

using kaio::fail;
using kaio::OpKind;
using kaio::OpPlan;

namespace {

kaio_status create_op(const char *fn, kaio_op **out, kaio_device *device, const OpPlan &plan) {
  if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
  *out = nullptr;
  KAIO_TRY(kaio::resolve_handle("device", device));
  auto op = std::make_unique<kaio_op>();
  OpPlan &planned = std::get<OpPlan>(op->body) = plan;
  KAIO_TRY(kaio::plan_op(fn, device, &planned));
  return kaio::publish_op(fn, out, device, std::move(op));
}

OpPlan make_plan(OpKind kind, kaio_dtype dtype, int64_t rows, int64_t cols) {
  OpPlan p;
  p.kind = kind;
  p.dtype = dtype;
  p.rows = rows;
  p.cols = cols;
  return p;
}

// One-shot calls take the op's shape from argument 'x'; the full checks of
// every view happen in run_op, exactly as for a prepared op.
kaio_status one_shot(const char *fn, kaio_stream *stream, OpPlan plan,
                     const kaio_tensor *tensors, size_t count) {
  KAIO_TRY(kaio::resolve_handle("stream", stream));
  kaio::CheckedView x;
  KAIO_TRY(kaio::check_view(fn, "x", &tensors[0], stream->device, &x));
  if (!kaio::is_float_dtype(x.dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument 'x' has dtype %s; this op takes f32, f16 or bf16.", fn,
                kaio_dtype_name(x.dtype));
  plan.dtype = x.dtype;
  plan.rows = x.rows;
  plan.cols = x.cols;
  KAIO_TRY(kaio::plan_op(fn, stream->device, &plan));
  return kaio::run_op(fn, stream->device, plan, stream, tensors, count);
}

kaio_status require_views(const char *fn, std::initializer_list<std::pair<const char *, const kaio_tensor *>> views) {
  for (const auto &[name, view] : views)
    if (!view)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                  fn, name);
  return KAIO_OK;
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_op_create_silu_gate(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                              int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_silu_gate";
  return kaio::firewall(fn, [&] {
    return create_op(fn, out, device, make_plan(OpKind::silu_gate, dtype, rows, cols));
  });
}

KAIO_API kaio_status kaio_op_create_gelu(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                         int64_t rows, int64_t cols, kaio_gelu_mode mode) {
  constexpr const char *fn = "kaio_op_create_gelu";
  return kaio::firewall(fn, [&] {
    OpPlan p = make_plan(OpKind::gelu, dtype, rows, cols);
    p.gelu_mode = mode;
    return create_op(fn, out, device, p);
  });
}

KAIO_API kaio_status kaio_op_create_rmsnorm(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                            int64_t rows, int64_t cols, float eps) {
  constexpr const char *fn = "kaio_op_create_rmsnorm";
  return kaio::firewall(fn, [&] {
    OpPlan p = make_plan(OpKind::rmsnorm, dtype, rows, cols);
    p.eps = eps;
    return create_op(fn, out, device, p);
  });
}

KAIO_API kaio_status kaio_op_create_softmax(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                            int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_softmax";
  return kaio::firewall(fn, [&] {
    return create_op(fn, out, device, make_plan(OpKind::softmax, dtype, rows, cols));
  });
}

KAIO_API kaio_status kaio_op_launch(const kaio_op *op, kaio_stream *stream,
                                    const kaio_tensor *tensors, size_t count) {
  constexpr const char *fn = "kaio_op_launch";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("op", op));
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    return kaio::run_op_handle(fn, *op, stream, tensors, count);
  });
}

KAIO_API void kaio_op_destroy(kaio_op *handle) {
  kaio::firewall_void("kaio_op_destroy", [&] {
    kaio_op *op = kaio::retire_handle(handle);
    if (!op) return;
    kaio_device *device = op->device;
    delete op;
    kaio::device_release(device);
  });
}

KAIO_API kaio_status kaio_silu_gate(kaio_stream *stream, const kaio_tensor *x,
                                    const kaio_tensor *gate, const kaio_tensor *out) {
  constexpr const char *fn = "kaio_silu_gate";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, {{"x", x}, {"gate", gate}, {"out", out}}));
    const kaio_tensor t[] = {*x, *gate, *out};
    return one_shot(fn, stream, make_plan(OpKind::silu_gate, 0, 0, 0), t, 3);
  });
}

KAIO_API kaio_status kaio_gelu(kaio_stream *stream, const kaio_tensor *x, const kaio_tensor *out,
                               kaio_gelu_mode mode) {
  constexpr const char *fn = "kaio_gelu";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, {{"x", x}, {"out", out}}));
    const kaio_tensor t[] = {*x, *out};
    OpPlan p = make_plan(OpKind::gelu, 0, 0, 0);
    p.gelu_mode = mode;
    return one_shot(fn, stream, p, t, 2);
  });
}

KAIO_API kaio_status kaio_rmsnorm(kaio_stream *stream, const kaio_tensor *x,
                                  const kaio_tensor *weight, const kaio_tensor *out, float eps) {
  constexpr const char *fn = "kaio_rmsnorm";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, {{"x", x}, {"weight", weight}, {"out", out}}));
    const kaio_tensor t[] = {*x, *weight, *out};
    OpPlan p = make_plan(OpKind::rmsnorm, 0, 0, 0);
    p.eps = eps;
    return one_shot(fn, stream, p, t, 3);
  });
}

KAIO_API kaio_status kaio_softmax(kaio_stream *stream, const kaio_tensor *x,
                                  const kaio_tensor *out) {
  constexpr const char *fn = "kaio_softmax";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(require_views(fn, {{"x", x}, {"out", out}}));
    const kaio_tensor t[] = {*x, *out};
    return one_shot(fn, stream, make_plan(OpKind::softmax, 0, 0, 0), t, 2);
  });
}

}  // extern "C"
