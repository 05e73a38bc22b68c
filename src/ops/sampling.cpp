// Token sampling: one CTA per row, or with few rows a row split over several
// CTAs in stage launches (ptx/gen_sampling.py). Penalties first copy the row,
// penalised, into the op's f32 workspace; the sampler then reads that.
#include "ops/sampling.hpp"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <vector>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "runtime/buffer_copy.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr uint32_t kAllFeatures = KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K |
                                  KAIO_SAMPLING_TOP_P | KAIO_SAMPLING_MIN_P |
                                  KAIO_SAMPLING_PENALTIES | KAIO_SAMPLING_PROBS |
                                  KAIO_SAMPLING_TOP_P_OF_ROW;

struct Slot {
  const char *name;
  uint32_t feature;  // 0: always present
};
// The launch order; which feature each view belongs to.
constexpr Slot kSlots[12] = {
    {"logits", 0},       {"temperature", KAIO_SAMPLING_RANDOM}, {"top_k", KAIO_SAMPLING_TOP_K},
    {"top_p", KAIO_SAMPLING_TOP_P}, {"min_p", KAIO_SAMPLING_MIN_P}, {"rng", KAIO_SAMPLING_RANDOM},
    {"prev", KAIO_SAMPLING_PENALTIES}, {"prev_lens", KAIO_SAMPLING_PENALTIES},
    {"penalties", KAIO_SAMPLING_PENALTIES}, {"tokens", 0}, {"probs", KAIO_SAMPLING_PROBS},
    {"logprobs", KAIO_SAMPLING_PROBS}};
constexpr const char *kOrder =
    "{logits, temperature, top_k, top_p, min_p, rng, prev, prev_lens, penalties, tokens, probs, "
    "logprobs}";

kaio_status check_desc(const kaio_sampling_desc &d) {
  if (!is_float_dtype(d.dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: desc->dtype is %s (%d); sampling takes KAIO_DTYPE_F32, KAIO_DTYPE_F16 or "
                "KAIO_DTYPE_BF16 logits.",
                api_name(), kaio_dtype_name(d.dtype), d.dtype);
  if (d.batch < 1 || d.batch > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->batch is %" PRId64 "; it must be in [1, %d] (the rows of logits).",
                api_name(), d.batch, INT32_MAX);
  if (d.vocab < 1 || d.vocab > INT32_MAX - 3)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->vocab is %" PRId64 "; it must be in [1, %d] (the columns of logits).",
                api_name(), d.vocab, INT32_MAX - 3);
  if (d.features & ~kAllFeatures)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->features is 0x%x; unknown bits 0x%x. Use KAIO_SAMPLING_* flags only.",
                api_name(), d.features, d.features & ~kAllFeatures);
  const uint32_t filters = KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P | KAIO_SAMPLING_MIN_P;
  if ((d.features & filters) && !(d.features & KAIO_SAMPLING_RANDOM))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->features is 0x%x: top-k, top-p and min-p need KAIO_SAMPLING_RANDOM "
                "(temperature and rng); add it, or drop the filters for greedy decoding.",
                api_name(), d.features);
  if ((d.features & KAIO_SAMPLING_TOP_P_OF_ROW) && !(d.features & KAIO_SAMPLING_TOP_P))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->features is 0x%x: KAIO_SAMPLING_TOP_P_OF_ROW changes how top-p "
                "measures its mass and needs KAIO_SAMPLING_TOP_P; add it, or drop the flag.",
                api_name(), d.features);
  const bool pen = d.features & KAIO_SAMPLING_PENALTIES;
  if (pen ? (d.max_prev < 1 || d.max_prev > INT32_MAX) : d.max_prev != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->max_prev is %" PRId64 "; it must be in [1, %d] with "
                "KAIO_SAMPLING_PENALTIES (the columns of prev) and 0 without.",
                api_name(), d.max_prev, INT32_MAX);
  if (d.reserved != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: desc->reserved is %u; it must be 0.",
                api_name(), d.reserved);
  return KAIO_OK;
}

