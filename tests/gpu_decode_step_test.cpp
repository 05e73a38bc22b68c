// A whole decode step, twice (two layers with their own weights and caches),
// as one stream of launches: add + RMSNorm -> Q, K, V matvecs (Q4_K, f16) ->
// RoPE + paged KV-cache write -> paged decode attention (split keys, last-CTA
// combine) -> O matvec -> add + RMSNorm -> gate, up -> SiLU gate -> down. On
// sm_90 every one of them is a programmatic dependent launch (the sm_90 twins
// and the stream matvec), so each may start in its predecessor's tail.
//  * With a stream sync after every launch (no overlap), each link against
//    an f64 reference from the inputs the GPU gave it (matvecs from the
//    reference's dequantized weights), every output poisoned (NaN) first;
//  * the same step with no sync between launches must leave every buffer
//    (activations, the residual, both caches) with the same bits;
//  * and so must the step captured into a CUDA graph and replayed.
// Small: hidden 1024, 8 query heads, 2 KV heads, head dim 128, FFN 2816,
// context 300 in shuffled pages of 16 (compute-sanitizer runs it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/graph_api.hpp"
#include "support/kaio_test.hpp"
#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

constexpr int64_t kHidden = 1024, kHq = 8, kHkv = 2, kD = 128, kFfn = 2816, kKv = kHkv * kD;
constexpr int64_t kCtx = 300, kPage = 16, kPages = 20, kPoolRows = kPages * kPage;
constexpr int kLayers = 2;
constexpr float kEps = 1e-5f;
constexpr double kTheta = 10000.0;

enum Mat { kQ, kK, kV, kO, kGate, kUp, kDown, kMats };
constexpr int64_t kN[kMats] = {kHidden, kKv, kKv, kHidden, kFfn, kFfn, kHidden};
constexpr int64_t kK_[kMats] = {kHidden, kHidden, kHidden, kHidden, kHidden, kHidden, kFfn};
// A layer's activations, each at its own 256-byte slot of one buffer.
enum Act { xn1, q, k, v, o, attn, xn2, g, u, act, down, kActs };
constexpr int64_t kCols[kActs] = {kHidden, kHidden, kKv, kKv, kHidden, kHidden,
                                  kHidden, kFfn,    kFfn, kFfn, kHidden};

int64_t row_bytes(int m) { return kK_[m] / 256 * 144; }
uint64_t act_off(int a) {
  uint64_t at = 0;
  for (int i = 0; i < a; ++i) at += (static_cast<uint64_t>(kCols[i]) * 2 + 255) / 256 * 256;
  return at;
}
const uint64_t kActBytes = act_off(kActs), kPoolBytes = kPoolRows * kKv * 2;

// sqrt(sum (got - ref)^2 / sum ref^2); infinite when got has a non-finite value.
double rel_err(const std::vector<double> &got, const std::vector<double> &ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / r);
}

std::vector<double> slice(const std::vector<double> &v, size_t at, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + n)};
}

struct Layer {
  kt::Buffer weights, acts, pools;
  std::vector<float> deq[kMats];  // the reference's dequantized weights
  std::vector<uint8_t> pool_init;
};

class GpuDecodeStep : public kt::GpuTest {
 protected:
  void SetUp() override {
    kt::GpuTest::SetUp();
    if (IsSkipped()) return;
    build();
  }

  void build();
  void reset();
  // The step's launches, in order; each returns its status.
  std::vector<std::function<kaio_status()>> links();
  // Every buffer the step writes: the residual, each layer's activations and pools.
  std::vector<uint8_t> state();

  kaio_tensor act_view(int l, int a) const {
    kaio_tensor t = kaio_tensor_2d(layers_[l].acts.get(), KAIO_DTYPE_F16, 1, kCols[a]);
    t.offset_bytes = act_off(a);
    return t;
  }

  Layer layers_[kLayers];
  kt::Buffer h_, x_, norm_w_, meta_;
  kt::HostTensor h0_, x0_, w0_;
  std::vector<int32_t> table_;
  int32_t slot_ = 0;
  uint64_t w_off_[kMats] = {};
  kt::Op norm_, mat_[kMats], rope_, attn_, silu_;
};

