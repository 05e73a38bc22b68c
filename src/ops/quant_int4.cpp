// INT4 W4A16 matmul and the fused QKV projection on GPTQ-packed weights
// (ptx/gen_quant_int4.py). Decode shapes run the dequantize-in-registers
// kernel, one launch for up to three weight sets. With M > 16 an sm_90a
// device runs one wgmma kernel that dequantizes in registers or in shared
// memory (ptx/gen_quant_int4_sm90.py); elsewhere op handles dequantize into
// a workspace they own and run the tensor-core matmul.
#include <cinttypes>
#include <climits>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/plan_log.hpp"
#include "ops/quant.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

constexpr int64_t kDecodeMaxRows = 16;
constexpr int64_t kFusedMaxRows = 4096;   // op handles: the sm_90a fused kernel up to here
// sm_90a: up to kDecodeOverFusedRows the decode kernel (16-row slices of
// CTAs, the second reading W mostly from L2) beats the fused one, 1.0-2.5x at
// M 17 and 32 on the Llama shapes of bench/RESULTS.md (session 19). At M 48
// it still wins where the fused kernel has few column tiles (N <= 4096:
// 1.2x against the 64-row tile, session 20), ties at M 64, and loses where
// it has many (N >= 6144), so up to kDecodeNarrowRows only outputs of at most
// kDecodeNarrowCols columns take it.
constexpr int64_t kDecodeOverFusedRows = 32, kDecodeNarrowRows = 64, kDecodeNarrowCols = 4096;
constexpr int64_t kKStep = 32;           // the decode kernel's K step
constexpr int64_t kMaxGridYZ = 65535;
constexpr uint32_t kSignedMask = 0x88888888u;  // signed nibble s -> unsigned s + 8
constexpr unsigned kGroupIsK = 31;             // shift that keeps every step in group 0
const char *const kProj[3] = {"q", "k", "v"};

bool is_half(kaio_dtype d) { return d == KAIO_DTYPE_F16 || d == KAIO_DTYPE_BF16; }
bool is_packed(kaio_dtype d) { return d == KAIO_DTYPE_U32 || d == KAIO_DTYPE_I32; }

unsigned group_shift(const Int4Plan &p) {
  if (p.group == p.k) return kGroupIsK;
  unsigned s = 0;
  while ((kKStep << s) < p.group) ++s;
  return s;
}

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Groups of >= 128 (and one group per column) let M <= 16 use the kernels whose
// warps take contiguous K ranges in batches of steps within one group.
constexpr int64_t kContigMinGroup = 128;
constexpr int64_t kWarpsPerSm = 16;     // the contiguous-K kernels' target occupancy
constexpr int64_t kColsPerCta = 32;     // every decode kernel's cols_per_block
constexpr int64_t kW4CtasPerSm = 3;     // the M <= 16 "_w4" kernel's registers allow 3

// CTAs that do work: a projection's CTAs past its N return at once.
int64_t busy_ctas(const Int4Plan &p, int64_t rows_per_block) {
  int64_t tiles = 0;
  for (int i = 0; i < p.nproj; ++i) tiles += (p.n[i] + kColsPerCta - 1) / kColsPerCta;
  return tiles * ((p.m + rows_per_block - 1) / rows_per_block);
}

// The contiguous-K kernels split K over 16, 8 or 4 warps per CTA. Measured on
// the H100 (ptx/gen_quant_int4.py's header): the fastest is the one with the
// most warps whose busy CTAs fit the GPU at 16 warps per SM in one wave (M <= 8;
// N = 4096: 16, N = K = 8192: 8, N = 14336: 4). With 16 rows, likewise for 16
// and 8 warps; then 4 warps with 4 steps per batch (3 CTAs per SM) while the
// grid fits in one wave, else with 2 steps (4 CTAs per SM).
// pdl: the sm_90 twin (ptx/gen_quant_int4.py grid_dependency), same arithmetic and bits.
KernelId decode_kernel(bool pdl, kernels::Variant variant, kaio_dtype dtype, int64_t rows) {
  return pdl ? kernels::quant_gemv_pdl(variant, dtype, rows)
             : kernels::quant_gemv(kernels::Weights::int4, variant, dtype, rows);
}

