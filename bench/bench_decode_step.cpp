// bench_decode_step: one Llama-3-8B layer's decode step at M = 1, as a serving
// engine launches it: add + RMSNorm, the Q, K and V matvecs, RoPE with the
// paged KV-cache write, paged decode attention, the O matvec, add + RMSNorm,
// the gate and up matvecs, SiLU gate, the down matvec (12 launches; hidden
// 4096, 32 query heads, 8 KV heads, head dim 128, FFN 14336; weights Q4_K
// (--format q8_0 for Q8_0; --format int4: GPTQ group 128 with qzeros, Q K V
// in one fused launch, 10 launches), f16 activations, KV cache f16 in pages
// of 16 tokens, shuffled). Every op is prepared once (kaio_op_create_*).
// Per context length (512 and 4096): "layer", the median of --iters layers
// each timed alone (one event pair around its launches), and "burst", the
// time per layer of --layers layers back to back (one event pair around them
// all). Each layer has its own weights, norms and KV cache (one layer's
// weights alone are more than twice L2), so no layer reads another's bytes.
// With programmatic dependent launches (sm_90 twins) every launch may start
// in its predecessor's tail; KAIO_LOG=1 lists the kernels each op planned.
// Timing: support/timing.hpp (warm-ups, median, launches queued behind a
// spinner). Correctness is the GPU tests' job (gpu_decode_step_test.cpp).
// Exit status: 0 success, 1 failure, 2 no usable GPU.
#include <kaio/kaio.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/command_line.hpp"
#include "support/device.hpp"
#include "support/errors.hpp"
#include "support/handles.hpp"
#include "support/host_data.hpp"
#include "support/timing.hpp"

