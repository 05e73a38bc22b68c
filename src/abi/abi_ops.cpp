// Op entry points: prepared op handles and one-shot calls.
#include <kaio/kaio.h>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/buffer.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/tensor_view.hpp"

using kaio::api_name;
using kaio::ElementwisePlan;
using kaio::fail;
using kaio::RowsPlan;

namespace {

template <class Plan>
Plan make_plan(typename Plan::Op op, kaio_dtype dtype, int64_t rows, int64_t cols) {
  Plan p;
  p.op = op;
  p.dtype = dtype;
  p.rows = rows;
  p.cols = cols;
  return p;
}

// One-shot calls take the op's shape from argument 'x'; the full checks of
// every view happen in run(), exactly as for a prepared op. They check
// their view arguments for NULL before the stream (one_shot's own check,
// after it, then passes).
struct ShapeFromX {
  template <class Plan>
  kaio_status operator()(const kaio_stream *stream, const kaio_tensor *tensors,
                         size_t, Plan *plan) const {
    kaio::CheckedView x;
    KAIO_TRY(kaio::check_view("x", &tensors[0], stream->device, &x));
    if (!kaio::is_float_dtype(x.dtype))
      return fail(KAIO_ERROR_INVALID_DTYPE,
                  "%s: argument 'x' has dtype %s; this op takes f32, f16 or bf16.", api_name(),
                  kaio_dtype_name(x.dtype));
    plan->dtype = x.dtype;
    plan->rows = x.rows;
    plan->cols = x.cols;
    return KAIO_OK;
  }
};

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_op_create_silu_gate(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                              int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_silu_gate";
  return kaio::firewall(fn, [&] {
    return kaio::create_op(
        out, device, make_plan<ElementwisePlan>(ElementwisePlan::Op::silu_gate, dtype, rows, cols));
  });
}

KAIO_API kaio_status kaio_op_create_gelu(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                         int64_t rows, int64_t cols, kaio_gelu_mode mode) {
  constexpr const char *fn = "kaio_op_create_gelu";
  return kaio::firewall(fn, [&] {
    auto p = make_plan<ElementwisePlan>(ElementwisePlan::Op::gelu, dtype, rows, cols);
    p.gelu_mode = mode;
    return kaio::create_op(out, device, p);
  });
}

KAIO_API kaio_status kaio_op_create_rmsnorm(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                            int64_t rows, int64_t cols, float eps) {
  constexpr const char *fn = "kaio_op_create_rmsnorm";
  return kaio::firewall(fn, [&] {
    auto p = make_plan<RowsPlan>(RowsPlan::Op::rmsnorm, dtype, rows, cols);
    p.eps = eps;
    return kaio::create_op(out, device, p);
  });
}

KAIO_API kaio_status kaio_op_create_softmax(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                            int64_t rows, int64_t cols) {
  constexpr const char *fn = "kaio_op_create_softmax";
  return kaio::firewall(fn, [&] {
    return kaio::create_op(out, device,
                           make_plan<RowsPlan>(RowsPlan::Op::softmax, dtype, rows, cols));
  });
}

KAIO_API kaio_status kaio_op_launch(const kaio_op *op, kaio_stream *stream,
                                    const kaio_tensor *tensors, size_t count) {
  constexpr const char *fn = "kaio_op_launch";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("op", op));
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    return kaio::run_op_handle(*op, stream, tensors, count);
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
    const kaio::NamedView views[] = {{"x", x}, {"gate", gate}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    return kaio::one_shot(stream, views,
                          make_plan<ElementwisePlan>(ElementwisePlan::Op::silu_gate, 0, 0, 0),
                          ShapeFromX{});
  });
}

KAIO_API kaio_status kaio_gelu(kaio_stream *stream, const kaio_tensor *x, const kaio_tensor *out,
                               kaio_gelu_mode mode) {
  constexpr const char *fn = "kaio_gelu";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"x", x}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    auto p = make_plan<ElementwisePlan>(ElementwisePlan::Op::gelu, 0, 0, 0);
    p.gelu_mode = mode;
    return kaio::one_shot(stream, views, p, ShapeFromX{});
  });
}

KAIO_API kaio_status kaio_rmsnorm(kaio_stream *stream, const kaio_tensor *x,
                                  const kaio_tensor *weight, const kaio_tensor *out, float eps) {
  constexpr const char *fn = "kaio_rmsnorm";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"x", x}, {"weight", weight}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    auto p = make_plan<RowsPlan>(RowsPlan::Op::rmsnorm, 0, 0, 0);
    p.eps = eps;
    return kaio::one_shot(stream, views, p, ShapeFromX{});
  });
}

KAIO_API kaio_status kaio_softmax(kaio_stream *stream, const kaio_tensor *x,
                                  const kaio_tensor *out) {
  constexpr const char *fn = "kaio_softmax";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"x", x}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    return kaio::one_shot(stream, views, make_plan<RowsPlan>(RowsPlan::Op::softmax, 0, 0, 0),
                          ShapeFromX{});
  });
}

KAIO_API kaio_status kaio_op_create_add_rmsnorm(kaio_op **out, kaio_device *device,
                                                kaio_dtype dtype, int64_t rows, int64_t cols,
                                                float eps) {
  constexpr const char *fn = "kaio_op_create_add_rmsnorm";
  return kaio::firewall(fn, [&] {
    auto p = make_plan<RowsPlan>(RowsPlan::Op::add_rmsnorm, dtype, rows, cols);
    p.eps = eps;
    return kaio::create_op(out, device, p);
  });
}

KAIO_API kaio_status kaio_add_rmsnorm(kaio_stream *stream, const kaio_tensor *x,
                                      const kaio_tensor *residual, const kaio_tensor *weight,
                                      const kaio_tensor *out, float eps) {
  constexpr const char *fn = "kaio_add_rmsnorm";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {
        {"x", x}, {"residual", residual}, {"weight", weight}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    auto p = make_plan<RowsPlan>(RowsPlan::Op::add_rmsnorm, 0, 0, 0);
    p.eps = eps;
    return kaio::one_shot(stream, views, p, ShapeFromX{});
  });
}

KAIO_API kaio_status kaio_op_create_layernorm(kaio_op **out, kaio_device *device, kaio_dtype dtype,
                                              int64_t rows, int64_t cols, float eps) {
  constexpr const char *fn = "kaio_op_create_layernorm";
  return kaio::firewall(fn, [&] {
    auto p = make_plan<RowsPlan>(RowsPlan::Op::layernorm, dtype, rows, cols);
    p.eps = eps;
    return kaio::create_op(out, device, p);
  });
}

KAIO_API kaio_status kaio_layernorm(kaio_stream *stream, const kaio_tensor *x,
                                    const kaio_tensor *weight, const kaio_tensor *bias,
                                    const kaio_tensor *out, float eps) {
  constexpr const char *fn = "kaio_layernorm";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {
        {"x", x}, {"weight", weight, true}, {"bias", bias, true}, {"out", out}};
    KAIO_TRY(kaio::require_views(views));
    auto p = make_plan<RowsPlan>(RowsPlan::Op::layernorm, 0, 0, 0);
    p.eps = eps;
    return kaio::one_shot(stream, views, p, ShapeFromX{});
  });
}

}  // extern "C"