KernelId contig_kernel(const Int4Plan &p, int64_t sms, bool pdl) {
  const bool m16 = p.m > 8;
  const int64_t ctas = busy_ctas(p, m16 ? kDecodeMaxRows : 8);
  auto one_wave = [&](int64_t warps) { return ctas * warps <= sms * kWarpsPerSm; };
  using V = kernels::Variant;
  const V variant = one_wave(16)                     ? V::g128
                    : one_wave(8)                    ? V::g128_w8
                    : !m16                           ? V::g128_w4
                    : ctas <= kW4CtasPerSm * sms ? V::g128_w4
                                                     : V::g128_w4s2;
  return decode_kernel(pdl, variant, p.in_dtype, m16 ? 16 : 8);
}

KernelId gemv_kernel(const Int4Plan &p, int64_t sms, bool pdl) {
  if (p.group >= kContigMinGroup || p.group == p.k) return contig_kernel(p, sms, pdl);
  return decode_kernel(pdl, kernels::Variant::none, p.in_dtype, p.m <= 8 ? 8 : 16);
}

// One weight set's views, checked: qweight, optional qzeros, scales.
struct Weights {
  CheckedView qw, qz, sc;
  bool has_zeros = false;
};

std::string arg_name(const Int4Plan &p, const char *base, int proj) {
  return p.qkv ? std::string(base) + "_" + kProj[proj] : base;
}

kaio_status check_packed_shape(const std::string &arg, const CheckedView &v,
                               int64_t rows, int64_t cols, const char *rule) {
  if (v.rows == rows && v.cols == cols) return KAIO_OK;
  return fail(KAIO_ERROR_SHAPE_MISMATCH,
              "%s: argument '%s' is %" PRId64 " x %" PRId64 " but must be %s = %" PRId64
              " x %" PRId64 ".",
              api_name(), arg.c_str(), v.rows, v.cols, rule, rows, cols);
}