namespace {

using kaio_bench::Buffer;
using kaio_bench::Op;
using kaio_bench::Timer;

constexpr int64_t kHidden = 4096, kHeadsQ = 32, kHeadsKv = 8, kHeadDim = 128, kFfn = 14336;
constexpr int64_t kKv = kHeadsKv * kHeadDim;  // 1024
constexpr int64_t kMaxContext = 4096, kPage = 16, kPages = kMaxContext / kPage;
constexpr float kEps = 1e-5f;
constexpr int64_t kGroup = 128;  // int4 GPTQ group size

// The matvecs of a layer (N x K), in the order the step runs them.
enum Mat { kQ, kK, kV, kO, kGate, kUp, kDown, kMats };
constexpr int64_t kN[kMats] = {kHidden, kKv, kKv, kHidden, kFfn, kFfn, kHidden};
constexpr int64_t kKdim[kMats] = {kHidden, kHidden, kHidden, kHidden, kHidden, kHidden, kFfn};

Buffer make_buffer(kaio_device *d, uint64_t bytes) {
  kaio_buffer *b = nullptr;
  CHECK(kaio_buffer_create(&b, d, bytes));
  return Buffer(b);
}

uint64_t align256(uint64_t v) { return (v + 255) / 256 * 256; }

kaio_tensor view(kaio_buffer *b, kaio_dtype dt, int64_t rows, int64_t cols, uint64_t offset) {
  kaio_tensor t = kaio_tensor_2d(b, dt, rows, cols);
  t.offset_bytes = offset;
  return t;
}

// One layer's own bytes: the quantized weights, both norms' weights, K and V pools.
// int4: w_off is qweight's offset, z_off and s_off those of qzeros and scales.
struct Layer {
  Buffer weights, pools;
  uint64_t w_off[kMats] = {}, z_off[kMats] = {}, s_off[kMats] = {};
  uint64_t norm_off[2] = {};
};

// Weight bytes of matrix m: GGUF rows, or int4 qweight / qzeros / scales.
struct Parts {
  uint64_t w, z, s;
};
Parts parts(bool int4, kaio_quant_format format, int m) {
  const uint64_t n = static_cast<uint64_t>(kN[m]), k = static_cast<uint64_t>(kKdim[m]);
  if (!int4) return {n * static_cast<uint64_t>(kaio_quant_row_bytes(format, kKdim[m])), 0, 0};
  return {k / 8 * n * 4, k / kGroup * n / 8 * 4, k / kGroup * n * 2};
}

// The activations every layer passes on (a few KiB: in L2, as in a real step).
struct Acts {
  Buffer buf;
  enum { h, x, xn, q, k, v, o, attn, g, u, act, down, pos, slot, table, lens, count };
  uint64_t off[count] = {};
};

struct Step {
  kaio_quant_format format;
  bool int4 = false;  // GPTQ int4 (format unused)
  Op qkv;             // int4: Q, K and V in one launch
  std::vector<Layer> layers;
  Acts acts;
  Op norm, mat[kMats], rope, attn[2], silu;
};

void make_layers(kaio_device *dev, kaio_stream *s, Step *st, int count) {
  // One f32 source as large as the largest matrix; each matrix quantizes a prefix. Small
  // weights keep the residual stream finite over many layers.
  const std::vector<float> w = kaio_bench::random_floats(kFfn * kHidden, -0.02f, 0.02f, 7);
  Buffer wf = make_buffer(dev, w.size() * 4);
  CHECK(kaio_buffer_write(wf.get(), 0, w.data(), w.size() * 4));
  std::vector<uint16_t> ones(kHidden, kaio_bench::to_f16(1.0f));
  std::vector<uint32_t> bits;
  std::vector<uint16_t> scales;
  if (st->int4) {
    std::mt19937 rng(13);
    bits.resize(kFfn * kHidden / 8);
    for (uint32_t &b : bits) b = rng();
    scales = kaio_bench::to_half(
        kaio_bench::random_floats(kFfn * kHidden / kGroup, 0.001f, 0.003f, 17), KAIO_DTYPE_F16);
  }
  const std::vector<uint16_t> kv =
      kaio_bench::to_half(kaio_bench::random_floats(kKv * 64, -1.0f, 1.0f, 11), KAIO_DTYPE_F16);
  for (int l = 0; l < count; ++l) {
    Layer ly;
    uint64_t at = 0;
    for (int m = 0; m < kMats; ++m) {
      const Parts p = parts(st->int4, st->format, m);
      ly.w_off[m] = at;
      ly.z_off[m] = at = align256(at + p.w);
      ly.s_off[m] = at = align256(at + p.z);
      at = align256(at + p.s);
    }
    for (int i = 0; i < 2; ++i) {
      ly.norm_off[i] = at;
      at = align256(at + kHidden * 2);
    }
    ly.weights = make_buffer(dev, at);
    for (int m = 0; m < kMats && st->int4; ++m) {
      // random nibbles and zero points; scales small enough to keep the residual finite
      const Parts p = parts(true, st->format, m);
      CHECK(kaio_buffer_write(ly.weights.get(), ly.w_off[m], bits.data(), p.w));
      CHECK(kaio_buffer_write(ly.weights.get(), ly.z_off[m], bits.data(), p.z));
      CHECK(kaio_buffer_write(ly.weights.get(), ly.s_off[m], scales.data(), p.s));
    }
    for (int m = 0; m < kMats && !st->int4; ++m) {
      const kaio_tensor src = kaio_tensor_2d(wf.get(), KAIO_DTYPE_F32, kN[m], kKdim[m]);
      const kaio_tensor q = view(ly.weights.get(), KAIO_DTYPE_U8, kN[m],
                                 kaio_quant_row_bytes(st->format, kKdim[m]), ly.w_off[m]);
      CHECK(kaio_quantize(s, &src, &q, st->format, KAIO_QUANT_MODE_GGML));
    }
    for (int i = 0; i < 2; ++i)
      CHECK(kaio_buffer_write(ly.weights.get(), ly.norm_off[i], ones.data(), ones.size() * 2));
    // K and V pools: the same 64 random rows repeated (the values do not change the time).
    const uint64_t pool_bytes = static_cast<uint64_t>(kMaxContext * kKv * 2);
    ly.pools = make_buffer(dev, 2 * pool_bytes);
    for (uint64_t off = 0; off < 2 * pool_bytes; off += kv.size() * 2)
      CHECK(kaio_buffer_write(ly.pools.get(), off, kv.data(), kv.size() * 2));
    st->layers.push_back(std::move(ly));
  }
  CHECK(kaio_stream_synchronize(s));
}

void make_acts(kaio_device *dev, Step *st) {
  Acts &a = st->acts;
  const int64_t bytes[Acts::count] = {kHidden * 2, kHidden * 2, kHidden * 2, kHidden * 2, kKv * 2,
                                      kKv * 2,     kHidden * 2, kHidden * 2, kFfn * 2,    kFfn * 2,
                                      kFfn * 2,    kHidden * 2, 4,           4,           kPages * 4,
                                      4};
  uint64_t at = 0;
  for (int i = 0; i < Acts::count; ++i) {
    a.off[i] = at;
    at = align256(at + static_cast<uint64_t>(bytes[i]));
  }
  a.buf = make_buffer(dev, at);
  const std::vector<uint16_t> h =
      kaio_bench::to_half(kaio_bench::random_floats(kHidden, -1.0f, 1.0f, 3), KAIO_DTYPE_F16);
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::h], h.data(), h.size() * 2));
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::down], h.data(), h.size() * 2));
  // Pages of the one sequence, shuffled as an allocator would leave them.
  std::vector<int32_t> table(kPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::table], table.data(), table.size() * 4));
}