// A vector of n elements, [1, n] or [n, 1]: its address and element stride
// in bytes.
kaio_status check_vector(const char *name, const kaio_tensor *t, const kaio_device *device,
                         int64_t n, kaio_dtype a, kaio_dtype b, unsigned long long *addr,
                         unsigned long long *stride) {
  CheckedView v;
  KAIO_TRY(check_view(name, t, device, &v));
  if (v.dtype != a && v.dtype != b)
    return fail(KAIO_ERROR_INVALID_DTYPE, "%s: view '%s' has dtype %s; it must be %s%s%s.",
                api_name(), name, kaio_dtype_name(v.dtype), kaio_dtype_name(a),
                a == b ? "" : " or ", a == b ? "" : kaio_dtype_name(b));
  const bool row = v.rows == 1 && v.cols == n, col = v.cols == 1 && v.rows == n;
  if (!row && !col)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: view '%s' is %" PRId64 " x %" PRId64 "; it must hold one value per row of "
                "logits: 1 x %" PRId64 " or %" PRId64 " x 1.",
                api_name(), name, v.rows, v.cols, n, n);
  *addr = v.address;
  *stride = (row ? 1ull : static_cast<unsigned long long>(v.row_stride)) * kaio_dtype_size(v.dtype);
  return KAIO_OK;
}

kaio_status check_matrix(const char *name, const kaio_tensor *t, const kaio_device *device,
                         int64_t rows, int64_t cols, kaio_dtype a, kaio_dtype b, CheckedView *v) {
  KAIO_TRY(check_view(name, t, device, v));
  if (v->dtype != a && v->dtype != b)
    return fail(KAIO_ERROR_INVALID_DTYPE, "%s: view '%s' has dtype %s; it must be %s%s%s.",
                api_name(), name, kaio_dtype_name(v->dtype), kaio_dtype_name(a),
                a == b ? "" : " or ", a == b ? "" : kaio_dtype_name(b));
  return check_shape(name, *v, rows, cols);
}

}  // namespace

// Rows split over several CTAs when 2·B <= SMs: B·C CTAs cover the SMs
// (C = SMs / B), each taking at least kMinSpanQuads quads (4 tokens each)
// of its row. Every split gives the same bits.
constexpr int64_t kMinSpanQuads = 64;
// ptx/gen_sampling.py's SPLIT_ROW_BYTES: the split kernel's record per row.
constexpr uint64_t kSplitRowBytes = 32896;
// Top-k without top-p takes stage 7 whenever B <= SMs, with C in [1, 8]:
// each CTA passes on about k tokens (its top key bins), and the row's
// last CTA holds 1024 of them (more: the one-CTA passes in that CTA).
constexpr int64_t kFastMaxSplit = 8;

kaio_status SamplingPlan::plan_split(kaio_device *device, bool pen) {
  const int64_t quads = (desc.vocab + 3) / 4, sms = std::max(1, device->info.sm_count);
  int64_t c = std::min(sms / desc.batch, quads / kMinSpanQuads);
  fast_topk = prepared && (desc.features & KAIO_SAMPLING_TOP_K) &&
              !(desc.features & KAIO_SAMPLING_TOP_P) && desc.batch <= sms;
  if (fast_topk) c = std::clamp<int64_t>(c, 1, kFastMaxSplit);
  if (!prepared || c < (fast_topk ? 1 : 2)) return KAIO_OK;
  const int64_t per = (quads + c - 1) / c;
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(
      kernels::sampling(kernels::Pass::split, pen ? KAIO_DTYPE_F32 : desc.dtype), &fn));
  split = launch_of(fn);
  split.grid = static_cast<unsigned>((quads + per - 1) / per);
  split.grid_y = static_cast<unsigned>(desc.batch);
  span = static_cast<unsigned>(per);
  // zero once here; each launch leaves the records zero
  const uint64_t bytes = kSplitRowBytes * static_cast<uint64_t>(desc.batch);
  KAIO_TRY(DeviceMemory::allocate(device, bytes, &split_ws));
  const std::vector<uint8_t> zeros(bytes, 0);
  return buffer_write(split_ws->buffer(), 0, zeros.data(), bytes);
}

