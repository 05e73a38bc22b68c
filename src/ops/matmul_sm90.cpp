#include "ops/matmul_sm90.hpp"

#include <algorithm>
#include <vector>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "runtime/buffer.hpp"
#include "runtime/buffer_copy.hpp"
#include "runtime/context_scope.hpp"
#include "ops/kernel_family.hpp"
#include "ops/plan_log.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

// The kernels' tiles, from the kernel registry (every layout and dtype
// of a tile family has the same).
constexpr const KernelInfo &kWideKernel =
    kernel_info(kernels::matmul_sm90(KAIO_DTYPE_F16, false, false, kernels::Tile::n256));
constexpr const KernelInfo &kNarrowKernel =
    kernel_info(kernels::matmul_sm90(KAIO_DTYPE_F16, false, false, kernels::Tile::n128));
constexpr const KernelInfo &kSlimKernel =
    kernel_info(kernels::matmul_sm90(KAIO_DTYPE_F16, false, false, kernels::Tile::n64));
constexpr const KernelInfo &kTinyKernel =
    kernel_info(kernels::matmul_sm90(KAIO_DTYPE_F16, false, false, kernels::Tile::m64));
constexpr int64_t kStepK = kWideKernel.tile_k;
static_assert(kNarrowKernel.tile_k == kStepK && kSlimKernel.tile_k == kStepK &&
              kTinyKernel.tile_k == kStepK);

// The kernel families: 128 x 256 tiles; 128 x 128 (_n128), 128 x 64 (_n64)
// and 64 x 64 (_m64, two CTAs an SM) for shapes whose wide tiles leave SMs
// idle. rate is one CTA's tensor-core rate: 720 TFLOP/s over 132 SMs at
// 4096^3 for the wide tile, 580 for the narrow one; the 128 x 64 tile
// reached 3.4 TFLOP/s per CTA at M = 128 (64 CTAs, ncu) and 2.7 at 4096^3
// (all SMs busy).
struct TileFamily {
  int64_t tile_m, tile_n;
  double rate;
  kernels::Tile tile;
  bool in_kernel;         // it has _sk entries, which sum the splits themselves
  bool splits;            // it may split K at all
  int64_t per_sm;         // CTAs an SM holds
  double shared_rate;     // per_sm > 1: a CTA's rate where SMs hold more than one
  int64_t max_steps;      // K steps it takes at most (0: any)
};
constexpr TileFamily kWide = {kWideKernel.tile_m, kWideKernel.tile_n, 5.5e12, kernels::Tile::n256,
                              false, true, 1, 0, 0};
constexpr TileFamily kNarrow = {kNarrowKernel.tile_m, kNarrowKernel.tile_n, 4.4e12,
                                kernels::Tile::n128, true, true, 1, 0, 0};
constexpr TileFamily kSlim = {kSlimKernel.tile_m, kSlimKernel.tile_n, 3.3e12, kernels::Tile::n64,
                              true, true, 1, 0, 0};
// The 64 x 64 tiles, fitted to the H200 (bench/RESULTS.md, session 23:
// every family forced at 17 shapes): alone on an SM they beat the 128 x 64
// tiles on the small squares and M 300, N 700, K 1000 (the smaller fixed
// part and step of a half-height tile), two to an SM they share its tensor
// cores. Past 16 K steps two to an SM ran 5-30 % slower than the 128 x 64
// tiles and the cluster splits (K 2048-4096), which the rates alone do not
// tell apart: hence max_steps.
constexpr TileFamily kTiny = {kTinyKernel.tile_m, kTinyKernel.tile_n, 1.9e12, kernels::Tile::m64,
                              false, false, 2, 1.75e12, 16};
static_assert(kernel_info(kernels::matmul_sm90_sk(KAIO_DTYPE_F16, false, true, kernels::Tile::n64))
                      .tile_n == kSlimKernel.tile_n &&
                  kernel_info(kernels::matmul_sm90_sk(KAIO_DTYPE_F16, false, true,
                                                      kernels::Tile::n128))
                          .tile_n == kNarrowKernel.tile_n,
              "the _sk kernels share their family's tile");

