// RoPE fused with the paged KV-cache write: Q rotated in place, K rotated on
// its way into the K cache (K itself is only read), V copied to the V cache.
// One pass over K and V instead of RoPE's in-place pass plus the write's.
#include <cinttypes>
#include <climits>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/kernel_family.hpp"
#include "ops/op_flag.hpp"
#include "ops/plan_log.hpp"
#include "ops/rope.hpp"

namespace kaio {
namespace {

constexpr uint64_t kVector = 16;  // V rows move as 16-byte vectors

kaio_status check_cache(const char *arg, const kaio_tensor &t, const kaio_device *device,
                        const kaio_rope_desc &d, CheckedView *out) {
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, d.dtype));
  if (out->cols != d.heads_k * d.head_dim)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument '%s' has %" PRId64 " cols but desc->heads_k * desc->head_dim is "
                "%" PRId64 "; pass the cache as [num_pages * page_size, heads_k * head_dim].",
                api_name(), arg, out->cols, d.heads_k * d.head_dim);
  if (out->rows > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: argument '%s' has %" PRId64 " rows; a cache holds at most %d slots.",
                api_name(), arg, out->rows, INT32_MAX);
  return KAIO_OK;
}

// V's rows are copied as 16-byte vectors.
kaio_status check_v_aligned(const char *arg, const CheckedView &v) {
  const uint64_t es = kaio_dtype_size(v.dtype);
  if (v.address % kVector == 0 && (v.row_stride * es) % kVector == 0 &&
      (v.cols * es) % kVector == 0)
    return KAIO_OK;
  return fail(KAIO_ERROR_MISALIGNED,
              "%s: view '%s' (start 0x%" PRIx64 ", %" PRId64 " cols, row_stride %" PRId64
              ") must start on a 16-byte boundary with rows and row pitch multiples of 16 "
              "bytes; V rows are copied as 16-byte vectors.",
              api_name(), arg, static_cast<uint64_t>(v.address), v.cols, v.row_stride);
}

}  // namespace

kaio_status RopeKvCachePlan::plan(kaio_device *device) {
  this->device = device;
  return log_plan([&] { return plan_unlogged(device); }, [&] { return rope.subject(); });
}

// The desc's checks and table (RopePlan::prepare), then the cache kernels.
kaio_status RopeKvCachePlan::plan_unlogged(kaio_device *device) {
  KAIO_TRY(rope.prepare(device));
  const kaio_rope_desc &d = rope.desc;
  if (d.heads_k == 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->heads_k is 0; the KV-cache form needs K (use kaio_rope for Q alone).",
                api_name());
  const auto style = d.style == KAIO_ROPE_HALF_SPLIT ? kernels::RopeStyle::half_split
                                                     : kernels::RopeStyle::interleaved;
  // each kernel, or where it can run its sm_90 twin (a dependent launch)
  for (Launch *l : {&vec, &scalar}) {
    BuiltinFunction fn;
    KAIO_TRY(resolve_twin(device, kernels::rope_cache(d.dtype, style, l == &vec),
                          kernels::rope_cache_pdl(d.dtype, style, l == &vec),
                          l == &vec ? "with the cache, 16-byte heads" : "with the cache, any layout",
                          &fn));
    *l = launch_of(fn);
  }
  return device_op_flag(device, &flag);
}