// Context length `ctx`: the new token is position ctx - 1, its K and V go to that slot.
void set_context(Step *st, kaio_stream *s, int64_t ctx) {
  Acts &a = st->acts;
  std::vector<int32_t> table(kPages);
  CHECK(kaio_buffer_read(a.buf.get(), a.off[Acts::table], table.data(), table.size() * 4));
  const int32_t pos = static_cast<int32_t>(ctx - 1), len = static_cast<int32_t>(ctx);
  const int32_t slot = table[static_cast<size_t>(pos / kPage)] * kPage + pos % kPage;
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::pos], &pos, 4));
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::slot], &slot, 4));
  CHECK(kaio_buffer_write(a.buf.get(), a.off[Acts::lens], &len, 4));
  CHECK(kaio_stream_synchronize(s));
}

void make_ops(kaio_device *dev, Step *st) {
  kaio_op *raw = nullptr;
  CHECK(kaio_op_create_add_rmsnorm(&raw, dev, KAIO_DTYPE_F16, 1, kHidden, kEps));
  st->norm.reset(raw);
  for (int m = 0; m < kMats; ++m) {
    if (st->int4 && m <= kV) continue;  // the fused QKV op below
    if (st->int4) {
      kaio_matmul_int4_desc d;
      CHECK(kaio_matmul_int4_desc_init(&d, sizeof d));
      d.out_dtype = KAIO_DTYPE_F16;
      d.m = 1;
      d.n = kN[m];
      d.k = kKdim[m];
      CHECK(kaio_op_create_matmul_int4(&raw, dev, &d));
    } else {
      CHECK(kaio_op_create_quant_matmul(&raw, dev, st->format, KAIO_DTYPE_F16, KAIO_DTYPE_F16, 1,
                                        kN[m], kKdim[m]));
    }
    st->mat[m].reset(raw);
  }
  if (st->int4) {
    kaio_qkv_int4_desc d;
    CHECK(kaio_qkv_int4_desc_init(&d, sizeof d));
    d.m = 1;
    d.k = kHidden;
    d.n_q = kHidden;
    d.n_k = d.n_v = kKv;
    CHECK(kaio_op_create_qkv_project_int4(&raw, dev, &d));
    st->qkv.reset(raw);
  }
  kaio_rope_desc rd;
  CHECK(kaio_rope_desc_init(&rd, sizeof rd));
  rd.dtype = KAIO_DTYPE_F16;
  rd.heads_q = kHeadsQ;
  rd.heads_k = kHeadsKv;
  rd.head_dim = kHeadDim;
  rd.theta = 500000.0;
  CHECK(kaio_op_create_rope_kv_cache_write(&raw, dev, &rd));
  st->rope.reset(raw);
  for (int c = 0; c < 2; ++c) {
    kaio_attention_desc d;
    CHECK(kaio_attention_desc_init(&d, sizeof d));
    d.dtype = KAIO_DTYPE_F16;
    d.batch = 1;
    d.seq_q = 1;
    d.seq_k = c == 0 ? 512 : kMaxContext;
    d.heads_q = kHeadsQ;
    d.heads_kv = kHeadsKv;
    d.head_dim = kHeadDim;
    kaio_attention_paged_desc pd;
    CHECK(kaio_attention_paged_desc_init(&pd, sizeof pd));
    pd.page_size = static_cast<int32_t>(kPage);
    CHECK(kaio_op_create_attention_paged(&raw, dev, &d, &pd));
    st->attn[c].reset(raw);
  }
  CHECK(kaio_op_create_silu_gate(&raw, dev, KAIO_DTYPE_F16, 1, kFfn));
  st->silu.reset(raw);
}