// A cost model in seconds. The main kernel is bound either by its CTAs'
// tensor cores or by reading A and B (and writing split-K partials) from
// DRAM; every split beyond the first then costs the reduction, which reads
// the partials back and writes C, plus its launch. Measured on the H100
// (bench_matmul, M = 128 and squares 256-2048, every family at 1, 2 and 4
// splits): the reduction took about 5 us at M = 128, N = 4096 (ncu), and no
// split beat the 128 x 64 tiles' single one by more than the noise.
// The 128 x 128 and 128 x 64 tiles sum their splits in the kernel (_sk):
// measured 0.9-2.3 us faster than the second launch at M = 128, N = 4096,
// K = 4096 / 11008, yet slower than not splitting at K = 4096 (the split
// kernels run 3-4 us over the DRAM bound above). The model charges both
// forms the same, so it chooses families and splits as it did before them.
// The squares 512^3 - 1024^3 agree (session 16): every split the SMs fit in
// one wave, 2-4 ways on either tile, ran at 0.61-0.79x of the unsplit
// 128 x 64 tiles; at 512^3 the _sk kernels took 10.0-12.9 us a launch at
// 2, 3 and 4 splits alike, the unsplit one 7.8-8.0 us.
constexpr double kDramBandwidth = 2.8e12;
constexpr double kReduceLaunch = 4.5e-6;
// Leave the default (wide tiles, one split) only for a predicted gain of at
// least 10%: the model is coarse.
constexpr double kMinGain = 0.9;
// Each split keeps at least this many K steps, so its pipeline fills.
constexpr int64_t kMinStepsPerSplit = 4;
// f32 output (and f32 split partials) on the 128 x 128 / 128 x 64 tiles: K
// steps per accumulation chunk (4096 of K), each chunk added into f32 totals
// in registers. The tensor cores' f32 sums lose accuracy about linearly with
// K: at M = 128, K 14336 - 57344, one-shot products erred 3-4x more than
// cuBLAS (which splits K there); chunked, 0.3-0.8x (bench/RESULTS.md,
// session 14). The wide tile has no registers for the totals.
constexpr unsigned kChunkSteps = 64;
// K split over a cluster of CTAs (the _k<S> kernels, module matmul_sm90_cluster:
// one tile a CTA, the partials summed through distributed shared memory, no
// workspace, so one-shot calls may split too): the tiles and split counts
// generated, and what a cluster launch costs beyond its K steps, fitted to
// the H100 (bench/RESULTS.md, session 22: 2.5-3.7 us at the squares
// 512^3-1024^3, where splitting therefore loses to the unsplit 128 x 64
// tiles; M 128-256 with K 2048-4096 gained 8-12 %). The clusters must fit
// the GPU at once (the driver's count: 66 of 2, 39 of 3, 30 of 4 on the
// H100), and each CTA keeps kMinClusterSteps K steps.
struct ClusterSplit {
  const TileFamily *family;
  int64_t splits;
};
constexpr ClusterSplit kClusterSplits[] = {{&kSlim, 2}, {&kSlim, 4}, {&kNarrow, 2}, {&kNarrow, 3},
                                           {&kNarrow, 4}};
constexpr size_t kClusterCount = sizeof kClusterSplits / sizeof kClusterSplits[0];
constexpr double kClusterSum = 3.0e-6;
constexpr int64_t kMinClusterSteps = 2;

struct Choice {
  const TileFamily *family = &kWide;
  int64_t splits = 1;
  bool in_kernel = false;  // the splits summed by the _sk kernel
  bool in_cluster = false; // the splits summed by the cluster (_k<S>) kernel
};

int64_t tiles_of(int64_t m, int64_t n, const TileFamily &f) {
  return ((m + f.tile_m - 1) / f.tile_m) * ((n + f.tile_n - 1) / f.tile_n);
}