void GpuDecodeStep::build() {
  const uint64_t seed = kt::test_seed();
  uint64_t wbytes = 0, w_off[kMats];
  for (int m = 0; m < kMats; ++m) {
    w_off[m] = wbytes;
    wbytes += static_cast<uint64_t>(kN[m] * row_bytes(m) + 256);
  }
  for (int l = 0; l < kLayers; ++l) {
    Layer &ly = layers_[l];
    ly.weights = kt::make_buffer(dev(), wbytes);
    for (int m = 0; m < kMats; ++m) {
      // uniform scaled by sqrt(3 / K): each output's variance is its input's
      std::vector<float> w = kqref::make_inputs(kqref::Dist::uniform, kN[m] * kK_[m], seed + 97 * l + m);
      const float scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(kK_[m])));
      for (float &x : w) x *= scale;
      kt::Buffer src = upload(w.data(), w.size() * 4);
      kaio_tensor st = kaio_tensor_2d(src.get(), KAIO_DTYPE_F32, kN[m], kK_[m]),
                  qt = kaio_tensor_2d(ly.weights.get(), KAIO_DTYPE_U8, kN[m], row_bytes(m));
      qt.offset_bytes = w_off[m];
      KT_OK(kaio_quantize(stream(), &st, &qt, KAIO_QUANT_Q4_K, KAIO_QUANT_MODE_GGML));
      KT_OK(kaio_stream_synchronize(stream()));
      const std::vector<uint8_t> bytes = download(ly.weights.get(), wbytes);
      ly.deq[m].resize(static_cast<size_t>(kN[m] * kK_[m]));
      for (int64_t r = 0; r < kN[m]; ++r)
        kqref::dequantize_row(kqref::Format::q4_k, &bytes[w_off[m] + static_cast<size_t>(r * row_bytes(m))],
                              kK_[m], &ly.deq[m][static_cast<size_t>(r * kK_[m])]);
    }
    ly.acts = kt::make_buffer(dev(), kActBytes);
    ly.pool_init = kt::random_tensor(KAIO_DTYPE_F16, 2 * kPoolRows * kKv, -1, 1, seed + 7 + l).bytes;
    ly.pools = kt::make_buffer(dev(), 2 * kPoolBytes);
  }
  h0_ = kt::random_tensor(KAIO_DTYPE_F16, kHidden, -1, 1, seed + 1);
  x0_ = kt::random_tensor(KAIO_DTYPE_F16, kHidden, -1, 1, seed + 2);
  w0_ = kt::random_tensor(KAIO_DTYPE_F16, kHidden, 0.5, 1.5, seed + 3);
  h_ = kt::make_buffer(dev(), kHidden * 2);
  x_ = upload(x0_.bytes);
  norm_w_ = upload(w0_.bytes);
  // meta: position, slot, length, then the block table (pages shuffled)
  table_.resize(kPages);
  std::iota(table_.begin(), table_.end(), 0);
  std::shuffle(table_.begin(), table_.end(), std::mt19937(static_cast<uint32_t>(seed)));
  const int32_t pos = kCtx - 1;
  slot_ = table_[pos / kPage] * kPage + pos % kPage;
  std::vector<int32_t> meta = {pos, slot_, kCtx, 0};
  meta.insert(meta.end(), table_.begin(), table_.end());
  meta_ = upload(meta.data(), meta.size() * 4);

  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_add_rmsnorm(&op, dev(), KAIO_DTYPE_F16, 1, kHidden, kEps));
  norm_.reset(op);
  for (int m = 0; m < kMats; ++m) {
    KT_OK(kaio_op_create_quant_matmul(&op, dev(), KAIO_QUANT_Q4_K, KAIO_DTYPE_F16, KAIO_DTYPE_F16, 1,
                                      kN[m], kK_[m]));
    mat_[m].reset(op);
  }
  kaio_rope_desc rd;
  KT_OK(kaio_rope_desc_init(&rd, sizeof rd));
  rd.dtype = KAIO_DTYPE_F16;
  rd.heads_q = kHq;
  rd.heads_k = kHkv;
  rd.head_dim = kD;
  rd.theta = kTheta;
  KT_OK(kaio_op_create_rope_kv_cache_write(&op, dev(), &rd));
  rope_.reset(op);
  kaio_attention_desc ad;
  KT_OK(kaio_attention_desc_init(&ad, sizeof ad));
  ad.dtype = KAIO_DTYPE_F16;
  ad.batch = 1;
  ad.seq_q = 1;
  ad.seq_k = kCtx;
  ad.heads_q = kHq;
  ad.heads_kv = kHkv;
  ad.head_dim = kD;
  kaio_attention_paged_desc pd;
  KT_OK(kaio_attention_paged_desc_init(&pd, sizeof pd));
  pd.page_size = kPage;
  KT_OK(kaio_op_create_attention_paged(&op, dev(), &ad, &pd));
  attn_.reset(op);
  KT_OK(kaio_op_create_silu_gate(&op, dev(), KAIO_DTYPE_F16, 1, kFfn));
  silu_.reset(op);
  for (int m = 0; m < kMats; ++m) w_off_[m] = w_off[m];
}