kaio_status check_weights(const kaio_device *device, const Int4Plan &p,
                          int proj, const kaio_tensor *t, Weights *w) {
  const int64_t k = p.k, n = p.n[proj], groups = p.k / p.group;
  const std::string qw = arg_name(p, "qweight", proj), qz = arg_name(p, "qzeros", proj),
                    sc = arg_name(p, "scales", proj);
  KAIO_TRY(check_view(qw.c_str(), &t[0], device, &w->qw));
  if (!is_packed(w->qw.dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument '%s' has dtype %s but must be u32 or i32 (8 packed 4-bit values "
                "per word).",
                api_name(), qw.c_str(), kaio_dtype_name(w->qw.dtype));
  KAIO_TRY(check_packed_shape(qw, w->qw, k / 8, n,
                              "K/8 x N (GPTQ packs 8 values of a column per word along K)"));
  KAIO_TRY(check_aligned_view(qw.c_str(), &t[0], device, 16, 4,
                              "the int4 kernel (16-byte loads of 4 words)", &w->qw));
  w->has_zeros = !absent(t[1]);
  if (w->has_zeros) {
    if (p.format == KAIO_INT4_SIGNED)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument '%s' is given but the format is KAIO_INT4_SIGNED, whose values "
                  "have no zero point; pass a view with a NULL buffer, or use KAIO_INT4_GPTQ.",
                  api_name(), qz.c_str());
    KAIO_TRY(check_view(qz.c_str(), &t[1], device, &w->qz));
    if (!is_packed(w->qz.dtype))
      return fail(KAIO_ERROR_INVALID_DTYPE,
                  "%s: argument '%s' has dtype %s but must be u32 or i32 (8 packed 4-bit zero "
                  "points per word).",
                  api_name(), qz.c_str(), kaio_dtype_name(w->qz.dtype));
    KAIO_TRY(check_packed_shape(qz, w->qz, groups, n / 8,
                                "K/group_size x N/8 (8 zero points per word along N)"));
  }
  KAIO_TRY(check_view(sc.c_str(), &t[2], device, &w->sc));
  KAIO_TRY(check_dtype(sc.c_str(), w->sc, p.in_dtype));
  KAIO_TRY(check_packed_shape(sc, w->sc, groups, n, "K/group_size x N"));
  KAIO_TRY(check_aligned_view(sc.c_str(), &t[2], device, 8, 4,
                              "the int4 kernel (8-byte loads of 4 scales)", &w->sc));
  return KAIO_OK;
}

kaio_status check_output(const kaio_device *device, const Int4Plan &p,
                         int proj, const kaio_tensor &t, CheckedView *out) {
  const std::string name =
      p.qkv ? std::string("out_") + kProj[proj] : std::string("C");
  KAIO_TRY(check_view(name.c_str(), &t, device, out));
  KAIO_TRY(check_dtype(name.c_str(), *out, p.out_dtype));
  return check_shape(name.c_str(), *out, p.m, p.n[proj]);
}

// M > 16 on sm_90a: the fused wgmma kernel, for op handles and one-shot
// calls alike (it needs no workspace; ptx/gen_quant_int4_sm90.py). Its
// tiles: 128 weight columns by 64, 128, 192 or 256 rows, each also with K
// split over 2 or 4 CTAs (a cluster whose partial tiles meet in shared
// memory). Cost: waves of CTAs (of split tiles: the clusters the driver says
// fit at once) times one wave's time, K steps per CTA times a step's time
// plus a fixed part (launch, pipeline fill, epilogue). Fitted to H100 timings
// (bench/RESULTS.md, session 20: every tile forced on 35 Llama shapes at M
// 48-320, the 192-row ones on 30 more at M 160-576), it picks the fastest
// timed tile on each. Ties keep the earlier row. The split kernels are a
// module of their own (PTX 8.1: st.async); a driver that cannot load it gets
// the unsplit ones.
struct FusedTile {
  int64_t rows;
  int64_t step_cost, wave_cost;   // in 10 ns: one K step, a wave's fixed part
};
constexpr FusedTile kFusedTiles[] = {{256, 60, 880}, {192, 54, 750}, {128, 47, 650}, {64, 43, 450}};
constexpr int64_t kFusedSplits[] = {1, 2, 4};   // every tile height comes in each
constexpr int64_t kFusedStepK = 64;             // K per step (the generator's BK)

int64_t fused_cost(const Int4Plan &p, const FusedTile &f, int64_t split, int64_t cols,
                   int64_t wave, int64_t steps) {
  const int64_t ctas = ((p.m + f.rows - 1) / f.rows) * ((p.n[0] + cols - 1) / cols) * split;
  return (ctas + wave - 1) / wave * ((steps + split - 1) / split * f.step_cost + f.wave_cost);
}

kaio_status plan_fused(kaio_device *device, Int4Plan *p, const std::string &why) {
  const int64_t steps = (p->k + kFusedStepK - 1) / kFusedStepK;
  const FamilyCheck splits = check_family(device, ModuleId::quant_int4_sm90_split, true);
  BuiltinFunction fn;
  int64_t best_cost = -1, best_split = 0;
  for (const FusedTile &f : kFusedTiles) {
    for (const int64_t split : kFusedSplits) {
      // each CTA of a split needs a K step of its own: CTA z takes
      // ceil(steps / split) steps from z times that
      if (steps <= (split - 1) * ((steps + split - 1) / split) || (split > 1 && !splits.ok()))
        continue;
      BuiltinFunction candidate;
      KAIO_TRY(device->modules->function(kernels::int4_mm_sm90(p->in_dtype, f.rows, split),
                                         &candidate));
      if (candidate.info->cols_per_block == 0)
        return fail(KAIO_ERROR_INTERNAL, "%s: the int4 wgmma kernel lacks its launch facts.",
                    api_name());
      // a wave: a CTA on every SM, or as many clusters as the driver says fit at
      // once (on the H100, fewer than 132 / 4 of 4 CTAs: whole clusters per GPC)
      const int64_t wave = candidate.max_clusters > 0 ? int64_t{candidate.max_clusters} * split
                                                      : int64_t{device->info.sm_count};
      const int64_t cost = fused_cost(*p, f, split, candidate.info->cols_per_block, wave, steps);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best_split = split;
        fn = candidate;
      }
    }
  }
  if (!tma_box(fn, "tmap_x", p->box_a) || !tma_box(fn, "tmap_qw", p->box_b))
    return fail(KAIO_ERROR_INTERNAL, "%s: the int4 wgmma kernel lacks its launch facts.",
                api_name());
  Launch &kp = p->kernel = launch_of(fn);
  kp.grid =
      static_cast<unsigned>((p->n[0] + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  kp.grid_y = static_cast<unsigned>((p->m + p->box_a[1] - 1) / p->box_a[1]);
  // X's box is the tile's rows, or M rows where M is fewer: a box reaching
  // past M loads slowly, and the kernel expects min(M, tile rows) rows a stage
  if (p->m < p->box_a[1]) p->box_a[1] = static_cast<unsigned>(p->m);
  kp.grid_z = static_cast<unsigned>(best_split);   // the split kernels' clusters are 1 x 1 x split
  p->fused = true;
  if (log_enabled())
    log_kernel(device, kp.function,
               "AUTO: M > 16, " + why +
                   (best_split > 1 && fn.max_clusters > 0
                        ? "; K split " + std::to_string(best_split) + " ways, clusters a wave: " +
                              std::to_string(fn.max_clusters)
                        : "") +
                   (splits.ok() ? "" : "; K never split: " + splits.why));
  return KAIO_OK;
}

kaio_status plan_prefill(kaio_device *device, Int4Plan *p, const std::string &why) {
  if (p->k / 8 > kMaxGridYZ)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: K is %" PRId64 "; the prefill path dequantizes at most %" PRId64
                " rows of K. Split K.",
                api_name(), p->k, kMaxGridYZ * 8);
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(kernels::int4_dequant(p->in_dtype), &fn));
  if (fn.info->cols_per_block == 0)
    return fail(KAIO_ERROR_INTERNAL, "%s: the int4 dequantize kernel lacks its annotation.",
                api_name());
  Launch &d = p->dequant;
  d.function = fn.function;
  d.block = fn.info->block[0];
  d.grid = static_cast<unsigned>((p->n[0] + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  d.grid_y = static_cast<unsigned>(p->k / 8);
  if (log_enabled())
    log_kernel(device, d.function, "AUTO: M > 16, dequantize then matmul; " + why);
  MatmulPlan &mm = p->matmul;
  mm.dtype = p->in_dtype;
  mm.rows = p->m;
  mm.cols = p->n[0];
  mm.out_dtype = p->out_dtype;
  mm.k = p->k;
  KAIO_TRY(mm.plan_product(device));
  KAIO_TRY(DeviceMemory::allocate(
      device, static_cast<uint64_t>(p->k) * static_cast<uint64_t>(p->n[0]) * 2, &p->workspace));
  p->prefill = true;
  return KAIO_OK;
}

kaio_status plan_unlogged(kaio_device *device, Int4Plan *p, bool allow_prefill) {
  if (!is_half(p->in_dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: in_dtype is %s (%d); int4 matmul takes KAIO_DTYPE_F16 or KAIO_DTYPE_BF16 "
                "activations (the scales have the same dtype).",
                api_name(), kaio_dtype_name(p->in_dtype), p->in_dtype);
  if (!is_half(p->out_dtype) && p->out_dtype != KAIO_DTYPE_F32)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: out_dtype is %s (%d); use KAIO_DTYPE_F32, KAIO_DTYPE_F16 or KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(p->out_dtype), p->out_dtype);
  if (p->format != KAIO_INT4_GPTQ && p->format != KAIO_INT4_SIGNED)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: format is %d; use KAIO_INT4_GPTQ (0) or KAIO_INT4_SIGNED (1).", api_name(),
                p->format);
  if (p->zeros_offset > 1 || (p->format == KAIO_INT4_SIGNED && p->zeros_offset != 0))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: zeros_offset is %u; use 0, or 1 for AutoGPTQ v1 qzeros (GPTQ format "
                "only).",
                api_name(), p->zeros_offset);
  if (p->m < 1 || p->k < 1 || p->m > INT32_MAX || p->k > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M and K are %" PRId64 " and %" PRId64 "; each must be between 1 and %d.",
                api_name(), p->m, p->k, INT32_MAX);
  for (int i = 0; i < p->nproj; ++i) {
    const int64_t n = p->n[i];
    if (n < 1 || n > INT32_MAX || n % 8 != 0)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: N%s%s is %" PRId64 "; it must be a positive multiple of 8 (qzeros pack 8 "
                  "columns per word).",
                  api_name(), p->nproj > 1 ? "_" : "", p->nproj > 1 ? kProj[i] : "", n);
  }
  if (p->k % kKStep != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: K is %" PRId64 " but must be a multiple of 32 (the int4 kernels take K in "
                "steps of 4 packed words); pad K with zero weights to %" PRId64 ".",
                api_name(), p->k, (p->k + kKStep - 1) / kKStep * kKStep);
  if (p->group != p->k && (!power_of_two(p->group) || p->group < kKStep || p->k % p->group != 0))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: group_size is %" PRId64 " with K %" PRId64 "; it must be a power of two "
                ">= 32 that divides K (32, 64, 128, ...), or K itself (one group per column).",
                api_name(), p->group, p->k);
  if ((p->m + kDecodeMaxRows - 1) / kDecodeMaxRows > kMaxGridYZ)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M is %" PRId64 "; at most %" PRId64 " rows per call. Split M.", api_name(),
                p->m, kMaxGridYZ * kDecodeMaxRows);
  KAIO_TRY(require_arch(device, 8, 0, "int4 matmul (mma.sync m16n8k16)"));
  // Op handles past kFusedMaxRows dequantize once per launch and run the
  // matmul; one-shot calls own no workspace. At M = 4096 the fused kernel
  // (256-row tiles in shared memory) is the faster: 0.94-0.98x cuBLAS against
  // 0.89-0.90x, f16 and bf16 (bench_quant --prefill, H100, N = K = 4096 and
  // 8192, N 14336); past it untimed.
  // The fused kernel where the device runs sm_90a and the driver loads it.
  const bool fused_rows = p->m <= kFusedMaxRows || !allow_prefill;
  const bool tall = !p->qkv && p->m > kDecodeMaxRows;
  const FamilyCheck hopper = tall ? check_family(device, ModuleId::quant_int4_sm90, true)
                                  : FamilyCheck{};
  const bool few = tall && hopper.ok() &&
                   (p->m <= kDecodeOverFusedRows ||
                    (p->m <= kDecodeNarrowRows && p->n[0] <= kDecodeNarrowCols));
  if (tall && fused_rows && hopper.ok() && !few) return plan_fused(device, p, hopper.why);
  if (allow_prefill && tall && !few)
    return plan_prefill(device, p,
                        hopper.ok() ? "M > " + std::to_string(kFusedMaxRows) : hopper.why);
  // Where the device runs sm_90 and the driver loads the twins' PTX (7.8): the
  // same decode kernels as programmatic dependent launches (their CTAs start in
  // the previous kernel's tail and wait there; bench/RESULTS.md).
  const FamilyCheck pdl = check_family(device, ModuleId::quant_int4_gemv_sm90, false);
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(gemv_kernel(*p, device->info.sm_count, pdl.ok()), &fn));
  if (fn.info->cols_per_block == 0)
    return fail(KAIO_ERROR_INTERNAL, "%s: the int4 decode kernel lacks its annotation.",
                api_name());
  int64_t nmax = 0;
  for (int i = 0; i < p->nproj; ++i) nmax = p->n[i] > nmax ? p->n[i] : nmax;
  const int64_t rows_per_block = p->m <= 8 ? 8 : kDecodeMaxRows;
  Launch &kp = p->kernel = launch_of(fn);
  kp.grid = static_cast<unsigned>((nmax + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  kp.grid_y = static_cast<unsigned>(p->nproj);
  kp.grid_z = static_cast<unsigned>((p->m + rows_per_block - 1) / rows_per_block);
  if (log_enabled())
    log_kernel(device, kp.function,
               (few    ? std::string("AUTO: M <= 32, or <= 64 with N <= 4096: the decode kernel "
                                     "(faster there than the fused one)")
                : tall ? "AUTO: one-shot M > 16, the decode kernel; " + hopper.why
                : p->qkv ? std::string("QKV: the decode kernel, the only family")
                         : std::string("M <= 16: the decode kernel")) +
                   (pdl.ok() ? "; dependent launch (" : "; plain launch (") + pdl.why + ")");
  return KAIO_OK;
}

kaio_status run_int4(const kaio_device *device, const Int4Plan &p,
                     kaio_stream *stream, const kaio_tensor *t) {
  const char *xname = p.qkv ? "x" : "A";
  CheckedView x;
  KAIO_TRY(check_aligned_view(xname, &t[0], device, 16, 8,
                              "the int4 kernel (16-byte loads of activations)", &x));
  KAIO_TRY(check_dtype(xname, x, p.in_dtype));
  KAIO_TRY(check_shape(xname, x, p.m, p.k));
  Weights w[3];
  CheckedView out[3];
  for (int i = 0; i < p.nproj; ++i) {
    KAIO_TRY(check_weights(device, p, i, &t[1 + 3 * i], &w[i]));
    KAIO_TRY(check_output(device, p, i, t[1 + 3 * p.nproj + i], &out[i]));
  }
  for (int i = 0; i < p.nproj; ++i) {
    const std::string o = p.qkv ? std::string("out_") + kProj[i] : "C";
    KAIO_TRY(check_no_partial_overlap(xname, x, o.c_str(), out[i], false));
    for (int j = 0; j < p.nproj; ++j) {
      KAIO_TRY(check_no_partial_overlap(arg_name(p, "qweight", j).c_str(), w[j].qw,
                                        o.c_str(), out[i], false));
      KAIO_TRY(check_no_partial_overlap(arg_name(p, "scales", j).c_str(), w[j].sc,
                                        o.c_str(), out[i], false));
      if (w[j].has_zeros)
        KAIO_TRY(check_no_partial_overlap(arg_name(p, "qzeros", j).c_str(), w[j].qz,
                                          o.c_str(), out[i], false));
      if (j < i) {
        const std::string oj = std::string("out_") + kProj[j];
        KAIO_TRY(check_no_partial_overlap(oj.c_str(), out[j], o.c_str(), out[i], false));
      }
    }
  }
  unsigned xmask = p.format == KAIO_INT4_SIGNED ? kSignedMask : 0u, zoff = p.zeros_offset;
  unsigned long long qw[3], ldqw[3], qz[3], ldqz[3], sc[3], ldsc[3], po[3], ldo[3];
  unsigned un[3];
  for (int i = 0; i < 3; ++i) {
    const int s = i < p.nproj ? i : 0;  // unused projections repeat the first
    qw[i] = w[s].qw.address;
    ldqw[i] = w[s].qw.row_stride;
    qz[i] = w[s].has_zeros ? w[s].qz.address : 0;
    ldqz[i] = w[s].has_zeros ? w[s].qz.row_stride : 0;
    sc[i] = w[s].sc.address;
    ldsc[i] = w[s].sc.row_stride;
    po[i] = out[s].address;
    ldo[i] = out[s].row_stride;
    un[i] = static_cast<unsigned>(p.n[s]);
  }
  unsigned um = static_cast<unsigned>(p.m), uk = static_cast<unsigned>(p.k),
           out_dtype = static_cast<unsigned>(p.out_dtype);
  if (p.fused) {
    TensorMap map_x, map_qw;
    {
      ContextScope scope(device);
      KAIO_TRY(scope.status());
      KAIO_TRY(encode_tensor_map(device, x, p.in_dtype, p.box_a, &map_x));
      KAIO_TRY(encode_tensor_map(device, w[0].qw, KAIO_DTYPE_U32, p.box_b, &map_qw, false));
    }
    unsigned group = static_cast<unsigned>(p.group);
    void *params[] = {&map_x, &map_qw, &po[0], &ldo[0], &sc[0],  &ldsc[0], &qz[0],
                      &ldqz[0], &um,   &un[0], &uk,     &group, &xmask,   &zoff, &out_dtype};
    return launch_builtin(device, p.kernel, stream, params);
  }
  if (p.prefill) {
    // the product's views are checked before the dequantization is enqueued
    const kaio_tensor mm[] = {t[0], kaio_tensor_2d(p.workspace->handle(), p.in_dtype, p.k, p.n[0]),
                              t[4]};
    MatmulViews product;
    KAIO_TRY(prepare_matmul(p.matmul, mm, {xname, "qweight", "C"}, &product));
    unsigned long long pw = p.workspace->ptr(), ldw = static_cast<unsigned long long>(p.n[0]);
    unsigned group = static_cast<unsigned>(p.group);
    void *dq[] = {&qw[0], &ldqw[0], &qz[0], &ldqz[0], &sc[0], &ldsc[0], &pw, &ldw,
                  &un[0], &group, &xmask, &zoff};
    KAIO_TRY(launch_builtin(device, p.dequant, stream, dq));
    return enqueue_matmul(p.matmul, stream, product);
  }
  unsigned long long px = x.address, ldx = x.row_stride;
  unsigned gshift = group_shift(p);
  void *params[8 + 9 * 3] = {&px, &ldx, &um, &uk, &gshift, &xmask, &zoff, &out_dtype};
  for (int i = 0; i < 3; ++i) {
    void **q = params + 8 + 9 * i;
    q[0] = &qw[i];
    q[1] = &ldqw[i];
    q[2] = &qz[i];
    q[3] = &ldqz[i];
    q[4] = &sc[i];
    q[5] = &ldsc[i];
    q[6] = &po[i];
    q[7] = &ldo[i];
    q[8] = &un[i];
  }
  return launch_builtin(device, p.kernel, stream, params);
}

}  // namespace