// One work item's flops: a tile over one of `splits` parts of K.
double item_flops(int64_t k, const TileFamily &f, int64_t splits) {
  const int64_t steps = ((k + kStepK - 1) / kStepK + splits - 1) / splits;
  return 2.0 * f.tile_m * f.tile_n * steps * kStepK;
}

double modelled_seconds(int64_t m, int64_t n, int64_t k, const TileFamily &f, int64_t splits,
                        int64_t sms) {
  // Tensor cores compute whole tiles, and a CTA with more work items than
  // another runs them one after the other: waves of whole tiles.
  const int64_t work = tiles_of(m, n, f) * splits, ctas = std::min(work, sms * f.per_sm);
  const int64_t waves = (work + ctas - 1) / ctas;
  const double rate = f.per_sm > 1 && work > sms ? f.shared_rate : f.rate;
  const double operands = 2.0 * (m + n) * k, partials = splits > 1 ? 4.0 * splits * m * n : 0.0;
  double t = std::max(waves * item_flops(k, f, splits) / rate,
                      (operands + partials) / kDramBandwidth);
  if (splits > 1) t += (partials + 4.0 * m * n) / kDramBandwidth + kReduceLaunch;
  return t;
}

// A cluster split: its CTAs' tensor cores on ceil(steps / splits) steps, or
// DRAM, then the sum.
double cluster_seconds(int64_t m, int64_t n, int64_t k, const ClusterSplit &c) {
  const TileFamily &f = *c.family;
  return std::max(item_flops(k, f, c.splits) / f.rate, 2.0 * (m + n) * k / kDramBandwidth) +
         kClusterSum;
}

// The family and split count the model likes best, keeping every work item
// in one wave. Splits through global memory need a workspace, so only op
// handles (may_split) get them; cluster splits go wherever max_clusters[i]
// (the clusters of kClusterSplits[i] the GPU holds at once; 0: none) fit
// every tile.
Choice choose(int64_t m, int64_t n, int64_t k, int64_t sms, bool may_split,
              const int *max_clusters) {
  const int64_t ksteps = (k + kStepK - 1) / kStepK;
  Choice best;
  double best_t = modelled_seconds(m, n, k, kWide, 1, sms) * kMinGain;
  for (size_t i = 0; i < kClusterCount; ++i) {
    const ClusterSplit &c = kClusterSplits[i];
    const int64_t per = (ksteps + c.splits - 1) / c.splits;
    if (tiles_of(m, n, *c.family) > max_clusters[i] || per < kMinClusterSteps ||
        (c.splits - 1) * per >= ksteps)
      continue;
    const double t = cluster_seconds(m, n, k, c);
    if (t < best_t) {
      best = {c.family, c.splits, false, true};
      best_t = t;
    }
  }
  for (const TileFamily *f : {&kWide, &kNarrow, &kSlim, &kTiny}) {
    if (f->max_steps && ksteps > f->max_steps) continue;
    const int64_t tiles = tiles_of(m, n, *f);
    // The reduction's grid.y is a row, so at most 65535 rows split.
    const int64_t max_splits =
        may_split && f->splits && m <= 65535 ? ksteps / kMinStepsPerSplit : 1;
    for (int64_t s = 1; s == 1 || (tiles * s <= sms && s <= max_splits); ++s) {
      const double t = modelled_seconds(m, n, k, *f, s, sms);
      if (t < best_t) {
        best = {f, s, s > 1 && f->in_kernel};
        best_t = t;
      }
    }
  }
  return best;
}

KernelId kernel_for(const MatmulPlan &p, const Choice &c) {
  const bool ta = p.trans_a == KAIO_TRANS_T, tb = p.trans_b == KAIO_TRANS_T;
  if (c.in_cluster)
    return kernels::matmul_sm90_cluster(p.dtype, ta, tb, c.family->tile, c.splits);
  return c.in_kernel ? kernels::matmul_sm90_sk(p.dtype, ta, tb, c.family->tile)
                     : kernels::matmul_sm90(p.dtype, ta, tb, c.family->tile);
}