// Every output poisoned (0xFF: NaN), the residual, input and caches as at the start.
void GpuDecodeStep::reset() {
  for (Layer &ly : layers_)
    ASSERT_EQ(kaio_buffer_memset(ly.acts.get(), stream(), 0, 0xFF, kActBytes), KAIO_OK);
  KT_OK(kaio_stream_synchronize(stream()));  // buffer writes are not ordered after memsets
  KT_OK(kaio_buffer_write(h_.get(), 0, h0_.bytes.data(), h0_.bytes.size()));
  for (Layer &ly : layers_)
    KT_OK(kaio_buffer_write(ly.pools.get(), 0, ly.pool_init.data(), ly.pool_init.size()));
}

std::vector<std::function<kaio_status()>> GpuDecodeStep::links() {
  std::vector<std::function<kaio_status()>> out;
  kaio_stream *s = stream();
  const kaio_tensor h = kaio_tensor_2d(h_.get(), KAIO_DTYPE_F16, 1, kHidden),
                    w = kaio_tensor_2d(norm_w_.get(), KAIO_DTYPE_F16, 1, kHidden);
  auto meta = [&](uint64_t index, int64_t cols) {
    kaio_tensor t = kaio_tensor_2d(meta_.get(), KAIO_DTYPE_I32, 1, cols);
    t.offset_bytes = index * 4;
    return t;
  };
  for (int l = 0; l < kLayers; ++l) {
    const kaio_tensor x = l == 0 ? kaio_tensor_2d(x_.get(), KAIO_DTYPE_F16, 1, kHidden) : act_view(l - 1, down);
    auto norm = [=, this](kaio_tensor in, int a) {
      return [=, this] {
        const kaio_tensor t[] = {in, h, w, act_view(l, a)};
        return kaio_op_launch(norm_.get(), s, t, 4);
      };
    };
    auto matvec = [=, this](int m, int in, int a) {
      kaio_tensor wt = kaio_tensor_2d(layers_[l].weights.get(), KAIO_DTYPE_U8, kN[m], row_bytes(m));
      wt.offset_bytes = w_off_[m];
      return [=, this] {
        const kaio_tensor t[] = {act_view(l, in), wt, act_view(l, a)};
        return kaio_op_launch(mat_[m].get(), s, t, 3);
      };
    };
    kaio_tensor kp = kaio_tensor_2d(layers_[l].pools.get(), KAIO_DTYPE_F16, kPoolRows, kKv), vp = kp;
    vp.offset_bytes = kPoolBytes;
    out.push_back(norm(x, xn1));
    out.push_back(matvec(kQ, xn1, q));
    out.push_back(matvec(kK, xn1, k));
    out.push_back(matvec(kV, xn1, v));
    const kaio_tensor rope_t[] = {act_view(l, q), act_view(l, k), act_view(l, v), meta(0, 1), meta(1, 1), kp, vp};
    std::vector<kaio_tensor> rt(rope_t, rope_t + 7);
    out.push_back([=, this] { return kaio_op_launch(rope_.get(), s, rt.data(), 7); });
    const kaio_tensor attn_t[] = {act_view(l, q), kp, vp, meta(4, kPages), meta(2, 1), act_view(l, o),
                                  kaio_tensor_2d(nullptr, KAIO_DTYPE_F32, kHq, 1)};
    std::vector<kaio_tensor> at(attn_t, attn_t + 7);
    out.push_back([=, this] { return kaio_op_launch(attn_.get(), s, at.data(), 7); });
    out.push_back(matvec(kO, o, attn));
    out.push_back(norm(act_view(l, attn), xn2));
    out.push_back(matvec(kGate, xn2, g));
    out.push_back(matvec(kUp, xn2, u));
    out.push_back([=, this] {
      const kaio_tensor t[] = {act_view(l, g), act_view(l, u), act_view(l, act)};
      return kaio_op_launch(silu_.get(), s, t, 3);
    });
    out.push_back(matvec(kDown, act, down));
  }
  return out;
}