// The launches of layer l's decode step (12; int4 10); `attn` the op for the context length.
void run_layer(const Step &st, kaio_stream *s, const Layer &ly, const kaio_op *attn) {
  const Acts &a = st.acts;
  kaio_buffer *b = a.buf.get();
  auto act = [&](int i, int64_t cols, kaio_dtype dt = KAIO_DTYPE_F16) {
    return view(b, dt, 1, cols, a.off[i]);
  };
  auto norm = [&](int in, int i) {
    const kaio_tensor t[] = {act(in, kHidden), act(Acts::h, kHidden),
                             view(ly.weights.get(), KAIO_DTYPE_F16, 1, kHidden, ly.norm_off[i]),
                             act(Acts::xn, kHidden)};
    CHECK(kaio_op_launch(st.norm.get(), s, t, 4));
  };
  // int4: qweight, qzeros, scales of matrix m
  auto gptq = [&](int m, kaio_tensor *t) {
    kaio_buffer *w = ly.weights.get();
    t[0] = view(w, KAIO_DTYPE_U32, kKdim[m] / 8, kN[m], ly.w_off[m]);
    t[1] = view(w, KAIO_DTYPE_U32, kKdim[m] / kGroup, kN[m] / 8, ly.z_off[m]);
    t[2] = view(w, KAIO_DTYPE_F16, kKdim[m] / kGroup, kN[m], ly.s_off[m]);
  };
  auto matvec = [&](int m, int in, int out) {
    if (st.int4) {
      kaio_tensor t[5] = {act(in, kKdim[m])};
      gptq(m, t + 1);
      t[4] = act(out, kN[m]);
      CHECK(kaio_op_launch(st.mat[m].get(), s, t, 5));
      return;
    }
    const kaio_tensor t[] = {act(in, kKdim[m]),
                             view(ly.weights.get(), KAIO_DTYPE_U8, kN[m],
                                  kaio_quant_row_bytes(st.format, kKdim[m]), ly.w_off[m]),
                             act(out, kN[m])};
    CHECK(kaio_op_launch(st.mat[m].get(), s, t, 3));
  };
  const uint64_t pool = static_cast<uint64_t>(kMaxContext * kKv * 2);
  const kaio_tensor kpool = view(ly.pools.get(), KAIO_DTYPE_F16, kMaxContext, kKv, 0),
                    vpool = view(ly.pools.get(), KAIO_DTYPE_F16, kMaxContext, kKv, pool);
  norm(Acts::down, 0);
  if (st.int4) {
    kaio_tensor t[13] = {act(Acts::xn, kHidden)};
    gptq(kQ, t + 1);
    gptq(kK, t + 4);
    gptq(kV, t + 7);
    t[10] = act(Acts::q, kHidden);
    t[11] = act(Acts::k, kKv);
    t[12] = act(Acts::v, kKv);
    CHECK(kaio_op_launch(st.qkv.get(), s, t, 13));
  } else {
    matvec(kQ, Acts::xn, Acts::q);
    matvec(kK, Acts::xn, Acts::k);
    matvec(kV, Acts::xn, Acts::v);
  }
  const kaio_tensor r[] = {act(Acts::q, kHidden), act(Acts::k, kKv),  act(Acts::v, kKv),
                           act(Acts::pos, 1, KAIO_DTYPE_I32), act(Acts::slot, 1, KAIO_DTYPE_I32),
                           kpool, vpool};
  CHECK(kaio_op_launch(st.rope.get(), s, r, 7));
  kaio_tensor lse = kaio_tensor_2d(nullptr, KAIO_DTYPE_F32, kHeadsQ, 1);
  const kaio_tensor at[] = {act(Acts::q, kHidden), kpool, vpool,
                            view(b, KAIO_DTYPE_I32, 1, kPages, a.off[Acts::table]),
                            act(Acts::lens, 1, KAIO_DTYPE_I32), act(Acts::o, kHidden), lse};
  CHECK(kaio_op_launch(attn, s, at, 7));
  matvec(kO, Acts::o, Acts::attn);
  norm(Acts::attn, 1);
  matvec(kGate, Acts::xn, Acts::g);
  matvec(kUp, Acts::xn, Acts::u);
  const kaio_tensor sg[] = {act(Acts::g, kFfn), act(Acts::u, kFfn), act(Acts::act, kFfn)};
  CHECK(kaio_op_launch(st.silu.get(), s, sg, 3));
  matvec(kDown, Acts::act, Acts::down);
}