// How many clusters of each kClusterSplits kernel (this plan's dtype and
// layout) the GPU runs at once, as the driver says; all 0 where the driver
// cannot load the cluster module (PTX 8.1) or the inputs are not 16-bit.
kaio_status cluster_capacity(kaio_device *device, const MatmulPlan &p, int *max_clusters) {
  if (p.dtype != KAIO_DTYPE_F16 && p.dtype != KAIO_DTYPE_BF16) return KAIO_OK;
  if (!check_family(device, ModuleId::matmul_sm90_cluster, true).ok()) return KAIO_OK;
  for (size_t i = 0; i < kClusterCount; ++i) {
    BuiltinFunction fn;
    KAIO_TRY(device->modules->function(kernel_for(p, {kClusterSplits[i].family,
                                                      kClusterSplits[i].splits, false, true}),
                                       &fn));
    max_clusters[i] = fn.max_clusters;
  }
  return KAIO_OK;
}

// The _sk kernels' workspace: each split's f32 partial of each tile, then a
// u32 count per tile, zero before the first launch (each launch leaves them
// zero).
kaio_status in_kernel_workspace(kaio_device *device, MatmulPlan *p, const Choice &c) {
  const uint64_t tiles = static_cast<uint64_t>(tiles_of(p->rows, p->cols, *c.family));
  p->count_offset = tiles * p->splits * c.family->tile_m * c.family->tile_n * sizeof(float);
  KAIO_TRY(DeviceMemory::allocate(device, p->count_offset + tiles * 4, &p->workspace));
  const std::vector<uint32_t> zeros(tiles, 0);
  return buffer_write(p->workspace->buffer(), p->count_offset, zeros.data(), tiles * 4);
}

}  // namespace

kaio_status plan_matmul_sm90(kaio_device *device, MatmulPlan *plan, const std::string &why) {
  MatmulPlan &p = *plan;
  const int64_t m = p.rows, n = p.cols, sms = device->info.sm_count;
  const int64_t ksteps = (p.k + kStepK - 1) / kStepK;
  // The cluster kernels' module is loaded only for shapes with few enough tiles
  // for a cluster of 2 on each (the n64 tiles are at least as many).
  int max_clusters[kClusterCount] = {};
  if (tiles_of(m, n, kNarrow) * 2 <= sms) KAIO_TRY(cluster_capacity(device, p, max_clusters));
  const Choice choice = choose(m, n, p.k, sms, p.prepared, max_clusters);
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(kernel_for(p, choice), &fn));
  if (!tma_box(fn, "tmap_a", p.box_a) || !tma_box(fn, "tmap_b", p.box_b))
    return fail(KAIO_ERROR_INTERNAL, "%s: the Hopper matmul kernel lacks its TMA boxes.",
                api_name());
  p.tma = true;
  p.launch = launch_of(fn);
  const int64_t per = (ksteps + choice.splits - 1) / choice.splits;
  p.k_steps_per_split = static_cast<unsigned>(per);
  p.splits = static_cast<unsigned>((ksteps + per - 1) / per);
  p.split_in_kernel = p.splits > 1 && choice.in_kernel;
  p.k_chunk = kChunkSteps;
  if (choice.in_cluster) {
    // A tile a cluster, the splits along z (the kernels' clusters are 1 x 1 x splits).
    p.launch.grid = static_cast<unsigned>(tiles_of(m, n, *choice.family));
    p.launch.grid_z = static_cast<unsigned>(choice.splits);
    p.splits = 1;  // nothing for the host to sum: enqueue launches it as one product
    if (log_enabled())
      log_kernel(device, fn.function,
                 "AUTO: " + why + ", K split " + std::to_string(choice.splits) +
                     " ways over a cluster, clusters a wave: " + std::to_string(fn.max_clusters));
    return KAIO_OK;
  }
  if (p.split_in_kernel) {
    KAIO_TRY(in_kernel_workspace(device, &p, choice));
  } else if (p.splits > 1) {
    BuiltinFunction reduce;
    KAIO_TRY(device->modules->function(kernels::splitk_reduce(), &reduce));
    // A block per run of a row's columns, a row per grid.y.
    p.reduce.function = reduce.function;
    p.reduce.block = reduce.info->block[0];
    p.reduce.grid = static_cast<unsigned>((n + p.reduce.block - 1) / p.reduce.block);
    p.reduce.grid_y = static_cast<unsigned>(m);
    KAIO_TRY(DeviceMemory::allocate(device, static_cast<uint64_t>(p.splits) * m * n * sizeof(float),
                                    &p.workspace));
  }
  // Persistent: no more CTAs than the SMs hold at once, each walking work items.
  p.launch.grid = static_cast<unsigned>(
      std::min<int64_t>(tiles_of(m, n, *choice.family) * p.splits, sms * choice.family->per_sm));
  if (log_enabled())
    log_kernel(device, fn.function,
               "AUTO: " + why +
                   (p.splits > 1 ? ", K split " + std::to_string(p.splits) + " ways" +
                                       (p.split_in_kernel ? ", summed in the kernel" : "")
                                 : ""));
  return KAIO_OK;
}