kaio_status RopeKvCachePlan::run(kaio_stream *stream, const kaio_tensor *t, size_t count) const {
  KAIO_TRY(check_launch(device, stream, t, count, 7,
                        "{Q, K, V, positions, slot_mapping, k_cache, v_cache}"));
  const kaio_rope_desc &d = rope.desc;
  if (t[1].buffer == nullptr)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'k' is absent; the KV-cache form writes K (use kaio_rope for Q "
                "alone).",
                api_name());
  const bool has_v = t[2].buffer != nullptr;
  if (has_v != (t[6].buffer != nullptr))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: view '%s' has a NULL buffer but '%s' does not; pass both V views or "
                "neither (a K-only cache).",
                api_name(), has_v ? "v_cache" : "v", has_v ? "v" : "v_cache");
  RopeViews rv;
  KAIO_TRY(check_rope_views(rope, t[0], t[1], t[3], &rv));
  CheckedView v, slots, kc, vc;
  KAIO_TRY(check_view("slot_mapping", &t[4], device, &slots));
  KAIO_TRY(check_dtype("slot_mapping", slots, KAIO_DTYPE_I32));
  KAIO_TRY(check_shape("slot_mapping", slots, 1, rv.tokens));
  KAIO_TRY(check_cache("k_cache", t[5], device, d, &kc));
  if (has_v) {
    KAIO_TRY(check_view("v", &t[2], device, &v));
    KAIO_TRY(check_dtype("v", v, d.dtype));
    KAIO_TRY(check_shape("v", v, rv.tokens, d.heads_k * d.head_dim));
    KAIO_TRY(check_cache("v_cache", t[6], device, d, &vc));
    KAIO_TRY(check_shape("v_cache", vc, kc.rows, kc.cols));
    KAIO_TRY(check_v_aligned("v", v));
    KAIO_TRY(check_v_aligned("v_cache", vc));
  }
  // The caches are written: apart from each other and from every input. Q is
  // rotated in place: apart from everything but itself, where K and V may be
  // its neighbouring columns (one fused QKV output; K checked above).
  const struct {
    const char *name;
    const CheckedView *view;
  } all[] = {{"q", rv.has_q ? &rv.q : nullptr}, {"k", &rv.k}, {"v", has_v ? &v : nullptr},
             {"positions", &rv.pos}, {"slot_mapping", &slots}, {"k_cache", &kc},
             {"v_cache", has_v ? &vc : nullptr}};
  for (const auto &w : all) {
    if (!w.view || (w.view != &kc && w.view != &vc && w.view != &rv.q)) continue;
    for (const auto &o : all) {
      if (!o.view || o.view == w.view) continue;
      if (w.view == &rv.q && (o.view == &rv.k || o.view == &v))
        KAIO_TRY(check_columns_disjoint(w.name, *w.view, o.name, *o.view));
      else
        KAIO_TRY(check_no_partial_overlap(w.name, *w.view, o.name, *o.view, false));
    }
  }

  const bool vector = (!rv.has_q || rope_vector_ok(rope, rv.q)) && rope_vector_ok(rope, rv.k) &&
                      rope_vector_ok(rope, kc);
  RopeLaunch r = rope_launch(rope, rv, vector, vector ? vec : scalar, false);
  const uint64_t es = kaio_dtype_size(d.dtype);
  unsigned long long pq = rv.has_q ? rv.q.address : 0, pk = rv.k.address, pp = rv.pos.address;
  unsigned long long qs = rv.has_q ? rv.q.row_stride * es : 0, ks = rv.k.row_stride * es;
  unsigned utokens = static_cast<unsigned>(rv.tokens);
  unsigned hq = rv.has_q ? static_cast<unsigned>(d.heads_q) : 0;
  unsigned hk = static_cast<unsigned>(d.heads_k);
  unsigned hd = static_cast<unsigned>(d.head_dim), half = static_cast<unsigned>(rope.freqs.half);
  float attn = rope.freqs.attention;
  unsigned long long pv = has_v ? v.address : 0, ps = slots.address, pkc = kc.address,
                     pvc = has_v ? vc.address : 0;
  unsigned long long vs = has_v ? v.row_stride * es : 0, kcs = kc.row_stride * es,
                     vcs = has_v ? vc.row_stride * es : 0;
  unsigned rows = static_cast<unsigned>(kc.rows);
  unsigned v_chunks = static_cast<unsigned>(d.heads_k * d.head_dim * es / kVector);
  unsigned tail = static_cast<unsigned>(d.head_dim - d.rotary_dim);
  unsigned long long pflag = flag->device_address();
  void *params[] = {&pq,  &pk,  &pp,  &qs,   &ks,       &utokens,   &hq,
                    &hk,  &hd,  &half, &r.units, &r.head_lanes, &r.tok_per_block, &r.head_chunk, &attn,
                    &pv,  &ps,  &pkc, &pvc,  &vs,       &kcs,       &vcs,
                    &rows, &v_chunks, &tail, &pflag,
                    const_cast<float *>(rope.freqs.inv_freq)};
  KAIO_TRY(launch_builtin(device, r.launch, stream, params));
  note_op_flag(stream, flag);  // after the launch: see ErrorFlagRegistry::ticket
  return KAIO_OK;
}

}  // namespace kaio
