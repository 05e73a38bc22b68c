// RoPE: the desc's checks, launch shape and views. The kernels' contract is
// in ptx/gen_rope.py.
#include "ops/rope.hpp"

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/kernel_family.hpp"
#include "ops/plan_log.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr int64_t kMaxHeads = 65535;
constexpr unsigned kBlock = 256;

const char *style_name(kaio_rope_style s) {
  return s == KAIO_ROPE_HALF_SPLIT ? "half split" : "interleaved";
}

kaio_status bad_param(const char *field, double value, const char *rule) {
  return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: desc->%s is %g; it must be %s.", api_name(), field,
              value, rule);
}

kaio_status check_scaling(const kaio_rope_desc &d) {
  if (d.scaling == KAIO_ROPE_SCALING_NONE) return KAIO_OK;
  if (!(std::isfinite(d.factor) && d.factor > 0))
    return bad_param("factor", d.factor, "finite and > 0 (the config's rope_scaling factor)");
  if (d.scaling == KAIO_ROPE_SCALING_LINEAR) return KAIO_OK;
  if (d.original_max_position_embeddings < 1 || d.original_max_position_embeddings > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->original_max_position_embeddings is %" PRId64 "; it must be between 1 "
                "and %d (the pretrained context length, e.g. 8192).",
                api_name(), d.original_max_position_embeddings, INT32_MAX);
  if (d.scaling == KAIO_ROPE_SCALING_LLAMA3) {
    if (!(std::isfinite(d.low_freq_factor) && d.low_freq_factor > 0))
      return bad_param("low_freq_factor", d.low_freq_factor, "finite and > 0 (Llama 3.1: 1)");
    if (!(std::isfinite(d.high_freq_factor) && d.high_freq_factor > d.low_freq_factor))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: desc->high_freq_factor is %g and low_freq_factor %g; high_freq_factor "
                  "must be finite and greater (Llama 3.1: 4 and 1).",
                  api_name(), d.high_freq_factor, d.low_freq_factor);
    return KAIO_OK;
  }
  const struct {
    const char *name;
    double value;
    bool zero_ok;
    const char *rule;
  } yarn[] = {{"beta_fast", d.beta_fast, false, "finite and > 0 (HF's default: 32)"},
              {"beta_slow", d.beta_slow, false, "finite and > 0 (HF's default: 1)"},
              {"attention_factor", d.attention_factor, true,
               "finite and > 0, or 0 for HF's default from factor and mscale"},
              {"mscale", d.mscale, true, "finite and > 0, or 0 (unset)"},
              {"mscale_all_dim", d.mscale_all_dim, true, "finite and > 0, or 0 (unset)"}};
  for (const auto &f : yarn)
    if (!(std::isfinite(f.value) && (f.value > 0 || (f.zero_ok && f.value == 0))))
      return bad_param(f.name, f.value, f.rule);
  if (d.truncate != 0 && d.truncate != 1)
    return bad_param("truncate", d.truncate, "1 (HF's default) or 0");
  return KAIO_OK;
}

