// Matmul entry points: the general descriptor form and KAIO's named forms.
#include <kaio/kaio.h>

#include <cstring>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::api_name;
using kaio::fail;
using kaio::MatmulBackwardPlan;
using kaio::MatmulPlan;

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

MatmulPlan plan_from(const kaio_matmul_desc &d) {
  MatmulPlan p;
  p.dtype = d.in_dtype;
  p.rows = d.m;
  p.cols = d.n;
  p.out_dtype = d.out_dtype;
  p.trans_a = d.trans_a;
  p.trans_b = d.trans_b;
  p.variant = d.variant;
  p.k = d.k;
  p.alpha = d.alpha;
  p.beta = d.beta;
  return p;
}

kaio_status create(kaio_op **out, kaio_device *device, const kaio_matmul_desc &desc) {
  return kaio::create_op(out, device, plan_from(desc));
}

// One-shot: M, N, K left at 0 in the desc come from the views' shapes.
kaio_status one_shot(kaio_stream *stream, const kaio_tensor *a,
                     const kaio_tensor *b, const kaio_tensor *c, kaio_matmul_desc desc) {
  const kaio::NamedView views[] = {{"A", a}, {"B", b}, {"C", c}};
  return kaio::one_shot(stream, views, MatmulPlan{}, [&](MatmulPlan *plan) -> kaio_status {
    if (desc.m == 0) desc.m = c->rows;
    if (desc.n == 0) desc.n = c->cols;
    if (desc.k == 0) desc.k = desc.trans_a == KAIO_TRANS_T ? a->rows : a->cols;
    *plan = plan_from(desc);
    return KAIO_OK;
  });
}

kaio_matmul_desc named_desc(kaio_dtype in, kaio_matmul_variant variant) {
  kaio_matmul_desc d = default_desc();
  d.in_dtype = in;
  d.variant = variant;
  return d;
}

kaio_status create_named(kaio_op **out, kaio_device *device, kaio_dtype in,
                         kaio_matmul_variant variant, int64_t m, int64_t n, int64_t k) {
  kaio_matmul_desc d = named_desc(in, variant);
  d.m = m;
  d.n = n;
  d.k = k;
  return create(out, device, d);
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

kaio_status create_backward(kaio_op **out, kaio_device *device,
                            const kaio_matmul_backward_desc &desc) {
  const auto fill = [&](MatmulBackwardPlan *plan) -> kaio_status {
    if (desc.reserved != 0 || desc.reserved2 != 0)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: desc->reserved fields must be 0.", api_name());
    *plan = MatmulBackwardPlan(desc);
    return KAIO_OK;
  };
  return kaio::create_op<MatmulBackwardPlan>(out, device, fill);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_matmul_backward_desc_init(kaio_matmul_backward_desc *desc,
                                                    size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_backward_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_backward_desc());
  });
}

KAIO_API kaio_status kaio_op_create_matmul_backward(kaio_op **out, kaio_device *device,
                                                    const kaio_matmul_backward_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul_backward";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_backward_desc d;
    KAIO_TRY(kaio::read_desc("kaio_matmul_backward_desc_init", desc, &d));
    return create_backward(out, device, d);
  });
}

KAIO_API kaio_status kaio_matmul_tc_backward(kaio_stream *stream, const kaio_tensor *dc,
                                             const kaio_tensor *a, const kaio_tensor *b,
                                             const kaio_tensor *da, const kaio_tensor *db) {
  constexpr const char *fn = "kaio_matmul_tc_backward";
  return kaio::firewall(fn, [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"dC", dc}, {"A", a}, {"B", b}, {"dA", da}, {"dB", db}};
    const auto from_views = [&](MatmulBackwardPlan *plan) -> kaio_status {
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
      *plan = MatmulBackwardPlan(d);
      return KAIO_OK;
    };
    return kaio::one_shot(stream, views, MatmulBackwardPlan{}, from_views,
                          " (a NULL buffer skips a gradient)");
  });
}

KAIO_API kaio_status kaio_matmul_desc_init(kaio_matmul_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_matmul(kaio_op **out, kaio_device *device,
                                           const kaio_matmul_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_desc d;
    KAIO_TRY(kaio::read_desc("kaio_matmul_desc_init", desc, &d));
    return create(out, device, d);
  });
}

KAIO_API kaio_status kaio_matmul(kaio_stream *stream, const kaio_tensor *a, const kaio_tensor *b,
                                 const kaio_tensor *c, const kaio_matmul_desc *desc) {
  constexpr const char *fn = "kaio_matmul";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_desc d;
    KAIO_TRY(kaio::read_desc("kaio_matmul_desc_init", desc, &d));
    return one_shot(stream, a, b, c, d);
  });
}

#define KAIO_NAMED_MATMUL(name, in, variant)                                                    \
  KAIO_API kaio_status kaio_##name(kaio_stream *stream, const kaio_tensor *a,                   \
                                   const kaio_tensor *b, const kaio_tensor *c) {                \
    constexpr const char *fn = "kaio_" #name;                                                   \
    return kaio::firewall(fn, [&] { return one_shot(stream, a, b, c, named_desc(in, variant)); }); \
  }                                                                                             \
  KAIO_API kaio_status kaio_op_create_##name(kaio_op **out, kaio_device *device, int64_t m,     \
                                             int64_t n, int64_t k) {                            \
    constexpr const char *fn = "kaio_op_create_" #name;                                         \
    return kaio::firewall(fn, [&] { return create_named(out, device, in, variant, m, n, k); }); \
  }

KAIO_NAMED_MATMUL(matmul_tc, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO)
KAIO_NAMED_MATMUL(matmul_tc_async, KAIO_DTYPE_F16, KAIO_MATMUL_ASYNC)
KAIO_NAMED_MATMUL(matmul_tc_bf16, KAIO_DTYPE_BF16, KAIO_MATMUL_AUTO)
KAIO_NAMED_MATMUL(matmul_tc_bf16_async, KAIO_DTYPE_BF16, KAIO_MATMUL_ASYNC)
#undef KAIO_NAMED_MATMUL

}  // extern "C"