std::vector<uint8_t> GpuDecodeStep::state() {
  std::vector<uint8_t> out = download(h_.get(), kHidden * 2);
  for (Layer &ly : layers_) {
    const std::vector<uint8_t> a = download(ly.acts.get(), kActBytes), p = download(ly.pools.get(), 2 * kPoolBytes);
    out.insert(out.end(), a.begin(), a.end());
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// One layer's values as the GPU left them after a link: its activations, the
// residual and its caches (f64).
struct Snapshot {
  std::vector<double> acts, h, pools;
  std::vector<double> at(int a) const { return slice(acts, act_off(a) / 2, static_cast<size_t>(kCols[a])); }
};

std::vector<double> matvec_ref(const std::vector<float> &w, const std::vector<double> &x, int64_t n, int64_t k) {
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) y[static_cast<size_t>(j)] += w[static_cast<size_t>(j * k + i)] * x[static_cast<size_t>(i)];
  return y;
}

// RoPE (half split, rotary_dim = D) of the heads of x at position pos, f64 from
// transformers' f32 inverse frequencies.
std::vector<double> rope_ref(std::vector<double> x, int64_t heads, int pos) {
  for (int64_t hd = 0; hd < heads; ++hd)
    for (int64_t i = 0; i < kD / 2; ++i) {
      const float inv = 1.0f / std::pow(static_cast<float>(kTheta), static_cast<float>(2 * i) / kD);
      const double ang = static_cast<double>(static_cast<float>(pos) * inv), c = std::cos(ang), s = std::sin(ang);
      double &a = x[static_cast<size_t>(hd * kD + i)], &b = x[static_cast<size_t>(hd * kD + i + kD / 2)];
      const double a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = b0 * c + a0 * s;
    }
  return x;
}

TEST_F(GpuDecodeStep, EveryLinkMatchesTheReferenceAndOverlapChangesNoBits) {
  const auto step = links();
  ASSERT_EQ(step.size(), static_cast<size_t>(12 * kLayers));
  // 1. A sync after every launch: nothing overlaps; each link against f64.
  reset();
  Snapshot prev[kLayers];
  for (int l = 0; l < kLayers; ++l)
    prev[l] = {kt::decode(KAIO_DTYPE_F16, download(layers_[l].acts.get(), kActBytes)), h0_.values,
               kt::decode(KAIO_DTYPE_F16, layers_[l].pool_init)};
  for (size_t i = 0; i < step.size(); ++i) {
    const int l = static_cast<int>(i / 12), j = static_cast<int>(i % 12);
    SCOPED_TRACE("layer " + std::to_string(l) + " link " + std::to_string(j));
    KT_OK(step[i]());
    KT_OK(kaio_stream_synchronize(stream()));
    const Layer &ly = layers_[l];
    const Snapshot now{kt::decode(KAIO_DTYPE_F16, download(ly.acts.get(), kActBytes)),
                       kt::decode(KAIO_DTYPE_F16, download(h_.get(), kHidden * 2)),
                       j == 4 ? kt::decode(KAIO_DTYPE_F16, download(ly.pools.get(), 2 * kPoolBytes)) : prev[l].pools};
    const Snapshot &was = prev[l];
    auto norm_check = [&](const std::vector<double> &x, int a) {
      std::vector<double> res(static_cast<size_t>(kHidden)), ref(res.size());
      double ss = 0;
      for (size_t c = 0; c < res.size(); ++c) {
        const uint16_t bits = kt::f32_to_f16(static_cast<float>(was.h[c] + x[c]));  // exact sum, one rounding
        res[c] = kt::f16_to_f32(bits);
        ss += res[c] * res[c];
      }
      EXPECT_EQ(now.h, res) << "residual";
      const double inv = 1.0 / std::sqrt(ss / kHidden + kEps);
      for (size_t c = 0; c < res.size(); ++c) ref[c] = res[c] * inv * w0_.values[c];
      EXPECT_LE(rel_err(now.at(a), ref), 1e-3);
    };
    auto mat_check = [&](int m, int in, int a) {
      EXPECT_LE(rel_err(now.at(a), matvec_ref(ly.deq[m], was.at(in), kN[m], kK_[m])), 1e-3) << "matvec " << m;
    };
    switch (j) {
      case 0: norm_check(l == 0 ? x0_.values : prev[l - 1].at(down), xn1); break;
      case 1: mat_check(kQ, xn1, q); break;
      case 2: mat_check(kK, xn1, k); break;
      case 3: mat_check(kV, xn1, v); break;
      case 4: {
        EXPECT_LE(rel_err(now.at(q), rope_ref(was.at(q), kHq, kCtx - 1)), 1e-3) << "q";
        const size_t row = static_cast<size_t>(slot_ * kKv), vrow = row + static_cast<size_t>(kPoolRows * kKv);
        EXPECT_LE(rel_err(slice(now.pools, row, kKv), rope_ref(was.at(k), kHkv, kCtx - 1)), 1e-3) << "k cache";
        EXPECT_EQ(slice(now.pools, vrow, kKv), was.at(v)) << "v cache";
        EXPECT_EQ(now.at(k), was.at(k)) << "K is only read";
        break;
      }
      case 5: {
        std::vector<double> ref(static_cast<size_t>(kHidden)), qv = was.at(q), p(kCtx);
        for (int64_t hq = 0; hq < kHq; ++hq) {
          const int64_t hk = hq / (kHq / kHkv);
          double mx = -INFINITY, sum = 0;
          for (int64_t t = 0; t < kCtx; ++t) {
            const size_t r = static_cast<size_t>((table_[t / kPage] * kPage + t % kPage) * kKv + hk * kD);
            double dot = 0;
            for (int64_t d = 0; d < kD; ++d) dot += qv[static_cast<size_t>(hq * kD + d)] * was.pools[r + d];
            p[t] = dot / std::sqrt(static_cast<double>(kD));
            mx = std::max(mx, p[t]);
          }
          for (double &e : p) sum += (e = std::exp(e - mx));
          for (int64_t t = 0; t < kCtx; ++t) {
            const size_t r = static_cast<size_t>((table_[t / kPage] * kPage + t % kPage) * kKv + hk * kD) +
                             static_cast<size_t>(kPoolRows * kKv);
            for (int64_t d = 0; d < kD; ++d) ref[static_cast<size_t>(hq * kD + d)] += p[t] / sum * was.pools[r + d];
          }
        }
        EXPECT_LE(rel_err(now.at(o), ref), 3e-3) << "attention";
        break;
      }
      case 6: mat_check(kO, o, attn); break;
      case 7: norm_check(was.at(attn), xn2); break;
      case 8: mat_check(kGate, xn2, g); break;
      case 9: mat_check(kUp, xn2, u); break;
      case 10: {
        std::vector<double> ref(static_cast<size_t>(kFfn)), gv = was.at(g), uv = was.at(u);
        for (size_t c = 0; c < ref.size(); ++c) ref[c] = gv[c] / (1 + std::exp(-gv[c])) * uv[c];
        EXPECT_LE(rel_err(now.at(act), ref), 1e-3) << "silu gate";
        break;
      }
      case 11: mat_check(kDown, act, down); break;
    }
    prev[l] = now;
    if (l + 1 < kLayers) prev[l + 1].h = now.h;
  }
  const std::vector<uint8_t> synced = state();

  // 2. The same launches back to back: every buffer with the same bits.
  reset();
  for (const auto &link : step) KT_OK(link());
  EXPECT_TRUE(state() == synced) << "the chain without syncs differs from the synced one";

  // 3. Captured into a CUDA graph (programmatic edges on sm_90), replayed twice.
  kt::GraphApi api = kt::graph_api();
  ASSERT_TRUE(api.begin && api.end && api.instantiate && api.launch && api.push && api.pop)
      << "driver lacks graph API";
  ASSERT_EQ(api.push(kaio_device_native_context(dev())), 0);
  kt::PopContext pop{api};
  void *s = kaio_stream_native(stream());
  ASSERT_EQ(api.begin(s, 0), 0);
  for (const auto &link : step) KT_OK(link());
  void *graph = nullptr, *exec = nullptr;
  ASSERT_EQ(api.end(s, &graph), 0) << "capture was invalidated by a kaio call";
  ASSERT_EQ(api.instantiate(&exec, graph, 0), 0);
  for (int round = 0; round < 2; ++round) {
    reset();
    ASSERT_EQ(api.launch(exec, s), 0);
    EXPECT_TRUE(state() == synced) << "graph replay " << round << " differs from the synced chain";
  }
  EXPECT_EQ(api.exec_destroy(exec), 0);
  EXPECT_EQ(api.graph_destroy(graph), 0);
}

}  // namespace