int run(int iters, int layers, kaio_quant_format format, bool int4) {
  kaio_bench::Device device;
  const kaio_device_info info =
      kaio_bench::open_device(&device, "the decode step needs compute capability 8.0+");
  const kaio_bench::Stream stream = kaio_bench::create_stream(device);
  kaio_bench::print_banner("bench_decode_step", info);
  Timer timer(device.get(), stream.get(), iters);
  Step st;
  st.format = format;
  st.int4 = int4;
  make_layers(device.get(), stream.get(), &st, layers);
  make_acts(device.get(), &st);
  make_ops(device.get(), &st);
  uint64_t wbytes = 0;
  for (int m = 0; m < kMats; ++m) {
    const Parts p = parts(int4, format, m);
    wbytes += p.w + p.z + p.s;
  }
  std::printf("Llama-3-8B layer, M = 1, %s weights (%.1f MB a layer), f16 activations, paged KV "
              "f16 (pages of %d), %d layers with their own weights and caches\n",
              int4 ? "int4 GPTQ g128" : format == KAIO_QUANT_Q4_K ? "Q4_K" : "Q8_0", static_cast<double>(wbytes) / 1e6,
              static_cast<int>(kPage), layers);
  std::printf("context | layer us (alone, median) | burst of %d: us per layer | burst / layer\n",
              layers);
  for (int c = 0; c < 2; ++c) {
    const int64_t ctx = c == 0 ? 512 : kMaxContext;
    set_context(&st, stream.get(), ctx);
    const auto layer = [&](uint64_t set) {
      run_layer(st, stream.get(), st.layers[set], st.attn[c].get());
    };
    const double one = timer.median_us(layer, static_cast<uint64_t>(layers));
    const double burst = timer.burst_us(layer, static_cast<uint64_t>(layers), layers);
    std::printf("%7lld | %24.1f | %25.1f | %.3f\n", static_cast<long long>(ctx), one, burst,
                burst / one);
    std::fflush(stdout);
  }
  CHECK(kaio_stream_synchronize(stream.get()));
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int iters = 20, layers = 4;
  kaio_quant_format format = KAIO_QUANT_Q4_K;
  bool int4 = false;
  const char *usage =
      "usage: bench_decode_step [--iters N] [--layers L] [--format q4_k|q8_0|int4]\n"
      "       (--layers: layers with their own weights, timed back to back; default 4)\n";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", usage);
      return 0;
    }
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--format") == 0 && has_value) {
      const std::string f = argv[++i];
      if (f != "q4_k" && f != "q8_0" && f != "int4") {
        std::fprintf(stderr, "%s", usage);
        return 1;
      }
      format = f == "q8_0" ? KAIO_QUANT_Q8_0 : KAIO_QUANT_Q4_K;
      int4 = f == "int4";
      continue;
    }
    const bool it = std::strcmp(argv[i], "--iters") == 0, ly = std::strcmp(argv[i], "--layers") == 0;
    const auto v = (it || ly) && has_value ? kaio_bench::parse_positive(argv[++i]) : std::nullopt;
    if (!v || (ly && *v > 64) || (it && *v > 100000)) {
      std::fprintf(stderr, "%s", usage);
      return 1;
    }
    (it ? iters : layers) = static_cast<int>(*v);
  }
  return kaio_bench::exit_status_of("bench_decode_step", [&] { return run(iters, layers, format, int4); });
}