kaio_status SamplingPlan::plan(kaio_device *device) {
  this->device = device;
  KAIO_TRY(check_desc(desc));
  KAIO_TRY(require_arch(device, 8, 0, "sampling (PTX sm_80)"));
  BuiltinFunction fn;
  const bool pen = desc.features & KAIO_SAMPLING_PENALTIES;
  // With penalties the sampler reads the f32 workspace.
  KAIO_TRY(device->modules->function(
      kernels::sampling(kernels::Pass::sample, pen ? KAIO_DTYPE_F32 : desc.dtype), &fn));
  sample = launch_of(fn);
  sample.grid = static_cast<unsigned>(desc.batch);
  KAIO_TRY(plan_split(device, pen));
  if (!pen) return KAIO_OK;
  KAIO_TRY(device->modules->function(kernels::sampling(kernels::Pass::penalty, desc.dtype), &fn));
  penalty = launch_of(fn);
  penalty.grid = static_cast<unsigned>(desc.batch);
  if (!prepared)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: penalties need the op's workspace; create the op with "
                "kaio_op_create_sampling.",
                api_name());
  return DeviceMemory::allocate(
      device, static_cast<uint64_t>(desc.batch) * static_cast<uint64_t>(desc.vocab) * 8,
      &workspace);
}

kaio_status SamplingPlan::run(kaio_stream *stream, const kaio_tensor *t, size_t count) const {
  KAIO_TRY(check_launch(device, stream, t, count, 12, kOrder));
  for (size_t i = 0; i < 12; ++i) {
    const bool on = kSlots[i].feature == 0 || (desc.features & kSlots[i].feature);
    if (!on && t[i].buffer)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: view %zu ('%s') has a buffer but its feature is off in the op's desc "
                  "(features 0x%x); pass a view with a NULL buffer, or create the op with that "
                  "feature.",
                  api_name(), i, kSlots[i].name, desc.features);
    if (on && !t[i].buffer)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: view %zu ('%s') has a NULL buffer but the op's desc needs it (features "
                  "0x%x); pass the view. Order: %s.",
                  api_name(), i, kSlots[i].name, desc.features, kOrder);
  }
  const int64_t B = desc.batch, V = desc.vocab;
  CheckedView logits, rng, prev;
  KAIO_TRY(check_matrix("logits", &t[0], device, B, V, desc.dtype, desc.dtype, &logits));
  unsigned long long a[12] = {}, s[12] = {};
  a[0] = logits.address;
  s[0] = static_cast<unsigned long long>(logits.row_stride) * kaio_dtype_size(logits.dtype);
  const kaio_dtype vec_types[12][2] = {
      {}, {KAIO_DTYPE_F32, KAIO_DTYPE_F32}, {KAIO_DTYPE_I32, KAIO_DTYPE_I32},
      {KAIO_DTYPE_F32, KAIO_DTYPE_F32}, {KAIO_DTYPE_F32, KAIO_DTYPE_F32}, {}, {},
      {KAIO_DTYPE_I32, KAIO_DTYPE_I32}, {}, {KAIO_DTYPE_I32, KAIO_DTYPE_I32},
      {KAIO_DTYPE_F32, KAIO_DTYPE_F32}, {KAIO_DTYPE_F32, KAIO_DTYPE_F32}};
  for (size_t i : {1, 2, 3, 4, 7, 9, 10, 11})
    if (t[i].buffer)
      KAIO_TRY(check_vector(kSlots[i].name, &t[i], device, B, vec_types[i][0], vec_types[i][1],
                            &a[i], &s[i]));
  if (t[5].buffer) {
    KAIO_TRY(check_matrix("rng", &t[5], device, B, 4, KAIO_DTYPE_U32, KAIO_DTYPE_I32, &rng));
    a[5] = rng.address;
    s[5] = static_cast<unsigned long long>(rng.row_stride) * 4;
  }
  CheckedView pen;
  if (t[6].buffer) {
    KAIO_TRY(check_matrix("prev", &t[6], device, B, desc.max_prev, KAIO_DTYPE_I32,
                          KAIO_DTYPE_I32, &prev));
    a[6] = prev.address;
    s[6] = static_cast<unsigned long long>(prev.row_stride) * 4;
    KAIO_TRY(check_matrix("penalties", &t[8], device, B, 3, KAIO_DTYPE_F32, KAIO_DTYPE_F32,
                          &pen));
    a[8] = pen.address;
    s[8] = static_cast<unsigned long long>(pen.row_stride) * 4;
  }
  // Outputs must not overlap any input (or each other).
  for (size_t o : {9, 10, 11}) {
    if (!t[o].buffer) continue;
    CheckedView ov, iv;
    KAIO_TRY(check_view(kSlots[o].name, &t[o], device, &ov));
    for (size_t i = 0; i < 12; ++i) {
      if (i == o || !t[i].buffer || (i > 8 && i > o)) continue;
      KAIO_TRY(check_view(kSlots[i].name, &t[i], device, &iv));
      KAIO_TRY(check_no_partial_overlap(kSlots[i].name, iv, kSlots[o].name, ov, false));
    }
  }
  unsigned vocab = static_cast<unsigned>(V);
  // The kernels' flags: bit 0, top-p's mass over the whole row.
  unsigned flags = (desc.features & KAIO_SAMPLING_TOP_P_OF_ROW) ? 1u : 0u;
  unsigned long long logits_addr = a[0], logits_stride = s[0];
  if (desc.features & KAIO_SAMPLING_PENALTIES) {
    unsigned long long ws = workspace->ptr(), counts = ws + static_cast<uint64_t>(B * V) * 4;
    unsigned max_prev = static_cast<unsigned>(desc.max_prev);
    void *pp[] = {&a[0], &s[0], &a[6], &s[6], &a[7], &s[7], &a[8], &s[8], &ws, &counts,
                  &vocab, &max_prev};
    KAIO_TRY(launch_builtin(device, penalty, stream, pp));
    logits_addr = ws;
    logits_stride = static_cast<unsigned long long>(V) * 4;
  }
  if (!split_ws) {
    void *sp[] = {&logits_addr, &logits_stride, &a[1], &s[1], &a[2], &s[2], &a[3], &s[3],
                  &a[4], &s[4], &a[5], &s[5], &a[9], &s[9], &a[10], &s[10], &a[11], &s[11],
                  &vocab, &flags};
    return launch_builtin(device, sample, stream, sp);
  }
  // The split kernel's stages (gen_sampling.py's STAGES), those the features use.
  unsigned long long ws = split_ws->ptr();
  unsigned stage = 0, per = span;
  void *sp[] = {&logits_addr, &logits_stride, &a[1], &s[1], &a[2], &s[2], &a[3], &s[3],
                &a[4], &s[4], &a[5], &s[5], &a[9], &s[9], &a[10], &s[10], &a[11], &s[11],
                &ws, &vocab, &stage, &per, &flags};
  if (fast_topk) {
    stage = 7;
    return launch_builtin(device, split, stream, sp);
  }
  const uint32_t f = desc.features;
  for (unsigned st = 1; st <= 6; ++st) {
    const bool use = st == 1 || ((f & KAIO_SAMPLING_RANDOM) &&
                                 (st == 6 || (st <= 3 ? (f & KAIO_SAMPLING_TOP_K)
                                                      : (f & KAIO_SAMPLING_TOP_P))));
    if (!use) continue;
    stage = st;
    KAIO_TRY(launch_builtin(device, split, stream, sp));
  }
  return KAIO_OK;
}

}  // namespace kaio
