// Quantized matmul entry points: INT8 W8A8, INT4 W4A16 (GPTQ), fused QKV.
#include <kaio/kaio.h>

#include <cstring>
#include <type_traits>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::api_name;
using kaio::fail;
using kaio::Int4Plan;
using kaio::Int8Plan;
using kaio::QkvInt8Plan;

namespace {

constexpr int64_t kDefaultGroup = 128;

// kaio::read_desc, then the reserved field's check.
template <typename Desc>
kaio_status read_desc(const char *init, const Desc *in, Desc *out) {
  KAIO_TRY(kaio::read_desc(init, in, out));
  if constexpr (!std::is_same_v<Desc, kaio_matmul_int8_desc>) {
    if (out->reserved != 0)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: desc->reserved is %u but must be 0.",
                  api_name(), out->reserved);
  }
  return KAIO_OK;
}

kaio_matmul_int8_desc int8_defaults() {
  kaio_matmul_int8_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.out_dtype = KAIO_DTYPE_F32;
  d.alpha = 1.0f;
  return d;
}

kaio_matmul_int4_desc int4_defaults() {
  kaio_matmul_int4_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.in_dtype = KAIO_DTYPE_F16;
  d.out_dtype = KAIO_DTYPE_F32;
  d.format = KAIO_INT4_GPTQ;
  d.group_size = kDefaultGroup;
  return d;
}

kaio_qkv_int4_desc qkv_defaults() {
  kaio_qkv_int4_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.in_dtype = KAIO_DTYPE_F16;
  d.out_dtype = KAIO_DTYPE_F16;
  d.format = KAIO_INT4_GPTQ;
  d.group_size = kDefaultGroup;
  return d;
}

kaio_qkv_int8_desc qkv8_defaults() {
  kaio_qkv_int8_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.out_dtype = KAIO_DTYPE_F16;
  return d;
}

QkvInt8Plan qkv8_plan(const kaio_qkv_int8_desc &d) {
  QkvInt8Plan p;
  p.out_dtype = d.out_dtype;
  p.m = d.m;
  p.k = d.k;
  p.n[0] = d.n_q;
  p.n[1] = d.n_k;
  p.n[2] = d.n_v;
  return p;
}

// A QKV one-shot's desc with M, K and the three N left at 0 taken from x
// (tensors[0]) and the outputs (tensors[out], [out + 1], [out + 2]).
template <typename Desc>
Desc qkv_dims(const kaio_tensor *tensors, size_t out, Desc d) {
  if (d.m == 0) d.m = tensors[0].rows;
  if (d.k == 0) d.k = tensors[0].cols;
  if (d.n_q == 0) d.n_q = tensors[out].cols;
  if (d.n_k == 0) d.n_k = tensors[out + 1].cols;
  if (d.n_v == 0) d.n_v = tensors[out + 2].cols;
  return d;
}

Int8Plan int8_plan(const kaio_matmul_int8_desc &d) {
  Int8Plan p;
  p.out_dtype = d.out_dtype;
  p.m = d.m;
  p.n = d.n;
  p.k = d.k;
  p.alpha = d.alpha;
  p.variant = d.variant;
  return p;
}

Int4Plan int4_plan(const kaio_matmul_int4_desc &d) {
  Int4Plan p;
  p.in_dtype = d.in_dtype;
  p.out_dtype = d.out_dtype;
  p.format = d.format;
  p.m = d.m;
  p.n[0] = d.n;
  p.k = d.k;
  p.group = d.group_size ? d.group_size : kDefaultGroup;
  p.zeros_offset = d.zeros_offset;
  return p;
}

Int4Plan qkv_plan(const kaio_qkv_int4_desc &d) {
  Int4Plan p;
  p.qkv = true;
  p.nproj = 3;
  p.in_dtype = d.in_dtype;
  p.out_dtype = d.out_dtype;
  p.format = d.format;
  p.m = d.m;
  p.k = d.k;
  p.n[0] = d.n_q;
  p.n[1] = d.n_k;
  p.n[2] = d.n_v;
  p.group = d.group_size ? d.group_size : kDefaultGroup;
  p.zeros_offset = d.zeros_offset;
  return p;
}


}  // namespace

extern "C" {

KAIO_API kaio_status kaio_matmul_int8_desc_init(kaio_matmul_int8_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_int8_desc_init";
  return kaio::firewall(fn, [&] {
    return kaio::init_desc(desc, struct_size, int8_defaults());
  });
}

KAIO_API kaio_status kaio_op_create_matmul_int8(kaio_op **out, kaio_device *device,
                                                const kaio_matmul_int8_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul_int8";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_int8_desc d;
    KAIO_TRY(read_desc("kaio_matmul_int8_desc_init", desc, &d));
    return kaio::create_op(out, device, int8_plan(d));
  });
}

KAIO_API kaio_status kaio_matmul_int8(kaio_stream *stream, const kaio_tensor *a,
                                      const kaio_tensor *b, const kaio_tensor *sa,
                                      const kaio_tensor *sb, const kaio_tensor *c,
                                      const kaio_matmul_int8_desc *desc) {
  constexpr const char *fn = "kaio_matmul_int8";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_int8_desc d;
    KAIO_TRY(read_desc("kaio_matmul_int8_desc_init", desc, &d));
    const kaio::NamedView views[] = {
        {"A", a}, {"B", b}, {"sa", sa, true}, {"sb", sb, true}, {"C", c}};
    return kaio::one_shot(stream, views, Int8Plan{}, [&](Int8Plan *plan) -> kaio_status {
      if (d.m == 0) d.m = c->rows;
      if (d.n == 0) d.n = c->cols;
      if (d.k == 0) d.k = a->cols;
      *plan = int8_plan(d);
      return KAIO_OK;
    });
  });
}