kaio_status check_desc(const kaio_rope_desc &d) {
  if (d.style != KAIO_ROPE_HALF_SPLIT && d.style != KAIO_ROPE_INTERLEAVED)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->style is %d; use KAIO_ROPE_HALF_SPLIT (GPT-NeoX, Llama) or "
                "KAIO_ROPE_INTERLEAVED (GPT-J).",
                api_name(), d.style);
  if (!is_float_dtype(d.dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: desc->dtype is %s (%d); RoPE takes KAIO_DTYPE_F32, KAIO_DTYPE_F16 or "
                "KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(d.dtype), d.dtype);
  if (d.scaling < KAIO_ROPE_SCALING_NONE || d.scaling > KAIO_ROPE_SCALING_YARN)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->scaling is %d; use KAIO_ROPE_SCALING_NONE, _LINEAR, _LLAMA3 or _YARN.",
                api_name(), d.scaling);
  if (d.reserved != 0 || d.reserved2[0] != 0 || d.reserved2[1] != 0 || d.reserved2[2] != 0 ||
      d.reserved2[3] != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->reserved fields must be 0; initialise the desc with "
                "kaio_rope_desc_init.",
                api_name());
  const struct {
    const char *name;
    int64_t value;
  } heads[] = {{"heads_q", d.heads_q}, {"heads_k", d.heads_k}};
  for (const auto &h : heads)
    if (h.value < 0 || h.value > kMaxHeads)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: desc->%s is %" PRId64 "; it must be between 0 (that tensor is always "
                  "absent) and %" PRId64 ".",
                  api_name(), h.name, h.value, kMaxHeads);
  if (d.heads_q + d.heads_k == 0 || d.heads_q + d.heads_k > kMaxHeads)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->heads_q + desc->heads_k is %" PRId64 "; it must be between 1 and %" PRId64
                " (set the head counts; split the heads across calls).",
                api_name(), d.heads_q + d.heads_k, kMaxHeads);
  if (d.head_dim < 1 || d.head_dim > INT32_MAX / kMaxHeads)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->head_dim is %" PRId64 "; it must be between 1 and %" PRId64 ".",
                api_name(), d.head_dim, static_cast<int64_t>(INT32_MAX / kMaxHeads));
  const int64_t rot = d.rotary_dim == 0 ? d.head_dim : d.rotary_dim;
  if (rot < 2 || rot % 2 != 0 || rot > d.head_dim)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->rotary_dim is %" PRId64 " (%" PRId64 " with head_dim %" PRId64
                "); it must be even and between 2 and head_dim (0 means head_dim).",
                api_name(), d.rotary_dim, rot, d.head_dim);
  if (rot > 2 * kRopeMaxHalf)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->rotary_dim is %" PRId64 "; the kernels take at most %d rotary dims.",
                api_name(), rot, 2 * kRopeMaxHalf);
  if (!(std::isfinite(d.theta) && d.theta > 1))
    return bad_param("theta", d.theta, "finite and > 1 (the config's rope_theta, e.g. 10000)");
  return check_scaling(d);
}

// Both kernels.
kaio_status plan_kernels(kaio_device *device, RopePlan *plan) {
  const kaio_rope_desc &d = plan->desc;
  const auto style = d.style == KAIO_ROPE_HALF_SPLIT ? kernels::RopeStyle::half_split
                                                     : kernels::RopeStyle::interleaved;
  // each kernel, or where it can run its sm_90 twin (a dependent launch)
  for (Launch *l : {&plan->vec, &plan->scalar}) {
    const bool vec = l == &plan->vec;
    BuiltinFunction fn;
    KAIO_TRY(resolve_twin(device, kernels::rope(d.dtype, style, vec),
                          kernels::rope_pdl(d.dtype, style, vec),
                          vec ? "16-byte heads" : "any layout", &fn));
    *l = launch_of(fn);
  }
  return KAIO_OK;
}

// A present view: Q or K.
kaio_status check_qk(const char *arg, const kaio_tensor &t, const kaio_device *device,
                     const kaio_rope_desc &d, int64_t heads, const char *field, CheckedView *out) {
  if (heads == 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument '%s' has a buffer but desc->%s is 0; pass a view with a NULL "
                "buffer, or set desc->%s.",
                api_name(), arg, field, field);
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, d.dtype));
  if (out->cols != heads * d.head_dim)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument '%s' has %" PRId64 " cols but desc->%s * desc->head_dim is %" PRId64
                " * %" PRId64 " = %" PRId64 "; pass the [tokens, heads * head_dim] view.",
                api_name(), arg, out->cols, field, heads, d.head_dim, heads * d.head_dim);
  return KAIO_OK;
}

unsigned ceil_div(uint64_t a, uint64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

bool aligned16(const CheckedView &v, const kaio_rope_desc &d) {
  const uint64_t es = kaio_dtype_size(d.dtype);
  const uint64_t span = d.style == KAIO_ROPE_HALF_SPLIT ? d.rotary_dim / 2 : d.rotary_dim;
  return v.address % 16 == 0 && (v.row_stride * es) % 16 == 0 && (d.head_dim * es) % 16 == 0 &&
         (span * es) % 16 == 0;
}

}  // namespace