kaio_status encode_matmul_sm90_maps(const MatmulPlan &p, MatmulViews *views) {
  ContextScope scope(p.device);
  KAIO_TRY(scope.status());
  KAIO_TRY(encode_tensor_map(p.device, views->a, p.dtype, p.box_a, &views->map_a));
  return encode_tensor_map(p.device, views->b, p.dtype, p.box_b, &views->map_b);
}

kaio_status enqueue_matmul_sm90(const MatmulPlan &p, kaio_stream *stream,
                                const MatmulViews &views) {
  const kaio_device *device = p.device;
  const CheckedView &c = views.c;
  TensorMap map_a = views.map_a, map_b = views.map_b;
  unsigned long long pc = c.address, ldc = c.row_stride;
  unsigned m = static_cast<unsigned>(p.rows), n = static_cast<unsigned>(p.cols),
           k = static_cast<unsigned>(p.k);
  float alpha = p.alpha, beta = p.beta;
  unsigned out_dtype = static_cast<unsigned>(p.out_dtype), kper = p.k_steps_per_split;
  unsigned long long split_elems = 0;
  unsigned kchunk = p.k_chunk;
  if (p.split_in_kernel) {
    // The last CTA of each tile sums the splits (workspace: partials, then
    // the counts) and writes C itself.
    unsigned long long ws = p.workspace->ptr(), count = ws + p.count_offset;
    void *params[] = {&map_a, &map_b, &pc,  &m,   &n,   &k,           &ldc,
                      &alpha, &beta,  &out_dtype, &kper, &split_elems, &ws, &count, &kchunk};
    return launch_builtin(device, p.launch, stream, params);
  }
  if (p.splits > 1) {
    // The splits write f32 partial products, M x N each, into the workspace.
    unsigned long long ws = p.workspace->ptr(), ws_ld = n;
    float one = 1.0f, zero = 0.0f;
    unsigned f32 = KAIO_DTYPE_F32, splits = p.splits;
    split_elems = static_cast<unsigned long long>(m) * n;
    void *params[] = {&map_a, &map_b, &ws, &m, &n, &k, &ws_ld, &one, &zero, &f32, &kper,
                      &split_elems, &kchunk};
    KAIO_TRY(launch_builtin(device, p.launch, stream, params));
    void *reduce_params[] = {&ws, &pc, &m, &n, &ldc, &splits, &split_elems, &alpha, &beta,
                             &out_dtype};
    return launch_builtin(device, p.reduce, stream, reduce_params);
  }
  void *params[] = {&map_a, &map_b, &pc, &m, &n, &k, &ldc, &alpha, &beta, &out_dtype, &kper,
                    &split_elems, &kchunk};
  return launch_builtin(device, p.launch, stream, params);
}

}  // namespace kaio