KAIO_API kaio_status kaio_matmul_int4_desc_init(kaio_matmul_int4_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_matmul_int4_desc_init";
  return kaio::firewall(fn, [&] {
    return kaio::init_desc(desc, struct_size, int4_defaults());
  });
}

KAIO_API kaio_status kaio_op_create_matmul_int4(kaio_op **out, kaio_device *device,
                                                const kaio_matmul_int4_desc *desc) {
  constexpr const char *fn = "kaio_op_create_matmul_int4";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_int4_desc d;
    KAIO_TRY(read_desc("kaio_matmul_int4_desc_init", desc, &d));
    return kaio::create_op(out, device, int4_plan(d));
  });
}

KAIO_API kaio_status kaio_matmul_int4(kaio_stream *stream, const kaio_tensor *a,
                                      const kaio_tensor *qweight, const kaio_tensor *qzeros,
                                      const kaio_tensor *scales, const kaio_tensor *c,
                                      const kaio_matmul_int4_desc *desc) {
  constexpr const char *fn = "kaio_matmul_int4";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_matmul_int4_desc d;
    KAIO_TRY(read_desc("kaio_matmul_int4_desc_init", desc, &d));
    const kaio::NamedView views[] = {
        {"A", a}, {"qweight", qweight}, {"qzeros", qzeros, true}, {"scales", scales}, {"C", c}};
    return kaio::one_shot(stream, views, Int4Plan{}, [&](Int4Plan *plan) -> kaio_status {
      if (d.m == 0) d.m = c->rows;
      if (d.n == 0) d.n = c->cols;
      if (d.k == 0) d.k = a->cols;
      *plan = int4_plan(d);
      return KAIO_OK;
    });
  });
}

KAIO_API kaio_status kaio_int4_repack_kaio(kaio_stream *stream, const kaio_tensor *src,
                                           const kaio_tensor *dst) {
  constexpr const char *fn = "kaio_int4_repack_kaio";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    return kaio::repack_kaio_int4(stream, src, dst);
  });
}

KAIO_API kaio_status kaio_qkv_int4_desc_init(kaio_qkv_int4_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_qkv_int4_desc_init";
  return kaio::firewall(fn, [&] {
    return kaio::init_desc(desc, struct_size, qkv_defaults());
  });
}

KAIO_API kaio_status kaio_op_create_qkv_project_int4(kaio_op **out, kaio_device *device,
                                                     const kaio_qkv_int4_desc *desc) {
  constexpr const char *fn = "kaio_op_create_qkv_project_int4";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_qkv_int4_desc d;
    KAIO_TRY(read_desc("kaio_qkv_int4_desc_init", desc, &d));
    return kaio::create_op(out, device, qkv_plan(d));
  });
}

KAIO_API kaio_status kaio_qkv_project_int4(kaio_stream *stream, const kaio_tensor *tensors,
                                           size_t count, const kaio_qkv_int4_desc *desc) {
  constexpr const char *fn = "kaio_qkv_project_int4";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_qkv_int4_desc d;
    KAIO_TRY(read_desc("kaio_qkv_int4_desc_init", desc, &d));
    const auto from_views = [&](Int4Plan *plan) -> kaio_status {
      if (!tensors || count != kaio::kQkvTensors)
        return fail(KAIO_ERROR_INVALID_ARGUMENT,
                    "%s: argument 'count' is %zu but the fused QKV projection takes 13 tensors: "
                    "{x, qweight_q, qzeros_q, scales_q, qweight_k, qzeros_k, scales_k, "
                    "qweight_v, qzeros_v, scales_v, out_q, out_k, out_v}.",
                    fn, tensors ? count : 0);
      *plan = qkv_plan(qkv_dims(tensors, 10, d));
      return KAIO_OK;
    };
    return kaio::one_shot(stream, tensors, count, Int4Plan{}, from_views);
  });
}

KAIO_API kaio_status kaio_qkv_int8_desc_init(kaio_qkv_int8_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_qkv_int8_desc_init";
  return kaio::firewall(fn, [&] {
    return kaio::init_desc(desc, struct_size, qkv8_defaults());
  });
}

KAIO_API kaio_status kaio_op_create_qkv_project_int8(kaio_op **out, kaio_device *device,
                                                     const kaio_qkv_int8_desc *desc) {
  constexpr const char *fn = "kaio_op_create_qkv_project_int8";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_qkv_int8_desc d;
    KAIO_TRY(read_desc("kaio_qkv_int8_desc_init", desc, &d));
    return kaio::create_op(out, device, qkv8_plan(d));
  });
}

KAIO_API kaio_status kaio_qkv_project_int8(kaio_stream *stream, const kaio_tensor *tensors,
                                           size_t count, const kaio_qkv_int8_desc *desc) {
  constexpr const char *fn = "kaio_qkv_project_int8";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_qkv_int8_desc d;
    KAIO_TRY(read_desc("kaio_qkv_int8_desc_init", desc, &d));
    const auto from_views = [&](QkvInt8Plan *plan) -> kaio_status {
      if (!tensors || count != kaio::kQkv8Tensors)
        return fail(KAIO_ERROR_INVALID_ARGUMENT,
                    "%s: argument 'count' is %zu but the int8 QKV projection takes 10 tensors: "
                    "{x, w_q, scale_q, w_k, scale_k, w_v, scale_v, out_q, out_k, out_v}.",
                    fn, tensors ? count : 0);
      *plan = qkv8_plan(qkv_dims(tensors, 7, d));
      return KAIO_OK;
    };
    return kaio::one_shot(stream, tensors, count, QkvInt8Plan{}, from_views);
  });
}

}  // extern "C"