kaio_status Int4Plan::plan(kaio_device *device) {
  this->device = device;
  const char *kind = qkv ? "qkv int4" : "int4";
  return log_plan([&] { return plan_unlogged(device, this, prepared); },
                  [&] { return quant_subject(kind, m, n, nproj, k, in_dtype); });
}

kaio_status Int4Plan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_launch(device, stream, tensors, count, qkv ? kQkvTensors : kInt4Tensors,
                        qkv ? "{x, qweight_q, qzeros_q, scales_q, qweight_k, qzeros_k, scales_k, "
                              "qweight_v, qzeros_v, scales_v, out_q, out_k, out_v}"
                            : "{A, qweight, qzeros, scales, C}"));
  return run_int4(device, *this, stream, tensors);
}

kaio_status repack_kaio_int4(kaio_stream *stream, const kaio_tensor *src, const kaio_tensor *dst) {
  KAIO_TRY(check_stream(stream));
  if (!src || !dst)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                api_name(), src ? "dst" : "src");
  const kaio_device *device = stream->device;
  CheckedView s, d;
  KAIO_TRY(check_view("src", src, device, &s));
  KAIO_TRY(check_view("dst", dst, device, &d));
  for (const auto &[name, v] : {std::pair<const char *, const CheckedView *>{"src", &s},
                                {"dst", &d}})
    if (!is_packed(v->dtype))
      return fail(KAIO_ERROR_INVALID_DTYPE,
                  "%s: argument '%s' has dtype %s but must be u32 or i32 (packed words).",
                  api_name(), name, kaio_dtype_name(v->dtype));
  if (d.rows != s.cols || d.cols != s.rows)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument 'dst' is %" PRId64 " x %" PRId64 " but must be K/8 x N = %" PRId64
                " x %" PRId64 " for a 'src' of N x K/8 = %" PRId64 " x %" PRId64 ".",
                api_name(), d.rows, d.cols, s.cols, s.rows, s.rows, s.cols);
  if (s.cols > kMaxGridYZ || s.rows > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: 'src' is %" PRId64 " x %" PRId64 "; at most %" PRId64 " words per column "
                "(K <= %" PRId64 "). Split K.",
                api_name(), s.rows, s.cols, kMaxGridYZ, kMaxGridYZ * 8);
  KAIO_TRY(check_no_partial_overlap("src", s, "dst", d, false));
  KAIO_TRY(require_arch(stream->device, 8, 0, "int4 repack"));
  BuiltinFunction fn;
  KAIO_TRY(stream->device->modules->function(kernels::int4_transpose(), &fn));
  Launch launch;
  launch.function = fn.function;
  launch.block = fn.info->block[0];
  launch.grid =
      static_cast<unsigned>((s.rows + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  launch.grid_y = static_cast<unsigned>(s.cols);
  unsigned long long ps = s.address, lds = s.row_stride, pd = d.address, ldd = d.row_stride;
  unsigned rows = static_cast<unsigned>(s.rows);
  void *params[] = {&ps, &lds, &pd, &ldd, &rows};
  return launch_builtin(device, launch, stream, params);
}

}  // namespace kaio
