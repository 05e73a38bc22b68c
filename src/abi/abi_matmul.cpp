// Matmul entry points: the general descriptor form and KAIO's named forms.
#include <kaio/kaio.h>

#include <cstring>
#include <memory>

#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "ops/op_handle.hpp"
#include "ops/op_plan.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

using kaio::fail;
using kaio::OpKind;
using kaio::OpPlan;

namespace {

kaio_matmul_desc default_desc() {
  kaio_matmul_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.in_dtype = KAIO_DTYPE_F16;
  d.out_dtype = KAIO_DTYPE_F32;
  d.trans_a = KAIO_TRANS_N;
  d.trans_b = KAIO_TRANS_N;
  d.variant = KAIO_MATMUL_AUTO;
  d.alpha = 1.0f;
  d.beta = 0.0f;
  return d;
}

// Reads a caller's descriptor of any later, larger version: fields this
// version does not know are ignored.
kaio_status read_desc(const char *fn, const kaio_matmul_desc *in, kaio_matmul_desc *out) {
  if (!in) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'desc' is NULL.", fn);
  if (in->struct_size < sizeof(kaio_matmul_desc))
    return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                "%s: desc->struct_size is %u but must be at least %zu; initialise the desc with "
                "kaio_matmul_desc_init.",
                fn, in->struct_size, sizeof(kaio_matmul_desc));
  std::memcpy(out, in, sizeof *out);
  return KAIO_OK;
}

OpPlan plan_from(const kaio_matmul_desc &d) {
  OpPlan p;
  p.kind = OpKind::matmul;
  p.dtype = d.in_dtype;
  p.rows = d.m;
  p.cols = d.n;
  p.matmul.out_dtype = d.out_dtype;
  p.matmul.trans_a = d.trans_a;
  p.matmul.trans_b = d.trans_b;
  p.matmul.variant = d.variant;
  p.matmul.k = d.k;
  p.matmul.alpha = d.alpha;
  p.matmul.beta = d.beta;
  return p;
}

kaio_status create(const char *fn, kaio_op **out, kaio_device *device,
                   const kaio_matmul_desc &desc) {
  if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
  *out = nullptr;
  KAIO_TRY(kaio::resolve_handle("device", device));
  auto op = std::make_unique<kaio_op>();
  kaio::OpPlan &plan = std::get<kaio::OpPlan>(op->body) = plan_from(desc);
  plan.prepared = true;
  KAIO_TRY(kaio::plan_op(fn, device, &plan));
  return kaio::publish_op(fn, out, device, std::move(op));
}

// One-shot: M, N, K left at 0 in the desc come from the views' shapes.
kaio_status one_shot(const char *fn, kaio_stream *stream, const kaio_tensor *a,
                     const kaio_tensor *b, const kaio_tensor *c, kaio_matmul_desc desc) {
  KAIO_TRY(kaio::resolve_handle("stream", stream));
  const struct {
    const char *name;
    const kaio_tensor *view;
  } args[] = {{"A", a}, {"B", b}, {"C", c}};
  for (const auto &arg : args)
    if (!arg.view)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                  fn, arg.name);
  if (desc.m == 0) desc.m = c->rows;
  if (desc.n == 0) desc.n = c->cols;
  if (desc.k == 0) desc.k = desc.trans_a == KAIO_TRANS_T ? a->rows : a->cols;
  OpPlan plan = plan_from(desc);
  KAIO_TRY(kaio::plan_op(fn, stream->device, &plan));
  const kaio_tensor tensors[] = {*a, *b, *c};
  return kaio::run_op(fn, stream->device, plan, stream, tensors, 3);
}

kaio_matmul_desc named_desc(kaio_dtype in, kaio_matmul_variant variant) {
  kaio_matmul_desc d = default_desc();
  d.in_dtype = in;
  d.variant = variant;
  return d;
}

kaio_status create_named(const char *fn, kaio_op **out, kaio_device *device, kaio_dtype in,
                         kaio_matmul_variant variant, int64_t m, int64_t n, int64_t k) {
  kaio_matmul_desc d = named_desc(in, variant);
  d.m = m;
  d.n = n;
  d.k = k;
  return create(fn, out, device, d);
}

kaio_matmul_backward_desc default_backward_desc() {
  kaio_matmul_backward_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.in_dtype = KAIO_DTYPE_F16;
  d.grad_dtype = KAIO_DTYPE_F16;
  d.out_dtype = KAIO_DTYPE_F32;
  d.variant = KAIO_MATMUL_AUTO;
  return d;
}