// With one row stride and element size, two views' bytes never meet when, per
// row, one's columns fall outside the other's (modulo the stride).
kaio_status check_columns_disjoint(const char *a_name, const CheckedView &a, const char *b_name,
                                   const CheckedView &b) {
  const bool apart = a.address + a.span_bytes <= b.address || b.address + b.span_bytes <= a.address;
  if (apart) return KAIO_OK;
  const uint64_t es = kaio_dtype_size(a.dtype);
  const uint64_t stride = static_cast<uint64_t>(a.row_stride) * es;
  if (a.row_stride == b.row_stride && es == kaio_dtype_size(b.dtype)) {
    const bool a_first = a.address < b.address;
    const uint64_t first_cols = (a_first ? a.cols : b.cols) * es;
    const uint64_t second_cols = (a_first ? b.cols : a.cols) * es;
    const uint64_t delta = (a_first ? b.address - a.address : a.address - b.address) % stride;
    if (delta >= first_cols && delta + second_cols <= stride) return KAIO_OK;
  }
  return fail(KAIO_ERROR_INVALID_ARGUMENT,
              "%s: arguments '%s' and '%s' share elements; they must be disjoint (column ranges "
              "of one buffer with the same row_stride, as a fused QKV output, are fine).",
              api_name(), a_name, b_name);
}

kaio_status RopePlan::prepare(kaio_device *device) {
  this->device = device;
  KAIO_TRY(check_desc(desc));
  if (desc.rotary_dim == 0) desc.rotary_dim = desc.head_dim;
  KAIO_TRY(require_arch(device, 8, 0, "built-in ops (bf16 conversions, PTX sm_80)"));
  rope_frequencies(desc, desc.rotary_dim, &freqs);
  return KAIO_OK;
}

std::string RopePlan::subject() const {
  char s[200];
  std::snprintf(s, sizeof s, "Hq %" PRId64 " Hk %" PRId64 " D %" PRId64 " rot %" PRId64 " %s %s scaling %d",
                desc.heads_q, desc.heads_k, desc.head_dim, desc.rotary_dim, style_name(desc.style),
                kaio_dtype_name(desc.dtype), desc.scaling);
  return s;
}

kaio_status RopePlan::plan(kaio_device *device) {
  return log_plan(
      [&] {
        KAIO_TRY(prepare(device));
        return plan_kernels(device, this);
      },
      [&] { return subject(); });
}

kaio_status check_rope_views(const RopePlan &plan, const kaio_tensor &tq, const kaio_tensor &tk,
                             const kaio_tensor &tpos, RopeViews *out) {
  const kaio_rope_desc &d = plan.desc;
  const kaio_device *device = plan.device;
  RopeViews &v = *out;
  v.has_q = tq.buffer != nullptr;
  v.has_k = tk.buffer != nullptr;
  if (!v.has_q && !v.has_k)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: both 'q' and 'k' are absent (NULL buffers); pass at least one to rotate.",
                api_name());
  if (v.has_q) KAIO_TRY(check_qk("q", tq, device, d, d.heads_q, "heads_q", &v.q));
  if (v.has_k) KAIO_TRY(check_qk("k", tk, device, d, d.heads_k, "heads_k", &v.k));
  if (v.has_q && v.has_k && v.q.rows != v.k.rows)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: 'q' has %" PRId64 " rows (tokens) and 'k' %" PRId64 "; they must match.",
                api_name(), v.q.rows, v.k.rows);
  v.tokens = v.has_q ? v.q.rows : v.k.rows;
  if (v.tokens > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %" PRId64 " tokens; at most %d per call. Split the tokens.", api_name(),
                v.tokens, INT32_MAX);
  KAIO_TRY(check_view("positions", &tpos, device, &v.pos));
  KAIO_TRY(check_dtype("positions", v.pos, KAIO_DTYPE_I32));
  KAIO_TRY(check_shape("positions", v.pos, 1, v.tokens));
  if (v.has_q) KAIO_TRY(check_no_partial_overlap("positions", v.pos, "q", v.q, false));
  if (v.has_k) KAIO_TRY(check_no_partial_overlap("positions", v.pos, "k", v.k, false));
  if (v.has_q && v.has_k) KAIO_TRY(check_columns_disjoint("q", v.q, "k", v.k));
  return KAIO_OK;
}