kaio_status create_backward(const char *fn, kaio_op **out, kaio_device *device,
                            const kaio_matmul_backward_desc &desc) {
  if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
  *out = nullptr;
  KAIO_TRY(kaio::resolve_handle("device", device));
  if (desc.reserved != 0 || desc.reserved2 != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: desc->reserved fields must be 0.", fn);
  auto op = std::make_unique<kaio_op>();
  auto &backward = op->body.emplace<std::unique_ptr<kaio::BackwardPlan>>(
      std::make_unique<kaio::BackwardPlan>(kaio::make_backward_plan(desc)));
  KAIO_TRY(kaio::plan_matmul_backward(fn, device, backward.get()));
  return kaio::publish_op(fn, out, device, std::move(op));
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_matmul_backward_desc_init(kaio_matmul_backward_desc *desc,
                                                    size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_backward_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(fn, desc, struct_size, default_backward_desc());
  });
}

KAIO_API kaio_status kaio_op_create_matmul_backward(kaio_op **out, kaio_device *device,
                                                    const kaio_matmul_backward_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul_backward";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!desc) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'desc' is NULL.", fn);
    if (desc->struct_size < sizeof(kaio_matmul_backward_desc))
      return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                  "%s: desc->struct_size is %u but must be at least %zu; initialise the desc "
                  "with kaio_matmul_backward_desc_init.",
                  fn, desc->struct_size, sizeof(kaio_matmul_backward_desc));
    kaio_matmul_backward_desc d;
    std::memcpy(&d, desc, sizeof d);
    return create_backward(fn, out, device, d);
  });
}

KAIO_API kaio_status kaio_matmul_tc_backward(kaio_stream *stream, const kaio_tensor *dc,
                                             const kaio_tensor *a, const kaio_tensor *b,
                                             const kaio_tensor *da, const kaio_tensor *db) {
  constexpr const char *fn = "kaio_matmul_tc_backward";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    const struct {
      const char *name;
      const kaio_tensor *view;
    } args[] = {{"dC", dc}, {"A", a}, {"B", b}, {"dA", da}, {"dB", db}};
    for (const auto &arg : args)
      if (!arg.view)
        return fail(KAIO_ERROR_INVALID_ARGUMENT,
                    "%s: argument '%s' is NULL; pass a kaio_tensor (a NULL buffer skips a "
                    "gradient).",
                    fn, arg.name);
    if (dc->dtype == KAIO_DTYPE_F32)
      return fail(KAIO_ERROR_UNSUPPORTED,
                  "%s: argument 'dC' is f32; this call never allocates, so create the op with "
                  "kaio_op_create_matmul_backward (grad_dtype KAIO_DTYPE_F32), which owns the "
                  "rounding workspace.",
                  fn);
    kaio_matmul_backward_desc d = default_backward_desc();
    d.m = a->rows;
    d.k = a->cols;
    d.n = b->cols;
    kaio::BackwardPlan plan = kaio::make_backward_plan(d);
    KAIO_TRY(kaio::plan_matmul_backward(fn, stream->device, &plan));
    const kaio_tensor t[] = {*dc, *a, *b, *da, *db};
    return kaio::run_matmul_backward(fn, stream->device, plan, stream, t, 5);
  });
}

KAIO_API kaio_status kaio_matmul_desc_init(kaio_matmul_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(fn, desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_matmul(kaio_op **out, kaio_device *device,
                                           const kaio_matmul_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_desc d;
    KAIO_TRY(read_desc(fn, desc, &d));
    return create(fn, out, device, d);
  });
}

KAIO_API kaio_status kaio_matmul(kaio_stream *stream, const kaio_tensor *a, const kaio_tensor *b,
                                 const kaio_tensor *c, const kaio_matmul_desc *desc) {
  constexpr const char *fn = "kaio_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_desc d;
    KAIO_TRY(read_desc(fn, desc, &d));
    return one_shot(fn, stream, a, b, c, d);
  });
}

#define KAIO_NAMED_MATMUL(name, in, variant)                                                    \
  KAIO_API kaio_status kaio_##name(kaio_stream *stream, const kaio_tensor *a,                   \
                                   const kaio_tensor *b, const kaio_tensor *c) {                \
    constexpr const char *fn = "kaio_" #name;                                                   \
    return kaio::firewall(fn, [&] { return one_shot(fn, stream, a, b, c, named_desc(in, variant)); }); \
  }                                                                                             \
  KAIO_API kaio_status kaio_op_create_##name(kaio_op **out, kaio_device *device, int64_t m,     \
                                             int64_t n, int64_t k) {                            \
    constexpr const char *fn = "kaio_op_create_" #name;                                         \
    return kaio::firewall(fn, [&] { return create_named(fn, out, device, in, variant, m, n, k); }); \
  }

KAIO_NAMED_MATMUL(matmul_tc, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO)
KAIO_NAMED_MATMUL(matmul_tc_async, KAIO_DTYPE_F16, KAIO_MATMUL_ASYNC)
KAIO_NAMED_MATMUL(matmul_tc_bf16, KAIO_DTYPE_BF16, KAIO_MATMUL_AUTO)
KAIO_NAMED_MATMUL(matmul_tc_bf16_async, KAIO_DTYPE_BF16, KAIO_MATMUL_ASYNC)
#undef KAIO_NAMED_MATMUL

}  // extern "C"