RopeLaunch rope_launch(const RopePlan &plan, const RopeViews &v, bool vector, Launch l,
                       bool head_lanes) {
  const kaio_rope_desc &d = plan.desc;
  const int64_t ppu = !vector ? 1
                      : d.style == KAIO_ROPE_HALF_SPLIT
                          ? 16 / static_cast<int64_t>(kaio_dtype_size(d.dtype))
                          : 8 / static_cast<int64_t>(kaio_dtype_size(d.dtype));
  RopeLaunch r;
  const unsigned heads = static_cast<unsigned>((v.has_q ? d.heads_q : 0) + (v.has_k ? d.heads_k : 0));
  r.units = static_cast<unsigned>(plan.freqs.half / ppu);
  // A warp on neighbouring heads of one token reads one stretch of its row
  // (a warp on 4 tokens reads 4 pieces a row apart); each of a token's lanes
  // computes the same cos / sin, so no more lanes than a warp holds, nor
  // than a head chunk has heads.
  while (head_lanes && r.head_lanes * 2 * r.units <= 32 && r.head_lanes * 2 <= heads)
    r.head_lanes *= 2;
  const int sms = plan.device->info.sm_count;
  const uint64_t want = 4 * static_cast<uint64_t>(sms > 0 ? sms : 1);
  for (;;) {
    r.tok_per_block = kBlock / (r.units * r.head_lanes);
    l.grid = ceil_div(static_cast<uint64_t>(v.tokens), r.tok_per_block);
    // Enough blocks to fill the GPU: split the heads when the tokens alone
    // give too few (decode), else one chunk keeps cos / sin per token once.
    unsigned chunks = l.grid >= want ? 1 : ceil_div(want, l.grid);
    if (chunks > heads) chunks = heads;
    r.head_chunk = ceil_div(heads, chunks);
    if (r.head_lanes <= r.head_chunk) break;
    r.head_lanes /= 2;
  }
  l.grid_y = ceil_div(heads, r.head_chunk);
  r.launch = l;
  return r;
}

bool rope_vector_ok(const RopePlan &plan, const CheckedView &v) { return aligned16(v, plan.desc); }

kaio_status RopePlan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_launch(device, stream, tensors, count, 3, "{Q, K, positions}"));
  const kaio_rope_desc &d = desc;
  RopeViews v;
  KAIO_TRY(check_rope_views(*this, tensors[0], tensors[1], tensors[2], &v));
  const bool vector = (!v.has_q || aligned16(v.q, d)) && (!v.has_k || aligned16(v.k, d));
  RopeLaunch r = rope_launch(*this, v, vector, vector ? vec : scalar, true);
  const uint64_t es = kaio_dtype_size(d.dtype);
  unsigned long long pq = v.has_q ? v.q.address : 0, pk = v.has_k ? v.k.address : 0,
                     pp = v.pos.address;
  unsigned long long qs = v.has_q ? v.q.row_stride * es : 0, ks = v.has_k ? v.k.row_stride * es : 0;
  unsigned utokens = static_cast<unsigned>(v.tokens);
  unsigned hq = v.has_q ? static_cast<unsigned>(d.heads_q) : 0;
  unsigned hk = v.has_k ? static_cast<unsigned>(d.heads_k) : 0;
  unsigned hd = static_cast<unsigned>(d.head_dim), half = static_cast<unsigned>(freqs.half);
  float attn = freqs.attention;
  void *params[] = {&pq,   &pk,    &pp,           &qs,         &ks,   &utokens,
                    &hq,   &hk,    &hd,           &half,       &r.units, &r.head_lanes,
                    &r.tok_per_block, &r.head_chunk, &attn, const_cast<float *>(freqs.inv_freq)};
  return launch_builtin(device, r.launch, stream, params);
}

}  // namespace kaio
